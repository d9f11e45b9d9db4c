"""The studies' claims (docs/studies.md), each decided half by half from a study's own runs, in its
study's own words: its accuracy half and its speed half, each by a rule written out here and in
the report (asrscale.analysis.halves: reproduced, not reproduced, not decided, not testable here,
each saying why), and the claim from its halves: reproduced only where every half is, not
reproduced where any half is, not testable here where every half is, else not decided.

Accuracy halves are decided by really trained runs, 3 seeds of each system or more, through an
interval over the test set's speakers and training's seeds (asrscale.analysis.bootstrap; simulated
runs train every learner: their accuracy is real); speed halves only by
runs measured on GPUs (a modelled speedup is said beside, for information). Claims against MA
alone (su15, NG-SGD, the averaging period) rest on MA's runs, not on SEQ's.
"""

import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import pandas as pd

from asrscale.analysis import regime
from asrscale.analysis.bootstrap import Interval, error_rate, relative_difference
from asrscale.analysis.halves import (
    ACCURACY_SEEDS,
    NOT_DECIDED,
    NOT_REPRODUCED,
    NOT_TESTABLE,
    REPRODUCED,
    SPEED_MARGIN,
    Half,
    better,
    blocked,
    bound_of,
    combine,
    compare,
    matches,
    missing,
    reaches,
    shifted,
    speed_interval,
    testable_speed,
    together,
    too_few_seeds,
    worse,
)
from asrscale.analysis.measures import baseline, diverged, mean_spread, runs_of
from asrscale.config.algorithms import label

LARGE_BATCH_LEARNERS = 16  # zhang19b's larger-batch claim is about many learners' global batch
SU15_LOSS = 0.034  # su15's own "limited accuracy loss": 14.7% → 15.2% WER at 32 GPUs
ASGD_EFFICIENCY = 0.75  # "the overhead is significant": below this efficiency (speedup / P)


@dataclass(frozen=True)
class Evidence:
    """What a claim is decided from: the runs as configured (of one kind of timing), the sweeps'
    points joined with their runs, and every run's word errors per test utterance."""

    runs: pd.DataFrame
    points: pd.DataFrame
    utterances: pd.DataFrame


HalfRule = Callable[[Evidence], Half]


@dataclass(frozen=True)
class Claim:
    study: str
    claim: str
    accuracy_rule: str  # "" where the claim has no accuracy half
    speed_rule: str  # "" where it has no speed half
    accuracy: HalfRule | None
    speed: HalfRule | None
    decided_by: str  # the study of studies/ that decides its accuracy half (STUDIES)


#: the studies of studies/ that decide the accuracy halves a study leaves undecided, with what each
#: runs and its wall time (docs/reproductions.md has every run of them); a speed half is decided on
#: GPUs
STUDIES = {
    "claims-at-4": (
        "SEQ, KAVG, ASGD and the SSGD control at 4 learners, each tuned over one grid of rates and "
        "halved, 3 seeds, 20 epochs each",
        "1 hour 9 minutes on 2 CPU cores",
    ),
    "asgd-at-4": (
        "SEQ and ASGD at 4 learners, each tuned over one grid of rates and momenta and halved, 3 "
        "seeds, 40 epochs each",
        "1 hour 39 minutes on 2 CPU cores",
    ),
    "kavg-at-20": (
        "SEQ, KAVG at 20 learners and the SSGD control at 20, each tuned over one grid of rates "
        "and halved, 3 seeds, 16 epochs each",
        "54 minutes on 2 CPU cores after bmuf, about 1 hour 15 minutes alone",
    ),
    "adpsgd-at-32": (
        "SEQ, ADPSGD at 32 learners and the SSGD control at 32, each tuned over one grid of rates "
        "and halved, 3 seeds, 16 epochs each",
        "about 1 hour 30 minutes on 2 CPU cores, estimated",
    ),
    "scaled-64": (
        "SEQ and H-ADPSGD at 64 learners beside the SSGD control at 64, each tuned over one grid "
        "of rates and halved, 3 seeds, 16 epochs each",
        "about 2 hours 20 minutes on 2 CPU cores, estimated",
    ),
    "averaging": (
        "MA as Kaldi trained it: its averaging period and NG-SGD swept at 4 learners, 3 seeds",
        "about 45 minutes on 2 CPU cores",
    ),
    "averaging-scaled": (
        "MA as Kaldi trained it at 16 and 32 learners against MA alone, 3 seeds, 20 epochs each",
        "about 1.5 hours on 2 CPU cores, estimated",
    ),
    "large-batch": (
        "SSGD's and ADPSGD's global batch swept at 16 learners against SEQ, "
        "3 seeds, 16 epochs each",
        "about 2 hours on 2 CPU cores, estimated",
    ),
    "bmuf": (
        "BMUF beside the KAVG arm that differs from it by the filter alone, at 16 learners, and "
        "the SSGD control against SEQ, each tuned over one grid of rates (BMUF's also of its "
        "block momentum) and halved, 3 seeds, 16 epochs each",
        "about 2 hours on 2 CPU cores, estimated from its probe",
    ),
}


