"""The rules that decide one half of a claim (its accuracy, its speed), each with four outcomes:
reproduced, not reproduced, not decided (why, with the numbers) or not testable here (why, with
the arithmetic). A rule is applied only where both of its outcomes can occur for the runs at hand;
where one cannot, the half is not testable here, never "not decided".

Accuracy: by test WER decoded with the word LM (as the studies scored), through an interval over
the test set's speakers and training's seeds (asrscale.analysis.bootstrap), over `ACCURACY_SEEDS`
seeds of each system or more (with fewer, training's spread is not in the interval: not decided);
the greedy WER (the acoustic model alone) is decided beside it, and a disagreement is said in the
why. The relative WER difference d = WER(runs) / WER(reference) − 1 and its 95% interval
[low, high] decide:
- "matches", "without loss" (non-inferiority within a margin m): reproduced where high < m, not
  reproduced where low ≥ m;
- "worse" ("poor accuracy"): reproduced where low > m, not reproduced where high ≤ m;
- "better": reproduced where high < 0, not reproduced where low ≥ 0;
else not decided: the interval spans the threshold. Where it does and its half-width is wider than
the margin, the why says what would narrow it: where the speakers' (or voices') part alone is
wider, the test set is too small, and about how many utterances of how many speakers would narrow
it (that part shrinks as one over the root of the speakers, at the test set's utterances per
speaker); else more seeds would. A run that diverged, a configuration tuned at its grid's edge
or newbob's epochs of unequal updates leave a half not decided (`blocked`). A run that has not
converged carries a bound on what it could still gain (asrscale.analysis.convergence): the
interval is moved by each side's bound in the direction that could flip the half, and the half is
decided on that interval where it can be, else not decided: under-trained (`settle`).

Speed: a measurement only. A claimed speedup is decided by runs on real ranks (world: mpi), each
learner on a GPU of its own, timed by the wall clock, over `SPEED_SEEDS` seeds or more: reproduced
where the 95% interval of the mean speedup over seeds (Student's t) lies at or above
(1 − `SPEED_MARGIN`) of the claim, not reproduced where it lies below, else not decided. A modelled
speedup (a simulated run, or a replay of a study's setup) never decides: it is said beside, with
its band, for information. A claimed speedup for the same epochs beyond what P learners can give
(above P) is not testable.
"""

import dataclasses
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from asrscale.analysis.bootstrap import Interval, relative_difference
from asrscale.analysis.convergence import FINISHED
from asrscale.analysis.measures import beyond_p, diverged

REPRODUCED, NOT_REPRODUCED = "reproduced", "not reproduced"
NOT_DECIDED, NOT_TESTABLE = "not decided", "not testable here"
# newbob's runs compared only where their epochs hold updates within this factor of each other
# (the same configuration's seeds differ by their shards' rounding alone)
UNEQUAL_EPOCHS = 1.25
OUTCOMES = (REPRODUCED, NOT_REPRODUCED, NOT_DECIDED, NOT_TESTABLE)
NOT_MEASURED = "not measured in this study"  # the reason of a half whose runs the study lacks
WER_MARGIN = 0.03  # relative: "matches" and "without loss", unless the study states its own loss
SPEED_MARGIN = 0.10  # a measured speedup within 10% of the claimed one reproduces it
SPEED_SEEDS = 3  # a speed half is decided over this many seeds at least (the wall clock's spread)
ACCURACY_SEEDS = (
    3  # an accuracy half over this many seeds of each system at least (training's spread)
)
MEASURES = {"wer": "with the LM", "greedy_wer": "greedily"}


@dataclass(frozen=True)
class Half:
    """One half of a claim: its outcome, why (with the numbers) and what was measured; `reason`
    says in a few words why a half is not decided or not testable."""

    outcome: str
    why: str
    measured: str = ""
    reason: str = ""

    @property
    def verdict(self) -> str:
        return f"{self.outcome}: {self.reason}" if self.reason else self.outcome


def missing(what: str) -> Half:
    """A half whose runs this study does not have."""
    return Half(NOT_DECIDED, what, reason=NOT_MEASURED)


