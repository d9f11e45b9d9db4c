"""Fused learners in the simulated world: every learner's gradient computed together, exactly as
each alone, whatever the algorithm (TF32 plays no part on the CPU)."""

import copy
import json

import pytest
import torch

from asrscale.config.schema import profile_defaults
from asrscale.config.sections import world_of
from asrscale.training.fused import fused_updates, fusers
from asrscale.training.learner import Learner, make_optimizer
from asrscale.training.run import make_world
from asrscale.worlds import ops
from conftest import CALIBRATION, run_config, simulate


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

    assert set(sizes_of("ssgd", ops.Gradient)) == {4}
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
    covers gradients, updates and preconditionings."""
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
    assert set(world.fusers) == (set(ops.WORK) if fuse == "on" else set())