def _name(algorithm: str) -> str:
    return label(algorithm)


def _wers(runs: pd.DataFrame) -> str:
    """Mean WER with the LM and greedily, with their spreads over seeds."""
    if diverged(runs).all():
        return "diverged"
    (wer, spread), (greedy, greedy_spread) = mean_spread(runs.wer), mean_spread(runs.greedy_wer)
    if len(runs) == 1:
        return f"WER {100 * wer:.1f}% (greedy {100 * greedy:.1f}%)"
    return (
        f"WER {100 * wer:.1f}% ± {100 * spread:.1f} (greedy {100 * greedy:.1f}% ± "
        f"{100 * greedy_spread:.1f}) "
        f"over {len(runs)} seeds"
    )


def _trained_so(runs: pd.DataFrame) -> str:
    """How a system was trained, as its table says (where it does): its optimizer (with its
    momentum, in tables since it was gathered), its rate and how that was chosen (study.tuning: its
    grid, in tables since it was said), its global batch, under a fixed schedule its epochs (two
    sides may train different budgets: studies/bmuf-longer.yaml), and where dev chose its LM weight
    or word bonus at its grid's edge, so that a verdict says what it rests on."""
    if not {"optimizer", "lr", "tuning"} <= set(runs.columns) or runs.empty:
        return ""
    first = runs.iloc[0]
    momentum = f" momentum {first.momentum:g}" if pd.notna(first.get("momentum")) else ""
    fixed = f", {runs.epochs.max()} epochs" if first.get("schedule") in FIXED_EPOCHS else ""
    return (
        f" ({first.optimizer}{momentum}, lr {first.lr:g} {first.tuning}, global batch "
        f"{first.global_batch:,.0f}{fixed}{_decoded_at_edge(runs)})"
    )


FIXED_EPOCHS = ("cosine", "exponential")  # the schedules of the same epochs for every run


def _decoded_at_edge(runs: pd.DataFrame) -> str:
    """Where dev chose a run's LM weight or word bonus at its grid's edge (`lm_grid`), in words."""
    edges = runs.get("lm_grid", pd.Series(dtype=str)).fillna("")
    edges = edges[edges.str.startswith("at the edge")]
    if edges.empty:
        return ""
    where = ", ".join(sorted(set(edges.str.removeprefix("at the edge (").str.rstrip(")"))))
    return f"; decoded at its LM grid's edge in {len(edges)} of {len(runs)} seeds: {where}"


def _scale(runs: pd.DataFrame) -> str:
    """The scale a verdict rests on: the model's size and the training set's hours of speech."""
    if "train_hours" not in runs.columns or runs.empty:
        return ""
    return (
        f"; at {runs.parameters.iloc[0] / 1e6:.2f} M parameters on "
        f"{runs.train_hours.iloc[0]:.1f} hours of speech"
    )


def _said(half: Half, measured: str) -> Half:
    """The half with what was measured said first."""
    return dataclasses.replace(half, measured="; ".join(filter(None, (measured, half.measured))))


def _against(
    ev: Evidence, runs: pd.DataFrame, name: str, reference: pd.DataFrame, reference_name: str, rule
) -> Half:
    """An accuracy half of `runs` against `reference` by `rule` (asrscale.analysis.halves.compare:
    a side that has not converged by its bound); against SEQ, with the gap split by the SSGD
    control (`_control`)."""
    said = (
        f"{name} {_wers(runs)}{_trained_so(runs)}; {reference_name} "
        f"{_wers(reference)}{_trained_so(reference)}"
        f"{_scale(runs)}"
    )
    # the regime of a comparison across global batches (asrscale.analysis.regime)
    said += regime.sentence(ev.runs, (name, runs), (reference_name, reference), rule)
    late = blocked((reference_name, reference), (name, runs))
    if late and late.reason != "diverged":  # what the runs measured, decided on by nothing
        found = relative_difference(ev.utterances, runs.run, reference.run)
        said += (
            f"; as measured, not decided on: WER {found.describe()} relative to "
            f"{reference_name}'s, over {found.rests_on()}"
        )
    if late:
        return _said(late, said)
    half = _said(compare(ev.utterances, runs, reference, rule, reference_name, name), said)
    if reference_name != "SEQ" or (runs.algorithm == "ssgd").all():
        return half
    return dataclasses.replace(
        half, measured=f"{half.measured}; {_control(ev, runs, name, reference)}"
    )


