"""Real multi-process tests: learners are MPI ranks started by mpiexec."""

import json
import shutil
import sys
import time
from pathlib import Path

import pandas as pd

from conftest import ROOT, mpiexec

TRAIN = {"epochs": 2, "batch_size": 8, "lr": 0.003, "log_interval": 2, "threads": 1, "seed": 3}
MODEL = {"kind": "lstm", "layers": 1, "units": 32}


def train_command(corpus, out, shards, algorithm="ssgd"):
    return [
        sys.executable, "-m", "asrscale", "train", "--train", json.dumps(dict(TRAIN, algorithm=algorithm)),
        "--model", json.dumps(MODEL), "--features", json.dumps({"kind": "fbank"}),
        "--data", corpus / "data", "--feats", corpus / "feats", "--shards", shards,
        "--tokens", corpus / "tokens.txt", "--out", out,
    ]  # fmt: skip


def test_ssgd_step_equals_seq_on_the_concatenated_batch_and_replicas_stay_identical(corpus):
    result = mpiexec(2, sys.executable, ROOT / "tests" / "mpi_programs" / "ssgd_properties.py", corpus)
    assert result.stdout.count("ssgd properties hold") == 2


def test_ssgd_run_on_four_ranks(corpus, tmp_path):
    mpiexec(4, *train_command(corpus, tmp_path, corpus / "shards" / "P4"))
    metrics = pd.read_csv(tmp_path / "metrics.tsv", sep="\t")
    intervals = metrics[metrics.kind == "interval"]
    assert sorted(intervals["rank"].unique()) == [0, 1, 2, 3]
    assert (intervals.communication_s > 0).all()
    epochs = metrics[metrics.kind == "epoch"]
    assert epochs.frames.iloc[0] == intervals[intervals.epoch == 1].frames.sum()
    assert json.loads((tmp_path / "run.json").read_text())["learners"] == 4


def test_a_failing_rank_ends_the_job_with_its_name(corpus, tmp_path):
    shards = tmp_path / "shards"
    shutil.copytree(corpus / "shards" / "P2", shards)
    (shards / "shard1.tsv").unlink()
    start = time.monotonic()
    result = mpiexec(2, *train_command(corpus, tmp_path / "run", shards), check=False, timeout=120)
    assert result.returncode != 0
    assert "rank 1 of 2: FileNotFoundError" in result.stderr
    assert time.monotonic() - start < 60
    assert not Path(tmp_path / "run" / "model.pt").exists()
