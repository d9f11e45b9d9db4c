"""Many learners computed as one (asrscale.training.fused.learners): each learner's outputs and
gradients are those of its own model computed alone, to float rounding; and in the simulated world,
whatever the algorithm, the learners fused train as they do computed one by one (TF32 plays no part
on the CPU)."""

import copy
import json
from dataclasses import replace

import pytest
import torch

from asrscale.config.schema import profile_defaults
from asrscale.config.sections import world_of
from asrscale.data.batches import Batch
from asrscale.models import build_model
from asrscale.training.fused import learners as fused
from asrscale.training.fused.learners import fused_forward, fused_updates, fusers
from asrscale.training.fused.recurrence import EAGER, Loops
from asrscale.training.learner import GradientJob, Learner, make_optimizer
from asrscale.training.run import make_world
from asrscale.worlds import ops
from helpers import (
    CALIBRATION,
    FUSED_CONFIGS,
    learners_and_batch,
    model_config,
    run_config,
    simulate,
    stack,
)


@pytest.mark.parametrize("config", FUSED_CONFIGS, ids=["blstm", "lstm", "dnn"])
def test_stacked_learners_compute_what_each_computes_alone(config):
    models, features, lengths = learners_and_batch(config)
    stacked = stack(models)
    log_probs, out_lengths = fused_forward(config, stacked, features, lengths)
    weights = torch.randn_like(log_probs)  # any loss of the outputs
    (log_probs * weights).sum().backward()
    for n, model in enumerate(models):
        alone, alone_lengths = model(features[n], lengths[n])
        assert torch.equal(alone_lengths, out_lengths[n])
        torch.testing.assert_close(log_probs[n].detach(), alone.detach(), rtol=1e-12, atol=1e-12)
        (alone * weights[n]).sum().backward()
        for name, parameter in model.named_parameters():
            torch.testing.assert_close(
                stacked[name].grad[n], parameter.grad, rtol=1e-10, atol=1e-12, msg=name
            )


class Bucketed(Loops):
    bucket = 8  # as GraphedLoops pads; 50 frames stacked by 3 make 17 steps, run as 24


def test_loops_run_past_the_longest_utterance_change_nothing():
    config = FUSED_CONFIGS[0]
    models, features, lengths = learners_and_batch(config)
    weights = None
    outputs, gradients = [], []
    for loops in (EAGER, Bucketed()):
        stacked = stack(models)
        log_probs, _ = fused_forward(config, stacked, features, lengths, loops=loops)
        weights = torch.randn_like(log_probs) if weights is None else weights
        (log_probs * weights).sum().backward()
        outputs.append(log_probs.detach())
        gradients.append({name: tensor.grad for name, tensor in stacked.items()})
    torch.testing.assert_close(outputs[1], outputs[0], rtol=1e-12, atol=1e-12)
    for name, gradient in gradients[0].items():
        torch.testing.assert_close(gradients[1][name], gradient, rtol=1e-10, atol=1e-12, msg=name)


@pytest.mark.slow
@pytest.mark.parametrize("algorithm", ["ssgd", "asgd", "kavg", "ma", "adpsgd", "hadpsgd"])
def test_fused_learners_train_every_algorithm_as_learners_computed_one_by_one(
    corpus, tmp_path, algorithm
):
    """After an epoch of every algorithm (MA with povey14's NG-SGD, ASGD and ADPSGD in their
    modelled order), the fused run's model and dev loss are the unfused one's to float rounding."""
    (alone, alone_metrics), (fused, fused_metrics) = (
        simulate(corpus, tmp_path / str(fuse), algorithm, 4, fuse, optimizer="sgd", lr=0.05)
        for fuse in (False, True)
    )
    for name, tensor in alone.items():
        torch.testing.assert_close(fused[name], tensor, rtol=1e-4, atol=1e-5, msg=name)
    dev = [metrics[metrics.kind == "epoch"].dev_loss for metrics in (alone_metrics, fused_metrics)]
    assert dev[0].round(3).tolist() == dev[1].round(3).tolist()
    # the modelled clock does not see the difference
    assert alone_metrics.time_s.tolist() == fused_metrics.time_s.tolist()


