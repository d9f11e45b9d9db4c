"""The gradient noise scale's estimator (asrscale.training.noise_scale) on a problem whose
gradient covariance is known: least squares with Gaussian inputs and noise."""

import json
import math

import pandas as pd
import pytest
import torch

from asrscale.config.schema import profile_defaults
from asrscale.training.evaluation import noise_groups
from asrscale.training.noise_scale import Norms, Tally, norms, smoothed
from asrscale.training.run import train
from asrscale.worlds.clock import CostModel, Hardware
from asrscale.worlds.mpi import MPIWorld
from asrscale.worlds.simulated import SimWorld
from helpers import (
    CALIBRATION,
    TIMES,
    mpiexec,
    run_config,
    run_paths,
    same_models,
    simulate,
    train_command,
)

DIMENSIONS, NOISE, OFFSET = 20, 2.0, 1.0
# one example's gradient of ½(x·w − y)², x ~ N(0, I), y = x·w* + ε, ε ~ N(0, σ²), at w = w* + d:
# x(x·d − ε), of mean d and covariance dd' + (|d|² + σ²)I (Isserlis), so |G|² = |d|² and
# tr(Σ) = |d|² + D(|d|² + σ²)
TRUE_NOISE_SCALE = (OFFSET**2 + DIMENSIONS * (OFFSET**2 + NOISE**2)) / OFFSET**2


def least_squares(generator: torch.Generator):
    """A batch's gradient at w = w* + d, |d| = OFFSET, as the trainer's would be: of the batch's
    mean loss."""
    w_true = torch.randn(DIMENSIONS, generator=generator, dtype=torch.float64)
    offset = torch.randn(DIMENSIONS, generator=generator, dtype=torch.float64)
    w = (w_true + OFFSET * offset / offset.norm()).requires_grad_()

    def gradient(batch: int) -> torch.Tensor:
        x = torch.randn(batch, DIMENSIONS, generator=generator, dtype=torch.float64)
        y = x @ w_true + NOISE * torch.randn(batch, generator=generator, dtype=torch.float64)
        (found,) = torch.autograd.grad(((x @ w - y) ** 2 / 2).mean(), [w])
        return found

    return gradient


def measurements(count: int, batch: int = 16, batches: int = 4) -> list[Norms]:
    """`count` measurements as a run takes them, each a big batch of `batches` small ones."""
    gradient, found = least_squares(torch.Generator().manual_seed(0)), []
    for _ in range(count):
        tally = Tally()
        tally.add(gradient(batch) for _ in range(batches))
        found.append(norms(tally.values(), batch, batches))
    return found


def test_the_smoothed_estimate_is_within_10_percent_of_the_true_noise_scale():
    found = measurements(200)
    estimates = [(m.gradient_sq, m.trace) for m in found]
    assert TRUE_NOISE_SCALE == 101
    assert smoothed(estimates, 0.99) == pytest.approx(TRUE_NOISE_SCALE, rel=0.1)
    # each part unbiased: |G|² = |d|² = 1, tr(Σ) = 101
    assert sum(g for g, _ in estimates) / len(estimates) == pytest.approx(OFFSET**2, rel=0.1)
    assert sum(t for _, t in estimates) / len(estimates) == pytest.approx(101, rel=0.1)
    # one measurement of 64 examples alone is far off: why they are smoothed
    assert not smoothed(estimates[:1], 0.5) == pytest.approx(TRUE_NOISE_SCALE, rel=0.1)


def test_two_batch_sizes_solve_for_both_unknowns():
    # E|g_b|² = |G|² + tr(Σ)/b: with |G|² = 2 and tr(Σ) = 64, b = 16 and 64
    found = Norms(2 + 64 / 16, 2 + 64 / 64, 16, 64)
    assert found.gradient_sq == pytest.approx(2) and found.trace == pytest.approx(64)
    tally = Tally()
    tally.add(torch.tensor(v) for v in ([3.0, 0.0], [1.0, 0.0]))
    assert tally.values() == [10.0, 2, 4.0, 1]


def test_the_averages_are_smoothed_apart_and_an_unresolved_gradient_is_infinite():
    # the ratio of the averages, not the average of the ratios
    assert smoothed([(1.0, 10.0), (3.0, 10.0)], 0.5) == pytest.approx(7.5 / 1.75)
    assert smoothed([(-1.0, 10.0)], 0.5) == math.inf
    assert smoothed([(1.0, -10.0)], 0.5) == 0
    assert math.isnan(smoothed([], 0.5))


