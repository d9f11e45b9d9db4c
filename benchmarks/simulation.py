"""Target 3: what it costs to simulate 64 learners. One epoch of SSGD and of ADPSGD with 64
simulated learners on the study's hardware profile, against SEQ really training one epoch on the
same data; wall time and peak memory, each run `asrscale train` as the workflow calls it, in a
process of its own.

On a GPU (skipped without one), the fused learners' target: one epoch of 64 simulated learners
of SSGD, ADPSGD, KAVG and MA (fused, as `study.fuse_learners: auto` has it there) at half or more
of the frames per second of one model trained at their global batch (64 × 32) on the same GPU.
An epoch there takes seconds, so each figure is the difference between a run of 3 epochs and one
of 1: what a run's start costs (imports, the GPU's context, the data, the first CUDA graphs'
captures) cancels, and the epochs' dev evaluations and checkpoints count, on both sides alike.

On the CPU and on a GPU, for every algorithm: where a 64-learner run's wall time goes
(asrscale.worlds.timing.WallTimes, recorded in run.json): the learners' arithmetic, and the
seconds outside it (exchanges, dev evaluation, checkpoints, batches, consensus models, the rest:
the trainer's and the world's bookkeeping), which the fused learners' epochs must keep small.

SSGD's learners as one batch (`one_batch`, its own entry of the suite): an epoch of 64 SSGD
learners of 2 utterances against SEQ's, with the learners computed one by one and as one batch.

Quick (the tests' run), 8 learners instead of 64 (`benchmarks.common.simulated_learners`)."""

import json
import shutil
from pathlib import Path

from asrscale.config import paths
from benchmarks.common import (
    Bench,
    PreparedCorpus,
    child,
    child_main,
    median,
    peak_rss_mb,
)

SIMULATED = ("ssgd", "adpsgd")
EVERY = ("ssgd", "asgd", "kavg", "ma", "adpsgd", "hadpsgd")
FUSED = ("ssgd", "adpsgd", "kavg", "ma")
EPOCHS = (1, 3)  # the GPU's figures: the difference between runs of these many epochs
SMALL_BATCH = 2  # the 64-learner controls' utterances a learner (studies/bmuf-64.yaml)


