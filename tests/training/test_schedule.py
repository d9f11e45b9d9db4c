"""The learning rate's schedules: exponential for fixed epochs, and Kaldi nnet1's newbob, which
holds the rate while the dev loss improves, rejects an epoch that worsens it, halves once the
gains are small, and stops once they are negligible (no floor on the rate, as in nnet1); and a
run trained by it: rejected epochs rolled back, its best model kept, what stopped it recorded."""

import json
from types import SimpleNamespace

import pandas as pd
import pytest
import torch

from asrscale.errors import ConfigError
from asrscale.training.algorithms import make_algorithm
from asrscale.training.checkpoints import Checkpoints
from asrscale.training.run import train
from asrscale.training.schedule import Decision, Schedule, cosine, learning_rate, lr_scale
from asrscale.worlds.clock import CostModel, Hardware
from asrscale.worlds.ops import Layout
from asrscale.worlds.simulated import SimWorld
from helpers import CALIBRATION, GPU, run_config, run_paths

NEWBOB = {"start_halving": 0.01, "stop": 0.001, "halving": 0.5}


def decisions(
    kind: str, losses: list[float], lr_decay: float = 0.6, epochs: int = 20, lr_final: float = 0.01
) -> list[tuple]:
    train = SimpleNamespace(
        schedule=kind, lr_decay=lr_decay, newbob=NEWBOB, epochs=epochs, lr_final=lr_final
    )
    schedule, state = Schedule(train), Schedule.start()
    return [
        (d.accepted, d.factor, d.stop)
        for d in (schedule.after_epoch(state, loss) for loss in losses)
    ]


def test_the_rate_warms_up_to_its_peak_then_follows_the_schedules_factor():
    assert learning_rate(0.1, 4.0, 1.0, 1.0, 5, 10) == pytest.approx(0.1 * (1 + 3 * 0.5))
    assert learning_rate(0.1, 4.0, 1.0, 0.5, 30, 10) == pytest.approx(0.2)
    assert [factor for _, factor, _ in decisions("exponential", [3, 2, 1])] == pytest.approx(
        [0.6, 0.36, 0.216]
    )
    assert all(
        accepted and stop is None for accepted, _, stop in decisions("exponential", [3, 2, 4])
    )


def test_the_cosine_schedule_anneals_from_the_peak_to_its_final_share_at_the_last_epoch():
    """Five epochs to 1%: factors 1, (1 + cos(π/4))/2, 1/2, (1 + cos(3π/4))/2 of the way, then
    1%, each with 1% of the peak kept below it; every epoch accepted, no stop of its own."""
    found = decisions("cosine", [5, 4, 3, 2, 1], epochs=5)
    factors = [1.0] + [factor for _, factor, _ in found][:4]
    half = [1.0, (1 + 2**-0.5) / 2, 0.5, (1 - 2**-0.5) / 2, 0.0]
    assert factors == pytest.approx([0.01 + 0.99 * h for h in half])
    assert factors[-1] == pytest.approx(0.01)
    assert all(accepted and stop is None for accepted, _, stop in found)
    assert cosine(1, 1, 0.01) == 1.0 and cosine(9, 5, 0.01) == pytest.approx(0.01)


def test_newbob_holds_the_rate_while_it_improves_and_halves_once_the_gains_are_small():
    found = decisions("newbob", [3.0, 2.0, 1.5, 1.495, 1.49, 1.4895])
    assert [factor for _, factor, _ in found] == [1.0, 1.0, 1.0, 0.5, 0.25, 0.25]
    # gains: 33%, 25%, 0.33% (halving starts), 0.33%, 0.03% (halving: negligible, it stops)
    assert [stop for _, _, stop in found][:4] == [None] * 4
    assert found[-1][2].startswith("halving, an epoch gained 0.03% at 0.25 of the peak rate")


