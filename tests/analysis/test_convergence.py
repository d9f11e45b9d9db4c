"""The convergence rule (asrscale.analysis.convergence) against answers worked out by hand: the
recent gain of a best-so-far curve, the rate still to come, the bound and its back-test; and its
constants measured again on the committed records."""

import numpy as np
import pytest

from asrscale.analysis import convergence
from asrscale.analysis.convergence import (
    BOUND_FACTOR,
    EXCEEDANCES,
    NOISE,
    Curve,
    backtest,
    noise_of,
    plateau,
    smallest_factor,
)
from asrscale.analysis.records import backtest_records
from helpers import ROOT


def curve(values, rates=None, measure="dev_ter") -> Curve:
    rates = [1.0] * len(values) if rates is None else rates
    return Curve(measure, np.asarray(values, float), np.asarray(rates, float))


def test_the_recent_gain_is_the_best_so_fars_mean_over_the_last_three_epochs():
    """0.30, 0.20, 0.25 (not a new best), 0.19, 0.18: the best so far went 0.20 → 0.18 over the
    last 3 epochs, 10% in all, 3.33% an epoch; with three epochs or fewer there is none."""
    found = curve([0.30, 0.20, 0.25, 0.19, 0.18])
    assert found.recent_gain() == pytest.approx(0.1 / 3)
    assert found.recent_gain(end=3) == pytest.approx((0.30 - 0.19) / 0.30 / 3)
    assert curve([0.3, 0.2, 0.1]).recent_gain() == float("inf")


def test_a_curve_is_flat_below_two_epochs_noise_over_the_window():
    assert plateau("dev_ter") == pytest.approx(2 * 0.0029 / 3)
    level = 0.2
    gain = plateau("dev_ter") * 3 * level  # the threshold's gain over the window
    assert not curve([0.3, level, level, level, level - 1.01 * gain]).flat()
    assert curve([0.3, level, level, level, level - 0.99 * gain]).flat()


def test_the_rate_still_to_come_continues_the_last_decay_for_ever():
    """Rates 1, 0.5, 0.25: halving continued spends 0.25 more; a constant rate, or one rising,
    has no end."""
    assert curve([1, 1, 1], [1, 0.5, 0.25]).continued_rate() == pytest.approx(0.25)
    assert curve([1, 1], [0.5, 0.5]).continued_rate() == float("inf")
    assert curve([1], [1.0]).continued_rate() == float("inf")


def test_the_bound_is_the_factor_times_the_gain_per_rate_times_the_rate_to_come_plus_noise():
    """0.4, 0.3, 0.28, 0.26, 0.25 at rates 1, 0.5, 0.25, 0.125, 0.0625: 1/6 gained over rates
    worth 0.4375, with 0.0625 to come; a curve that gained nothing keeps only the noise."""
    found = curve([0.4, 0.3, 0.28, 0.26, 0.25], [1, 0.5, 0.25, 0.125, 0.0625])
    per_rate = (0.3 - 0.25) / 0.3 / 0.4375
    assert found.gain_per_rate(4) == pytest.approx(per_rate)
    assert found.bound(found.continued_rate()) == pytest.approx(
        BOUND_FACTOR * per_rate * 0.0625 + 2 * NOISE["dev_ter"]
    )
    assert curve([0.4, 0.3, 0.3, 0.3, 0.3]).bound(5.0) == pytest.approx(2 * NOISE["dev_ter"])


def test_a_run_has_finished_its_budget_at_two_percent_of_its_peak_rate():
    assert curve([1, 1], [1, 0.02]).finished and not curve([1, 1], [1, 0.021]).finished


def test_the_backtest_counts_each_cut_that_later_gained_more_than_the_bound_allowed():
    """A curve flat from epoch 2 to 5, then falling by half: cut at epoch 4 its first fall is in
    the window and the bound is large; cut at epoch 5 its last 3 epochs gained nothing, the bound
    is the noise alone and the fall exceeds it; cut at epoch 6 and later the fall is in the
    window, and the bound grows past what remains."""
    falling = curve([0.5, 0.4, 0.4, 0.4, 0.4, 0.2, 0.19, 0.18, 0.17, 0.16], [1.0] * 10)
    found = backtest([falling], factor=3.0)
    assert found.cuts == 6 and found.exceedances == 1
    assert found.share == pytest.approx(1 / 6)
    flat = curve([0.5, 0.4, 0.4, 0.4, 0.4, 0.4], [1.0] * 6)
    assert backtest([flat], 0.5).exceedances == 0


def test_the_smallest_factor_is_the_first_multiple_of_a_half_whose_backtest_passes(monkeypatch):
    shares = {0.5: 0.5, 1.0: 0.02, 1.5: 0.01, 2.0: 0.0}
    monkeypatch.setattr(
        convergence,
        "backtest",
        lambda curves, factor: convergence.Backtest(factor, 100, round(100 * shares[factor])),
    )
    assert smallest_factor([], largest=2.0).factor == 1.5


def test_one_epochs_noise_is_the_spread_of_successive_differences_on_the_second_half():
    """Second halves 1.0, 1.1, 1.0, 1.1: differences ±0.1, standard deviation 0.1155 (n − 1), over
    √2, over the mean 1.05."""
    values = np.array([9.0, 9.0, 9.0, 9.0, 1.0, 1.1, 1.0, 1.1])
    expected = np.std([0.1, -0.1, 0.1], ddof=1) / np.sqrt(2) / 1.05
    assert noise_of([values, values]) == pytest.approx(expected)


def test_the_rules_constants_are_the_committed_records_own_and_the_backtest_passes():
    """The noise in use is what SEQ's long runs in records/ measure, to the hundredth of a percent,
    and the bound's constant is the smallest whose back-test passes (docs/studies.md)."""
    found = backtest_records(sorted(path.parent for path in ROOT.glob("records/*/record.json")))
    for measure, noise in found["noise"].items():
        assert round(noise, 4) == NOISE[measure]
    assert found["smallest"].factor == BOUND_FACTOR
    assert found["in_use"].share <= EXCEEDANCES
    assert found["curves"] == 60 and found["in_use"].cuts == 924
