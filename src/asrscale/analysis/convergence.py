"""One convergence rule for every study (docs/studies.md, "One convergence rule, fixed in
advance"): whether a run has converged, from its curve of a dev measure and its rates, and where it
has not, a bound on what it could still gain; with the back-test that chose the bound's constant.

A curve is a run's epochs in order: the measure that chose its model (dev TER or dev loss) at each
accepted epoch, and the rate each epoch ran at as a share of the run's peak. Its best-so-far is the
lowest measure up to each epoch. Gains are relative: (before − after) / before.
"""

from dataclasses import dataclass

import numpy as np

#: the epochs whose mean gain says whether a curve is still falling
WINDOW = 3
#: one epoch's relative noise of each measure, measured on the flat tails of SEQ's runs of 30 and
#: 40 epochs in records/ (`noise_of`), on the built-in corpus's 500 dev utterances
NOISE = {"dev_ter": 0.0029, "dev_loss": 0.0034}
#: a fixed-epoch schedule has finished its budget where its last epoch ran at this share of its
#: peak rate or less
FINISHED = 0.02
#: the bound's constant: the smallest multiple of 0.5 whose back-test on records/ found at most
#: `EXCEEDANCES` of the cut points gaining more than it allowed (`backtest`)
BOUND_FACTOR = 3.0
EXCEEDANCES = 0.01
#: the curves whose tails measure the noise: SEQ's runs of at least this many epochs
NOISE_EPOCHS = 30


def near_tie(measure: str) -> float:
    """How close two runs' dev scores (relative) are within the dev set's noise: two standard
    deviations of the difference of two epochs' measures."""
    return 2 * np.sqrt(2) * NOISE[measure]


def plateau(measure: str) -> float:
    """The mean gain an epoch below which a curve is flat: two epochs' noise over the window."""
    return 2 * NOISE[measure] / WINDOW


@dataclass(frozen=True)
class Curve:
    """A run's dev measure (`values`, named `measure`) and rates (`rates`, shares of its peak) at
    each accepted epoch, in order."""

    measure: str
    values: np.ndarray
    rates: np.ndarray

    @property
    def best(self) -> np.ndarray:
        return np.minimum.accumulate(self.values)

    def recent_gain(self, end: int | None = None) -> float:
        """The best-so-far's mean relative gain an epoch over the `WINDOW` epochs up to epoch
        index `end` (the last by default); infinite where fewer epochs came before."""
        end = len(self.values) - 1 if end is None else end
        if end < WINDOW:
            return float("inf")
        before, after = self.best[end - WINDOW], self.best[end]
        return (before - after) / before / WINDOW

    def gain_per_rate(self, end: int) -> float:
        """The best-so-far's relative gain over the `WINDOW` epochs up to `end`, per unit of rate
        spent in them (each epoch's share of the peak, summed)."""
        spent = self.rates[end - WINDOW + 1 : end + 1].sum()
        return WINDOW * self.recent_gain(end) / spent if spent > 0 else float("inf")

    def continued_rate(self) -> float:
        """The rate still to be spent if the schedule's last decay went on for ever (a geometric
        tail from the last epoch's rate); infinite where the rate was not decaying."""
        if len(self.rates) < 2 or self.rates[-2] <= 0:
            return float("inf")
        decay = self.rates[-1] / self.rates[-2]
        return self.rates[-1] * decay / (1 - decay) if decay < 1 else float("inf")

    def bound(self, remaining: float, end: int | None = None) -> float:
        """What the curve could still gain (relative) with `remaining` rate to spend, judged at
        epoch index `end`: `BOUND_FACTOR` times its recent gain per rate times the remaining rate,
        plus two epochs' noise."""
        end = len(self.values) - 1 if end is None else end
        if end < WINDOW:
            return float("inf")
        per_rate = self.gain_per_rate(end)
        moving = BOUND_FACTOR * per_rate * remaining if per_rate > 0 else 0.0
        return moving + 2 * NOISE[self.measure]

    @property
    def finished(self) -> bool:
        return bool(len(self.rates)) and self.rates[-1] <= FINISHED + 1e-9

    def flat(self) -> bool:
        return self.recent_gain() < plateau(self.measure)


@dataclass(frozen=True)
class Backtest:
    """The back-test of a bound's constant: the cut points that gained more than it allowed."""

    factor: float
    cuts: int
    exceedances: int

    @property
    def share(self) -> float:
        return self.exceedances / self.cuts if self.cuts else float("nan")


def cut_points(curve: Curve) -> list[tuple[float, float, float]]:
    """Each cut of `curve` from its fourth epoch to its last but one: the recent gain per rate,
    the rate still spent after the cut in the record, and the gain the curve made after it."""
    best, last = curve.best, len(curve.values) - 1
    return [
        (
            curve.gain_per_rate(end),
            curve.rates[end + 1 :].sum(),
            (best[end] - best[last]) / best[end],
        )
        for end in range(WINDOW, last)
    ]


def backtest(curves: list[Curve], factor: float = BOUND_FACTOR) -> Backtest:
    """How often a curve, cut at an epoch, later gained more than the bound of constant `factor`
    allowed from the epochs up to the cut."""
    cuts = exceedances = 0
    for curve in curves:
        noise = 2 * NOISE[curve.measure]
        for per_rate, remaining, gained in cut_points(curve):
            cuts += 1
            exceedances += gained > factor * max(per_rate, 0.0) * remaining + noise
    return Backtest(factor, cuts, exceedances)


def smallest_factor(curves: list[Curve], step: float = 0.5, largest: float = 20.0) -> Backtest:
    """The smallest multiple of `step` whose back-test has at most `EXCEEDANCES` exceeding."""
    for factor in np.arange(step, largest + step, step):
        found = backtest(curves, float(factor))
        if found.share <= EXCEEDANCES:
            return found
    return backtest(curves, largest)


def noise_of(values: list[np.ndarray]) -> float:
    """One epoch's relative noise of a measure, from flat curves: over the second half of each,
    the standard deviation of successive differences over √2, relative to its mean; the mean of
    the curves'."""
    found = []
    for curve in values:
        tail = np.asarray(curve[len(curve) // 2 :], dtype=float)
        found.append(np.diff(tail).std(ddof=1) / np.sqrt(2) / tail.mean())
    return float(np.mean(found))