def test_newbob_rejects_a_worse_epoch_and_halves_without_a_floor_until_it_stops():
    """nnet1's train_scheduler.sh on a scripted sequence: a worse epoch is rejected and starts the
    halving (its gain on the accepted loss is negative); the rate then halves at every epoch's end
    however low it gets (0.5 ... 1/64: nnet1 has no floor) while each epoch still gains 0.1% or
    more, and the first epoch to gain less stops the run, at the rate it had."""
    losses = [2.0, 1.0, 1.2, 0.9, 0.85, 0.8, 0.76, 0.75, 0.74, 0.7395]
    found = decisions("newbob", losses)
    assert [accepted for accepted, _, _ in found] == [True, True, False] + [True] * 7
    assert [factor for _, factor, _ in found] == [
        1.0,
        1.0,
        0.5,
        0.25,
        0.125,
        0.0625,
        0.03125,
        0.015625,
        0.0078125,
        0.0078125,
    ]
    assert [stop for _, _, stop in found][:-1] == [None] * 9
    assert found[-1][2].startswith("halving, an epoch gained 0.07% at 0.00781 of the peak rate")
    # a rejected epoch while halving stops it too: it gained nothing on the accepted loss
    assert decisions("newbob", [2.0, 1.995, 2.1])[-1][2].startswith(
        "halving, an epoch gained -5.26%"
    )


def profile() -> Hardware:
    from asrscale.config.schema import profile_defaults

    return Hardware.from_config("test", profile_defaults(**GPU))


def reject_the_second_epoch(monkeypatch) -> list:
    """Every learner's schedule rejects its second epoch (whatever its dev loss); returns the
    models the learners held right after each roll-back."""
    decide, rolled = Schedule.after_epoch, []

    def after_epoch(self, state, dev_loss):
        state["seen"], accepted_loss = state.get("seen", 0) + 1, state["accepted_loss"]
        if state["seen"] != 2:
            return decide(self, state, dev_loss)
        decide(self, state, 2 * accepted_loss)  # as newbob takes a worse epoch: rejected, halving
        return Decision(False, state["factor"], None)

    def roll_back(self, name, learner):
        real_roll_back(self, name, learner)
        rolled.append({k: t.clone() for k, t in learner.model.state_dict().items()})

    real_roll_back = Checkpoints.roll_back
    monkeypatch.setattr(Schedule, "after_epoch", after_epoch)
    monkeypatch.setattr(Checkpoints, "roll_back", roll_back)
    return rolled


@pytest.mark.slow
@pytest.mark.parametrize("algorithm, learners", [("seq", 1), ("kavg", 2), ("asgd", 2)])
def test_a_rejected_epoch_rolls_every_learner_back_and_the_run_keeps_its_best_model(
    corpus, tmp_path, monkeypatch, algorithm, learners
):
    """The second epoch rejected: every learner (and ASGD's server) goes back to the first epoch's
    model and trains on at half the rate; the run stops by the schedule (or its epochs), records
    why, and its model is its best accepted epoch's."""
    rolled = reject_the_second_epoch(monkeypatch)
    config = run_config(
        algorithm, options={"period": 2} if algorithm == "kavg" else {}, epochs=4, schedule="newbob"
    )
    servers = 1 if algorithm == "asgd" else 0
    world = SimWorld(learners, CostModel(profile(), CALIBRATION), servers, name="test")
    out = tmp_path / "run"
    train(config, run_paths(corpus, corpus / "shards" / f"P{learners}", out), world)
    record = json.loads((out / "run.json").read_text())
    epochs = pd.read_csv(out / "metrics.tsv", sep="\t").query("kind == 'epoch'")
    assert epochs.accepted.tolist()[:2] == [1, 0] and len(rolled) >= learners + servers
    assert epochs.lr.iloc[2] == pytest.approx(epochs.lr.iloc[1] / 2)  # halved after the rejection
    best = epochs[epochs.accepted == 1].dev_loss.min()
    assert record["best_dev_loss"] == pytest.approx(best, rel=1e-5) and record["stopped"]
    assert record["best_epoch"] == epochs[epochs.dev_loss == best].epoch.iloc[0]
    saved = torch.load(out / "model.pt", weights_only=False)
    assert saved["epoch"] == record["best_epoch"]
    assert record["learning_rate"]["peak"] == pytest.approx(
        config.train.lr * record["learning_rate"]["scale"]
    )


