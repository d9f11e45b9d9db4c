"""Calibration: this model's compute timed on this machine's device, for the cost model of
simulated runs (`asrscale.worlds.clock`): a shared profile computes at these rates, and a
dedicated profile's measured compute (`asrscale calibrate` on such a device) is carried over to
this model by its size recorded here.

A calibration must survive a busy machine (a shared login node, a node with another job): a rate
timed while another process holds the cores is many times too slow, and a simulated run built on it
gives speedups beyond P (2,533 frames/s at 2 threads against 75,825 at 1 on a 2-core machine running
a test suite made a modelled SSGD at 2 learners 19× SEQ). So each thread count's rates are timed
`REPEATS` times and the fastest kept (the least disturbed), and the two fastest must agree (within
`AGREEMENT`); where they do not, the calibration waits (`WAITS_S`, a few minutes in all: a burst
of another process passes) and times everything again, before a `BusyMachine` error that names the
rates, or, where the study accepts a busy machine (study.busy_machine: go-on), the rates kept with
why the machine was busy (`busy`), which the report says beside every modelled time resting on
them. More threads are never modelled slower than fewer
(`slower_with_more_threads` says where they ran slower, and at which rates they are modelled): SEQ
on all cores would otherwise be modelled slower than one learner on one. On a CPU, a busy machine
shows directly in two shares of each repeat: other processes' time on the cores this process may run
on (over wall time and cores: where they held more than 1 - 1 / `BUSY_FACTOR` of them, threads on
every core could run `BUSY_FACTOR` times slower; a 2-core machine with a process spinning on each
core gave one thread 67% of its core, and 2 threads rates 1.7× too slow that agreed), and the
process's own share of one thread's time on a core (its CPU time over wall time, below 1 /
`BUSY_FACTOR` where a quota throttles it). A machine where either held in every repeat of a thread
count is busy. The repeats are recorded (`repeats`, `spread`, `cpu_share`, `held_by_others`).

A calibration also times this machine's speed on one workload whatever the study's model
(`machine_rate`), at which the study files' wall times are stated (study.wall_time), so that a
study's time here can be told (asrscale.machine.wall_time_here)."""

import os
import time
from dataclasses import replace

import numpy as np
import psutil
import torch

from asrscale.config.sections import FeatureConfig, ModelConfig, TrainConfig
from asrscale.data.batches import Batch, Subset
from asrscale.errors import UserError
from asrscale.models import build_model, flops_per_frame
from asrscale.provenance import available_cores
from asrscale.training.learner import Learner, make_optimizer
from asrscale.training.natural_gradient import Recorder, natural_gradient_of
from asrscale.worlds import ops
from asrscale.worlds.clock import RATES
from asrscale.worlds.devices import describe, resolve_device, synchronize

SEED = 1  # of the batches timed and of the model
# Minibatch sizes timed, against train.batch_size: a batch's fixed cost splits from a cost a frame
# only over batches of several sizes (at one size their frames differ by their lengths alone).
BATCH_SCALES = (0.25, 1.0, 4.0)
# Widths of the model timed (its units, against model.units) on the device at full speed: the
# efficiency curve along which a dedicated profile carries its compute to another model.
WIDTH_SCALES = (0.5, 2.0)
REPEATS = 3  # timings of each thread count's rates, whose fastest is kept
BUSY_FACTOR = (
    1.5  # the slowdown the shares of a busy machine admit (others' time, one thread's own)
)
AGREEMENT = 2.0  # the two fastest repeats within this factor (a busy machine's were 2-30× apart)
# seconds waited before each new attempt where a machine's rates disagree: a burst of another
# process (a 20-s command beside it stopped a study) passes, a machine busy for minutes stays busy
WAITS_S = (10, 20, 40, 80)
# The workload a machine's speed is told by (`machine_rate`): the default BLSTM (config.yaml's: 2 ×
# 128 each way, 3 frames stacked, 40 features) forward and backward, clipped, at batch 32 on one
# thread, over 8 batches of like lengths at the built-in corpus's (frames at its 0th, 12.5th, ...,
# 100th percentiles: 5,000 training utterances, mean 222) and characters a frame (0.166). It reads
# as the calibration of that model reads its rate at one thread (within 3% on the 2-core machine).
REFERENCE_MODEL = ModelConfig("lstm", 2, 128, True, 3, 2)
REFERENCE_LENGTHS = (71, 121, 151, 177, 204, 237, 276, 330, 680)
REFERENCE_CHARACTERS_A_FRAME = 0.166