def _control(ev: Evidence, runs: pd.DataFrame, name: str, seq: pd.DataFrame) -> str:
    """The gap between `runs` and SEQ split in two by SSGD at the same learners and global batch
    (the control, as configured): the global batch's share (SSGD against SEQ) and the algorithm's
    own (the runs against SSGD), each with its interval; or that the study has no control; or, where
    an update of `runs` applies SEQ's batch, that none of the gap is the batch's."""
    learners, batch = int(runs.learners.iloc[0]), runs.global_batch.iloc[0]
    if (
        batch == seq.global_batch.iloc[0]
    ):  # ASGD's server applies each learner's minibatch alone, as SEQ does
        return (
            f"no share of the gap is a larger batch's: {name}'s updates apply {batch:,.0f} "
            "utterances, as SEQ's do"
        )
    control = runs_of(ev.runs, "ssgd", learners)
    control = control[control.global_batch == batch]
    at = f"SSGD at {learners} learners and global batch {batch:,.0f}"
    if control.empty:
        return (
            f"no control ({at}): the gap is not split into the global batch's share and "
            f"{name}'s own"
        )
    if diverged(control).any():
        return f"the control ({at}) diverged: the gap is not split"
    by_batch = relative_difference(ev.utterances, control.run, seq.run)
    own = relative_difference(ev.utterances, runs.run, control.run)
    late = [
        f"{side} in {int((~group.converged).sum())} of {len(group)} seeds"
        for side, group in (("SSGD", control), (name, runs), ("SEQ", seq))
        if not group.converged.all()
    ]
    caveat = f"; as measured: not converged, {', '.join(late)}" if late else ""
    return (
        f"the gap split by the control ({at}): the global batch's share {by_batch.describe()} "
        f"(SSGD against SEQ, over {by_batch.rests_on()}), {name}'s own {own.describe()} (against "
        f"SSGD, over {own.rests_on()}){caveat}"
    )


def _seq_accuracy(algorithm: str, learners: int, ev: Evidence, rule=None) -> Half:
    """`algorithm` at `learners` against SEQ, by `rule` (matching SEQ's accuracy by default). A
    claim binds its algorithm and learners (functools.partial), so that the function itself runs
    when the claim is decided."""
    name = f"{_name(algorithm)} P={learners}"
    runs, seq = runs_of(ev.runs, algorithm, learners), baseline(ev.runs)
    if runs.empty or seq.empty:
        return missing(f"no {name} run, or no SEQ run")
    return _against(ev, runs, name, seq, "SEQ", rule or matches())


def _speed(algorithm: str, learners: int, claimed: float, ev: Evidence, context: str = "") -> Half:
    """`algorithm` at `learners` reaching a claimed speedup over SEQ for the same epochs."""
    runs = runs_of(ev.runs, algorithm, learners)
    if runs.empty or baseline(ev.runs).empty:
        return missing(f"no {_name(algorithm)} run at {learners} learners, or no SEQ run")
    return _said(reaches(runs, claimed), f"{_name(algorithm)} P={learners}" + context)


def _asgd_learners(ev: Evidence) -> int | None:
    """cong17's "even with 4 GPUs": ASGD at 4 learners, or the fewest above 4 the study has."""
    found = sorted(p for p in set(ev.runs[ev.runs.algorithm == "asgd"].learners) if p >= 4)
    return found[0] if found else None


def _asgd_accuracy(ev: Evidence) -> Half:
    learners = _asgd_learners(ev)
    if learners is None:
        return missing("no ASGD run at 4 learners or more")
    half = _seq_accuracy("asgd", learners, ev, worse())
    kavg = runs_of(ev.runs, "kavg", learners)
    return half if kavg.empty else _said(half, f"KAVG P={learners} beside it: {_wers(kavg)}")


def _asgd_overhead(ev: Evidence) -> Half:
    """cong17: ASGD's efficiency (speedup / P) below `ASGD_EFFICIENCY`, measured."""
    learners = _asgd_learners(ev)
    if learners is None or baseline(ev.runs).empty:
        return missing("no ASGD run at 4 learners or more, or no SEQ run")
    runs = runs_of(ev.runs, "asgd", learners)
    untestable = testable_speed(runs, "time_speedup")
    if untestable:
        return _said(untestable, f"ASGD P={learners}, efficiency {runs.efficiency.mean():.2f}")
    mean, low, high = speed_interval(runs.efficiency)
    measured = (
        f"ASGD P={learners}: efficiency {mean:.2f} (95% interval {low:.2f}-{high:.2f}) over "
        f"{len(runs)} seeds"
    )
    if high < ASGD_EFFICIENCY:
        return Half(REPRODUCED, f"the interval lies below {ASGD_EFFICIENCY:g}", measured)
    if low >= ASGD_EFFICIENCY:
        return Half(
            NOT_REPRODUCED,
            f"the interval lies at or above {ASGD_EFFICIENCY:g}: no significant overhead",
            measured,
        )
    return Half(
        NOT_DECIDED,
        f"the interval spans {ASGD_EFFICIENCY:g}",
        measured,
        "the interval spans the claim",
    )


