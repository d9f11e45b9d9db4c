"""povey14's online natural gradient: per-frame statistics, low-rank-plus-identity factors."""

import copy
import gc
import weakref

import torch

from asrscale.data.batches import Batch
from asrscale.models import build_model
from asrscale.training.learner import ctc_loss
from asrscale.training.natural_gradient import (
    Factor,
    NaturalGradient,
    Recorder,
    natural_gradient_of,
    precondition_together,
    refresh,
    stacked,
)
from helpers import model_config


def test_a_factor_follows_the_covariance_of_its_rows():
    """From rows of a stationary covariance with 3 large directions, the online factor's rank-3
    subspace converges to theirs, its values to their excess variance and ρ to the rest's."""
    torch.manual_seed(0)
    directions = torch.linalg.qr(torch.randn(16, 3))[0]  # 16 × 3, orthonormal
    scales = torch.tensor([10.0, 6.0, 4.0])
    state = stacked([Factor(16, 3, torch.device("cpu"))])
    for step in range(60):
        rows = torch.randn(200, 16) + (torch.randn(200, 3) * scales) @ directions.T
        state = refresh(
            rows[None], torch.tensor([200.0]), torch.tensor([0.1]), *state, first=step == 0
        )
    basis, values, floor = (tensor[0] for tensor in state)
    captured = (basis @ directions).square().sum(0)
    assert captured.min() > 0.95
    torch.testing.assert_close(values.sort().values, (scales**2).sort().values, rtol=0.2, atol=0)
    assert abs(floor.item() - 1.0) < 0.2


def test_preconditioning_takes_the_large_directions_of_the_inputs_down():
    """An input direction of large variance is scaled down in the preconditioned gradient (the
    Fisher matrix's inverse, smoothed by α = 4 times the mean eigenvalue: about 4× here);
    isotropic inputs leave the gradient's direction nearly as it is."""
    torch.manual_seed(1)
    weight = torch.nn.Parameter(torch.zeros(8, 12))
    preconditioner, recorder = (
        NaturalGradient({"w": weight}, {"w": None}, rank_in=2, rank_out=2),
        Recorder(),
    )
    large = torch.zeros(12)
    large[0] = 1.0
    for spread, expect_down in ((torch.ones(12), False), (1 + 30 * large, True)):
        for _ in range(12):
            inputs, derivatives = torch.randn(500, 12) * spread, torch.randn(500, 8)
            weight.grad = derivatives.T @ inputs
            plain = weight.grad.clone()
            recorder.record = {"w": (inputs, derivatives)}
            preconditioner.precondition(recorder)
        share = lambda g: (g[:, 0].norm() / g[:, 1:].norm()).item()  # noqa: E731
        if expect_down:
            assert share(weight.grad) < share(plain) / 3
        else:
            cosine = (weight.grad * plain).sum() / (weight.grad.norm() * plain.norm())
            assert cosine > 0.95
        preconditioner = NaturalGradient({"w": weight}, {"w": None}, rank_in=2, rank_out=2)


def test_a_step_is_povey14s_update_in_kaldis_order():
    """Against a dense reference: each side's rows times the inverse of its stored factor
    F = Rᵀ diag(d) R + ρ I smoothed by α times its mean eigenvalue, each side at its own norm, the
    gradient their product with no rescaling; the factors then refreshed with these rows (not
    before: Kaldi preconditions with the factors as they were)."""
    torch.manual_seed(2)
    weight = torch.nn.Parameter(torch.zeros(7, 9))
    natural, recorder = (
        NaturalGradient({"w": weight}, {"w": None}, rank_in=3, rank_out=2),
        Recorder(),
    )
    for _ in range(3):
        inputs, derivatives = torch.randn(50, 9) * torch.linspace(0.5, 4, 9), torch.randn(50, 7)
        stored = [stacked([factor]) for factor in natural.factors["w"]]
        weight.grad, recorder.record = derivatives.T @ inputs, {"w": (inputs, derivatives)}
        natural.precondition(recorder)

    def reference(rows, basis, values, floor):
        dim = rows.shape[1]
        smoothed = floor + 4.0 * (values.sum() + floor * dim) / dim
        fisher = basis.T @ torch.diag(values) @ basis + smoothed * torch.eye(dim)
        out = rows @ torch.linalg.inv(fisher)
        return out * rows.norm() / out.norm()

    (x_basis, x_values, x_floor), (g_basis, g_values, g_floor) = (
        [t[0] for t in state] for state in stored
    )
    expected = reference(derivatives, g_basis, g_values, g_floor).T @ reference(
        inputs, x_basis, x_values, x_floor
    )
    torch.testing.assert_close(weight.grad, expected, rtol=1e-4, atol=1e-5)
    refreshed = refresh(
        inputs[None],
        torch.tensor([50.0]),
        1 - torch.exp(torch.tensor([-50 / 2000])),
        *stored[0],
        first=False,
    )
    torch.testing.assert_close(stacked([natural.factors["w"][0]]), refreshed)


