"""How two systems' word error rates differ, with a confidence interval that holds over what
varies between a study and its repetition: the test set's speakers and training's seeds.

A system is a configuration's runs, one a seed. Its word errors on the test set are the mean over
its runs of each one's; WER(system) / WER(reference) − 1 is the relative difference. Its variance
has two parts, estimated apart and added (on the log of the ratio, where both are near normal):
- the test set's: a paired bootstrap over speakers (Koehn 2004; Bisani and Ney 2004, clustered as
  Field and Welsh 2007 resample clusters): a resample draws the test set's speakers with
  replacement, every utterance of each, the same draw for both systems (paired: a speaker hard
  for one is hard for the other). Utterances of one voice are not independent: drawn one by one,
  5,000 utterances of 200 speakers would look like 5,000 independent trials. Where the table
  names each utterance's voice (the built-in corpus: its speakers are settings of a few eSpeak
  voices, asrscale.analysis.findings), a resample draws voices, every speaker of each;
- training's: the spread of each system's per-seed totals over its seeds, less the part of it that
  is the seeds' disagreement on single speakers (a two-way analysis of variance's residual, which
  the speaker bootstrap already holds: counted twice, a 95% interval would cover 98%).
The interval is Student's t with Welch-Satterthwaite's degrees of freedom (speakers − 1 for the
first part, seeds − 1 of each system for the second), so that 3 seeds widen it as they should. A
test (tests/analysis/test_bootstrap.py) simulates systems with known speaker and seed variance and
checks that it covers the true difference 93-97% of the time. With one seed a system's training
spread is unknown: the interval then holds over speakers alone, and says so. The draws come from a
fixed seed, so that the same tables give the same intervals.

A single system's WER (`error_rate`) has its interval by the same two parts: the ratio of its
errors to the words they were made on, its speakers (or voices) drawn, its seeds' spread added.
"""

from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd
from scipy import stats

CONFIDENCE = 0.95
RESAMPLES = 2000
SEED = 0
CHUNK = 200  # resamples drawn at once: a chunk's indices take CHUNK × utterances integers
MEASURES = {
    "wer": "lm_errors",
    "greedy_wer": "greedy_errors",
}  # runs.tsv's measure -> utterances.tsv's errors


@dataclass(frozen=True)
class Interval:
    """A statistic with its `CONFIDENCE` interval, over `utterances` test utterances of `speakers`
    speakers (or voices: `drawn`) and each system's `seeds`; `parts`: the half-width each source of
    variance would give alone ("speakers", "seeds"), for what would narrow it."""

    estimate: float
    low: float
    high: float
    utterances: int
    speakers: int = 0
    seeds: tuple[int, ...] = ()
    parts: dict = field(default_factory=dict, compare=False)
    drawn: str = (
        "speakers"  # what `speakers` counts: the test set's units drawn together ("voices")
    )

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2

    def rests_on(self) -> str:
        """What the interval holds over, in words."""
        said = f"{self.utterances:,} test utterances"
        if self.speakers:
            said += f" of {self.speakers:,} {self.drawn}"
        if self.seeds:
            said += f", {' and '.join(map(str, self.seeds))} seeds"
            if min(self.seeds) < 2:
                said += " (training's spread not in the interval: one seed)"
        return said

    def describe(self, scale: float = 100, signed: bool = True) -> str:
        sign = "+" if signed else ""
        return (
            f"{scale * self.estimate:{sign}.1f}% (95% interval {scale * self.low:{sign}.1f}% to "
            f"{scale * self.high:{sign}.1f}%)"
        )


def _resampled(columns: list[np.ndarray], statistic: Callable[..., np.ndarray]) -> np.ndarray:
    """`statistic` of every resample (the same draws of the rows, speakers, for every column)."""
    rng, n, found = np.random.default_rng(SEED), len(columns[0]), []
    for start in range(0, RESAMPLES, CHUNK):
        drawn = rng.integers(0, n, (min(CHUNK, RESAMPLES - start), n))
        found.append(statistic(*(column[drawn].sum(axis=1) for column in columns)))
    return np.concatenate(found)


def error_rate(utterances: pd.DataFrame, runs, measure: str = "wer") -> Interval:
    """The word error rate of the system of `runs` (their folders, a seed each: utterances.tsv's
    rows of every run), over the utterances every run was scored on, with its interval over
    speakers and seeds (see the module): its errors against the words they were made on."""
    runs = list(dict.fromkeys(runs))
    errors, common = speaker_errors(utterances, runs, MEASURES[measure])
    if errors.empty:
        raise ValueError(f"no utterance scores of the runs {runs}")
    words = (
        speaker_errors(utterances, runs, "words")[0].iloc[:, :1].to_numpy(float)
    )  # the same in every run
    if not errors.to_numpy().any():  # no error to resample: none in any draw
        return Interval(0.0, 0.0, 0.0, common, len(errors), (len(runs),), drawn=errors.index.name)
    found = interval_of(errors.to_numpy(float), words, common)
    return replace(
        found,
        estimate=found.estimate + 1,
        low=found.low + 1,
        high=found.high + 1,
        seeds=(len(runs),),
        drawn=errors.index.name,
    )