class BusyMachine(UserError):
    """The calibration's rates disagree as they do where another process holds the cores."""


def disagreement(
    frames_per_s: dict[str, list[float]],
    cpu_shares: dict[str, list[float]] | None = None,
    held_by_others: dict[str, list[float]] | None = None,
) -> str | None:
    """Why repeated rates (frames/s by thread count, each timed `REPEATS` times) cannot be this
    machine's own, or None where they can: in every repeat other processes held more than 1 - 1 /
    `BUSY_FACTOR` of the cores this process may run on (`held_by_others`: their CPU time on those
    cores over wall time and cores), the process had less than 1 / `BUSY_FACTOR` of its thread's
    time on a core in its best repeat (`cpu_shares`: its CPU time over wall time, of one thread on a
    CPU device), or its two fastest repeats are more than `AGREEMENT` apart (one disturbed repeat is
    tolerated: the fastest are the least disturbed, as timeit reads its repeats)."""
    for threads, held in (held_by_others or {}).items():
        if min(held) * BUSY_FACTOR > BUSY_FACTOR - 1:
            return (
                f"at {threads} threads other processes held {min(held):.0%} of this process's cores"
            )
    for threads, shares in (cpu_shares or {}).items():
        if BUSY_FACTOR * max(shares) < 1:
            return (
                f"at {threads} thread the process had {max(shares):.0%} of its thread's time on "
                "a core"
            )
    for threads, rates in frames_per_s.items():
        second, best = sorted(rates)[-2:]
        if best > AGREEMENT * second:
            return (
                f"at {threads} threads the forward-backward ran at {second:,.0f} and "
                f"{best:,.0f} frames/s"
            )
    return None


def never_slower_with_more_threads(
    by_threads: dict[str, dict],
) -> tuple[dict[str, dict], list[str]]:
    """The rates by thread count with each at least as fast as every fewer count's (a learner given
    more cores runs no slower than it would on fewer: a model too small to split, or a machine busy
    on its other cores, makes more threads slower), and what was replaced, in words."""
    kept, said = {}, []
    for threads in sorted(by_threads, key=int):
        rates = by_threads[threads]
        best = max(kept.values(), key=lambda r: r["frames_per_s"], default=None)
        if best is not None and best["frames_per_s"] > rates["frames_per_s"]:
            fewer = best["threads"]
            said.append(
                f"{threads} threads ran at {rates['frames_per_s']:,.0f} frames/s, slower than "
                f"{fewer} at {best['frames_per_s']:,.0f}: modelled at {fewer}'s rates"
            )
            rates = best
        kept[threads] = rates | {"threads": rates.get("threads", int(threads))}
    return kept, said


def _seconds(function, repeat: int = 1, warmup: int = 0) -> float:
    """Mean seconds of `repeat` calls after `warmup` untimed ones (a GPU loads a kernel's code
    at its first launch, and a library at its first call)."""
    for _ in range(warmup):
        function()
    start = time.perf_counter()
    for _ in range(repeat):
        function()
    return (time.perf_counter() - start) / repeat