def test_an_epochs_draw_is_whole_big_batches_of_its_share_of_the_training_set():
    default = {"share": 0.01, "batch_size": 16, "batches": 4, "smoothing": 0.5}
    utts = [f"u{i:05d}" for i in range(20_000)]
    # 1% of 20,000 utterances: 200, about 3 big batches of 4 × 16
    drawn = noise_groups(utts, default, "1/1")
    assert [[len(batch) for batch in group] for group in drawn] == [[16] * 4] * 3
    assert len({u for group in drawn for batch in group for u in batch}) == 3 * 64
    assert drawn == noise_groups(utts, default, "1/1") != noise_groups(utts, default, "1/2")
    # the default corpus's 5,000: one big batch at least; a set smaller than a big batch: smaller
    # batches
    assert len(noise_groups(utts[:5000], default, "1/1")) == 1
    assert [len(batch) for batch in noise_groups(utts[:40], default, "1/1")[0]] == [10] * 4
    with pytest.raises(ValueError, match=r"train.noise_scale.batches \(4\) is more than"):
        noise_groups(utts[:3], default, "1/1")


NOISE_COLUMNS = ["gradient_sq", "noise_trace", "noise_scale"]
# big batches of 2 × 4 utterances, 6 of them on the tiny corpus's 96 training utterances: shared
# out over 2 ranks
OFTEN = {"share": 0.5, "batch_size": 4, "batches": 2, "smoothing": 0.5}
OFF = {**OFTEN, "share": 0.0}


def epochs_of(metrics: pd.DataFrame) -> pd.DataFrame:
    return metrics[metrics.kind == "epoch"].reset_index(drop=True)


def test_each_epoch_measures_the_noise_scale_and_training_is_the_same_without_it(corpus, tmp_path):
    paths = {name: run_paths(corpus, corpus / "shards" / "P1", tmp_path / name) for name in "ab"}
    for name, noise in (("a", OFTEN), ("b", OFF)):
        train(run_config(noise_scale=noise), paths[name], MPIWorld())
    (measured, model), (unmeasured, same) = (
        (
            pd.read_csv(tmp_path / name / "metrics.tsv", sep="\t"),
            torch.load(tmp_path / name / "model.pt", weights_only=False)["model"],
        )
        for name in "ab"
    )
    assert same_models(model, same)
    rest = [c for c in measured.columns if c not in TIMES + NOISE_COLUMNS]
    assert measured[rest].equals(unmeasured[rest])
    epochs = epochs_of(measured)
    assert len(epochs) == 2 and (epochs[NOISE_COLUMNS] > 0).all().all(), epochs[NOISE_COLUMNS]
    assert epochs_of(unmeasured)[NOISE_COLUMNS].isna().all().all()
    # its cost is recorded apart
    walls = [json.loads((tmp_path / n / "run.json").read_text())["process_wall_s"] for n in "ab"]
    assert walls[0]["noise"] > 0 and walls[1]["noise"] == 0


@pytest.mark.parametrize("algorithm", ["kavg", "asgd"])
def test_a_simulated_run_keeps_its_model_and_modelled_times_with_the_measurement(
    corpus, tmp_path, algorithm
):
    (model, metrics), (same, unmeasured) = (
        simulate(corpus, tmp_path / name, algorithm, 4, fuse=False, noise_scale=noise)
        for name, noise in (("a", OFTEN), ("b", OFF))
    )
    assert same_models(model, same)
    rest = [c for c in metrics.columns if c not in NOISE_COLUMNS]
    assert metrics[rest].equals(unmeasured[rest])  # the modelled clock's times included
    assert (epochs_of(metrics).noise_scale > 0).all()


@pytest.mark.slow
def test_mpi_ranks_share_the_measurement_and_find_the_simulated_worlds_noise(corpus, tmp_path):
    shards = corpus / "shards" / "P2"
    command = train_command(corpus, tmp_path / "mpi", shards, "ssgd", epochs=1, noise_scale=OFTEN)
    mpiexec(2, *command)
    costs = CostModel(Hardware.from_config("here", profile_defaults()), CALIBRATION)
    run = run_config("ssgd", epochs=1, log_interval=2, noise_scale=OFTEN)
    train(run, run_paths(corpus, shards, tmp_path / "sim"), SimWorld(2, costs, name="ssgd"))
    mpi, simulated = (
        epochs_of(pd.read_csv(tmp_path / world / "metrics.tsv", sep="\t"))[NOISE_COLUMNS]
        for world in ("mpi", "sim")
    )
    assert (mpi > 0).all().all()
    pd.testing.assert_frame_equal(mpi, simulated, rtol=1e-4)
