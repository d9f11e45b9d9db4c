"""Fused learners: what one round of steps of 64 simulated learners costs when their gradients are
computed as one (asrscale.training.fused.learners, as the simulated world's fuser does), against the
same learners one after another and against one model at the same global batch, in input frames per
second on the same device, with the peak GPU memory. The corpus's own batches: each learner's first
batches of its 64-learner shard; SEQ's model, optimizer and batch size. On a GPU, fused twice: the
recurrence's loops launched kernel by kernel, and replayed as CUDA graphs (the simulated world's way
there, each time step's algebra one Triton kernel each way; and the same graphs with the algebra in
torch's operations, the way before those kernels; the rounds are timed once each shape's graphs are
captured). The fused rounds' updates are one multi-tensor step for the 64 learners (fused_updates,
as the simulated world applies them), the learners in turn each take their own; "updates" is the
fused rounds' optimizer steps alone, their share of a round. Also MA's NG-SGD preconditioning of the
64 learners' gradients (povey14; MA's dominant cost at this model and batch): together, as the
simulated world fuses it (precondition_together), against the learners in turn, a step of its steady
schedule (one refresh of the factors every `update_period` steps).

On a GPU (skipped without one: the figures then say so): the target is at least half of one
model's speed at batch 2048 (64 × 32). On the CPU the fused computation is slower than the
learners in turn (oneDNN's LSTM is near the cores' peak), which is why `study.fuse_learners:
auto` fuses on a GPU only: the CPU figure records it. Quick (the tests' run): 8 learners.
"""

import time
from pathlib import Path

from asrscale.config import paths
from benchmarks.common import Bench, PreparedCorpus, child, child_main, median


def run(bench: Bench) -> None:
    rounds, learners = (2 if bench.quick else 6), bench.learners
    for device in ("cpu", "cuda"):
        figures = child(bench, "fused", bench.work, device, rounds, learners)
        if not figures["measured"]:
            print(f"  {device}: skipped ({figures['why']})", flush=True)
            continue
        fused, alone, big = (median(figures[k]) for k in ("fused_s", "alone_s", "big_s"))
        frames, batch = figures["frames"], figures["global_batch"]
        if device == "cuda":
            graphed, torch_cells = (
                median(figures["graphed_s"]),
                median(figures["graphed_torch_cells_s"]),
            )
            bench.add(
                "fused",
                f"cuda: {learners} learners fused, CUDA graphs / one model at batch {batch}, "
                "frames/s",
                big / graphed,
                "x",
                ">= 0.5",
                fused_frames_per_s=frames / graphed,
                big_frames_per_s=frames / big,
                rounds=rounds,
            )
            bench.add(
                "fused",
                f"cuda: {learners} learners fused, CUDA graphs / kernel by kernel, frames/s",
                fused / graphed,
                "x",
            )
            bench.add(
                "fused",
                "cuda: CUDA graphs, Triton's cells / torch's operations, frames/s",
                torch_cells / graphed,
                "x",
                torch_cells_frames_per_s=frames / torch_cells,
            )
            bench.add(
                "fused",
                f"cuda: {learners} learners' optimizer steps, share of a fused round",
                median(figures["updates_s"]) / graphed,
                "",
                updates_s=median(figures["updates_s"]),
            )
        bench.add(
            "fused",
            f"{device}: {learners} learners fused / one model at batch {batch}, frames/s",
            big / fused,
            "x",
            fused_frames_per_s=frames / fused,
            big_frames_per_s=frames / big,
            rounds=rounds,
        )
        bench.add(
            "fused",
            f"{device}: {learners} learners fused / the same learners in turn, frames/s",
            alone / fused,
            "x",
            alone_frames_per_s=frames / alone,
        )
        if device == "cuda":
            bench.add(
                "fused",
                f"cuda: peak memory of {learners} fused learners",
                figures["fused_peak_gb"],
                "GB",
                with_cuda_graphs_gb=figures["graphed_peak_gb"],
            )
        in_turn, together = (
            figures["precondition_in_turn_s"][0],
            figures["precondition_together_s"][0],
        )
        bench.add(
            "fused",
            f"{device}: NG-SGD of {learners} learners, together / in turn, time a step",
            together / in_turn,
            "x",
            together_s=together,
            in_turn_s=in_turn,
        )


def measure(work: Path, device: str, rounds: int, count: int) -> dict:
    import torch

    from asrscale.data.batches import Batch
    from asrscale.data.shard import read_shard
    from asrscale.training.learner import Learner, make_optimizer

    if device == "cuda" and not torch.cuda.is_available():
        return {"measured": False, "why": "no CUDA device here"}
    torch.set_flush_denormal(
        True
    )  # as training does: denormals slow the CPU's arithmetic many times over
    study = PreparedCorpus.of(work)
    run, train_set, place = study.seq, study.subset("train"), torch.device(device)
    shards = [read_shard(study.path(paths.SHARDS, learners=count), r, count) for r in range(count)]
    batches = [
        train_set.collate(sorted(shard)[: run.train.batch_size]).to(place) for shard in shards
    ]
    torch.manual_seed(run.seed)

    def learner(name):
        model = study.build_model().to(place)
        return Learner(
            model,
            make_optimizer(run.train.optimizer, run.train.momentum, model),
            run.train.clip_grad_norm,
            name,
        )

    learners = [learner(f"learner {r}") for r in range(count)]
    longest = max(b.features.shape[1] for b in batches)
    everything = Batch(
        torch.cat([_padded(b, longest) for b in batches]),
        torch.cat([b.lengths for b in batches]),
        torch.cat([b.targets for b in batches]),
        torch.cat([b.target_lengths for b in batches]),
        [u for b in batches for u in b.utts],
    )
    seconds = time_rounds(
        learners, batches, learner("one model"), everything, run.train.lr, place, rounds
    )
    seconds |= time_preconditioning(learners, batches, place)
    return {
        "measured": True,
        "frames": sum(b.frames for b in batches),
        "global_batch": len(everything.utts),
        **seconds,
    }