# accuracy ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Rule:
    """An accuracy rule on the relative WER difference d: "below" holds where d's interval lies
    below `threshold` (fails where it lies at or above it), "above" the other way."""

    side: str  # "below" or "above"
    threshold: float
    margin: float  # the scale of the test's power: an interval half as wide cannot decide near it
    says: str  # what holding means, in words ("matches SEQ's accuracy")

    def outcome(self, interval: Interval) -> str:
        below = interval.high < self.threshold, interval.low >= self.threshold
        above = interval.low > self.threshold, interval.high <= self.threshold
        holds, fails = below if self.side == "below" else above
        return REPRODUCED if holds else NOT_REPRODUCED if fails else NOT_DECIDED


def matches(margin: float = WER_MARGIN, what: str = "matches SEQ's accuracy") -> Rule:
    return Rule("below", margin, margin, what)


def worse(margin: float = WER_MARGIN, what: str = "less accurate than SEQ") -> Rule:
    return Rule("above", margin, margin, what)


def better(what: str = "more accurate than SEQ") -> Rule:
    return Rule("below", 0.0, WER_MARGIN, what)


def blocked(*groups: tuple[str, pd.DataFrame]) -> Half | None:
    """Why an accuracy half cannot rest on these runs (named groups) whatever they measured, or
    None: each that diverged, each tuned at its grid's edge (a better rate may lie beyond it:
    asrscale.protocol.tuning), newbob's epochs of unequal updates (`unequal_epochs`). A run that
    has not converged is not among them: its bound decides (`compare`)."""
    gone = [
        f"{name} diverged in {int(diverged(r).sum())} of {len(r)} runs"
        for name, r in groups
        if diverged(r).any()
    ]
    if gone:
        return Half(NOT_DECIDED, "; ".join(gone) + ": a lower rate", reason="diverged")
    states = [
        (name, state)
        for name, runs in groups
        for state in runs.get("tuning", pd.Series()).dropna().unique()
    ]
    edges = [
        f"{name} was {state}" for name, state in states if state.startswith("tuned at the edge")
    ]
    if edges:
        return Half(
            NOT_DECIDED,
            "; ".join(edges) + ": a wider grid (study.tuning.lr_factors)",
            reason="tuned at the edge",
        )
    if unequal := unequal_epochs(*groups):
        return Half(NOT_DECIDED, unequal, reason="newbob's epochs unequal")
    return None


def bound_of(runs: pd.DataFrame) -> float:
    """What a system could still gain, relative to its WER (the mean over its seeds): each seed's
    bound (`gain_bound`: asrscale.analysis.measures.convergence; 0 for a seed that converged,
    unbounded where a table has none), weighted by the seed's WER, at most 1."""
    if "converged" not in runs or runs.converged.all():
        return 0.0
    bounds = runs["gain_bound"] if "gain_bound" in runs else pd.Series(np.inf, index=runs.index)
    bounds = bounds.where(~runs.converged, 0.0).fillna(np.inf).clip(upper=1.0)
    weights = runs["wer"] if "wer" in runs else pd.Series(1.0, index=runs.index)
    return float((bounds * weights).sum() / weights.sum())


def shifted(interval: Interval, gain: float, reference_gain: float) -> Interval:
    """The interval of d = WER / WER(reference) − 1 moved to its conservative ends: its low end as
    if the system gained `gain` more (its WER that much lower), its high end as if the reference
    gained `reference_gain`."""
    low = (1 + interval.low) * (1 - gain) - 1
    high = (1 + interval.high) / (1 - reference_gain) - 1 if reference_gain < 1 else np.inf
    return dataclasses.replace(interval, low=low, high=high)


def decisive_end(rule: Rule, outcome: str) -> str:
    """Which end of the interval decided `outcome` under `rule`: "low" or "high"."""
    holds = outcome == REPRODUCED
    return "high" if (rule.side == "below") == holds else "low"


def unconverged(name: str, runs: pd.DataFrame, bound: float) -> str:
    """A system that has not converged in words: how many seeds, why, and its bound."""
    late = runs[~runs.converged]
    why = ", ".join(sorted(set(late.converged_by.map(NOT_CONVERGED).fillna("not converged"))))
    return (
        f"{name} has not converged in {len(late)} of {len(runs)} seeds ({why}); what it could "
        f"still gain is bounded at {100 * bound:.1f}%"
    )


