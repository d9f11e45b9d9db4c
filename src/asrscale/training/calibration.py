"""Calibration: this model's compute timed on this machine's device, for the cost model of
simulated runs (`asrscale.worlds.costmodel`): a shared profile computes at these rates, and a
dedicated profile's measured compute (`asrscale calibrate` on such a device) is carried over to
this model by its size recorded here."""

import time
from dataclasses import replace

import numpy as np
import torch

from asrscale.config.sections import FeatureConfig, ModelConfig, TrainConfig
from asrscale.data.batches import Subset
from asrscale.models import build_model, flops_per_frame
from asrscale.provenance import available_cores
from asrscale.training.learner import Learner, make_optimizer
from asrscale.training.natural_gradient import Recorder, natural_gradient_of
from asrscale.worlds import ops
from asrscale.worlds.costmodel import RATES
from asrscale.worlds.devices import describe, resolve_device, synchronize

SEED = 1  # of the batches timed and of the model
# Minibatch sizes timed, against train.batch_size: a batch's fixed cost splits from a cost a frame
# only over batches of several sizes (at one size their frames differ by their lengths alone).
BATCH_SCALES = (0.25, 1.0, 4.0)
# Widths of the model timed (its units, against model.units) on the device at full speed: the
# efficiency curve along which a dedicated profile carries its compute to another model.
WIDTH_SCALES = (0.5, 2.0)


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
    a + b·frames (least squares over minibatches of the training data of BATCH_SCALES' sizes),
    update and preconditioning seconds; on the CPU at one thread and at all cores. Also the
    single-thread data loading rate, the model's size, and the seconds a frame of the model at
    WIDTH_SCALES' widths (`by_size`, on the device at full speed, net of a batch's fixed cost)."""
    device = resolve_device(train.device)
    utts = sorted(train_set.frames)
    sizes = sorted({max(1, round(train.batch_size * scale)) for scale in BATCH_SCALES})
    each = max(2, batches // len(sizes))  # batches timed at each size, after two of the policy's size
    of_size = {size: train_set.batches(utts, size, seed=SEED)[: each + 2] for size in sizes}
    groups = of_size[train.batch_size][:2] + [group for size in sizes for group in of_size[size][2:]]
    threads_before = torch.get_num_threads()
    torch.set_num_threads(1)
    load_s = [_seconds(lambda g=g: train_set.collate(g)) for g in groups]
    minibatches = [train_set.collate(g) for g in groups]
    frames = sum(b.frames for b in minibatches)
    calibration = {"device": device.type, "device_name": describe(device), "cores": available_cores(),
                   "gpus": torch.cuda.device_count() if device.type == "cuda" else 0,
                   "data_frames_per_s": frames / sum(load_s), "batch_sizes": sizes, "by_threads": {}}  # fmt: skip
    thread_counts = sorted({1, available_cores()}) if device.type == "cpu" else [available_cores()]
    tokens = len(train_set.tokens)
    policy_sized = [b for b in minibatches if len(b.utts) == train.batch_size]  # its first two warm up
    # NG-SGD's cost grows with a minibatch's frames: timed on the policy-sized one of median frames
    preconditioned = sorted(policy_sized, key=lambda b: b.frames)[len(policy_sized) // 2]
    calibration["preconditioned"] = {"utterances": len(preconditioned.utts), "frames": preconditioned.frames}
    for threads in thread_counts:
        torch.set_num_threads(threads)
        learner = _learner(train, model, features.dim, tokens, device)
        rates = _time_learner(learner, minibatches, train.lr, policy_sized, preconditioned)
        calibration["by_threads"][str(threads)] = rates
    calibration["model"] = {"flops_per_frame": flops_per_frame(model, features.dim, tokens),
                            "parameters": sum(p.numel() for p in learner.parameters)}  # fmt: skip
    # the other widths at the policy's batch size, net of a batch's fixed cost (which does not
    # grow with the width: the same kernels are launched)
    fixed_s = calibration["by_threads"][str(threads)]["backward_s_per_batch"]
    calibration["by_size"] = []
    for scale in WIDTH_SCALES if len(policy_sized) > 2 else ():  # a corpus of two batches times no width
        width = replace(model, units=max(1, round(model.units * scale)))
        frames, seconds = _backward_times(_learner(train, width, features.dim, tokens, device), policy_sized)
        net = seconds.sum() - fixed_s * len(seconds)  # a negative net is noise: then all per frame
        per_frame = float((net if net > 0 else seconds.sum()) / frames.sum())
        calibration["by_size"].append({"units": width.units, "backward_s_per_frame": per_frame,
                                       "flops_per_frame": flops_per_frame(width, features.dim, tokens)})  # fmt: skip
    torch.set_num_threads(threads_before)
    return calibration


def _learner(train: TrainConfig, model: ModelConfig, dim: int, tokens: int, device) -> Learner:
    torch.manual_seed(SEED)
    network = build_model(model, dim, tokens).to(device)
    return Learner(network, make_optimizer(train.optimizer, train.momentum, network), train.clip_grad_norm,
                   "calibration")  # fmt: skip


def _backward_times(learner: Learner, minibatches) -> tuple[np.ndarray, np.ndarray]:
    """Frames and seconds of the forward-backward of each minibatch but the first two (warm-up)."""
    for batch in minibatches[:2]:
        ops.run_alone(learner.backward(batch))
    timed = minibatches[2:]
    seconds = [_seconds(lambda b=b: ops.run_alone(learner.backward(b))) for b in timed]
    return np.array([b.frames for b in timed], dtype=float), np.array(seconds)


def measured_compute(calibration: dict, environment: dict) -> dict:
    """A dedicated profile's `compute` from a calibration: what to paste into a config's hardware.<name>."""
    fastest = calibration["by_threads"][str(max(int(t) for t in calibration["by_threads"]))]
    packages = environment.get("packages", {})
    return {"measured_on": f"{calibration['device_name']}, torch {packages.get('torch')}, by asrscale calibrate "
                           f"on {time.strftime('%Y-%m-%d')}",
            **calibration["model"], **{rate: float(f"{fastest[rate]:.4g}") for rate in RATES},
            "by_size": [[width["flops_per_frame"], float(f"{width['backward_s_per_frame']:.4g}")]
                        for width in calibration["by_size"]]}  # fmt: skip


def _time_learner(learner, minibatches, lr: float, policy_sized: list, preconditioned) -> dict:
    """The rates of a + b·frames over `minibatches` (and frames/s at the policy's batch size,
    `policy_sized`), update, and NG-SGD's preconditioning of the statistics of `preconditioned`."""
    frames, seconds = _backward_times(learner, minibatches)
    slope, intercept = np.polyfit(frames, seconds, 1) if len(frames) > 1 else (0.0, -1.0)
    if intercept < 0 or slope <= 0:  # a negative cost is noise: keep the total time, all per frame
        slope, intercept = seconds.sum() / frames.sum(), 0.0
    # NG-SGD's preconditioning of one minibatch's statistics, in its steady schedule (the first
    # ten minibatches refresh the factors every time, later ones every `update_period`)
    natural_gradient, recorder = natural_gradient_of(learner.model), Recorder()
    ops.run_alone(learner.backward(preconditioned, recorder))
    policy_frames = float(np.mean([b.frames for b in policy_sized]))
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
        "frames_per_s": float(policy_frames / (intercept + slope * policy_frames)),
    }
