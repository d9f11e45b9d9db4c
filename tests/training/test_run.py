import json
import math
import signal
import subprocess
import sys

import pandas as pd
import pytest
import torch

from asrscale.models import build_model
from asrscale.training.run import train
from asrscale.worlds.mpi import MPIWorld
from helpers import TIMES, Killed, diverged_run, kill_at_loss, run_config, run_paths, same_models

QUICK = run_config()


def test_a_job_that_crashes_in_native_code_leaves_its_python_stack_in_its_log():
    """A launcher reports a rank killed by a signal (abort, segfault) as an exit code only; the
    job's own log must say where it was."""
    crash = (
        "import os\nfrom asrscale import cli\ndef tokens(args):\n    os.abort()\n"
        "cli.COMMANDS = [((tokens if f.__name__ == 'tokens' else f), *rest) for f, *rest in "
        "cli.COMMANDS]\n"
    )
    program = crash + "cli.main(['tokens', '--data', 'text', '--out', 'tokens.txt'])"
    result = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == -signal.SIGABRT
    assert "Fatal Python error: Aborted" in result.stderr, result.stderr
    assert "line 4 in tokens" in result.stderr and "in main" in result.stderr, result.stderr


def run(corpus, out, config=QUICK, learners=1):
    paths = run_paths(corpus, corpus / "shards" / f"P{learners}", out)
    train(config, paths, MPIWorld())
    return torch.load(out / "model.pt", weights_only=False), pd.read_csv(
        out / "metrics.tsv", sep="\t"
    )


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


def test_same_seed_same_model_and_a_longer_run_resumes_from_the_last_epoch(corpus, tmp_path):
    whole, whole_metrics = run(corpus, tmp_path / "whole")
    again, _ = run(corpus, tmp_path / "again")
    assert same_models(whole["model"], again["model"])
    run(corpus, tmp_path / "longer", run_config(epochs=1))
    (tmp_path / "longer" / "model.pt").unlink()
    longer, metrics = run(corpus, tmp_path / "longer")
    assert same_models(whole["model"], longer["model"])
    assert metrics.drop(columns=TIMES).equals(whole_metrics.drop(columns=TIMES))
    record = json.loads((tmp_path / "longer" / "run.json").read_text())
    assert [(r["epoch"], r["step"]) for r in record["resumed"]] == [
        (2, 0)
    ]  # epoch 1's 12 steps were done
    # a checkpoint of other settings is not resumed: the run starts afresh
    (tmp_path / "longer" / "model.pt").unlink()
    _, metrics = run(corpus, tmp_path / "longer", run_config(lr=1e-3, epochs=1))
    assert metrics[metrics.kind == "epoch"].epoch.tolist() == [1]
    assert [c.name for c in (tmp_path / "longer" / "checkpoints").iterdir()] == ["step000000012"]


def test_a_run_killed_mid_epoch_resumes_to_the_uninterrupted_model_and_metrics(
    corpus, tmp_path, monkeypatch
):
    often = run_config(checkpoint_steps=8)
    whole, whole_metrics = run(corpus, tmp_path / "whole", often)
    kill_at_loss(monkeypatch, 12 + 10)  # in epoch 2, at step 10 of 12
    with pytest.raises(Killed):
        run(corpus, tmp_path / "killed", often)
    assert (
        not (tmp_path / "killed" / "model.pt").exists()
        and not (tmp_path / "killed" / "metrics.tsv").exists()
    )
    monkeypatch.undo()
    resumed, metrics = run(corpus, tmp_path / "killed", often)
    assert same_models(whole["model"], resumed["model"])
    assert metrics.drop(columns=TIMES).equals(whole_metrics.drop(columns=TIMES))


def test_checkpoints_come_at_log_lines(corpus, tmp_path):
    with pytest.raises(
        ValueError, match=r"checkpoint_steps \(6\) must be a multiple of train.log_interval \(4\)"
    ):
        run_config(checkpoint_steps=6)