@pytest.mark.parametrize(("best_by", "kept"), [("dev_loss", 1), ("dev_ter", 3)])
def test_the_runs_model_is_its_best_by_train_best_by(corpus, tmp_path, monkeypatch, best_by, kept):
    """The dev loss lowest after epoch 1 and rising, the TER falling to epoch 3 (CTC growing
    confident while its transcripts improve): the model kept and its record follow train.best_by."""
    import asrscale.training.loop as loop

    measured = iter([(0.5, 0.30), (0.6, 0.25), (0.7, 0.20)])
    calls = []

    def scripted(model, subset, part, wall):
        found = yield from real(model, subset, part, wall)
        calls.append(found)
        return found if len(calls) == 1 else next(measured)  # the untrained model's first

    real = loop.evaluate
    monkeypatch.setattr(loop, "evaluate", scripted)
    out = tmp_path / "run"
    config = run_config(
        "seq", epochs=3, schedule="exponential", best_by=best_by, divergence_factor=100.0
    )
    train(
        config,
        run_paths(corpus, corpus / "shards" / "P1", out),
        SimWorld(1, CostModel(profile(), CALIBRATION)),
    )
    record = json.loads((out / "run.json").read_text())
    expected = {1: (0.5, 0.30), 3: (0.7, 0.20)}[kept]
    assert (record["best_epoch"], record["best_dev_loss"], record["best_dev_ter"]) == (
        kept,
        *expected,
    )
    assert torch.load(out / "model.pt", weights_only=False)["epoch"] == kept


@pytest.mark.parametrize("together", [False, True])
def test_a_roll_back_takes_the_newest_epochs_end_not_a_checkpoint_within_the_epoch(
    tmp_path, together
):
    """A rejected epoch goes back to the last accepted epoch's end, past any checkpoint the
    rejected epoch made within itself (train.checkpoint_steps), which complete() keeps it for."""
    from asrscale.training.learner import Learner, make_optimizer

    model = torch.nn.Linear(3, 2)
    learner = Learner(model, make_optimizer("adam", 0.9, model), 0.0, "a learner")
    algorithm = type("Algorithm", (), {"state_dict": lambda self: {}})()
    saved = Checkpoints(tmp_path, {"format": 0}, together=together)
    states = {}
    for step, epoch_end in ((10, True), (15, False)):
        with torch.no_grad():
            model.weight.fill_(step)
        states[step] = model.weight.clone()
        saved.save(step, "rank0", learner, algorithm, with_model=True, progress={})
        saved.complete(step, epoch_end)
    assert [p.name for p in sorted(tmp_path.iterdir())] == ["step000000010", "step000000015"]
    saved.roll_back("rank0", learner)
    assert torch.equal(model.weight, states[10])


def test_the_rate_scale_of_p_learners_is_p_root_p_or_one():
    assert [lr_scale(rule, 16) for rule in ("linear", "sqrt", "none")] == [16.0, 4.0, 1.0]
    assert [lr_scale(rule, 1) for rule in ("linear", "sqrt", "none")] == [1.0, 1.0, 1.0]
    with pytest.raises(
        ConfigError,
        match=r"train.lr_scaling must be one of \('none', 'sqrt', 'linear'\), not 'cubic'",
    ):
        lr_scale("cubic", 4)


def rates_of(monkeypatch, algorithm: str) -> dict[int, list[float]]:
    """The rate the trainer gives `algorithm`'s step, by learner, step by step, once a run has
    run."""
    cls = type(make_algorithm(algorithm, Layout(0, 2, servers=int(algorithm == "asgd"))))
    real_step, rates = cls.step, {}

    def step(self, learner, batch, lr):
        rates.setdefault(self.layout.rank, []).append(lr)
        return real_step(self, learner, batch, lr)

    monkeypatch.setattr(cls, "step", step)
    return rates


@pytest.mark.parametrize(
    "algorithm, scaling, factor, times_lr",
    [
        # 4 learners, 3 steps an epoch, a warm-up of half an epoch (1.5 steps): step 1 at 2/3 of
        # the way from lr to its peak, steps 2 and 3 at the peak, lr × 4, × 2 or × 1
        ("ssgd", "linear", 1, [1 + 3 * 2 / 3, 4, 4]),
        ("ssgd", "sqrt", 1, [1 + 1 * 2 / 3, 2, 2]),
        ("ssgd", "none", 1, [1, 1, 1]),
        (
            "asgd",
            "linear",
            1,
            [1, 1, 1],
        ),  # the server applies each learner's gradient alone: lr itself
        # block momentum 1 - 1/4 amplifies a block's step 4 times: its learners take 1/4 of the
        # rule's rate, warming up from lr/4 to lr, Chen and Huo's single learner's rate
        ("bmuf", "linear", 0.25, [0.25 * (1 + 3 * 2 / 3), 1, 1]),
    ],
)
def test_each_step_of_p_learners_has_the_rate_scaled_by_p_after_its_warm_up(
    corpus, tmp_path, monkeypatch, algorithm, scaling, factor, times_lr
):
    rates = rates_of(monkeypatch, algorithm)
    config = run_config(
        algorithm, epochs=1, batch_size=8, lr=0.01, lr_scaling=scaling, warmup_epochs=0.5
    )
    world = SimWorld(
        4, CostModel(profile(), CALIBRATION), servers=int(algorithm == "asgd"), name="test"
    )
    train(config, run_paths(corpus, corpus / "shards" / "P4", tmp_path), world)
    assert rates == {rank: pytest.approx([0.01 * times for times in times_lr]) for rank in range(4)}
    record = json.loads((tmp_path / "run.json").read_text())["learning_rate"]
    scale = {"linear": 4, "sqrt": 2, "none": 1}[scaling] if algorithm != "asgd" else 1
    assert record == pytest.approx({"scale": scale, "factor": factor, "peak": 0.01 * times_lr[-1]})