def speaker_errors(
    utterances: pd.DataFrame, runs: list[str], column: str
) -> tuple[pd.DataFrame, int]:
    """Each speaker's word errors (`column`) in each of `runs` (speakers × runs), over the
    utterances every run was scored on (how many: the second value); an utterance with no speaker is
    its own (Kaldi's convention). Where the table names each utterance's voice, each voice's
    instead."""
    scored = utterances[utterances.run.isin(runs)]
    unit = "voice" if "voice" in scored else "speaker"
    speaker = scored[unit] if unit in scored else scored.utt
    scored = scored.assign(speaker=speaker.where(speaker.astype(str) != "", scored.utt))
    everywhere = scored.groupby("utt").run.nunique() == len(runs)
    scored = scored[scored.utt.isin(everywhere.index[everywhere])]
    table = scored.groupby(["speaker", "run"])[column].sum().unstack("run")
    return table.reindex(columns=runs).rename_axis(f"{unit}s"), int(everywhere.sum())


def _seed_variance(errors: np.ndarray) -> float:
    """The variance training's seeds add to a system's total errors (speakers × seeds): the spread
    of its per-seed totals, less the speaker-by-seed residual the speaker bootstrap holds already;
    over the mean of its seeds (0 for one seed)."""
    speakers, seeds = errors.shape
    if seeds < 2:
        return 0.0
    residual = (
        errors - errors.mean(1, keepdims=True) - errors.mean(0, keepdims=True) + errors.mean()
    )
    residual_variance = (
        (residual**2).sum() / ((speakers - 1) * (seeds - 1)) if speakers > 1 else 0.0
    )
    return max(0.0, errors.sum(0).var(ddof=1) - speakers * residual_variance) / seeds


def relative_difference(
    utterances: pd.DataFrame, runs, reference, measure: str = "wer"
) -> Interval:
    """WER(system) / WER(reference) − 1 of the system of `runs` against that of `reference` (their
    folders; utterances.tsv's rows of every run), over the utterances every run was scored on,
    with its interval over speakers and seeds (see the module): negative where the system makes
    fewer errors."""
    runs, reference = list(dict.fromkeys(runs)), list(dict.fromkeys(reference))
    table, common = speaker_errors(utterances, runs + reference, MEASURES[measure])
    if table.empty:
        raise ValueError("the two systems were scored on no common test utterance")
    found = interval_of(table[runs].to_numpy(float), table[reference].to_numpy(float), common)
    return replace(found, drawn=table.index.name)


def interval_of(ours: np.ndarray, theirs: np.ndarray, utterances: int) -> Interval:
    """The relative difference of two systems' errors (speakers × seeds each, the same speakers in
    the same order) with its interval over speakers and seeds (see the module)."""
    totals = ours.mean(1), theirs.mean(1)
    speakers = len(ours)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = totals[0].sum() / totals[1].sum()
        drawn = np.log(_resampled(list(totals), np.divide))
        parts = {
            "speakers": drawn.var(ddof=1) if speakers > 1 else 0.0,
            "seeds": _seed_variance(ours) / totals[0].sum() ** 2
            + _seed_variance(theirs) / totals[1].sum() ** 2,
        }
        freedom = {"speakers": speakers - 1, "seeds": _seed_freedom(ours, theirs, totals)}
    return _t_interval(
        ratio, parts, freedom, utterances, speakers, (ours.shape[1], theirs.shape[1])
    )


def _seed_freedom(ours: np.ndarray, theirs: np.ndarray, totals) -> float:
    """Welch-Satterthwaite's degrees of freedom of the two systems' seed variances (log scale)."""
    terms = [
        (_seed_variance(e) / t.sum() ** 2, e.shape[1] - 1) for e, t in zip((ours, theirs), totals)
    ]
    added = sum(v for v, _ in terms)
    spread = sum(v**2 / df for v, df in terms if df > 0 and v > 0)
    return added**2 / spread if spread else np.inf


def _t_interval(
    ratio: float, parts: dict, freedom: dict, utterances: int, speakers: int, seeds: tuple
) -> Interval:
    """The interval of a ratio from the variances of its log (`parts`) with their degrees of
    freedom."""
    variance = sum(parts.values())
    spread = sum(v**2 / freedom[k] for k, v in parts.items() if v > 0 and 0 < freedom[k] < np.inf)
    df = variance**2 / spread if spread else np.inf

    def half(v: float) -> float:  # the half-width, on the log scale, a variance `v` gives
        return (
            float(stats.t.ppf((1 + CONFIDENCE) / 2, df) * np.sqrt(v)) if v != 0 else 0.0
        )  # NaN stays NaN

    log = np.log(ratio) if ratio > 0 else float("nan")
    widths = {k: float(ratio * (np.exp(half(v)) - 1)) for k, v in parts.items()}
    return Interval(
        float(ratio - 1),
        float(np.exp(log - half(variance)) - 1),
        float(np.exp(log + half(variance)) - 1),
        utterances,
        speakers,
        seeds,
        widths,
    )