def test_a_loss_that_is_not_finite_stops_the_run_by_the_rule_with_its_last_good_checkpoint(
    corpus, tmp_path, monkeypatch
):
    run(corpus, tmp_path, run_config(epochs=1))
    (tmp_path / "model.pt").unlink()
    checkpoint = tmp_path / "checkpoints" / "step000000012" / "rank0.pt"
    good = torch.load(checkpoint, weights_only=False)["model"]
    import asrscale.training.learner as trainer

    real_loss, calls = trainer.ctc_loss, iter(range(10**9))

    def loss(*args, **kwargs):  # every fifth training loss of epoch 2 is NaN
        value = real_loss(*args, **kwargs)
        nan = kwargs.get("reduction", "mean") == "mean" and next(calls) % 5 == 4
        return (value[0] * math.nan, *value[1:]) if nan else value

    monkeypatch.setattr(trainer, "ctc_loss", loss)
    run(corpus, tmp_path)
    diverged, metrics, model, kept = diverged_run(tmp_path)
    assert (diverged["epoch"], diverged["step"]) == (
        2,
        12,
    ) and "training loss was not finite" in diverged["reason"]
    assert same_models(good, model) and same_models(
        good, torch.load(checkpoint, weights_only=False)["model"]
    )
    assert kept == [
        checkpoint.parent / "complete",
        checkpoint.parent / "epoch-end",
        checkpoint,
    ]  # kept, not finished
    epoch_two = metrics[metrics.epoch == 2]
    assert epoch_two.loss.isna().any() and math.isfinite(
        epoch_two.dev_loss.dropna().iloc[0]
    )  # the model stayed finite


def test_a_run_that_explodes_without_nan_stops_where_the_learners_meet(corpus, tmp_path, capsys):
    # Adam with clipping keeps the loss finite: it climbs to many thousands instead
    run(corpus, tmp_path, run_config(lr=1e4, epochs=3, checkpoint_steps=4))
    diverged, metrics, model, kept = diverged_run(tmp_path)
    assert (diverged["epoch"], diverged["step"], diverged["model"]) == (1, 4, "untrained")
    assert (
        "training loss reached" in diverged["reason"]
        and "untrained model's dev loss" in diverged["reason"]
    )
    assert metrics.kind.tolist() == ["interval"] and metrics.loss.iloc[0] > 1000 and not kept
    assert "diverged at epoch 1, step 4" in capsys.readouterr().out
    torch.manual_seed(3)  # the untrained model, as the run built it
    assert same_models(
        model, build_model(QUICK.model, QUICK.features.dim, len(model["output.bias"])).state_dict()
    )


def test_seq_refuses_several_learners():
    from asrscale.training.algorithms import make_algorithm
    from asrscale.worlds.ops import Layout

    with pytest.raises(ValueError, match="seq runs one learner, but 2"):
        make_algorithm("seq", Layout(rank=0, size=2))
    with pytest.raises(ValueError, match="unknown algorithm 'nope'"):
        make_algorithm("nope", Layout(rank=0, size=2))


def test_ranks_states_stacked_in_one_file_come_back_exactly_as_saved():
    """A simulated world's checkpoint: each tensor stacked over the ranks whose states hold the same
    shapes (learners; a server and a replica without its model apart), every rank's state restored
    exactly, with its own copies."""
    import torch

    from asrscale.training.checkpoints import stack, unstack

    def state(seed, with_model=True):
        generator = torch.Generator().manual_seed(seed)
        model = {
            "w": torch.randn(3, 4, generator=generator),
            "b": torch.randn(4, generator=generator),
        }
        found = {
            "rng": torch.randint(0, 255, (8,), dtype=torch.uint8, generator=generator),
            "steps": seed,
            "progress": {"rows": [{"loss": 0.5 * seed}], "pairings": [(1, seed, 2)]},
        }
        return (
            {**found, "model": model, "optimizer": {"state": {0: {"exp_avg": model["w"] * 2}}}}
            if with_model
            else found
        )

    states = {
        "rank0": state(0),
        "rank1": state(1),
        "rank2": state(2, with_model=False),
        "server0": state(9),
    }
    together = stack(states)
    assert sorted(len(group["names"]) for group in together["groups"]) == [
        1,
        3,
    ]  # the learners, the replica
    for name, saved in states.items():
        assert repr(unstack(together, name)) == repr(
            saved
        )  # every value, tensors included, and the structure
    restored = unstack(together, "rank1")
    restored["model"]["w"].add_(1)  # each restored state its own tensors
    assert torch.equal(unstack(together, "rank1")["model"]["w"], states["rank1"]["model"]["w"])