def _adaptive_kavg_runs(ev: Evidence) -> tuple[pd.DataFrame, pd.DataFrame] | Half:
    """cong17's 20 learners, as written (and SEQ), over `ACCURACY_SEEDS` seeds each."""
    runs, seq = runs_of(ev.runs, "kavg", 20), baseline(ev.runs)
    if runs.empty or seq.empty:
        return missing("no KAVG run at 20 learners, or no SEQ run")
    fewest = min(runs.seed.nunique(), seq.seed.nunique())
    if fewest < ACCURACY_SEEDS:
        return missing(f"needs {ACCURACY_SEEDS} seeds of KAVG at 20 and of SEQ (has {fewest})")
    return runs, seq


def _adaptive_kavg_accuracy(ev: Evidence) -> Half:
    found = _adaptive_kavg_runs(ev)
    if isinstance(found, Half):
        return found
    runs, seq = found
    return _against(ev, runs, "KAVG P=20", seq, "SEQ", better())


def _adaptive_kavg_speed(ev: Evidence) -> Half:
    """cong17's 6.1× to SEQ's accuracy: the time until SEQ's own best dev loss, SEQ's over
    KAVG's."""
    found = _adaptive_kavg_runs(ev)
    if isinstance(found, Half):
        return found
    runs, seq = found
    reached = runs.accuracy_epochs_ratio.notna().all()
    context = (
        f"KAVG P=20, to SEQ's best dev loss in {runs.accuracy_epochs_ratio.mean():.2g}× SEQ's "
        "epochs"
        if reached
        else "KAVG P=20 did not reach SEQ's best dev loss in every seed"
    )
    untestable = testable_speed(runs, "accuracy_speedup", 6.1)
    if untestable:
        return _said(untestable, context)
    if not seq.converged.all():
        return Half(
            NOT_DECIDED,
            "SEQ did not converge: it has no accuracy to reach",
            context,
            "under-trained",
        )
    if runs.accuracy_speedup.isna().any():
        return Half(NOT_REPRODUCED, "KAVG at 20 never reached SEQ's best dev loss", context)
    return _said(reaches(runs, 6.1, "accuracy_speedup", "speedup to SEQ's accuracy"), context)


BMUF_LEARNERS = (16, 64)  # Chen and Huo's BLSTM (16 GPUs) and DNN (64)
AVERAGING = (
    "kavg",
    "ma",
)  # what BMUF filters: an averaging of K local steps, or of MA's frames per job


def _beside(
    ev: Evidence, runs: pd.DataFrame, name: str, reference: pd.DataFrame, reference_name: str
) -> str:
    """`runs` against `reference` said beside a half: the relative WER difference with its interval
    over speakers and seeds, and which side had not converged (a difference between runs still
    improving is said, not decided)."""
    if diverged(runs).all() or diverged(reference).all():
        return (
            f"{name} against {reference_name}: "
            f"{'the first' if diverged(runs).all() else 'the second'} diverged"
        )
    found = relative_difference(ev.utterances, runs.run, reference.run)
    late = [
        side
        for side, group in ((name, runs), (reference_name, reference))
        if not group.converged.all()
    ]
    caveat = f" ({' and '.join(late)} not converged in every seed)" if late else ""
    return f"{name} against {reference_name}: {found.describe()} over {found.rests_on()}{caveat}"


ARM_OPTIONS = ("period", "averages", "learner_momentum")  # what BMUF shares with its KAVG arm


def _arm(bmuf: pd.DataFrame, kavg: pd.DataFrame) -> str:
    """Whether KAVG is BMUF's arm, from the runs' options: the same block length, the same state
    averaged and the same treatment of the learners' momentum, so that the filter alone differs;
    else each option that differs. Nothing where the table has no options (older records)."""
    if "options" not in bmuf or "options" not in kavg:
        return ""
    ours, theirs = (json.loads(runs.options.iloc[0]) for runs in (bmuf, kavg))
    differ = [
        f"{key} {theirs.get(key)} against {ours.get(key)}"
        for key in ARM_OPTIONS
        if theirs.get(key) != ours.get(key)
    ]
    return f" (not its arm: {', '.join(differ)})" if differ else " (its arm: the filter alone)"


def _bmuf_accuracy(ev: Evidence) -> Half:
    """chen16: BMUF at 16 learners (their BLSTM's) matches SEQ; beside it, BMUF against the
    averaging it filters at the same learners (KAVG, MA), and at 64 (their DNN's) against SEQ and
    those."""
    half = _seq_accuracy("bmuf", BMUF_LEARNERS[0], ev)
    seq, said = baseline(ev.runs), []
    for learners in BMUF_LEARNERS:
        bmuf = runs_of(ev.runs, "bmuf", learners)
        if bmuf.empty:
            continue
        name = f"BMUF P={learners}"
        if learners != BMUF_LEARNERS[0] and not seq.empty:
            said.append(_beside(ev, bmuf, name, seq, "SEQ"))
        for algorithm in AVERAGING:
            if (other := runs_of(ev.runs, algorithm, learners)).empty:
                continue
            arm = _arm(bmuf, other) if algorithm == "kavg" else ""
            said.append(_beside(ev, bmuf, name, other, f"{_name(algorithm)} P={learners}{arm}"))
    return _said(half, "; ".join(said)) if said else half


