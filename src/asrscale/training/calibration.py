"""Calibration: this model's compute timed on this machine's device, for the cost model of
simulated runs (`asrscale.worlds.costmodel`): a shared profile computes at these rates, and a
dedicated profile's measured compute (`asrscale calibrate` on such a device) is carried over to
this model by its size recorded here."""

import time

import numpy as np
import torch

from asrscale.config.sections import FeatureConfig, ModelConfig, TrainConfig
from asrscale.data.batches import Subset
from asrscale.models import build_model, flops_per_frame
from asrscale.provenance import available_cores
from asrscale.training.algorithms.ma import natural_gradient_of
from asrscale.training.fused import Recorder
from asrscale.training.learner import Learner, make_optimizer
from asrscale.worlds import ops
from asrscale.worlds.costmodel import RATES
from asrscale.worlds.devices import describe, resolve_device, synchronize

SEED = 1  # of the batches timed and of the model


def _seconds(function, repeat: int = 1, warmup: int = 0) -> float:
    """Mean seconds of `repeat` calls after `warmup` untimed ones (a GPU loads a kernel's code
    at its first launch, and a library at its first call)."""
    for _ in range(warmup):
        function()
    start = time.perf_counter()
    for _ in range(repeat):
        function()
    return (time.perf_counter() - start) / repeat


def calibrate(train: TrainConfig, model: ModelConfig, features: FeatureConfig, train_set: Subset,
              batches: int = 12) -> dict:  # fmt: skip
    """Time this model on this process's device (`train.device`): forward-backward seconds
    a + b·frames (least squares over minibatches of the training data), update and
    preconditioning seconds; on the CPU at one thread and at all cores. Also the single-thread
    data loading rate, and the model's size."""
    device = resolve_device(train.device)
    groups = train_set.batches(sorted(train_set.frames), train.batch_size, seed=SEED)[: batches + 2]
    threads_before = torch.get_num_threads()
    torch.set_num_threads(1)
    load_s = [_seconds(lambda g=g: train_set.collate(g)) for g in groups]
    minibatches = [train_set.collate(g) for g in groups]
    frames = sum(b.frames for b in minibatches)
    calibration = {"device": device.type, "device_name": describe(device), "cores": available_cores(),
                   "gpus": torch.cuda.device_count() if device.type == "cuda" else 0,
                   "data_frames_per_s": frames / sum(load_s), "by_threads": {}}  # fmt: skip
    thread_counts = sorted({1, available_cores()}) if device.type == "cpu" else [available_cores()]
    tokens = len(train_set.tokens)
    for threads in thread_counts:
        torch.set_num_threads(threads)
        torch.manual_seed(SEED)
        network = build_model(model, features.dim, tokens).to(device)
        learner = Learner(network, make_optimizer(train.optimizer, train.momentum, network), train.clip_grad_norm,
                          "calibration")  # fmt: skip
        calibration["by_threads"][str(threads)] = _time_learner(learner, minibatches, train.lr)
    calibration["model"] = {"flops_per_frame": flops_per_frame(model, features.dim, tokens),
                            "parameters": sum(p.numel() for p in network.parameters())}  # fmt: skip
    torch.set_num_threads(threads_before)
    return calibration


def measured_compute(calibration: dict, environment: dict) -> dict:
    """A dedicated profile's `compute` from a calibration: what to paste into config.yaml."""
    fastest = calibration["by_threads"][str(max(int(t) for t in calibration["by_threads"]))]
    packages = environment.get("packages", {})
    return {"measured_on": f"{calibration['device_name']}, torch {packages.get('torch')}, by asrscale calibrate "
                           f"on {time.strftime('%Y-%m-%d')}",
            **calibration["model"], **{rate: float(f"{fastest[rate]:.4g}") for rate in RATES}}  # fmt: skip


def _time_learner(learner, minibatches, lr: float) -> dict:
    for batch in minibatches[:2]:  # warm-up
        ops.run_alone(learner.backward(batch))
    timed = minibatches[2:]
    frames = np.array([b.frames for b in timed], dtype=float)
    seconds = np.array([_seconds(lambda b=b: ops.run_alone(learner.backward(b))) for b in timed])
    slope, intercept = np.polyfit(frames, seconds, 1) if len(timed) > 1 else (0.0, -1.0)
    if intercept < 0 or slope <= 0:  # a negative cost is noise: keep the total time, all per frame
        slope, intercept = seconds.sum() / frames.sum(), 0.0
    # NG-SGD's preconditioning of one minibatch's statistics, in its steady schedule (the first
    # ten minibatches refresh the factors every time, later ones every `update_period`)
    natural_gradient, recorder = natural_gradient_of(learner.model), Recorder()
    ops.run_alone(learner.backward(timed[0], recorder))
    period = natural_gradient.update_period

    def precondition():
        natural_gradient.precondition(recorder)
        synchronize(learner.device)

    def update():
        learner.apply(lr)
        synchronize(learner.device)

    return {
        "backward_s_per_frame": float(slope),
        "backward_s_per_batch": float(intercept),
        "update_s": _seconds(update, 5, warmup=2),
        "precondition_s": _seconds(precondition, 2 * period, warmup=10),
        "frames_per_s": float(frames.sum() / seconds.sum()),
    }
