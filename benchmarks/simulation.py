"""Target 3: what it costs to simulate 64 learners. One epoch of SSGD and of ADPSGD with 64
simulated learners on the study's hardware profile, against SEQ really training one epoch on the
same data; wall time and peak memory, each run `asrscale train` as the workflow calls it, in a
process of its own."""

import shutil
from pathlib import Path

from benchmarks.common import CORPUS, Bench, Stopwatch, Study, child, child_main, median, peak_rss_mb

LEARNERS = 64
SIMULATED = ("ssgd", "adpsgd")


def padded_frames(bench: Bench, learners: int) -> int:
    """Frames a first epoch computes, padding included: a learner's batches are cut from its own
    shard, so with few utterances each a batch spans more lengths and pads more."""
    from asrscale.data.shard import read_shard

    study = Study.of(bench.work)
    config, train_set = study.seq.train, study.train_set()
    shards = [read_shard(bench.results / "shards" / f"P{learners}" / f"shard{r}.tsv") for r in range(learners)]
    steps = min(-(-len(shard) // config.batch_size) for shard in shards)
    seed = study.seq.seed
    groups = [g for shard in shards for g in train_set.batches(shard, config.batch_size, seed * 1000 + 1, steps)]
    return sum(len(group) * max(train_set.frames[u] for u in group) for group in groups)


def run(bench: Bench) -> None:
    repetitions = 1 if bench.quick else 3
    padding = padded_frames(bench, LEARNERS) / padded_frames(bench, 1)
    bench.add("simulation", f"frames computed with padding, {LEARNERS} learners / SEQ, one epoch", padding, "x")
    # run by run in turn, so that a drift of the machine's speed cancels in each repetition's ratio
    runs = [("seq", 1)] + [(algorithm, LEARNERS) for algorithm in SIMULATED]
    measured = [{a: child(bench, "simulation", bench.work, a, p) for a, p in runs} for _ in range(repetitions)]
    seq = [m["seq"] for m in measured]
    for algorithm in SIMULATED:
        simulated = [m[algorithm] for m in measured]
        ratio = median(s["wall_s"] / q["wall_s"] for s, q in zip(simulated, seq))
        bench.add("simulation", f"wall time, {algorithm.upper()} {LEARNERS} simulated learners / SEQ, one epoch",
                  ratio, "x", "<= 1.2", simulated_s=[s["wall_s"] for s in simulated],
                  seq_s=[s["wall_s"] for s in seq], frames=seq[0]["frames"])  # fmt: skip
        memory = median(s["peak_rss_mb"] for s in simulated) / median(s["peak_rss_mb"] for s in seq)
        bench.add("simulation", f"peak memory, {algorithm.upper()} {LEARNERS} simulated learners / SEQ", memory, "x",
                  "<= 4", simulated_mb=simulated[0]["peak_rss_mb"], seq_mb=seq[0]["peak_rss_mb"])  # fmt: skip


def measure(work: Path, algorithm: str, learners: int) -> dict:
    from asrscale import cli

    results = work / "results" / CORPUS
    out = work / "scratch" / "simulation" / f"{algorithm}-P{learners}"
    shutil.rmtree(out, ignore_errors=True)
    # SEQ really trains alone; the others are simulated on the study's hardware profile
    settings = Study.of(work).settings_file(out, algorithm, learners, "simulated" if learners > 1 else "mpi", epochs=1)
    argv = [
        "train",
        "--settings",
        settings,
        "--data",
        results / "data",
        "--feats",
        results / "feats",
        "--shards",
        results / "shards" / f"P{learners}",
        "--tokens",
        results / "tokens.txt",
        "--out",
        out,
    ]
    if learners > 1:
        argv += ["--calibration", results / "studies" / CORPUS / "calibration.json"]
    with Stopwatch() as watch:
        cli.main(list(map(str, argv)))
    epoch = [line.split("\t") for line in (out / "metrics.tsv").read_text().splitlines()]
    frames = int(dict(zip(epoch[0], epoch[-1]))["frames"])
    return {"wall_s": watch.seconds, "peak_rss_mb": peak_rss_mb(), "frames": frames}


if __name__ == "__main__":
    child_main(measure, work=Path, algorithm=str, learners=int)