def _swept(points: pd.DataFrame, algorithm: str, setting: str) -> pd.DataFrame:
    """The points of `algorithm`'s sweep of `setting` at the largest learner count swept."""
    found = points[(points.algorithm == algorithm) & (points.sweep == setting)]
    return found[found.learners == found.learners.max()]


def _by_value(ev: Evidence, swept: pd.DataFrame) -> str:
    """Each value's pooled WER with its interval."""
    return ", ".join(
        f"{value}: {error_rate(ev.utterances, group.run).describe(signed=False)}"
        for value, group in swept.groupby("value")
    )


def _optimal_period(ev: Evidence) -> Half:
    """rosc17: an inner averaging period more accurate than both ends of the sweep (reproduced),
    or an end more accurate than every inner period (not reproduced)."""
    swept = _swept(ev.points, "ma", "frames_per_job")
    if swept.value.nunique() < 3:
        return missing("needs a sweep of ma frames_per_job over 3 or more values (study.sweeps)")
    values = sorted(swept.value.unique())
    groups = {v: swept[swept.value == v] for v in values}
    late = blocked(*((f"MA at {v} frames per job", group) for v, group in groups.items()))
    measured = f"MA P={swept.learners.iloc[0]}, WER by frames per job: "
    if late:
        return _said(late, measured.rstrip(": "))
    best = min(values, key=lambda v: error_rate(ev.utterances, groups[v].run).estimate)
    measured += _by_value(ev, swept) + f"; lowest at {best}"
    rule = better(f"lower at {best}")

    def against(value) -> Interval:
        found = relative_difference(ev.utterances, groups[best].run, groups[value].run)
        return shifted(found, bound_of(groups[best]), bound_of(groups[value]))

    short = too_few_seeds({f"MA at {v}": len(group) for v, group in groups.items()})
    if short:
        return Half(NOT_DECIDED, short, measured, f"needs {ACCURACY_SEEDS} seeds")
    still = not all(group.converged.all() for group in groups.values())
    beyond = " beyond the interval" + (" moved by the runs' bounds" if still else "")
    reason = "under-trained" if still else "the interval spans the threshold"
    if best not in (values[0], values[-1]):
        ends = [rule.outcome(against(end)) for end in (values[0], values[-1])]
        if all(outcome == REPRODUCED for outcome in ends):
            return Half(
                REPRODUCED, f"the inner value {best} is more accurate than both ends", measured
            )
        why = f"the inner value {best} is not more accurate than both ends{beyond}"
        return Half(NOT_DECIDED, why, measured, reason)
    inner = [rule.outcome(against(v)) for v in values[1:-1]]
    if all(outcome == REPRODUCED for outcome in inner):
        return Half(
            NOT_REPRODUCED, f"the end {best} is more accurate than every inner value", measured
        )
    why = f"the end {best} is not more accurate than every inner value{beyond}"
    return Half(NOT_DECIDED, why, measured, reason)


def _overlap_saving(ev: Evidence) -> Half:
    """rosc17's 54.9% is a saving against Kaldi's scripts (a job launched per GPU and averaging
    period, data loaded before training, models averaged through files), which asrscale's runs do
    not have: the saving of overlapping data loading alone, where swept, is said beside."""
    swept = _swept(ev.points, "ma", "train.prefetch")
    on, off = swept[swept.value > 0], swept[swept.value == 0]
    measured = ""
    if not on.empty and not off.empty:
        per_epoch = [(group.train_s / group.epochs).mean() for group in (on, off)]
        measured = (
            f"MA P={swept.learners.iloc[0]}: {100 * (1 - per_epoch[0] / per_epoch[1]):.1f}% less "
            "time an epoch "
            f"with prefetch than without ({swept.speedup_kind.iloc[0]})"
        )
    return Half(
        NOT_TESTABLE,
        "rosc17 measured against Kaldi's scripts (a job launched per GPU and averaging period, its "
        "data loaded before it trains, models averaged through files), which asrscale does not "
        "run: its saving of overlapping data loading alone is not rosc17's comparison; the cost "
        "model's replay of rosc17's setup (below) models it, for information",
        measured,
        "no Kaldi scripts to compare with",
    )


def _natural_gradient(ev: Evidence) -> Half:
    """povey14, su15: MA with NG-SGD more accurate than without, at the same learners."""
    swept = _swept(ev.points, "ma", "natural_gradient")
    on, off = swept[swept.value.map(bool)], swept[~swept.value.map(bool)]
    if on.empty or off.empty:
        return missing("needs a sweep of ma natural_gradient with it on and off (study.sweeps)")
    p = swept.learners.iloc[0]
    return _against(
        ev, on, f"MA P={p} with NG-SGD", off, "without", better("more accurate with NG-SGD")
    )