#: why a run has not converged, in words (asrscale.analysis.measures.convergence's converged_by)
NOT_CONVERGED = {
    "unfinished": f"its schedule stopped above {100 * FINISHED:g}% of its peak rate",
    "budget": "its budget ran out while it still gained",
    "untrained": "its best model does not transcribe",
}


def unequal_epochs(*groups: tuple[str, pd.DataFrame]) -> str:
    """Why newbob's stop does not treat these runs (named groups) alike, or "": it decides at each
    epoch's end by the epoch's gain, and an epoch of fewer updates (more learners, a larger batch)
    gains less, so it halves and stops sooner; runs whose epochs' updates differ beyond
    `UNEQUAL_EPOCHS` are compared under a schedule of the same epochs for every run."""
    if not any((runs.get("schedule", pd.Series()) == "newbob").any() for _, runs in groups):
        return ""
    per_epoch = {name: (runs.updates / runs.epochs).mean() for name, runs in groups if len(runs)}
    if max(per_epoch.values()) <= UNEQUAL_EPOCHS * min(per_epoch.values()):
        return ""
    each = ", ".join(f"{name} {updates:,.0f}" for name, updates in per_epoch.items())
    return (
        "newbob decides at each epoch's end, and these runs' epochs hold unequal updates a "
        f"learner ({each}): "
        "its thresholds stop the runs of fewer sooner; train.schedule: exponential, the same "
        "epochs for every run"
    )


def compare(
    utterances: pd.DataFrame,
    runs: pd.DataFrame,
    reference: pd.DataFrame,
    rule: Rule,
    reference_name: str = "SEQ",
    name: str = "the system",
) -> Half:
    """The accuracy half of `runs` (`name`) against `reference` by `rule`, with the LM (deciding)
    and greedily (beside), by the interval over speakers and seeds (`ACCURACY_SEEDS` of each);
    where a side has not converged, by the interval moved by each side's bound (`settle`)."""
    found = {
        measure: relative_difference(utterances, runs.run, reference.run, measure)
        for measure in MEASURES
    }
    lm, greedy = found["wer"], found["greedy_wer"]
    measured = (
        f"WER {lm.describe()} relative to {reference_name}'s with the LM, {greedy.describe()} "
        f"greedily, over {lm.rests_on()}"
    )
    short = too_few_seeds({name: lm.seeds[0], reference_name: lm.seeds[1]})
    if short:
        return Half(NOT_DECIDED, short, measured, f"needs {ACCURACY_SEEDS} seeds")
    gains = bound_of(runs), bound_of(reference)
    if any(gains):
        return settle(
            rule, lm, greedy, ((name, runs), (reference_name, reference)), gains, measured
        )
    outcome = rule.outcome(lm)
    why = said_of(rule, outcome)
    if rule.outcome(greedy) != outcome:
        why += f"; greedily {rule.outcome(greedy)} ({greedy.describe()})"
    if outcome != NOT_DECIDED:
        return Half(outcome, why, measured)
    reason, narrower = narrowing(rule, lm)
    if narrower:
        why += (
            f"; its half-width {100 * lm.half_width:.1f}% is wider than the margin "
            f"{100 * rule.margin:g}%: {narrower} to the margin"
        )
    return Half(outcome, why, measured, reason)


def said_of(rule: Rule, outcome: str, what: str = "the interval") -> str:
    """Why `rule` gave `outcome`, in words."""
    threshold = f"{100 * rule.threshold:+.1f}%"
    opposite = "above" if rule.side == "below" else "below"
    return {
        REPRODUCED: f"{rule.says}: {what} lies {rule.side} {threshold}",
        NOT_REPRODUCED: f"not {rule.says}: {what} lies {opposite} {threshold}",
        NOT_DECIDED: f"{what} spans {threshold}",
    }[outcome]