def padded_frames(bench: Bench, learners: int) -> tuple[int, int, int]:
    """Frames a first epoch computes, padding included: with the learners in turn, each batch padded
    to its own longest utterance; in fused rounds, every learner's batch of a step padded to the
    round's most utterances and longest utterance (asrscale.training.fused.learners); and the least
    padding of that many batches a learner, in turn (each shard sorted by length and cut). A
    learner's batches are cut from its own shard, so with few utterances each a batch spans more
    lengths; rounds of like lengths (Subset.batches) have every learner's batch of a step come from
    the same place in its own order of lengths."""
    from asrscale.data.shard import read_shard

    study = PreparedCorpus.of(bench.work)
    config, train_set = study.seq.train, study.subset("train")
    shards = [
        read_shard(bench.path(paths.SHARDS, learners=learners), r, learners)
        for r in range(learners)
    ]
    steps = min(-(-len(shard) // config.batch_size) for shard in shards)
    seed = study.seq.seed * 1000 + 1  # the first epoch's, as the trainer draws it
    groups = [
        train_set.batches(shard, config.batch_size, seed, steps, learner=r)
        for r, shard in enumerate(shards)
    ]
    longest = [[max(train_set.frames[u] for u in group) for group in learner] for learner in groups]
    in_turn = sum(
        len(group) * most
        for learner, tops in zip(groups, longest)
        for group, most in zip(learner, tops)
    )
    rounds = sum(
        learners * max(len(g[step]) for g in groups) * max(tops[step] for tops in longest)
        for step in range(steps)
    )
    sorted_cut = [
        train_set.batches(shard, config.batch_size, None, steps) for shard in shards
    ]  # no seed: by length
    least = sum(
        len(group) * max(train_set.frames[u] for u in group)
        for learner in sorted_cut
        for group in learner
    )
    return in_turn, rounds, least


def run(bench: Bench) -> None:
    learners = bench.learners
    (in_turn, rounds, least), (seq, _, _) = padded_frames(bench, learners), padded_frames(bench, 1)
    bench.add(
        "simulation",
        f"frames computed with padding, {learners} learners in turn / SEQ, one epoch",
        in_turn / seq,
        "x",
        least_possible=least / seq,
    )
    bench.add(
        "simulation",
        f"frames computed with padding, {learners} learners in fused rounds / SEQ, one epoch",
        rounds / seq,
        "x",
        "<= 1.1",
    )
    # run by run in turn, so that a drift of the machine's speed cancels in each repetition's ratio
    # (the suite's 5 repetitions: on a shared 2-core machine single ones range over ±20%)
    runs = [("seq", 1)] + [(algorithm, learners) for algorithm in SIMULATED]
    measured = [
        {a: child(bench, "simulation", bench.work, a, p, "cpu", 1, 0, "auto") for a, p in runs}
        for _ in range(bench.repetitions)
    ]
    seq = [m["seq"] for m in measured]
    for algorithm in SIMULATED:
        simulated = [m[algorithm] for m in measured]
        ratio = median(s["wall_s"] / q["wall_s"] for s, q in zip(simulated, seq))
        arithmetic = median(
            s["wall"]["arithmetic"] / q["wall"]["arithmetic"] for s, q in zip(simulated, seq)
        )
        bench.add(
            "simulation",
            f"wall time, {algorithm.upper()} {learners} simulated learners / SEQ, one epoch",
            ratio,
            "x",
            "<= 1.2",
            simulated_s=[s["wall_s"] for s in simulated],
            seq_s=[s["wall_s"] for s in seq],
            frames=seq[0]["frames"],
            arithmetic_ratio=arithmetic,
        )
        memory = median(s["peak_rss_mb"] for s in simulated) / median(s["peak_rss_mb"] for s in seq)
        bench.add(
            "simulation",
            f"peak memory, {algorithm.upper()} {learners} simulated learners / SEQ",
            memory,
            "x",
            "<= 4",
            simulated_mb=simulated[0]["peak_rss_mb"],
            seq_mb=seq[0]["peak_rss_mb"],
        )
    for algorithm in (
        "seq",
        *EVERY,
    ):  # the repetitions' median where there are several; SEQ's: what any run pays
        found = [m[algorithm] for m in measured if algorithm in m]
        found = found or [
            child(bench, "simulation", bench.work, algorithm, learners, "cpu", 1, 0, "auto")
        ]
        outside(
            bench,
            "cpu",
            algorithm,
            {phase: median(f["wall"][phase] for f in found) for phase in found[0]["wall"]},
        )
    on_a_gpu(bench)


def outside(bench: Bench, device: str, algorithm: str, wall: dict) -> None:
    """The seconds of a run of the simulated learners (SEQ: of one) outside their arithmetic, by
    phase."""
    phases = {
        phase: round(seconds, 2)
        for phase, seconds in wall.items()
        if phase not in ("arithmetic", "total")
    }
    learners = f"{bench.learners} simulated learners" if algorithm != "seq" else "one learner"
    bench.add(
        "simulation",
        f"{device}: {algorithm.upper()}, {learners}, an epoch's seconds outside their arithmetic",
        wall["total"] - wall["arithmetic"],
        "s",
        arithmetic_s=wall["arithmetic"],
        total_s=wall["total"],
        **phases,
    )


def on_a_gpu(bench: Bench) -> None:
    """The fused learners' epochs against one model at their global batch, on a GPU."""
    count = bench.learners
    batch = count * bench.config["train"]["batch_size"]

    def frames_per_s(algorithm: str, learners: int, batch_size: int = 0) -> dict:
        runs = []
        for epochs in EPOCHS:
            runs.append(
                child(
                    bench,
                    "simulation",
                    bench.work,
                    algorithm,
                    learners,
                    "cuda",
                    epochs,
                    batch_size,
                    "auto",
                )
            )
            if not runs[-1]["measured"]:
                return runs[-1]
        frames, seconds = (runs[1][k] - runs[0][k] for k in ("frames", "wall_s"))
        epochs = EPOCHS[1] - EPOCHS[0]
        wall = {
            phase: (runs[1]["wall"][phase] - runs[0]["wall"][phase]) / epochs
            for phase in runs[0]["wall"]
        }
        return {"measured": True, "value": frames / seconds, "wall": wall}

    big = frames_per_s("seq", 1, batch_size=batch)
    if not big["measured"]:
        print(f"  cuda: skipped ({big['why']})", flush=True)
        return
    for algorithm in FUSED:
        fused = frames_per_s(algorithm, count)
        bench.add(
            "simulation",
            f"cuda: one epoch of {algorithm.upper()}, {count} fused simulated learners / one "
            f"model at batch {batch}, frames/s",
            fused["value"] / big["value"],
            "x",
            ">= 0.5",
            frames_per_s=fused["value"],
            big_frames_per_s=big["value"],
        )
        outside(bench, "cuda", algorithm, fused["wall"])


def one_batch(bench: Bench) -> None:
    """SSGD's learners as one batch (asrscale.training.fused.learners.one_batch_gradients): an epoch
    of 64 simulated SSGD learners of `SMALL_BATCH` utterances, as the 64-learner controls train
    them, against SEQ's epoch at the study's batch, their learners computed one by one
    (study.fuse_learners off: before) and as one batch (auto: after), on the CPU."""
    learners = bench.learners
    runs = {
        "seq": ("seq", 1, 0, "auto"),
        "before": ("ssgd", learners, SMALL_BATCH, "off"),
        "after": ("ssgd", learners, SMALL_BATCH, "auto"),
    }
    # in turn within each repetition, so that a drift of the machine's speed cancels in its ratios
    measured = [
        {
            name: child(bench, "simulation", bench.work, algorithm, p, "cpu", 1, batch, fuse)
            for name, (algorithm, p, batch, fuse) in runs.items()
        }
        for _ in range(bench.repetitions)
    ]
    for name, how in (("before", "one by one"), ("after", "as one batch")):
        bench.add(
            "simulation",
            f"wall time, SSGD {learners} × {SMALL_BATCH} simulated learners {how} / SEQ, one epoch",
            median(m[name]["wall_s"] / m["seq"]["wall_s"] for m in measured),
            "x",
            **{f"{key}_s": [m[key]["wall_s"] for m in measured] for key in runs},
        )
    bench.add(
        "simulation",
        f"wall time, SSGD {learners} × {SMALL_BATCH} simulated learners as one batch / one by one",
        median(m["after"]["wall_s"] / m["before"]["wall_s"] for m in measured),
        "x",
        "<= 0.6",
    )


def measure(
    work: Path,
    algorithm: str,
    learners: int,
    device: str,
    epochs: int,
    batch_size: int,
    fuse: str,
) -> dict:
    """One run of `epochs` epochs on `device` (at `batch_size` a learner; 0: the study's; a
    simulated world's learners fused as study.fuse_learners `fuse` has them): its wall time, peak
    memory, frames trained, and where the process's wall time went."""
    import torch

    if device == "cuda" and not torch.cuda.is_available():
        return {"measured": False, "why": "no CUDA device here"}
    study = PreparedCorpus.of(work)
    out = work / "scratch" / "simulation" / f"{algorithm}-P{learners}-{device}-{epochs}"
    shutil.rmtree(out, ignore_errors=True)
    train = {"batch_size": batch_size} if batch_size else {}
    # SEQ really trains alone; the others are simulated on the study's hardware profile
    settings = study.settings_file(
        out,
        algorithm,
        learners,
        "simulated" if learners > 1 else "mpi",
        fuse,
        epochs=epochs,
        device=device,
        **train,
    )
    wall_s = study.train(settings, learners, out)
    rows = [line.split("\t") for line in (out / "metrics.tsv").read_text().splitlines()]
    frames = sum(
        int(row["frames"])
        for row in (dict(zip(rows[0], r)) for r in rows[1:])
        if row["kind"] == "epoch"
    )
    wall = json.loads((out / "run.json").read_text())["process_wall_s"]
    return {
        "measured": True,
        "wall_s": wall_s,
        "peak_rss_mb": peak_rss_mb(),
        "frames": frames,
        "wall": wall,
    }


if __name__ == "__main__":
    child_main(
        measure,
        work=Path,
        algorithm=str,
        learners=int,
        device=str,
        epochs=int,
        batch_size=int,
        fuse=str,
    )