def _ma_scaling(
    ev: Evidence, check: Callable[[Evidence, pd.DataFrame, pd.DataFrame, int], Half]
) -> Half:
    """su15 at 16 and 32 learners, each against MA alone (su15's own baseline): both must hold."""
    alone = runs_of(ev.runs, "ma", 1)
    found = {p: runs_of(ev.runs, "ma", p) for p in (16, 32)}
    absent = ["1 learner"] * alone.empty + [
        f"{p} learners" for p, runs in found.items() if runs.empty
    ]
    if absent:
        return missing(f"no MA run at {' and '.join(absent)} (su15's baseline is MA alone)")
    return together([check(ev, runs, alone, p) for p, runs in found.items()])


def _su15_accuracy(ev: Evidence) -> Half:
    return _ma_scaling(
        ev,
        lambda ev, runs, alone, p: _against(
            ev,
            runs,
            f"MA P={p}",
            alone,
            "MA alone",
            matches(SU15_LOSS, f"within su15's own loss ({100 * SU15_LOSS:.1f}%) of MA alone"),
        ),
    )


def _su15_speed(ev: Evidence) -> Half:
    claimed = {16: 9.3, 32: 17.0}
    return _ma_scaling(
        ev,
        lambda ev, runs, alone, p: _said(
            reaches(runs, claimed[p], "own_speedup", "speedup over MA alone"), f"MA P={p}"
        ),
    )


def _failed(runs: pd.DataFrame) -> pd.Series:
    """Which runs did not converge at their batch: diverged, or stopped by their schedule before
    their best model transcribed (newbob halved and ended them on CTC's first plateau). One such
    seed is enough for a batch not to converge."""
    return diverged(runs) | (runs.converged_by == "untrained")


def _batch_states(
    ev: Evidence, swept: pd.DataFrame, seq: pd.DataFrame
) -> dict[int, tuple[str, str, str]]:
    """Each global batch of a sweep: NOT_REPRODUCED where a run failed to converge (`_failed`,
    said beside it), else whether its runs match SEQ's accuracy (a run still gaining by its bound:
    asrscale.analysis.halves.compare), with the reason of a batch not decided."""
    states = {}
    for batch, group in swept.groupby("global_batch"):
        if (failed := _failed(group).sum()) > 0:
            note = f" ({failed} of {len(group)} runs did not converge)"
            states[batch] = (NOT_REPRODUCED, note, "")
        else:
            half = compare(ev.utterances, group, seq, matches())
            states[batch] = (half.outcome, "", half.reason)
    return states


def _undecided_edge(states: dict[int, tuple[str, str, str]], edge: int | None) -> Half | None:
    """A half not decided where a batch above SSGD's edge (`edge`: the largest batch at which it
    matches SEQ, None where none does) and below its first loss is itself not decided: the edge
    could lie there."""
    losses = [b for b, (state, *_) in states.items() if state == NOT_REPRODUCED]
    first_loss = min((b for b in losses if edge is None or b > edge), default=float("inf"))
    open_ = [
        (b, reason)
        for b, (state, _, reason) in states.items()
        if state == NOT_DECIDED and (edge is None or b > edge) and b < first_loss
    ]
    if not open_:
        return None
    reason = "under-trained" if any(r == "under-trained" for _, r in open_) else open_[0][1]
    batches = ", ".join(f"{b:,.0f}" for b, _ in open_)
    why = (
        f"SSGD's match with SEQ is not decided at a global batch of {batches}: its edge could lie "
        "there"
    )
    return Half(NOT_DECIDED, why, "", reason)