def test_learners_preconditioned_together_are_preconditioned_as_each_alone():
    """precondition_together, the fused learners' NG-SGD: learners whose minibatches differ in
    frames and in rows (padded apart) and one a step behind the others (refreshing on another
    schedule) get, step after step, the gradients and factors each gets alone."""
    torch.manual_seed(0)
    twins = []
    for _ in range(3):
        maps = [
            {"w": torch.nn.Parameter(torch.zeros(6, 5))},
            {"w": torch.nn.Parameter(torch.zeros(6))},
        ]
        twins.append(
            [
                NaturalGradient(
                    {"w": maps[0]["w"]}, {"w": maps[1]["w"]}, rank_in=2, rank_out=3, update_period=2
                )
                for maps in (maps, copy.deepcopy(maps))
            ]
        )
    for step in range(14):
        jobs = []
        for learner, (alone, together) in enumerate(twins):
            if learner == 2 and step == 0:
                continue  # one step behind the others from here on
            recorder = Recorder()
            rows, frames = (
                44 - 4 * (learner == 1),
                40 - 7 * learner,
            )  # padded apart; padding's rows zero
            derivatives = torch.randn(rows, 6) * (torch.arange(rows) < frames)[:, None]
            recorder.record = {"w": (torch.randn(rows, 5), derivatives)}
            for natural in (alone, together):
                natural.weights["w"].grad = (
                    torch.randn(6, 5) if natural is alone else alone.weights["w"].grad.clone()
                )
                natural.biases["w"].grad = (
                    torch.randn(6) if natural is alone else alone.biases["w"].grad.clone()
                )
            alone.precondition(recorder)
            jobs.append((together, recorder))
        precondition_together(jobs)
        for alone, together in twins:
            assert alone.steps == together.steps
            for a, b in [
                (alone.weights["w"], together.weights["w"]),
                (alone.biases["w"], together.biases["w"]),
            ]:
                torch.testing.assert_close(b.grad, a.grad, rtol=1e-5, atol=1e-6)
            for a, b in zip(alone.factors["w"], together.factors["w"]):
                torch.testing.assert_close(stacked([b]), stacked([a]), rtol=1e-4, atol=1e-6)


def test_every_affine_map_of_a_model_is_preconditioned_from_its_frames():
    """The recording forward pass gives the model's own gradients and every map's statistics
    (an LSTM direction's two maps, the output layer; a DNN's layers), and NG-SGD replaces each
    map's gradient (weight and bias together) by another descent direction (A g B, with A and B
    the two sides' positive definite preconditioners: ⟨A g B, g⟩ > 0)."""
    torch.manual_seed(0)
    for config, maps in (
        (model_config(units=16), 2 * 2 * 2 + 1),
        (model_config(kind="dnn", units=16), 2 + 1),
    ):
        model = build_model(config, 40, 12)
        features, lengths = torch.randn(4, 60, 40), torch.tensor([60, 45, 30, 51])
        batch = Batch(
            features, lengths, torch.randint(1, 12, (12,)), torch.tensor([3, 3, 3, 3]), list("abcd")
        )
        ctc_loss(model, batch)[0].backward()
        plain = {name: p.grad.clone() for name, p in model.named_parameters()}
        for p in model.parameters():  # each its own, as a learner's are
            p.grad = torch.zeros_like(p)
        recorder = Recorder()
        ctc_loss(model, batch, recorder=recorder)[0].backward()
        assert all(
            torch.allclose(p.grad, plain[name], atol=1e-5) for name, p in model.named_parameters()
        )
        assert len(recorder.record) == maps
        natural = natural_gradient_of(model)
        natural.precondition(recorder)
        now = {n: p.grad for n, p in model.named_parameters()}

        def joint(grads, weight):  # a map's weight and bias together
            return torch.cat(
                [grads[weight], grads[weight.replace("weight", "bias")][:, None]], dim=1
            )

        for name in recorder.record:
            assert (joint(now, name) * joint(plain, name)).sum() > 0
            assert not torch.allclose(joint(now, name), joint(plain, name))


def test_a_recorded_step_leaves_nothing_behind():
    """Once a recording step's gradient is taken and its statistics dropped, its autograd graph
    and recorder are freed (a recorder's hook that held its map's inputs made a cycle through
    autograd's C++ graph that Python cannot collect: every MA step leaked its graph, 12 GB in a
    2-epoch run)."""
    model = build_model(model_config(units=16), 40, 12)
    batch = Batch(
        torch.randn(2, 30, 40),
        torch.tensor([30, 24]),
        torch.randint(1, 12, (6,)),
        torch.tensor([3, 3]),
        list("ab"),
    )
    recorder = Recorder()
    ctc_loss(model, batch, recorder=recorder)[0].backward()
    assert recorder.record
    gone = weakref.ref(recorder)
    del recorder
    gc.collect()
    assert gone() is None
