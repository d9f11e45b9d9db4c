"""Targets 1 and 2: asrscale's training step against a plain hand-written PyTorch loop on the
same model, batches and threads; and the share of a step spent waiting for data, prefetch on
and off.

SEQ trains one epoch of `steps` batches through `asrscale.training.loop` (the trainer the workflow
runs: prefetcher, request dispatch, time split, logging) and the plain loop runs the same batches,
already built in memory, so every cost of asrscale's data path counts as overhead. The step time is
the epoch's training time (dev evaluation and checkpoint excluded) over its steps. The two
alternate, repetition by repetition, so that a drifting machine speed cancels in each ratio."""

import csv
import math
import shutil
import time
from dataclasses import replace
from pathlib import Path

from benchmarks.common import Bench, PreparedCorpus, child, child_main, median


def run(bench: Bench) -> None:
    steps = 8 if bench.quick else 60
    figures = child(bench, "trainer", bench.work, steps, bench.repetitions)
    steps = figures["steps"]
    ratios = [a / p for a, p in zip(figures["asrscale_s"], figures["plain_s"])]
    step_s = median(figures["plain_s"]) / steps
    details = dict(steps=steps, repetitions=bench.repetitions, mean_loss=figures["mean_loss"])
    bench.add(
        "trainer",
        "step time, asrscale trainer / plain PyTorch loop",
        median(ratios),
        "x",
        "<= 1.05",
        asrscale_step_ms=1000 * median(figures["asrscale_s"]) / steps,
        plain_step_ms=1000 * step_s,
        ratios=ratios,
        **details,
    )
    bench.add(
        "trainer",
        "step time without prefetch, asrscale / plain loop",
        median([a / p for a, p in zip(figures["no_prefetch_s"], figures["plain_s"])]),
        "x",
    )
    bench.add(
        "data",
        "data-wait share of step time, prefetch on",
        100 * median(figures["wait_share"]),
        "%",
        "<= 2",
    )
    bench.add(
        "data",
        "data-wait share of step time, prefetch off",
        100 * median(figures["wait_share_off"]),
        "%",
    )


def measure(work: Path, steps: int, repetitions: int) -> dict:
    import torch

    from asrscale.data.shard import write_shards
    from asrscale.worlds.mpi import MPIWorld

    study = PreparedCorpus.of(work)
    run = replace(study.seq, train=replace(study.seq.train, epochs=1))
    train_set = study.subset("train")
    steps = min(steps, len(train_set.frames) // run.train.batch_size)
    utts = sorted(train_set.frames)[: steps * run.train.batch_size]
    scratch = work / "scratch" / "trainer"
    shutil.rmtree(scratch, ignore_errors=True)
    write_shards({u: train_set.frames[u] for u in utts}, 1, scratch / "shards")
    # the batches the trainer's first epoch takes
    groups = train_set.batches(utts, run.train.batch_size, seed=run.seed * 1000 + 1, count=steps)
    batches = [train_set.collate(group) for group in groups]
    world = MPIWorld()
    torch.set_num_threads(world.threads_per_rank)  # what the trainer takes for one learner
    torch.set_flush_denormal(True)
    plain_loop(study, run, batches[:3])  # warm-up
    measured = {
        "asrscale_s": [],
        "plain_s": [],
        "no_prefetch_s": [],
        "wait_share": [],
        "wait_share_off": [],
    }
    for _ in range(repetitions):
        seconds, wait, asrscale_loss = asrscale_epoch(
            study, run, scratch, world, steps, run.train.prefetch
        )
        measured["asrscale_s"].append(seconds)
        measured["wait_share"].append(wait)
        seconds, plain_loss = plain_loop(study, run, batches)
        measured["plain_s"].append(seconds)
        seconds, wait, _ = asrscale_epoch(study, run, scratch, world, steps, prefetch=0)
        measured["no_prefetch_s"].append(seconds)
        measured["wait_share_off"].append(wait)
    if not math.isclose(asrscale_loss, plain_loss, rel_tol=1e-3):
        raise AssertionError(
            f"the two loops did not do the same work: mean loss {asrscale_loss} vs {plain_loss}"
        )
    measured["mean_loss"] = {"asrscale": asrscale_loss, "plain": plain_loss}
    measured["steps"] = steps
    return measured


def asrscale_epoch(
    study: PreparedCorpus, run, scratch: Path, world, steps: int, prefetch: int
) -> tuple:
    """One epoch of `run` by asrscale's trainer, over the shards in `scratch`: its wall seconds,
    data-wait share and mean loss (from its metrics.tsv)."""
    from asrscale.config import paths as folders
    from asrscale.training.run import RunPaths, train

    out = scratch / f"run-prefetch{prefetch}"
    shutil.rmtree(out, ignore_errors=True)
    paths = RunPaths(
        study.path(folders.DATA, subset="train"),
        study.path(folders.DATA, subset="dev"),
        study.path(folders.FEATURES, subset="train"),
        study.path(folders.FEATURES, subset="dev"),
        scratch / "shards",
        study.path(folders.TOKENS),
        out,
    )
    train(replace(run, train=replace(run.train, prefetch=prefetch)), paths, world)
    with open(out / "metrics.tsv") as file:
        rows = list(csv.DictReader(file, delimiter="\t"))
    intervals = [r for r in rows if r["kind"] == "interval"]
    (epoch,) = (r for r in rows if r["kind"] == "epoch")
    wait = sum(float(r["data_wait_s"]) for r in intervals) / sum(
        float(r["wall_s"]) for r in intervals
    )
    ends = [0] + [int(r["step"]) for r in intervals]  # an interval's loss is its steps' mean
    mean_loss = (
        sum(float(r["loss"]) * (b - a) for r, a, b in zip(intervals, ends, ends[1:])) / steps
    )
    return float(epoch["wall_s"]), wait, mean_loss


def plain_loop(study: PreparedCorpus, run, batches) -> tuple[float, float]:
    """The same steps by a plain hand-written PyTorch loop on batches already in memory: its
    seconds and mean loss."""
    import torch
    import torch.nn.functional as F

    from asrscale.training.learner import make_optimizer

    torch.manual_seed(run.seed)
    model = study.build_model()
    optimizer = make_optimizer(run.train.optimizer, run.train.momentum, model)  # the study's
    for group in optimizer.param_groups:
        group["lr"] = run.train.lr
    losses = []
    start = time.perf_counter()
    for batch in batches:
        optimizer.zero_grad()
        log_probs, lengths = model(batch.features, batch.lengths)
        loss = F.ctc_loss(
            log_probs.transpose(0, 1),
            batch.targets,
            lengths,
            batch.target_lengths,
            zero_infinity=True,
        )
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), run.train.clip_grad_norm)
        optimizer.step()
        losses.append(loss.item())
    return time.perf_counter() - start, sum(losses) / len(losses)


if __name__ == "__main__":
    child_main(measure, work=Path, steps=int, repetitions=int)
