"""What measuring the gradient noise scale costs (asrscale.training.noise_scale, measured at every
epoch's end: train.noise_scale): a run of the default study's SEQ and of KAVG at 4 simulated
learners, 2 epochs each, with the measurement as configured and without it (its share 0), in turn
so that a drift of the machine's speed cancels in each repetition's ratio. Two figures a run: the
wall time with it over without (on a shared 2-core machine single runs range over ±15-20%, so
this ratio's noise is wider than the cost), and the measurement's own share of the run's wall
time (run.json's process_wall_s: its `noise` phase over the total), which the noise of the
machine moves little; and whether both trained the same model (they must: the measurement
changes nothing of training)."""

import hashlib
import json
import shutil
from pathlib import Path

import torch

from benchmarks.common import Bench, PreparedCorpus, child, child_main, median

RUNS = (("seq", 1), ("kavg", 4))
EPOCHS = 2
REPETITIONS = 2  # of each pair: 8 runs of 2 epochs, about 16 minutes on the 2-core machine


def run(bench: Bench) -> None:
    for algorithm, learners in RUNS:
        measured = [
            {
                share: child(bench, "noise_scale", bench.work, algorithm, learners, share)
                for share in ("as-configured", "off")
            }
            for _ in range(REPETITIONS if not bench.quick else 1)
        ]
        with_it, without = ([m[k] for m in measured] for k in ("as-configured", "off"))
        name = f"{algorithm.upper()} at {learners}" + (" (simulated)" if learners > 1 else "")
        bench.add(
            "noise scale",
            f"{name}, {EPOCHS} epochs: wall time with the noise scale measured / without",
            median(a["wall_s"] / b["wall_s"] for a, b in zip(with_it, without)),
            "x",
            "<= 1.02",
            with_s=[a["wall_s"] for a in with_it],
            without_s=[b["wall_s"] for b in without],
        )
        bench.add(
            "noise scale",
            f"{name}, {EPOCHS} epochs: the measurement's share of the run's wall time",
            median(a["wall"]["noise"] / a["wall"]["total"] for a in with_it),
            "",
            "<= 0.02",
            noise_s=[a["wall"]["noise"] for a in with_it],
            noise_scale=with_it[0]["noise_scale"],
            same_model=all(a["digest"] == b["digest"] for a, b in zip(with_it, without)),
        )


def measure(work: Path, algorithm: str, learners: int, share: str) -> dict:
    """One run of `EPOCHS` epochs, SEQ really training alone and the others simulated on the
    study's hardware profile, the noise scale measured as configured or not at all: its wall time,
    where the process's went, its last noise scale and a digest of its model."""
    study = PreparedCorpus.of(work)
    out = work / "scratch" / "noise_scale" / f"{algorithm}-P{learners}-{share}"
    shutil.rmtree(out, ignore_errors=True)
    noise = dict(study.seq.train.noise_scale, **({"share": 0.0} if share == "off" else {}))
    settings = study.settings_file(
        out,
        algorithm,
        learners,
        "simulated" if learners > 1 else "mpi",
        epochs=EPOCHS,
        device="cpu",
        noise_scale=noise,
    )
    wall_s = study.train(settings, learners, out)
    last = (out / "metrics.tsv").read_text().splitlines()
    header, rows = last[0].split("\t"), [line.split("\t") for line in last[1:]]
    epochs = [dict(zip(header, row)) for row in rows if row[0] == "epoch"]
    model = torch.load(out / "model.pt", weights_only=False)["model"]
    return {
        "wall_s": wall_s,
        "wall": json.loads((out / "run.json").read_text())["process_wall_s"],
        "noise_scale": epochs[-1]["noise_scale"],
        "digest": hashlib.sha256(
            b"".join(tensor.numpy().tobytes() for tensor in model.values())
        ).hexdigest(),
    }


if __name__ == "__main__":
    child_main(measure, work=Path, algorithm=str, learners=int, share=str)