@pytest.mark.slow
def test_learners_that_wait_for_their_gradients_together_are_computed_as_one(corpus, tmp_path):
    """A learner's deferred gradient waits until the learner needs it, whatever other learners need
    meanwhile, and a gossip fixes what it computes on rather than computing it: SSGD's 4 learners
    are computed as one at every step, KAVG's and ADPSGD's at nearly every step (each at its own
    pace: a learner a little behind joins the next group; ADPSGD's averaged while their gradients
    wait; before deferral waited for need, their groups were mostly of one); MA's preconditionings
    all together where a preconditioning lasts longer than the learners' gradients end apart (as on
    the GPU profiles: 44 ms against 5 ms), several together where not; Adam trains the same
    fused."""
    sizes = []

    def sizes_of(algorithm, kind, **changes):
        def fuser(jobs):
            sizes.append(len(jobs))
            return fusers(torch.device("cpu"))[kind](jobs)

        sizes.clear()
        out = tmp_path / "-".join([algorithm, kind.__name__, *changes])
        simulate(corpus, out, algorithm, 4, True, instead={kind: fuser}, **changes)
        return list(sizes)

    assert set(sizes_of("ssgd", ops.AveragedGradient)) == {4}
    for algorithm in ("kavg", "adpsgd"):
        found = sizes_of(algorithm, ops.Gradient)
        assert sum(found) == 4 * 6 and found.count(4) >= len(found) - 2, (algorithm, found)
    assert sum(sizes_of("ma", ops.Precondition)) == 4 * 6
    slow = copy.deepcopy(CALIBRATION)
    for rates in slow["by_threads"].values():
        rates["precondition_s"] = 10.0
    assert sizes_of("ma", ops.Precondition, calibration=slow) == [4] * 6
    # Adam divides by the root of the squared gradient: where a gradient is near zero, a rounding
    # difference becomes part of a step of ±lr, so a few weights differ, each by less than a step
    # (lr at most 0.006 here); the losses do not
    (alone, alone_metrics), (fused, fused_metrics) = (
        simulate(corpus, tmp_path / f"adam{fuse}", "ssgd", 4, fuse) for fuse in (False, True)
    )
    dev = [
        metrics[metrics.kind == "epoch"].dev_loss.round(3).tolist()
        for metrics in (alone_metrics, fused_metrics)
    ]
    assert dev[0] == dev[1]
    close = sum(
        torch.isclose(fused[n], t, rtol=1e-4, atol=1e-5).sum().item() for n, t in alone.items()
    )
    assert close / sum(t.numel() for t in alone.values()) > 0.995
    assert max((fused[n] - t).abs().max().item() for n, t in alone.items()) < 0.006 / 4


@pytest.mark.parametrize("optimizer", ["adam", "sgd"])
def test_learners_updated_together_are_updated_as_each_alone(optimizer):
    """fused_updates: learners of two learning rates and unequal step counts, one multi-tensor step
    per rate, give every learner's own step's result bit for bit (parameters and optimizer
    state)."""
    torch.manual_seed(0)
    pairs = []
    for _ in range(4):
        model = torch.nn.LSTM(5, 4)
        twins = [copy.deepcopy(model) for _ in range(2)]
        pairs.append([Learner(m, make_optimizer(optimizer, 0.9, m), 0.0, "learner") for m in twins])
    for index, (alone, together) in enumerate(pairs):
        for step in range(
            index + 1
        ):  # learner k has taken k steps before; then a gradient for this one
            for a, b in zip(alone.parameters, together.parameters):
                b.grad.copy_(a.grad.normal_())
            if step < index:
                alone.apply(0.01)
                together.apply(0.01)
    rates = [0.01, 0.02, 0.01, 0.02]
    for (alone, _), lr in zip(pairs, rates):
        alone.apply(lr)
    fused_updates([(together, lr) for (_, together), lr in zip(pairs, rates)])
    for alone, together in pairs:
        assert together.steps == alone.steps
        for a, b in zip(alone.averaged, together.averaged):
            assert torch.equal(a, b)


@pytest.mark.parametrize("fuse", ["auto", "on", "off"])
def test_study_fuse_learners_decides_the_worlds_fusers(tmp_path, fuse):
    """`auto` fuses on a GPU only (on a CPU fusing is slower), `on` anywhere, `off` nowhere; fusing
    covers gradients, updates and preconditionings. The gradients a group averages (SSGD's) are
    computed as one batch but where `off`."""
    calibration = tmp_path / "calibration.json"
    calibration.write_text(json.dumps(CALIBRATION))
    settings = {
        "kind": "simulated",
        "learners": 4,
        "node_size": None,
        "fuse_learners": fuse,
        "hardware": {"name": "here", **profile_defaults()},
    }
    world = make_world(
        world_of({"world": settings}),
        run_config("ma", seed=0, device="cpu", prefetch=4),
        calibration,
    )
    fused = {"on": {*ops.WORK, ops.AveragedGradient}, "auto": {ops.AveragedGradient}, "off": set()}
    assert set(world.fusers) == fused[fuse]