def test_a_runs_row_says_its_rate_with_the_algorithms_own_factor_where_it_has_one():
    from asrscale.analysis.gather import training_rule

    train = {
        "optimizer": "sgd",
        "momentum": 0.9,
        "lr": 0.9,
        "lr_scaling": "linear",
        "warmup_epochs": 0,
        "schedule": "exponential",
        "lr_decay": 0.8,
        "epochs": 10,
        "clip_grad_norm": 0,
    }
    bmuf, kavg = (
        training_rule(train, {"scale": 16, "factor": 1 / 16}),
        training_rule(train, {"scale": 16}),
    )
    assert (
        bmuf
        == "SGD, momentum 0.9, lr 0.9 × 0.0625 (the algorithm's own) × 16 (linear), ×0.8 an epoch, "
        "10 epochs"
    )
    assert (
        kavg == "SGD, momentum 0.9, lr 0.9 × 16 (linear), ×0.8 an epoch, 10 epochs"
    )  # a record before the factor


@pytest.mark.slow
def test_a_64_learner_run_and_seq_are_stopped_by_one_rule_at_the_same_epochs(corpus, tmp_path):
    """Under the exponential schedule every run trains the same epochs: SEQ at batch 2 makes 48
    updates an epoch of the 96 utterances, each of 64 learners 1, and both stop at the end of their
    3rd epoch, each with the same frames every epoch, and the same rate's factor at each epoch's end
    (newbob's per-epoch thresholds would not treat them alike:
    asrscale.analysis.halves.unequal_epochs)."""
    from asrscale.data.batches import read_frame_counts
    from asrscale.data.shard import write_shards

    write_shards(read_frame_counts(corpus / "feats" / "train"), 64, tmp_path / "P64")
    stopped = {}
    for algorithm, learners in (("seq", 1), ("ssgd", 64)):
        shards = corpus / "shards" / "P1" if learners == 1 else tmp_path / "P64"
        run = run_config(
            algorithm, epochs=3, batch_size=2, schedule="exponential", lr_decay=0.5, log_interval=50
        )
        world = SimWorld(learners, CostModel(profile(), CALIBRATION), 0, name="test")
        out = tmp_path / algorithm
        train(run, run_paths(corpus, shards, out), world)
        metrics = pd.read_csv(out / "metrics.tsv", sep="\t")
        epochs = metrics[(metrics.kind == "epoch") & (metrics["rank"] == 0)]
        record = json.loads((out / "run.json").read_text())
        stopped[algorithm] = (
            record["stopped"],
            epochs.epoch.tolist(),
            epochs.frames.tolist(),
            epochs.lr.tolist(),
        )
        updates = metrics[metrics.kind == "epoch"].groupby("epoch").step.max()
        assert updates.iloc[0] == (48 if learners == 1 else 1), updates
    assert stopped["seq"][:2] == stopped["ssgd"][:2] == ("its 3 epochs done", [1, 2, 3])
    seq_frames, ssgd_frames = stopped["seq"][2], stopped["ssgd"][2]
    assert seq_frames == [seq_frames[0]] * 3 and ssgd_frames == [ssgd_frames[0]] * 3
    decays = {
        name: [later / earlier for earlier, later in zip(found[3], found[3][1:])]
        for name, found in stopped.items()
    }
    assert decays["seq"] == pytest.approx(decays["ssgd"]), stopped