def time_rounds(
    learners: list, batches: list, one, everything, lr: float, place, rounds: int
) -> dict:
    """Each way's seconds of `rounds` rounds: the learners' gradients as it computes them, then
    their updates as the simulated world applies them (fused learners' as one); "alone": the
    learners in turn, each its own update; "big": `one` model on `everything`. On a GPU, the fused
    ways' peak memory."""
    from asrscale.training.fused.cells import TorchCell
    from asrscale.training.fused.learners import fused_gradients, fused_updates, fusers
    from asrscale.training.fused.recurrence import GraphedLoops
    from asrscale.training.learner import GradientJob
    from asrscale.worlds import ops

    jobs = [GradientJob(each, batch) for each, batch in zip(learners, batches)]
    ways = {
        "fused": lambda: fused_gradients(jobs),  # kernel by kernel
        "alone": lambda: [each.compute(batch) for each, batch in zip(learners, batches)],
        "big": lambda: one.compute(everything),
    }
    on_gpu = place.type == "cuda"
    if on_gpu:
        the_worlds_fuser, graphs_of_torch_cells = (
            fusers(place)[ops.Gradient],
            GraphedLoops(TorchCell),
        )
        ways |= {
            "graphed": lambda: the_worlds_fuser(jobs),  # the recurrence's loops as CUDA graphs
            "graphed_torch_cells": lambda: fused_gradients(jobs, graphs_of_torch_cells),
            "updates": lambda: None,
        }  # nothing computed: the round's optimizer steps alone

    def round_of(name):
        ways[name]()
        if name not in ("alone", "big"):
            return fused_updates([(each, lr) for each in learners])
        for each in learners if name == "alone" else [one]:
            each.apply(lr)

    seconds = {}
    for name in ways:
        seconds |= _time_way(name, round_of, rounds, place)
    return seconds


def _time_way(name: str, round_of, rounds: int, place) -> dict:
    """One way's seconds of `rounds` rounds (`round_of(name)`), after its warm-up; on a GPU, a fused
    way's peak memory."""
    import torch

    from asrscale.worlds.devices import synchronize

    on_gpu = place.type == "cuda"
    for _ in range(2 if name.startswith("graphed") else 1):
        round_of(name)  # warm-up; with CUDA graphs the second captures
    synchronize(place)
    if on_gpu:
        torch.cuda.reset_peak_memory_stats()
    timed = []
    for _ in range(rounds):
        start = time.perf_counter()
        round_of(name)
        synchronize(place)
        timed.append(time.perf_counter() - start)
    seconds = {f"{name}_s": timed}
    if name in ("fused", "graphed", "graphed_torch_cells") and on_gpu:
        seconds[f"{name}_peak_gb"] = torch.cuda.max_memory_allocated() / 1e9
    return seconds


def time_preconditioning(learners: list, batches: list, place) -> dict:
    """MA's NG-SGD preconditioning of the learners' gradients, in turn and together: the seconds
    of a step of its steady schedule."""
    from asrscale.training.fused.learners import fused_gradients
    from asrscale.training.learner import GradientJob
    from asrscale.training.natural_gradient import (
        Recorder,
        natural_gradient_of,
        precondition_together,
    )
    from asrscale.worlds.devices import synchronize

    recorders = [Recorder() for _ in learners]
    fused_gradients([GradientJob(*job) for job in zip(learners, batches, recorders)])

    def in_turn(jobs):
        for natural, recorder in jobs:
            natural.precondition(recorder)

    seconds = {}
    for way, precondition in (("in_turn", in_turn), ("together", precondition_together)):
        naturals = [natural_gradient_of(each.model) for each in learners]
        jobs = list(zip(naturals, recorders))
        precondition(jobs)  # the first step: the factors' first estimate
        for (
            natural
        ) in naturals:  # on to the steady schedule (each of the first ten steps refreshes)
            natural.steps = 10 * natural.update_period
        precondition(jobs)  # a warm-up step of the steady schedule
        synchronize(place)
        start = time.perf_counter()
        for _ in range(naturals[0].update_period):
            precondition(jobs)
        synchronize(place)
        seconds[f"precondition_{way}_s"] = [
            (time.perf_counter() - start) / naturals[0].update_period
        ]
    return seconds


def _padded(batch, frames: int):
    import torch.nn.functional as F

    return F.pad(batch.features, (0, 0, 0, frames - batch.features.shape[1]))


if __name__ == "__main__":
    child_main(measure, work=Path, device=str, rounds=int, count=int)
