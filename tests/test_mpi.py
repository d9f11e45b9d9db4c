"""Real multi-process tests: learners are MPI ranks started by mpiexec."""

import json
import re
import shutil
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

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
    assert "asrscale train: ssgd: rank 1 of 2: FileNotFoundError" in result.stderr
    assert time.monotonic() - start < 60
    assert not Path(tmp_path / "run" / "model.pt").exists()


PROPERTIES = ROOT / "tests" / "mpi_programs" / "algorithm_properties.py"


def check(ranks, corpus, case, *arguments):
    result = mpiexec(ranks, sys.executable, PROPERTIES, corpus, case, *arguments, timeout=120)
    assert result.stdout.count(f"{case} holds") == ranks, result.stdout + result.stderr


@pytest.mark.parametrize("algorithm", ["ssgd", "kavg", "adpsgd", "hadpsgd", "asgd", "ma"])
def test_every_algorithm_with_one_learner_is_seq(corpus, algorithm):
    # MA is SEQ once its Kaldi extras (natural gradient, capped change) are off
    options = {"natural_gradient": False, "max_param_change": 0} if algorithm == "ma" else {}
    check(2 if algorithm == "asgd" else 1, corpus, "matches_seq_with_one_learner", algorithm, json.dumps(options))


def test_kavg_with_k1_matches_ssgd_step_for_step(corpus):
    check(2, corpus, "kavg_k1_matches_ssgd")


def test_kavg_replicas_are_identical_after_averaging(corpus):
    check(3, corpus, "kavg_averages_every_k")


@pytest.mark.parametrize("learners", [2, 3, 4])
def test_adpsgd_pairwise_averaging_keeps_the_mean_and_terminates(corpus, learners):
    check(learners, corpus, "adpsgd_keeps_the_mean_and_ends")


def test_asgd_server_applies_every_gradient_exactly_once_with_consistent_staleness(corpus):
    check(4, corpus, "asgd_applies_every_gradient_once")


@pytest.mark.parametrize("learners", [3, 4])
def test_hadpsgd_keeps_the_models_inside_a_node_identical(corpus, learners):
    check(learners, corpus, "hadpsgd_keeps_nodes_identical")


@pytest.mark.parametrize("fault", ["hanging", "dying"])
def test_a_hanging_or_dying_rank_ends_the_job_in_bounded_time(corpus, fault):
    start = time.monotonic()
    result = mpiexec(3, sys.executable, PROPERTIES, corpus, f"a_{fault}_rank_ends_the_job", check=False, timeout=90)
    assert result.returncode != 0
    assert time.monotonic() - start < 60
    if fault == "hanging":
        # whichever waiting rank notices first names itself and what it was waiting in
        assert re.search(r"ssgd: rank [02] of 3: no progress for 3 s in Barrier", result.stderr), result.stderr