def calibrate(
    train: TrainConfig,
    model: ModelConfig,
    features: FeatureConfig,
    train_set: Subset,
    batches: int = 12,
    when_busy: str = "refuse",
) -> dict:
    """Time this model on this process's device (`train.device`): forward-backward seconds
    a + b·frames (least squares over minibatches of the training data of BATCH_SCALES' sizes),
    update and preconditioning seconds; on the CPU at one thread and at all cores. Also the
    single-thread data loading rate, the model's size, and the seconds a frame of the model at
    WIDTH_SCALES' widths (`by_size`, on the device at full speed, net of a batch's fixed cost), and
    this machine's speed (`machine_rate`). On a machine that stays busy, `when_busy` "go-on" keeps
    the rates with why it was busy (`busy`); "refuse" stops with BusyMachine."""
    device = resolve_device(train.device)
    sizes, groups = _timed_groups(train, train_set, batches)
    threads_before = torch.get_num_threads()
    torch.set_num_threads(1)
    load_s = [_seconds(lambda g=g: train_set.collate(g)) for g in groups]
    minibatches = [train_set.collate(g) for g in groups]
    frames = sum(b.frames for b in minibatches)
    calibration = {
        "device": device.type,
        "device_name": describe(device),
        "cores": available_cores(),
        "gpus": torch.cuda.device_count() if device.type == "cuda" else 0,
        "data_frames_per_s": frames / sum(load_s),
        "batch_sizes": sizes,
    }
    thread_counts = sorted({1, available_cores()}) if device.type == "cpu" else [available_cores()]
    tokens = len(train_set.tokens)
    policy_sized = [
        b for b in minibatches if len(b.utts) == train.batch_size
    ]  # its first two warm up
    # NG-SGD's cost grows with a minibatch's frames: timed on the policy-sized one of median frames
    preconditioned = sorted(policy_sized, key=lambda b: b.frames)[len(policy_sized) // 2]
    calibration["preconditioned"] = {
        "utterances": len(preconditioned.utts),
        "frames": preconditioned.frames,
    }
    repeats, calibration["busy"] = _agreed(
        thread_counts,
        lambda: _learner(train, model, features.dim, tokens, device),
        (minibatches, train.lr, policy_sized, preconditioned),
        device.type == "cpu",
        go_on=when_busy == "go-on",
    )
    calibration |= _by_threads(repeats)
    calibration["model"] = {
        "flops_per_frame": flops_per_frame(model, features.dim, tokens),
        "parameters": sum(
            p.numel() for p in _learner(train, model, features.dim, tokens, device).parameters
        ),
    }
    # the other widths at the policy's batch size, net of a batch's fixed cost (which does not
    # grow with the width: the same kernels are launched)
    fixed_s = calibration["by_threads"][str(thread_counts[-1])]["backward_s_per_batch"]
    calibration["by_size"] = _by_size(
        train, model, features.dim, tokens, device, policy_sized, fixed_s
    )
    calibration["machine_rate"] = machine_rate()
    torch.set_num_threads(threads_before)
    return calibration


def _timed_groups(train: TrainConfig, train_set: Subset, batches: int) -> tuple[list[int], list]:
    """The minibatch sizes timed (BATCH_SCALES of the policy's) and about `batches` minibatches'
    utterances of them, after two of the policy's size."""
    utts = sorted(train_set.frames)
    sizes = sorted({max(1, round(train.batch_size * scale)) for scale in BATCH_SCALES})
    # batches timed at each size, after two of the policy's size
    each = max(2, batches // len(sizes))
    of_size = {size: train_set.batches(utts, size, seed=SEED)[: each + 2] for size in sizes}
    groups = of_size[train.batch_size][:2] + [
        group for size in sizes for group in of_size[size][2:]
    ]
    return sizes, groups


def _by_threads(repeats: dict[str, list[dict]]) -> dict:
    """A calibration's rates by thread count (each count's fastest repeat, never slower with more
    threads), and its repeats' figures."""
    fastest = {t: max(runs, key=lambda r: r["frames_per_s"]) for t, runs in repeats.items()}
    figures = {}
    figures["by_threads"], figures["slower_with_more_threads"] = never_slower_with_more_threads(
        fastest
    )
    for key, field in (
        ("repeats", "frames_per_s"),
        ("cpu_share", "cpu_share"),
        ("held_by_others", "held_by_others"),
    ):
        figures[key] = {t: [r[field] for r in runs] for t, runs in repeats.items()}
    figures["spread"] = {t: max(rates) / min(rates) for t, rates in figures["repeats"].items()}
    return figures


def _by_size(
    train: TrainConfig,
    model: ModelConfig,
    dim: int,
    tokens: int,
    device,
    policy_sized: list,
    fixed_s: float,
) -> list[dict]:
    """The seconds a frame of the model at WIDTH_SCALES' widths, over the policy-sized minibatches
    and net of a batch's fixed cost `fixed_s`, with each width's size."""
    by_size = []
    # a corpus of two batches times no width
    for scale in WIDTH_SCALES if len(policy_sized) > 2 else ():
        width = replace(model, units=max(1, round(model.units * scale)))
        frames, seconds = _backward_times(_learner(train, width, dim, tokens, device), policy_sized)
        net = seconds.sum() - fixed_s * len(seconds)  # a negative net is noise: then all per frame
        per_frame = float((net if net > 0 else seconds.sum()) / frames.sum())
        by_size.append(
            {
                "units": width.units,
                "backward_s_per_frame": per_frame,
                "flops_per_frame": flops_per_frame(width, dim, tokens),
            }
        )
    return by_size


def _agreed(
    thread_counts: list[int], learner, timed: tuple, on_cpu: bool = True, go_on: bool = False
) -> tuple[dict[str, list[dict]], str | None]:
    """`REPEATS` timings of the rates at each thread count (each of a fresh `learner()`, over
    `timed`: `_time_learner`'s minibatches, rate, policy-sized and preconditioned ones) that agree
    (`disagreement`; `on_cpu`: with the process's share of its threads' time), timed again after
    each of `WAITS_S` where they do not; and None. On a machine busy through every wait,
    BusyMachine, unless `go_on`: then the last attempt's, timed at every thread count, and why the
    machine was busy."""
    for attempt, wait in enumerate((*WAITS_S, None), start=1):
        repeats, why = _attempt(thread_counts, learner, timed, on_cpu, whole=go_on and not wait)
        if why is None:
            return repeats, None
        if wait is None:
            break
        print(
            f"calibration: {why}: the machine is busy; waiting {wait} s, then timing again "
            f"(attempt {attempt + 1} of {len(WAITS_S) + 1})",
            flush=True,
        )
        time.sleep(wait)
    waited = f"in each of {len(WAITS_S) + 1} attempts over {sum(WAITS_S)} s of waiting"
    if go_on:
        print(
            f"calibration: {why}, {waited}: the machine stays busy; its rates kept as timed "
            "(study.busy_machine: go-on), and the report marks every modelled time resting on them",
            flush=True,
        )
        return repeats, why
    raise BusyMachine(
        f"calibration: {why}, {waited}: the machine is busy (another process holds its cores); "
        "calibrate on a machine to itself, or keep a busy machine's rates with study.busy_machine: "
        "go-on (the report marks the times resting on them)"
    )


def _attempt(
    thread_counts: list[int], learner, timed: tuple, on_cpu: bool, whole: bool = False
) -> tuple[dict[str, list[dict]], str | None]:
    """`REPEATS` timings at each thread count, and why they cannot be this machine's own (None
    where they can). The attempt ends at the first thread count that disagrees (a busy machine's
    many threads are the slowest to time), unless `whole`."""
    repeats, why = {}, None
    for threads in thread_counts:
        torch.set_num_threads(threads)
        repeats[str(threads)] = [
            _shared(threads, lambda: _time_learner(learner(), *timed)) for _ in range(REPEATS)
        ]
        # one thread's share alone: many threads may leave some idle where the model is too small
        # to split
        shares = (
            {"1": [r["cpu_share"] for r in repeats["1"]]} if on_cpu and "1" in repeats else None
        )
        held = (
            {t: [r["held_by_others"] for r in runs] for t, runs in repeats.items()}
            if on_cpu
            else None
        )
        rates = {t: [r["frames_per_s"] for r in runs] for t, runs in repeats.items()}
        why = why or disagreement(rates, shares, held)
        if why and not whole:
            break
    return repeats, why


def machine_rate(repeats: int = REPEATS) -> float:
    """This machine's speed: frames/s of the reference workload (`REFERENCE_MODEL` over batches of
    `REFERENCE_LENGTHS`) on one thread, the fastest of `repeats` timings (the least disturbed)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    torch.manual_seed(SEED)
    network = build_model(REFERENCE_MODEL, 40, 30)
    learner = Learner(network, make_optimizer("adam", 0.0, network), 5.0, "reference")
    batches = _reference_batches()
    ops.run_alone(learner.backward(batches[0]))  # warm-up
    frames = sum(batch.frames for batch in batches)
    seconds = min(
        _seconds(lambda: [ops.run_alone(learner.backward(b)) for b in batches])
        for _ in range(repeats)
    )
    torch.set_num_threads(threads)
    return frames / seconds


def _reference_batches(count: int = 8, size: int = 32) -> list[Batch]:
    """The reference workload's batches: `count` × `size` utterances at the built-in corpus's
    lengths (`REFERENCE_LENGTHS`, interpolated), cut in order of length, random features and
    characters."""
    generator = torch.Generator().manual_seed(SEED)
    percentiles = np.linspace(0, 100, len(REFERENCE_LENGTHS))
    lengths = np.interp(np.linspace(0, 100, count * size), percentiles, REFERENCE_LENGTHS)
    batches = []
    for cut in torch.tensor(lengths.round(), dtype=torch.long).split(size):
        characters = (cut * REFERENCE_CHARACTERS_A_FRAME).round().long().clamp(min=1)
        batches.append(
            Batch(
                torch.randn(size, int(cut.max()), 40, generator=generator),
                cut,
                torch.randint(1, 30, (int(characters.sum()),), generator=generator),
                characters,
                [str(u) for u in range(size)],
            )
        )
    return batches


def _shared(threads: int, timing) -> dict:
    """`timing()`'s rates, with the share of its `threads`' wall time the process spent on the cores
    and the share of the cores it may run on that other processes held meanwhile."""
    wall, cpu, busy = time.perf_counter(), time.process_time(), _cores_busy_s()
    rates = timing()
    wall, cpu, busy = time.perf_counter() - wall, time.process_time() - cpu, _cores_busy_s() - busy
    cores = len(_own_cores())
    return rates | {
        "cpu_share": cpu / (wall * threads),
        "held_by_others": max(0.0, busy - cpu) / (wall * cores),
    }


def _own_cores() -> list[int]:
    """The cores this process may run on (its affinity; on a system without one, every core)."""
    return (
        sorted(os.sched_getaffinity(0))
        if hasattr(os, "sched_getaffinity")
        else list(range(psutil.cpu_count()))
    )


def _cores_busy_s() -> float:
    """Seconds since boot that this process's cores spent busy, for whichever process (a guest's
    time is in user time already)."""
    idle = ("idle", "iowait", "guest", "guest_nice")
    per_core = psutil.cpu_times(percpu=True)
    return sum(
        sum(getattr(per_core[core], field) for field in per_core[core]._fields if field not in idle)
        for core in _own_cores()
    )


def _learner(train: TrainConfig, model: ModelConfig, dim: int, tokens: int, device) -> Learner:
    torch.manual_seed(SEED)
    network = build_model(model, dim, tokens).to(device)
    return Learner(
        network,
        make_optimizer(train.optimizer, train.momentum, network),
        train.clip_grad_norm,
        "calibration",
    )


def _backward_times(learner: Learner, minibatches) -> tuple[np.ndarray, np.ndarray]:
    """Frames and seconds of the forward-backward of each minibatch but the first two (warm-up)."""
    for batch in minibatches[:2]:
        ops.run_alone(learner.backward(batch))
    timed = minibatches[2:]
    seconds = [_seconds(lambda b=b: ops.run_alone(learner.backward(b))) for b in timed]
    return np.array([b.frames for b in timed], dtype=float), np.array(seconds)


def measured_compute(calibration: dict, environment: dict) -> dict:
    """A dedicated profile's `compute` from a calibration: what to paste into a config's
    hardware.<name>."""
    fastest = calibration["by_threads"][str(max(int(t) for t in calibration["by_threads"]))]
    packages = environment.get("packages", {})
    return {
        "measured_on": f"{calibration['device_name']}, torch {packages.get('torch')}, by asrscale "
        "calibrate "
        f"on {time.strftime('%Y-%m-%d')}",
        **calibration["model"],
        **{rate: float(f"{fastest[rate]:.4g}") for rate in RATES},
        "by_size": [
            [width["flops_per_frame"], float(f"{width['backward_s_per_frame']:.4g}")]
            for width in calibration["by_size"]
        ],
    }


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