def _larger_batch(ev: Evidence) -> Half:
    """zhang19b: ADPSGD matches SEQ's accuracy at 3× the largest global batch at which SSGD does,
    where SSGD does not at a larger batch swept. A swept run that did not converge at its batch
    (`_failed`) is a loss of SEQ's accuracy there, the claim's very "does not converge"; one still
    gaining is judged by its bound, and a batch it leaves undecided where SSGD's edge could lie
    leaves the half undecided."""
    ssgd, adpsgd = (
        _swept(ev.points, "ssgd", "train.batch_size"),
        _swept(ev.points, "adpsgd", "train.batch_size"),
    )
    seq = baseline(ev.runs)
    if ssgd.empty or adpsgd.empty or seq.empty:
        return missing(
            "needs sweeps of train.batch_size for ssgd and adpsgd (study.sweeps), and SEQ"
        )
    if (fewest := min(ssgd.learners.min(), adpsgd.learners.min())) < LARGE_BATCH_LEARNERS:
        return missing(
            f"needs the sweeps at {LARGE_BATCH_LEARNERS} learners or more (zhang19b's batches are "
            "global, "
            f"over many learners), not {fewest}"
        )
    late = blocked(
        ("SEQ", seq),
        *(
            (f"{name} at global batch {b}", g[~_failed(g)])
            for name, swept in (("SSGD", ssgd), ("ADPSGD", adpsgd))
            for b, g in swept.groupby("global_batch")
        ),
    )
    if late:
        return late
    states = {"SSGD": _batch_states(ev, ssgd, seq), "ADPSGD": _batch_states(ev, adpsgd, seq)}
    measured = "; ".join(
        f"{name} by global batch, against SEQ's accuracy: "
        + ", ".join(f"{b}: {state}{note}" for b, (state, note, _) in found.items())
        for name, found in states.items()
    )
    holds = [b for b, (state, *_) in states["SSGD"].items() if state == REPRODUCED]
    if undecided := _undecided_edge(states["SSGD"], max(holds, default=None)):
        return dataclasses.replace(undecided, measured=measured)
    if not holds:
        return Half(
            NOT_TESTABLE,
            "SSGD matches SEQ at no batch swept: sweep smaller batches",
            measured,
            "the sweep has no edge",
        )
    edge = max(holds)
    if not any(state == NOT_REPRODUCED for b, (state, *_) in states["SSGD"].items() if b > edge):
        return Half(
            NOT_TESTABLE,
            f"SSGD is not shown to lose SEQ's accuracy above {edge}: sweep larger batches",
            measured,
            "the sweep has no edge",
        )
    beyond = [b for b in states["ADPSGD"] if b >= 3 * edge]
    if not beyond:
        return Half(
            NOT_TESTABLE,
            f"no ADPSGD run at a global batch of {3 * edge} or more",
            measured,
            "the sweep has no edge",
        )
    state, note, reason = states["ADPSGD"][min(beyond)]
    why = f"SSGD matches SEQ up to a global batch of {edge}; ADPSGD at {min(beyond)}: {state}{note}"
    return Half(state, why, measured, reason)


def verdicts(
    table: pd.DataFrame,
    points: pd.DataFrame,
    utterances: pd.DataFrame,
    claims: tuple["Claim", ...] | None = None,
) -> pd.DataFrame:
    """One row per claim (per kind of speedup, when a study has runs timed both ways): the study,
    the claim, each half's rule, what was measured, its verdict and why, and the claim's verdict.
    `table`: every run; `points`: the sweeps' points, each joined with its runs; `utterances`: every
    run's word errors per test utterance; `claims`: these alone (every claim by default)."""
    rows = []
    for kind, runs in table[table.variant == "default"].groupby("speedup_kind", sort=True):
        ev = Evidence(runs, points[points.speedup_kind == kind], utterances)
        for claim in CLAIMS if claims is None else claims:
            row = {
                "study": claim.study,
                "claim": claim.claim,
                "speedups": kind,
                "decided_by": claim.decided_by,
            }
            halves = []
            for name, rule, decide in (
                ("accuracy", claim.accuracy_rule, claim.accuracy),
                ("speed", claim.speed_rule, claim.speed),
            ):
                half = decide(ev) if decide else None
                halves += [half] if half else []
                row |= {
                    f"{name}_rule": rule,
                    name: half.verdict if half else "",
                    f"{name}_measured": half.measured if half else "",
                    f"{name}_why": half.why if half else "",
                }
            row["verdict"] = combine([half.outcome for half in halves])
            rows.append(row)
    return pd.DataFrame(rows)


MATCHES = (
    "the relative WER difference's 95% interval (over speakers and seeds, 3 seeds each or more, "
    "with the LM) below +{margin:g}%, not reproduced where it lies at or above it"
)
SPEED = (
    "measured on GPUs over 3 seeds: the mean's 95% interval at or above "
    f"{100 * (1 - SPEED_MARGIN):.0f}% of "
    "{claimed}, not reproduced where below it"
)