def test_ssgds_learners_as_one_batch_train_as_the_learners_one_by_one(corpus, tmp_path):
    """SSGD's 4 learners' minibatches as one batch of the model at every step (study.fuse_learners
    auto on a CPU), over an epoch of 6 steps: the model, each learner's losses and the dev loss of
    the learners computed one by one (off), to float rounding (the sums' order differs), and the
    modelled clock's times exactly."""
    calls = []

    def one_batch(jobs):
        calls.append((len(jobs), fused._one_model(jobs)))
        return fused.one_batch_gradients(jobs)

    runs = [
        simulate(
            corpus, tmp_path / fuse, "ssgd", 4, fuse, instead=instead, optimizer="sgd", lr=0.05
        )
        for fuse, instead in (("off", None), ("auto", {ops.AveragedGradient: one_batch}))
    ]
    (alone, alone_metrics), (one, one_metrics) = runs
    assert calls == [(4, True)] * 6
    for name, tensor in alone.items():
        torch.testing.assert_close(one[name], tensor, rtol=1e-4, atol=1e-5, msg=name)
    steps = [metrics[metrics.kind == "interval"] for metrics in (alone_metrics, one_metrics)]
    assert steps[0].loss.round(4).tolist() == steps[1].loss.round(4).tolist()
    dev = [metrics[metrics.kind == "epoch"].dev_loss for metrics in (alone_metrics, one_metrics)]
    assert dev[0].round(3).tolist() == dev[1].round(3).tolist()
    assert alone_metrics.time_s.tolist() == one_metrics.time_s.tolist()


def test_learners_of_other_models_are_not_computed_as_one_batch():
    """Two learners of equal parameters: each learner's gradient is the mean of the two computed
    alone, each loss its own; of unequal parameters (or clipped before the average), each its
    own gradient, as alone."""
    torch.manual_seed(0)
    config = model_config(kind="lstm", layers=1, units=8, bidirectional=True)
    learners = [
        Learner(model, make_optimizer("sgd", 0.0, model), 1.0, "learner")
        for model in [build_model(config, 40, 12) for _ in range(2)]
    ]
    learners[1].model.load_state_dict(learners[0].model.state_dict())
    batches = [tiny_batch(seed) for seed in (1, 2)]
    losses = [learner.compute(batch, clip=False) for learner, batch in zip(learners, batches)]
    alone = [[g.clone() for g in learner.gradients] for learner in learners]
    jobs = [GradientJob(learner, batch, clipped=False) for learner, batch in zip(learners, batches)]
    assert fused.one_batch_gradients(jobs) == pytest.approx(losses, rel=1e-5)
    for learner in learners:
        for mine, first, second in zip(learner.gradients, *alone):
            torch.testing.assert_close(mine, (first + second) / 2, rtol=1e-4, atol=1e-6)
    with torch.no_grad():
        learners[1].parameters[0].add_(0.01)  # another model: each as alone
    assert not fused._one_model(jobs)
    assert not fused._one_model([replace(job, clipped=True) for job in jobs[:1]])
    losses = [learner.compute(batch, clip=False) for learner, batch in zip(learners, batches)]
    alone = [[g.clone() for g in learner.gradients] for learner in learners]
    assert fused.one_batch_gradients(jobs) == pytest.approx(losses, rel=1e-5)
    for learner, own in zip(learners, alone):
        for mine, theirs in zip(learner.gradients, own):
            torch.testing.assert_close(mine, theirs, rtol=1e-4, atol=1e-6)


def tiny_batch(seed: int) -> Batch:
    """Three random utterances of 40 features and their targets, in a minibatch."""
    generator = torch.Generator().manual_seed(seed)
    lengths = torch.randint(20, 41, (3,), generator=generator)
    features = torch.randn(3, int(lengths.max()), 40, generator=generator)
    target_lengths = torch.tensor([4, 5, 3])
    targets = torch.randint(1, 12, (int(target_lengths.sum()),), generator=generator)
    return Batch(features, lengths, targets, target_lengths, ["a", "b", "c"])