def narrowing(rule: Rule, interval: Interval) -> tuple[str, str]:
    """Why an interval that spans the threshold does, and what would narrow it to the margin
    ("" where its half-width is within the margin already)."""
    if interval.parts["speakers"] > rule.margin:
        needed = interval.speakers * (interval.parts["speakers"] / rule.margin) ** 2
        utterances = needed * interval.utterances / interval.speakers
        return "the test set is too small", (
            f"about {utterances:,.0f} test utterances of about {needed:,.0f} {interval.drawn} "
            "would narrow it"
        )
    if interval.half_width > rule.margin:
        return "too few seeds", "the seeds' spread makes most of it: more seeds would narrow it"
    return "the interval spans the threshold", ""


def settle(
    rule: Rule,
    lm: Interval,
    greedy: Interval,
    sides: tuple[tuple[str, pd.DataFrame], tuple[str, pd.DataFrame]],
    gains: tuple[float, float],
    measured: str,
) -> Half:
    """An accuracy half where a side has not converged: decided on the interval moved by each
    side's bound in the direction that could flip it (`shifted`), else not decided: under-trained.
    Where the end that decides does not move (the side it depends on converged), more training of
    the other side could only strengthen the verdict, and the why says so."""
    words = [unconverged(name, runs, gain) for (name, runs), gain in zip(sides, gains) if gain]
    moved = shifted(lm, *gains)
    outcome = rule.outcome(moved)
    span = f"{100 * moved.low:+.1f}% to {100 * moved.high:+.1f}%"
    if outcome == NOT_DECIDED:
        why = f"{'; '.join(words)}: moved by the bounds, the interval could reach {span}"
        span_why = f"{why}, which spans {100 * rule.threshold:+.1f}%"
        return Half(NOT_DECIDED, span_why, measured, "under-trained")
    end = decisive_end(rule, outcome)
    moving = gains[0] if end == "low" else gains[1]
    if moving == 0:
        still = sides[1 if end == "low" else 0][0]
        words.append(f"more training of {still} could only strengthen this")
    why = f"{said_of(rule, outcome, f'the interval moved by the bounds ({span})')}; " + "; ".join(
        words
    )
    greedily = rule.outcome(shifted(greedy, *gains))
    if greedily != outcome:
        why += f"; greedily {greedily} ({greedy.describe()}, moved alike)"
    return Half(outcome, why, measured)


def too_few_seeds(seeds: dict[str, int]) -> str:
    """Why systems of these seeds (by name) cannot decide an accuracy half (fewer than
    `ACCURACY_SEEDS` of one), or ""."""
    if min(seeds.values()) >= ACCURACY_SEEDS:
        return ""
    has = ", ".join(f"{name} {n}" for name, n in seeds.items())
    return (
        f"needs {ACCURACY_SEEDS} seeds of each system, has {has}: with fewer, training's spread "
        "is not in the interval"
    )


# speed ---------------------------------------------------------------------------------------


def speed_interval(values: pd.Series) -> tuple[float, float, float]:
    """The mean over seeds and its 95% interval (Student's t; a single value has none)."""
    mean = float(values.mean())
    if len(values) < 2:
        return mean, float("nan"), float("nan")
    spread = stats.t.ppf(0.975, len(values) - 1) * values.std(ddof=1) / np.sqrt(len(values))
    return mean, mean - spread, mean + spread


def modelled(runs: pd.DataFrame, column: str) -> str:
    """What the cost model says of the runs' `column` speedup, with its band: information only."""
    kind = runs.speedup_kind.iloc[0]
    if runs[column].isna().any():  # a speedup to a target some seed never reached
        return f"{kind}: none, not every seed reached the target"
    band = f" (band {runs[f'{column}_low'].min():.2f}-{runs[f'{column}_high'].max():.2f}×)"
    return f"{kind}: {runs[column].mean():.2f}×{band if kind.startswith('modelled') else ''}"


def on_gpus(runs: pd.DataFrame) -> bool:
    """Whether the runs were measured on real ranks, every learner on a GPU of its own."""
    return bool(((runs.world == "mpi") & (runs.device == "cuda")).all())


