"""The benchmark suite runs end to end in its quick mode (its figures are not judged here)."""

import json
import math
import subprocess
import sys

import pytest
import yaml

from helpers import ROOT

pytestmark = pytest.mark.slow  # runs the benchmark suite, which starts Snakemake

SNAKEMAKE_BENCHMARK = (
    "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"
)


def write_study_benchmarks(root, study):
    """Benchmark files laid out and formatted as Snakemake writes them for a study."""
    files = {
        "synthesise/part0.tsv": (20.0, 120.0),
        "synthesise/part1.tsv": (22.0, 125.0),
        f"{study}/calibrate.tsv": (9.0, 600.0),
        f"{study}/train/sim-x/seq-P1-seed1.tsv": (50.0, 800.0),
        f"{study}/decode/sim-x/seq-P1-seed1.tsv": (5.0, 300.0),
        "other-study/train/mpi/seq-P1-seed1.tsv": (999.0, 999.0),  # another study's: left out
    }
    for name, (seconds, rss) in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(
            SNAKEMAKE_BENCHMARK
            + f"{seconds}\t0:00:{seconds:02.0f}\t{rss}\t1\t1\t1\t0\t0\t50\t{seconds}\n"
        )


def test_quick_suite_writes_every_figure(tmp_path):
    config = yaml.safe_load((ROOT / "config.yaml").read_text())
    write_study_benchmarks(
        tmp_path / "study", config["study"].get("name") or config["corpus"]["name"]
    )
    command = [
        sys.executable,
        "-m",
        "benchmarks",
        "--quick",
        "--work",
        tmp_path / "work",
        "--out",
        tmp_path / "out",
        "--study-benchmarks",
        tmp_path / "study",
    ]
    result = subprocess.run(
        list(map(str, command)), cwd=ROOT, capture_output=True, text=True, timeout=1500
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]

    results = json.loads((tmp_path / "out" / "results.json").read_text())
    figures = {f["figure"]: f for f in results["figures"]}
    assert {f["benchmark"] for f in figures.values()} == {
        "trainer",
        "data",
        "simulation",
        "fused",
        "allreduce",
        "features",
        "asgd",
        "decoding",
        "language model",
        "noise scale",
        "end-to-end",
    }
    assert all(math.isfinite(f["value"]) and f["value"] > 0 for f in figures.values())
    assert all(isinstance(f["met"], bool) for f in figures.values() if f["target"])
    assert sum(f["target"] is not None for f in figures.values()) >= 8
    assert figures["synthesise: 2 job(s), job seconds in all"]["value"] == 42.0
    assert figures["train: 1 job(s), job seconds in all"]["value"] == 50.0
    assert figures["calibrate: peak memory of one job"]["value"] == 600.0
    for algorithm in ("SSGD", "ASGD", "KAVG", "MA", "ADPSGD", "H-ADPSGD".replace("-", "")):
        outside = figures[
            f"cpu: {algorithm}, 8 simulated learners, an epoch's seconds outside their arithmetic"
        ]
        assert (
            0 < outside["value"] < outside["details"]["total_s"]
            and outside["details"]["arithmetic_s"] > 0
        )
    # a fused round pads every learner to its longest: never less than the learners in turn
    padding = "frames computed with padding, 8 learners {} / SEQ, one epoch"
    in_turn, rounds = figures[padding.format("in turn")], figures[padding.format("in fused rounds")]
    assert rounds["value"] >= in_turn["value"] >= in_turn["details"]["least_possible"]
    # SSGD's learners of 2 utterances, one by one and as one batch, against SEQ's epoch
    one_batch = "wall time, SSGD 8 × 2 simulated learners {} / SEQ, one epoch"
    assert all(
        figures[one_batch.format(how)]["value"] > 0 for how in ("one by one", "as one batch")
    )
    # SEQ's own: what any run pays (building its learner, the dev evaluations)
    assert (
        figures["cpu: SEQ, one learner, an epoch's seconds outside their arithmetic"]["details"][
            "start"
        ]
        > 0
    )
    # the gradient noise measurement: its own share of a run, which trains the same model without it
    share = figures["SEQ at 1, 2 epochs: the measurement's share of the run's wall time"]
    assert 0 < share["value"] < 1 and share["details"]["same_model"]
    # streaming the ARPA file holds less than every n-gram; each child's memory its own
    lm = next(
        f
        for name, f in figures.items()
        if name.startswith("LM statistics") and name.endswith("seconds")
    )
    assert figures["the same holding every n-gram / streaming (peak memory)"]["value"] > 1
    assert lm["details"]["before_mb"] < 1000 and lm["details"]["test_perplexity"] > 1
    table = (tmp_path / "out" / "results.md").read_text()
    assert "| benchmark | figure | value | target | met |" in table and len(
        table.splitlines()
    ) > len(figures)
