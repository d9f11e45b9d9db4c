"""Which regime a comparison across global batches measured: its batches beside the gradient
noise scale of the study's corpus and model (asrscale.training.noise_scale), as SEQ's runs
measured it at their last epoch.

McCandlish et al. ("An empirical model of large-batch training", 2018) find the critical batch
about the noise scale: below it a batch twice as large trains in about half the updates (the
small-batch regime), past it in about as many (the large-batch regime), so that for the same
epochs a batch past it ends less trained, and a gap between two batches there is the batch's as
much as an algorithm's. A study that reports no loss at its own global batch trained below its
corpus's critical batch (past it, the same epochs would have cost it accuracy); where this
study's batch lies past its own corpus's, the claim is measured outside its regime, and the
verdict says so (it stays decided, for this corpus).
"""

import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from asrscale.analysis.measures import baseline
from asrscale.config import paths


@dataclass(frozen=True)
class NoiseScale:
    """A corpus's noise scale as SEQ measured it: `value`, the median of `runs` runs' at their last
    epoch."""

    value: float
    runs: int

    @property
    def resolved(self) -> bool:
        return math.isfinite(self.value) and self.value > 0

    def said(self) -> str:
        of = f"the median of {self.runs} runs" if self.runs > 1 else "one run"
        if not self.resolved:
            return f"a noise scale SEQ's measurements did not resolve ({of})"
        return (
            f"the corpus's noise scale of about {rounded(self.value)} (SEQ's at its last epoch, "
            f"{of})"
        )


def rounded(value: float) -> str:
    """A noise scale to two significant figures, about what an epoch's measurement resolves."""
    return f"{round(value, 1 - math.floor(math.log10(value))):,g}"


def measured(table: pd.DataFrame) -> NoiseScale | None:
    """The noise scale SEQ's runs (as configured) measured at their last epoch; None where none
    did (runs recorded before the measurement, or with train.noise_scale.share 0)."""
    if "noise_scale" not in table:
        return None
    found = baseline(table).drop_duplicates("run").noise_scale.dropna()
    return NoiseScale(float(found.median()), len(found)) if len(found) else None


def of_corpus(corpus: str) -> dict[str, NoiseScale]:
    """The noise scale SEQ measured in each study of `corpus` whose runs are gathered (its runs
    table, asrscale.config.paths.TABLE), by study."""
    pattern = paths.TABLE.format(corpus=corpus, study="*", table="runs")
    found = {
        Path(table).parent.name: measured(pd.read_csv(table, sep="\t"))
        for table in sorted(Path().glob(pattern))
    }
    return {study: scale for study, scale in found.items() if scale is not None}


def regime(batch: float, scale: float) -> str:
    """Where a global batch lies against a noise scale."""
    return "the large-batch regime" if batch > scale else "the small-batch regime"


def sentence(table: pd.DataFrame, ours: tuple, theirs: tuple, rule) -> str:
    """What an accuracy half comparing the runs of `ours` with those of `theirs` ((name, runs)
    each) by `rule` measured, where their global batches differ and SEQ measured the noise scale
    (`measured` of `table`; else ""): each batch against the noise scale, in its regime, as a
    clause of the half's measured text (starting "; "); and, where the claim is that `ours` lose
    nothing (`rule` on the "below" side: matches, better) while their batch lies past the noise
    scale, that the claim is measured outside its regime."""
    (name, runs), (reference_name, reference) = ours, theirs
    batches = {name: runs.global_batch.iloc[0], reference_name: reference.global_batch.iloc[0]}
    scale = measured(table)
    if scale is None or len(set(batches.values())) == 1:
        return ""
    listed = " and ".join(f"{batch:,.0f} ({side})" for side, batch in batches.items())
    if not scale.resolved:
        return f"; global batches {listed} against {scale.said()}: no regime said"
    said = f"; global batches {listed} against {scale.said()}: {_regimes(batches, scale.value)}"
    if rule.side == "below" and batches[name] > scale.value:
        said += (
            f"; the study's claim ({name}: {rule.says}) was made below its own corpus's "
            "critical batch, since past it the same epochs would have cost it accuracy, and here "
            f"{name}'s global batch of {batches[name]:,.0f} lies past this corpus's: the claim "
            "is measured outside its regime, and decided for this corpus"
        )
    return said


def _regimes(batches: dict, scale: float) -> str:
    """Each batch's regime, with what it means for the comparison."""
    past = {side: batch > scale for side, batch in batches.items()}
    if all(past.values()):
        return "both past it, the large-batch regime"
    if not any(past.values()):
        return (
            "both at or below it, the small-batch regime, where a larger batch trains in "
            "proportionally fewer updates: a gap is the algorithm's more than the batch's"
        )
    (larger,) = [side for side, beyond in past.items() if beyond]
    (smaller,) = [side for side, beyond in past.items() if not beyond]
    return (
        f"{larger}'s past it, the large-batch regime, where a larger batch buys few fewer "
        f"updates and ends less trained for the same epochs, {smaller}'s at or below it: the "
        "control's share of a gap is the batch's"
    )