def measured_on(runs: pd.DataFrame) -> str:
    """The model and the hardware a measured speedup is of."""
    run = runs.iloc[0]
    return f"{run.parameters / 1e6:.2f} M parameters on {run.learners} × {run.gpu} ({run.hostname})"


def testable_speed(runs: pd.DataFrame, column: str, claimed: float | None = None) -> Half | None:
    """Why the runs cannot decide a speed half (None where they can): modelled, on CPU ranks,
    too few seeds, or a claimed or measured same-epochs speedup beyond P."""
    learners, same_epochs = int(runs.learners.iloc[0]), column in ("time_speedup", "own_speedup")
    if claimed is not None and same_epochs and (1 - SPEED_MARGIN) * claimed > learners:
        return Half(
            NOT_TESTABLE,
            f"{(1 - SPEED_MARGIN) * claimed:g}× ({100 * (1 - SPEED_MARGIN):.0f}% of "
            f"{claimed:g}×) for the same epochs is beyond what {learners} learners can give",
            modelled(runs, column),
            f"beyond {learners} learners",
        )
    if same_epochs and beyond_p(float(runs[column].mean()), learners):
        return Half(
            NOT_TESTABLE,
            f"{runs[column].mean():.2f}× measured for the same epochs is beyond what {learners} "
            "learners can give: a clock that ran slow for its baseline (a busy machine) or a "
            "calibration taken on one; time them again",
            modelled(runs, column),
            f"beyond {learners} learners",
        )
    if not on_gpus(runs):
        where = "measured on CPU ranks" if (runs.world == "mpi").all() else "modelled"
        return Half(
            NOT_TESTABLE,
            f"a speed claim is decided by {learners} GPUs measured (real ranks, wall clock, "
            f"{SPEED_SEEDS} seeds or more); these runs are {where} ({modelled(runs, column)}), "
            "shown for information",
            modelled(runs, column),
            "needs GPUs",
        )
    if runs.seed.nunique() < SPEED_SEEDS:
        return Half(
            NOT_DECIDED,
            f"needs {SPEED_SEEDS} seeds measured, has {runs.seed.nunique()}",
            modelled(runs, column),
            f"needs {SPEED_SEEDS} seeds",
        )
    return None


def reaches(
    runs: pd.DataFrame, claimed: float, column: str = "time_speedup", what: str = "speedup"
) -> Half:
    """Whether the runs' measured `column` speedup reaches a claimed one (see the module)."""
    untestable = testable_speed(runs, column, claimed)
    if untestable:
        return untestable
    mean, low, high = speed_interval(runs[column])
    needed = (1 - SPEED_MARGIN) * claimed
    measured = (
        f"{what} {mean:.2f}× (95% interval {low:.2f}-{high:.2f}×) over {len(runs)} seeds, "
        f"{measured_on(runs)}"
    )
    if low >= needed:
        return Half(
            REPRODUCED,
            f"the interval reaches {needed:.3g}× ({100 * (1 - SPEED_MARGIN):.0f}% of {claimed:g}×)",
            measured,
        )
    if high < needed:
        return Half(
            NOT_REPRODUCED,
            f"the interval is below {needed:.3g}× ({100 * (1 - SPEED_MARGIN):.0f}% of "
            f"{claimed:g}×)",
            measured,
        )
    return Half(
        NOT_DECIDED, f"the interval spans {needed:.3g}×", measured, "the interval spans the claim"
    )


def combine(outcomes: list[str]) -> str:
    """One outcome of several: not reproduced where any is, reproduced where every one is, not
    testable here where every one is, else not decided."""
    if NOT_REPRODUCED in outcomes:
        return NOT_REPRODUCED
    for outcome in (REPRODUCED, NOT_TESTABLE):
        if all(found == outcome for found in outcomes):
            return outcome
    return NOT_DECIDED


def together(halves: list[Half]) -> Half:
    """One half made of several (a claim at two learner counts), each said."""
    outcome = combine([half.outcome for half in halves])
    reasons = [half.reason for half in halves if half.outcome == outcome and half.reason]
    return Half(
        outcome,
        "; ".join(half.why for half in halves),
        "; ".join(h.measured for h in halves if h.measured),
        reasons[0] if reasons else "",
    )
