"""How two systems' word error rates differ, with a confidence interval: the paired bootstrap over
test utterances (Koehn 2004; Bisani and Ney 2004), as speech recognition compares systems scored
on one test set.

A system is a configuration's runs, its seeds pooled: each utterance's word errors are the mean
over its runs, so that seeds are repeated measurements of the same utterances. A resample draws
the test set's utterances with replacement, the same draw for both systems (paired: an utterance
hard for one is hard for the other, which is most of the variance a test set has), and takes
WER(system) / WER(reference) − 1; the interval is the resamples' percentiles. The draws come from a
fixed seed, so that the same tables give the same intervals. The interval covers the test set's
sampling, not training's: seeds enter only through their mean.
"""

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

CONFIDENCE = 0.95
RESAMPLES = 2000
SEED = 0
CHUNK = 200  # resamples drawn at once: a chunk's indices take CHUNK × utterances integers
MEASURES = {"wer": "lm_errors", "greedy_wer": "greedy_errors"}  # runs.tsv's measure -> utterances.tsv's errors


@dataclass(frozen=True)
class Interval:
    """A statistic with its `CONFIDENCE` interval, over `utterances` test utterances."""

    estimate: float
    low: float
    high: float
    utterances: int

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2

    def describe(self, scale: float = 100, signed: bool = True) -> str:
        sign = "+" if signed else ""
        return (f"{scale * self.estimate:{sign}.1f}% (95% interval {scale * self.low:{sign}.1f}% to "
                f"{scale * self.high:{sign}.1f}%)")  # fmt: skip


def pooled(utterances: pd.DataFrame, runs: pd.Series) -> pd.DataFrame:
    """The word errors of each test utterance, by measure (MEASURES), as the mean over `runs` (the
    folders of one configuration's runs), with its words; indexed by utterance."""
    scored = utterances[utterances.run.isin(set(runs))]
    if scored.empty:
        raise ValueError(f"no utterance scores of the runs {sorted(set(runs))}")
    errors = {column: (column, "mean") for column in MEASURES.values()}
    return scored.groupby("utt").agg(words=("words", "first"), **errors)


def _resampled(columns: list[np.ndarray], statistic: Callable[..., np.ndarray]) -> np.ndarray:
    """`statistic` of every resample (the same draws of the utterances for every column)."""
    rng, n, found = np.random.default_rng(SEED), len(columns[0]), []
    for start in range(0, RESAMPLES, CHUNK):
        drawn = rng.integers(0, n, (min(CHUNK, RESAMPLES - start), n))
        found.append(statistic(*(column[drawn].sum(axis=1) for column in columns)))
    return np.concatenate(found)


def _interval(estimate: float, resamples: np.ndarray, utterances: int) -> Interval:
    tail = (1 - CONFIDENCE) / 2
    low, high = np.quantile(resamples, [tail, 1 - tail])
    return Interval(float(estimate), float(low), float(high), utterances)


def error_rate(system: pd.DataFrame, measure: str = "wer") -> Interval:
    """A system's (`pooled`) word error rate with its interval."""
    errors, words = system[MEASURES[measure]].to_numpy(float), system.words.to_numpy(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        resamples = _resampled([errors, words], np.divide)
    return _interval(errors.sum() / words.sum(), resamples, len(errors))


def relative_difference(system: pd.DataFrame, reference: pd.DataFrame, measure: str = "wer") -> Interval:
    """WER(system) / WER(reference) − 1 (both `pooled`), over the utterances both were scored on,
    with its paired interval: negative where the system makes fewer errors."""
    common = system.index.intersection(reference.index)
    if common.empty:
        raise ValueError("the two systems were scored on no common test utterance")
    column = MEASURES[measure]
    ours, theirs = system.loc[common, column].to_numpy(float), reference.loc[common, column].to_numpy(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        resamples = _resampled([ours, theirs], lambda a, b: a / b - 1)
        estimate = ours.sum() / theirs.sum() - 1
    return _interval(estimate, resamples, len(common))