CLAIMS = (
    Claim(
        "cong17",
        "ASGD's overhead is significant and its accuracy poor, even with 4 GPUs",
        "ASGD at 4 learners (or the fewest above) less accurate than SEQ beyond 3%: the relative "
        "WER difference's interval above +3%, not reproduced where at or below it; KAVG said "
        "beside",
        f"ASGD's efficiency (speedup / P), measured on GPUs over 3 seeds: its 95% interval below "
        f"{ASGD_EFFICIENCY:g}, not reproduced where at or above it",
        _asgd_accuracy,
        _asgd_overhead,
        "asgd-at-4",
    ),
    Claim(
        "cong17",
        "KAVG with 4 learners matches SEQ accuracy",
        "KAVG P=4 against SEQ: " + MATCHES.format(margin=3),
        "",
        partial(_seq_accuracy, "kavg", 4),
        None,
        "claims-at-4",
    ),
    Claim(
        "cong17",
        "adaptive KAVG scales to 20 learners (6.1×) with better accuracy than SEQ",
        f"KAVG P=20 against SEQ, {ACCURACY_SEEDS} seeds each: more accurate, the relative WER "
        "difference's interval "
        "below 0, not reproduced where at or above 0",
        "the speedup to SEQ's accuracy (time until SEQ's best dev loss, SEQ's over KAVG's), "
        + SPEED.format(claimed="6.1×"),
        _adaptive_kavg_accuracy,
        _adaptive_kavg_speed,
        "kavg-at-20",
    ),
    Claim(
        "zhang13",
        "ASGD gives 3.2× on 4 GPUs without loss",
        "ASGD P=4 against SEQ: " + MATCHES.format(margin=3),
        "ASGD P=4's speedup over SEQ for the same epochs, " + SPEED.format(claimed="3.2×"),
        partial(_seq_accuracy, "asgd", 4),
        partial(_speed, "asgd", 4, 3.2),
        "asgd-at-4",
    ),
    Claim(
        "rosc17",
        "there is an optimal range of averaging periods",
        "in a sweep of MA's frames_per_job over 3 or more values, every run converged: an inner "
        "value more accurate than both ends (over speakers and seeds, below 0), not reproduced "
        "where an end is more accurate than every inner value",
        "",
        _optimal_period,
        None,
        "averaging",
    ),
    Claim(
        "rosc17",
        "MPI ranks with data loading overlapped cut training time by 54.9% (against Kaldi's "
        "scripts)",
        "",
        "against Kaldi's own scripts on the same GPUs, which asrscale does not run: not testable "
        "here",
        None,
        _overlap_saving,
        "averaging",
    ),
    Claim(
        "povey14, su15",
        "NG-SGD makes averaging work",
        "MA with NG-SGD against MA without at the same learners (a sweep of natural_gradient): "
        "more accurate, the relative WER difference's interval below 0, not reproduced where at or "
        "above 0",
        "",
        _natural_gradient,
        None,
        "averaging",
    ),
    Claim(
        "su15",
        "model averaging gives 9.3× at 16 and 17× at 32 with limited accuracy loss",
        "MA P=16 and P=32 each against MA alone (su15's baseline), within su15's own loss: "
        + MATCHES.format(margin=100 * SU15_LOSS),
        "the speedup over MA alone for the same epochs at 16 and 32, "
        + SPEED.format(claimed="9.3× and 17×"),
        _su15_accuracy,
        _su15_speed,
        "averaging-scaled",
    ),
    Claim(
        "zhang19",
        "ADPSGD on 32 GPUs: ~14.6× without loss (one week to 11.5 h on 32 V100)",
        "ADPSGD P=32 against SEQ: " + MATCHES.format(margin=3),
        "ADPSGD P=32's speedup over SEQ for the same epochs, " + SPEED.format(claimed="14.6×"),
        partial(_seq_accuracy, "adpsgd", 32),
        partial(_speed, "adpsgd", 32, 14.6),
        "adpsgd-at-32",
    ),
    Claim(
        "zhang19b",
        "ADPSGD converges at 3× the SSGD global batch",
        f"sweeps of train.batch_size at {LARGE_BATCH_LEARNERS} learners or more, every run "
        "converged or failed to (diverged, or stopped by newbob before it transcribed: a batch "
        "where one run failed does not match SEQ): the largest global batch at which SSGD matches "
        "SEQ (over speakers and seeds, 3%), where it does not at a larger one; ADPSGD matches SEQ "
        "at 3× that batch, not reproduced where it does not",
        "",
        _larger_batch,
        None,
        "large-batch",
    ),
    Claim(
        "zhang19b",
        "H-ADPSGD on 64 GPUs: 40× without WER loss",
        "H-ADPSGD P=64 against SEQ: " + MATCHES.format(margin=3),
        "H-ADPSGD P=64's speedup over SEQ for the same epochs, "
        + SPEED.format(claimed="40× (its abstract)"),
        partial(_seq_accuracy, "hadpsgd", 64),
        partial(
            _speed,
            "hadpsgd",
            64,
            40.0,
            context=" (its own timings give 32×, one week on one V100, to 37×, 192 h at batch 256)",
        ),
        "scaled-64",
    ),
    Claim(
        "chen16",
        "BMUF: almost linear speedup without loss of accuracy against one GPU's SGD, up to 16 GPUs "
        "(BLSTM; 64 for a DNN)",
        "BMUF P=16 against SEQ: "
        + MATCHES.format(margin=3)
        + "; beside it, BMUF against KAVG (and MA) at the "
        "same learners, and at 64 against SEQ and those",
        "BMUF P=16's speedup over SEQ for the same epochs, "
        + SPEED.format(claimed="16× (almost linear)"),
        _bmuf_accuracy,
        partial(_speed, "bmuf", 16, 16.0),
        "bmuf",
    ),
)
