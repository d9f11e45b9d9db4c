import dataclasses
import math

import pandas as pd
import pytest
import torch

from asrscale.comm import MPIWorld
from asrscale.features import FeatureConfig
from asrscale.models import ModelConfig
from asrscale.train import Diverged, RunPaths, TrainConfig, train

SMALL_MODEL = ModelConfig(layers=1, units=32)
QUICK = TrainConfig(algorithm="seq", epochs=2, batch_size=8, lr=3e-3, log_interval=4, threads=1, seed=3)


def run(corpus, out, config=QUICK, learners=1):
    paths = RunPaths(corpus / "data", corpus / "feats", corpus / "shards" / f"P{learners}", corpus / "tokens.txt", out)
    train(config, SMALL_MODEL, FeatureConfig(), paths, MPIWorld())
    return torch.load(out / "model.pt", weights_only=False), pd.read_csv(out / "metrics.tsv", sep="\t")


def test_seq_trains_logs_and_records(corpus, tmp_path):
    model, metrics = run(corpus, tmp_path)
    epochs, intervals = metrics[metrics.kind == "epoch"], metrics[metrics.kind == "interval"]
    assert epochs.epoch.tolist() == [1, 2]
    assert epochs.dev_loss.iloc[-1] < epochs.dev_loss.iloc[0]
    assert intervals.loss.iloc[-1] < intervals.loss.iloc[0]
    split = intervals[["compute_s", "communication_s", "data_wait_s", "idle_s"]].sum(axis=1)
    assert ((split - intervals.wall_s).abs() < 1e-3).all()
    assert (intervals.frames_per_s > 0).all() and (intervals.communication_s == 0).all()
    record = (tmp_path / "run.json").read_text()
    for field in ('"seed": 3', '"torch"', '"cpu"', '"hostname"', '"mpi"', '"batch_size": 8'):
        assert field in record
    assert model["tokens"][0] == "<blank>"


def test_same_seed_same_model_and_resume_matches_uninterrupted(corpus, tmp_path):
    whole, _ = run(corpus, tmp_path / "whole")
    again, _ = run(corpus, tmp_path / "again")
    for name in whole["model"]:
        assert torch.equal(whole["model"][name], again["model"][name])
    # a run stopped after epoch 1 (as if killed) and started again resumes from its checkpoint
    run(corpus, tmp_path / "resumed", dataclasses.replace(QUICK, epochs=1))
    (tmp_path / "resumed" / "model.pt").unlink()
    resumed, metrics = run(corpus, tmp_path / "resumed")
    for name in whole["model"]:
        assert torch.equal(whole["model"][name], resumed["model"][name])
    assert metrics[metrics.kind == "epoch"].epoch.tolist() == [1, 2]
    assert not metrics[metrics.kind == "interval"].duplicated(["epoch", "step", "rank"]).any()
    # a checkpoint of other settings is not resumed: the run starts afresh
    (tmp_path / "resumed" / "model.pt").unlink()
    _, metrics = run(corpus, tmp_path / "resumed", dataclasses.replace(QUICK, lr=1e-3, epochs=1))
    assert metrics[metrics.kind == "epoch"].epoch.tolist() == [1]
    assert [c.name for c in (tmp_path / "resumed" / "checkpoints").glob("*.pt")] == ["epoch1.pt"]


def test_a_diverging_run_stops_with_a_clear_error_and_keeps_its_checkpoint(corpus, tmp_path, monkeypatch):
    run(corpus, tmp_path, dataclasses.replace(QUICK, epochs=1))
    (tmp_path / "model.pt").unlink()
    good = torch.load(tmp_path / "checkpoints" / "epoch1.pt", weights_only=False)["model"]
    import asrscale.train as trainer

    real_loss = trainer.ctc_loss
    monkeypatch.setattr(trainer, "ctc_loss", lambda *a, **k: (real_loss(*a, **k)[0] * math.nan, None, None))
    with pytest.raises(Diverged, match=r"seq rank 0: loss nan at step 1"):
        run(corpus, tmp_path)
    kept = torch.load(tmp_path / "checkpoints" / "epoch1.pt", weights_only=False)["model"]
    assert all(torch.equal(good[k], kept[k]) for k in good)
    assert not (tmp_path / "model.pt").exists()


def test_seq_refuses_several_learners():
    from asrscale.algorithms import make_algorithm
    from asrscale.ops import Layout

    with pytest.raises(ValueError, match="seq runs one learner, but 2"):
        make_algorithm("seq", Layout(rank=0, size=2))
    with pytest.raises(ValueError, match="unknown algorithm 'nope'"):
        make_algorithm("nope", Layout(rank=0, size=2))
