"""The studies' claims (docs/studies.md), each decided from a study's own runs by a rule written out
here and shown in the report, in its study's own words: reproduced, not reproduced, not measured
in this study (saying what run is missing), or not decided (saying why: a run it rests on was
stopped by its budget before it converged, or diverged, or the claimed speedup lies within the
cost model's band). Every verdict says why.

Accuracy. "Matches" and "without loss" mean a mean test WER over seeds at most the reference's
times 1 + `WER_TOLERANCE` (3% relative: a 1,000-utterance test set's sampling error at 14% WER)
plus half the seeds' range of each (the spread: one seed has none), unless the study states its
own loss (su15: 3.4%, its 14.7% → 15.2% at 32 GPUs). "Better" means below beyond both spreads.
Both measures of accuracy must agree: WER decoded with the word LM (as the studies scored,
asrscale.decoding) and decoded greedily, by the acoustic model alone; where they do not, the
verdict says by which the claim holds ("not reproduced: holds with the LM only"), since an LM that
knows the test sentences can make any acoustic model look as good as SEQ. An accuracy claim rests
on converged runs only (asrscale.analysis.measures): a run stopped by its budget leaves it "not
decided: under-trained", with its updates per learner beside SEQ's.

Speed. A modelled speedup carries the cost model's band (asrscale.analysis.fit: the range of the
published speedups over the model's leave-one-out predictions), and a claimed speedup is reached
only where the band's lower edge reaches it, missed where its upper edge is below it, and not
decided between; a measured speedup's band is its seeds' range. A claim of both holds where both
halves hold; one half that fails is enough to say "not reproduced".
"""

from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd

from asrscale.analysis.measures import (
    ACCURACY,
    WER_TOLERANCE,
    baseline,
    below,
    diverged,
    keeps_accuracy,
    mean_spread,
    runs_of,
)  # fmt: skip

LARGE_BATCH_LEARNERS = 16  # zhang19b's larger-batch claim is about many learners' global batch
SEEDS_TO_BEAT = 3  # "better than sequential" is decided over this many seeds at least
SU15_LOSS = 0.034  # su15's own "limited accuracy loss": 14.7% → 15.2% WER at 32 GPUs
ASGD_EFFICIENCY = 0.75  # "the overhead is significant": below this efficiency (speedup / P)
ROSC17_SAVING = 0.549  # rosc17: 54.9% less time than Kaldi's scripts at 600k frames a job
SAVING_TOLERANCE = 0.25  # a saving within 25% of the claimed size reproduces it
REPRODUCED, NOT_REPRODUCED, NOT_MEASURED = "reproduced", "not reproduced", "not measured in this study"
UNDER_TRAINED, DIVERGED = "not decided: under-trained", "not decided: diverged"
WITHIN_BAND = "not decided: within the cost model's band"
HOLDS, FAILS = "holds", "fails"  # the state of one half of a claim (or one of the undecided verdicts)


@dataclass(frozen=True)
class Verdict:
    measured: str
    verdict: str
    why: str


@dataclass(frozen=True)
class Half:
    """One half of a claim (its speed, its accuracy): HOLDS, FAILS (`verdict` then says how it
    fails), or one of the undecided verdicts; and why."""

    state: str
    why: str
    verdict: str = NOT_REPRODUCED


@dataclass(frozen=True)
class Claim:
    study: str
    claim: str
    rule: str
    decide: Callable[[pd.DataFrame, pd.DataFrame], Verdict]  # (runs as configured, sweep points)
    decided_by: str  # the study of studies/ that decides it (STUDIES)


#: the studies of studies/ that decide the claims a study leaves undecided, with what each runs and
#: its wall time (docs/reproductions.md has every run of them)
STUDIES = {
    "claims-at-4": ("the claims at 4 learners, 3 seeds, each run trained until it converges",
                    "about 2 hours on 2 CPU cores"),
    "scaled-64": ("KAVG at 20 and H-ADPSGD at 64 learners, scaled down, trained until they converge",
                  "about 2 hours on 2 CPU cores"),
    "reproduction": ("every claim, 1 to 64 learners, with its sweeps and seeds", "sized for one GPU"),
}  # fmt: skip


NAMES = {"hadpsgd": "H-ADPSGD"}


def _name(algorithm: str) -> str:
    return NAMES.get(algorithm, algorithm.upper())


def _wers(runs: pd.DataFrame) -> str:
    """Mean WER with the LM and greedily, with their spreads over seeds."""
    (wer, spread), (greedy, greedy_spread) = mean_spread(runs.wer), mean_spread(runs.greedy_wer)
    if len(runs) == 1:
        return f"WER {100 * wer:.1f}% (greedy {100 * greedy:.1f}%)"
    return (f"WER {100 * wer:.1f}% ± {100 * spread:.1f} (greedy {100 * greedy:.1f}% ± {100 * greedy_spread:.1f}) "
            f"over {len(runs)} seeds")  # fmt: skip


def _band(runs: pd.DataFrame, column: str) -> tuple[float, float]:
    """The band of the runs' `column` speedup: the lowest low edge and highest high edge over seeds."""
    return runs[f"{column}_low"].min(), runs[f"{column}_high"].max()


def _speedup(runs: pd.DataFrame, column: str = "time_speedup") -> str:
    low, high = _band(runs, column)
    band = f" (band {low:.2f}-{high:.2f}×)" if high > low else ""
    return f"{runs[column].mean():.2f}×{band}"


def _describe(runs: pd.DataFrame, name: str, column: str = "time_speedup") -> str:
    if diverged(runs).all():
        return f"{name} P={runs.learners.iloc[0]}: diverged"
    return f"{name} P={runs.learners.iloc[0]}: {_wers(runs)}, {_speedup(runs, column)}"


def _kinds(table: pd.DataFrame) -> str:
    return " (" + ", ".join(sorted(table.speedup_kind.unique())) + ")"


def _missing(what: str) -> Verdict:
    return Verdict("", f"{NOT_MEASURED}: {what}", what)


def _untrained(table: pd.DataFrame, *groups: tuple[str, pd.DataFrame]) -> Half | None:
    """Why an accuracy claim cannot rest on these runs (SEQ's and `groups`), or None where every
    one converged: each that diverged, and each stopped by its budget, with its updates per
    learner against SEQ's to the target."""
    seq = baseline(table)
    runs = [("SEQ", seq), *groups]
    gone = [f"{name} P={r.learners.iloc[0]} diverged in {int(diverged(r).sum())} of {len(r)} runs"
            for name, r in runs if diverged(r).any()]  # fmt: skip
    if gone:
        return Half(DIVERGED, "; ".join(gone) + ": a lower rate", DIVERGED)
    late = [name for name, r in runs if not r.converged.all()]
    if not late:
        return None
    needed = seq.updates_to_target.max() if seq.converged.all() else float("nan")
    said = []
    for name, r in runs:
        if not r.converged.all():
            worst = r[~r.converged].iloc[0]
            said.append(f"{name} P={worst.learners} stopped by its budget after {worst.updates:.0f} updates a learner "
                        f"({worst.stopped}; its last epoch {100 * worst.last_epoch_gain:.1f}% below the best before, "
                        f"at {worst.last_rate:.2g} of its peak rate)")  # fmt: skip
    target = seq.target_dev_loss.iloc[0]
    seq_needed = f"; SEQ reached the target dev loss {target:.3g} in {needed:.0f} updates" if needed == needed else ""
    return Half(UNDER_TRAINED, "; ".join(said) + seq_needed + ": train longer (more epochs or data)", UNDER_TRAINED)


def _agreed(holds: dict[str, bool], what: str) -> Half:
    """An accuracy half by each measure of ACCURACY: it holds only where all agree."""
    if all(holds.values()):
        return Half(HOLDS, f"{what}, with the LM and greedily")
    by = [ACCURACY[measure] for measure, held in holds.items() if held]
    if by:
        return Half(FAILS, f"{what} {' and '.join(by)} only", f"{NOT_REPRODUCED}: holds {' and '.join(by)} only")
    return Half(FAILS, f"not {what}, with the LM or greedily")


def _reaches(runs: pd.DataFrame, claimed: float, column: str = "time_speedup", what: str = "speedup") -> Half:
    """Whether the runs' `column` speedup reaches a claimed one: by its band's lower edge."""
    low, high = _band(runs, column)
    if low >= claimed:
        return Half(HOLDS, f"the {what}'s band reaches {claimed:g}× ({low:.2f}-{high:.2f}×)")
    if not high >= claimed:  # NaN (a target never reached) misses it too
        return Half(FAILS, f"the {what}'s band is below {claimed:g}× ({low:.2f}-{high:.2f}×)")
    return Half(WITHIN_BAND, f"{claimed:g}× lies within the {what}'s band ({low:.2f}-{high:.2f}×)", WITHIN_BAND)


def _combine(measured: str, *halves: Half) -> Verdict:
    """A claim's verdict from its halves: one that fails decides; else one undecided; else reproduced."""
    for state in (FAILS, DIVERGED, UNDER_TRAINED, WITHIN_BAND):
        found = [half for half in halves if half.state == state]
        if found:
            return Verdict(measured, found[0].verdict, "; ".join(half.why for half in found))
    return Verdict(measured, REPRODUCED, "; ".join(half.why for half in halves))


def _largest(table: pd.DataFrame, algorithm: str, learners: list[int]) -> pd.DataFrame | None:
    present = [p for p in learners if not runs_of(table, algorithm, p).empty]
    return runs_of(table, algorithm, max(present)) if present else None


def _without_loss(algorithm: str, learners: int, claimed: float | None = None, context: str = ""):
    """The claim that `algorithm` at `learners` matches SEQ's accuracy and, where `claimed`, reaches
    that speedup for the same epochs; `context` is said beside what was measured."""

    name = _name(algorithm)

    def decide(table: pd.DataFrame, points: pd.DataFrame) -> Verdict:
        runs = runs_of(table, algorithm, learners)
        if runs.empty or baseline(table).empty:
            return _missing(f"no {name} run at {learners} learners, or no SEQ run")
        measured = _describe(runs, name) + f"; SEQ {_wers(baseline(table))}" + context + _kinds(runs)
        speed = [] if claimed is None else [_reaches(runs, claimed)]
        accuracy = _untrained(table, (name, runs)) or _agreed(keeps_accuracy(table, runs), "matches SEQ's accuracy")
        return _combine(measured, *speed, accuracy)

    return decide


def _adaptive_kavg(table: pd.DataFrame, points: pd.DataFrame) -> Verdict:
    """cong17: 6.1× on 20 GPUs, to an accuracy better than sequential (over `SEEDS_TO_BEAT` seeds)."""
    runs = _largest(table, "kavg", [16, 17, 18, 19, 20])
    seq = baseline(table)
    if runs is None or seq.empty:
        return _missing("no KAVG run at 16-20 learners, or no SEQ run")
    learners = runs.learners.iloc[0]
    fewest = min(runs.seed.nunique(), seq.seed.nunique())
    if fewest < SEEDS_TO_BEAT:
        return _missing(f"needs {SEEDS_TO_BEAT} seeds of KAVG at {learners} and of SEQ to say better (has {fewest})")
    where = "" if learners == 20 else f" (at {learners} learners: no run at 20)"
    ratio = runs.target_epochs_ratio.mean()
    measured = (_describe(runs, "KAVG", "target_speedup") + f" to the target dev loss in {ratio:.2g}× SEQ's epochs"
                + where + f"; SEQ {_wers(seq)}" + _kinds(runs))  # fmt: skip
    holds = {measure: below(runs[measure], seq[measure]) for measure in ACCURACY}
    accuracy = _untrained(table, ("KAVG", runs)) or _agreed(holds, "better than SEQ")
    return _combine(measured, _reaches(runs, 6.1, "target_speedup", "speedup to accuracy"), accuracy)


def _asgd_overhead(table: pd.DataFrame, points: pd.DataFrame) -> Verdict:
    """cong17: ASGD's overhead is significant and its accuracy poor, even with 4 GPUs; KAVG at
    the same learners is said beside it."""
    common = sorted(p for p in set(table[table.algorithm == "asgd"].learners) if p >= 4)
    if not common or baseline(table).empty:
        return _missing("no ASGD run at 4 learners or more, or no SEQ run")
    halves, said = [], []
    for p in common:
        asgd, kavg = runs_of(table, "asgd", p), runs_of(table, "kavg", p)
        said.append(_describe(asgd, "ASGD") + f", efficiency {asgd.time_speedup.mean() / p:.2f}"
                    + (f" (KAVG: {_describe(kavg, 'KAVG')})" if not kavg.empty else ""))  # fmt: skip
        low, high = (edge / p for edge in _band(asgd, "time_speedup"))
        if high < ASGD_EFFICIENCY:
            halves.append(Half(HOLDS, f"at {p}: efficiency below {ASGD_EFFICIENCY:g} ({low:.2f}-{high:.2f})"))
        elif low >= ASGD_EFFICIENCY:
            halves.append(Half(FAILS, f"at {p}: efficiency {low:.2f}-{high:.2f}, no significant overhead"))
        else:
            halves.append(Half(WITHIN_BAND, f"at {p}: {ASGD_EFFICIENCY:g} lies within its efficiency's band "
                                            f"({low:.2f}-{high:.2f})", WITHIN_BAND))  # fmt: skip
        poor = {measure: not kept for measure, kept in keeps_accuracy(table, asgd).items()}
        halves.append(_untrained(table, ("ASGD", asgd)) or _agreed(poor, f"at {p}: accuracy below SEQ's"))
    measured = "; ".join(said) + f"; SEQ {_wers(baseline(table))}" + _kinds(table)
    return _combine(measured, *halves)


def _ma_scaling(table: pd.DataFrame, points: pd.DataFrame) -> Verdict:
    """su15: 9.3× at 16 and 17× at 32 against MA at one GPU, with limited accuracy loss against
    that same run (its own 3.4%)."""
    claimed = {16: 9.3, 32: 17.0}
    found = {p: runs_of(table, "ma", p) for p in claimed if not runs_of(table, "ma", p).empty}
    alone = runs_of(table, "ma", 1)
    absent = ["1 learner"] * alone.empty + [f"{p} learners" for p in claimed if p not in found]
    if absent:
        return _missing(f"no MA run at {' and '.join(absent)} (su15's baseline is MA alone)")
    measured = "; ".join(f"{_describe(runs, 'MA', 'own_speedup')} against MA alone ({runs.time_speedup.mean():.2f}× "
                         "against SEQ)" for runs in found.values())  # fmt: skip
    measured += f"; MA alone {_wers(alone)}" + _kinds(table)
    speed = [_reaches(runs, claimed[p], "own_speedup", f"speedup at {p}") for p, runs in found.items()]
    groups = [("MA", alone), *((f"MA at {p}", runs) for p, runs in found.items())]
    late = _untrained(table, *groups)
    held = [keeps_accuracy(table, runs, alone, SU15_LOSS) for runs in found.values()]
    accuracy = late or _agreed({m: all(h[m] for h in held) for m in ACCURACY},
                               f"within su15's own loss ({100 * SU15_LOSS:.1f}%) of MA alone")  # fmt: skip
    return _combine(measured, *speed, accuracy)


def _swept(points: pd.DataFrame, algorithm: str, setting: str) -> pd.DataFrame:
    """The points of `algorithm`'s sweep of `setting` at the largest learner count swept."""
    found = points[(points.algorithm == algorithm) & (points.sweep == setting)]
    return found[found.learners == found.learners.max()]


def _by_value(points: pd.DataFrame, column: str, fmt: str) -> str:
    return ", ".join(f"{value}: {_format_spread(group[column], fmt)}" for value, group in points.groupby("value"))


def _format_spread(values: pd.Series, fmt: str) -> str:
    mean, spread = mean_spread(values)
    return format(mean, fmt) + (f" ± {format(spread, fmt)}" if len(values) > 1 else "")


def _optimal_period(runs: pd.DataFrame, points: pd.DataFrame) -> Verdict:
    swept = _swept(points, "ma", "frames_per_job")
    if swept.value.nunique() < 3:
        return _missing("needs a sweep of ma frames_per_job over 3 or more values (study.sweeps)")
    values = sorted(swept.value.unique())
    losses = {v: swept[swept.value == v].best_dev_loss for v in values}
    best = min(values, key=lambda v: losses[v].mean())
    ends = (values[0], values[-1])
    inside = best not in ends and all(below(losses[best], losses[end]) for end in ends)
    measured = (f"MA P={swept.learners.iloc[0]}, best dev loss by frames per job: "
                f"{_by_value(swept, 'best_dev_loss', '.3f')}; lowest at {best}")  # fmt: skip
    half = _untrained(runs, (f"MA at {best} frames per job", swept[swept.value == best]))
    return _combine(
        measured,
        half
        or Half(
            HOLDS if inside else FAILS,
            f"lowest at {best}, " + ("an inner value" if inside else "not inside beyond the spreads"),
        ),
    )


def _overlap_saving(runs: pd.DataFrame, points: pd.DataFrame) -> Verdict:
    """rosc17's 54.9% is the size of a saving against Kaldi's scripts: the sweep's saving must be
    of that size, not merely a saving."""
    swept = _swept(points, "ma", "train.prefetch")
    on, off = swept[swept.value > 0], swept[swept.value == 0]
    if on.empty or off.empty:
        return _missing("needs a sweep of ma train.prefetch with it on and off (study.sweeps)")
    per_epoch = {name: (group.train_s / group.epochs).mean() for name, group in (("on", on), ("off", off))}
    saving = 1 - per_epoch["on"] / per_epoch["off"]
    measured = (f"MA P={swept.learners.iloc[0]}: {per_epoch['on']:.3g} s an epoch with prefetch, "
                f"{per_epoch['off']:.3g} s without: {100 * saving:.1f}% less" + _kinds(swept))  # fmt: skip
    near = abs(saving - ROSC17_SAVING) <= SAVING_TOLERANCE * ROSC17_SAVING
    why = (f"{100 * saving:.1f}% against the claimed {100 * ROSC17_SAVING:.1f}% (within {100 * SAVING_TOLERANCE:.0f}% "
           "of its size to reproduce it); rosc17 measured against Kaldi's scripts, whose job launches and averaging "
           "through files asrscale's runs do not have: the cost model's table replays that comparison")  # fmt: skip
    return Verdict(measured, REPRODUCED if near else NOT_REPRODUCED, why)


def _natural_gradient(runs: pd.DataFrame, points: pd.DataFrame) -> Verdict:
    swept = _swept(points, "ma", "natural_gradient")
    on, off = swept[swept.value.map(bool)], swept[~swept.value.map(bool)]
    if on.empty or off.empty:
        return _missing("needs a sweep of ma natural_gradient with it on and off (study.sweeps)")
    measured = f"MA P={swept.learners.iloc[0]}, best dev loss by natural_gradient: " + _by_value(
        swept, "best_dev_loss", ".3f") + _kinds(swept)  # fmt: skip
    better = below(on.best_dev_loss, off.best_dev_loss)
    half = _untrained(runs, ("MA with natural_gradient true", on))
    return _combine(measured, half or Half(HOLDS if better else FAILS, "lower with NG-SGD beyond the spreads"
                                           if better else "not lower with NG-SGD beyond the spreads"))  # fmt: skip


def _larger_batch(runs: pd.DataFrame, points: pd.DataFrame) -> Verdict:
    """Converged: the mean best dev loss over seeds reaches the time-to-target dev loss."""
    ssgd, adpsgd = _swept(points, "ssgd", "train.batch_size"), _swept(points, "adpsgd", "train.batch_size")
    if ssgd.empty or adpsgd.empty:
        return _missing("needs sweeps of train.batch_size for ssgd and adpsgd (study.sweeps)")
    if (fewest := min(ssgd.learners.min(), adpsgd.learners.min())) < LARGE_BATCH_LEARNERS:
        return _missing(f"needs the sweeps at {LARGE_BATCH_LEARNERS} learners or more (zhang19b's batches are "
                        f"global, over many learners), not {fewest}")  # fmt: skip
    target = points.target_dev_loss.iloc[0]

    def converged(swept):
        means = swept.groupby("global_batch").best_dev_loss.mean()
        return means, sorted(means[means <= target].index)

    (ssgd_loss, ssgd_ok), (adpsgd_loss, adpsgd_ok) = converged(ssgd), converged(adpsgd)
    measured = (f"best dev loss by global batch (target {target:.3f}): SSGD "
                + ", ".join(f"{b}: {v:.3f}" for b, v in ssgd_loss.items()) + "; ADPSGD "
                + ", ".join(f"{b}: {v:.3f}" for b, v in adpsgd_loss.items()))  # fmt: skip
    if not ssgd_ok:
        return Verdict(measured, f"{NOT_MEASURED}: SSGD reaches the target at no batch swept", "")
    if ssgd_ok[-1] == ssgd_loss.index.max():
        return Verdict(measured, f"{NOT_MEASURED}: SSGD reaches the target at every batch swept; sweep larger ones", "")
    needed = 3 * ssgd_ok[-1]
    if adpsgd_loss.index.max() < needed:
        return Verdict(measured, f"{NOT_MEASURED}: no ADPSGD run at a global batch of {needed} or more", "")
    held = bool(adpsgd_ok) and adpsgd_ok[-1] >= needed
    why = f"SSGD reaches the target up to a global batch of {ssgd_ok[-1]}, ADPSGD " + (
        f"up to {adpsgd_ok[-1]}" if adpsgd_ok else "at none")  # fmt: skip
    return Verdict(measured, REPRODUCED if held else NOT_REPRODUCED, why)


CLAIMS = (
    Claim("cong17", "ASGD's overhead is significant and its accuracy poor, even with 4 GPUs",
          f"at every P ≥ 4 run: ASGD's efficiency (speedup / P) below {ASGD_EFFICIENCY:g} by its band's upper "
          f"edge, and its WER above SEQ's × {1 + WER_TOLERANCE:g} + spreads, with the LM and greedily; KAVG at the "
          "same P said beside it", _asgd_overhead, "claims-at-4"),
    Claim("cong17", "KAVG with 4 learners matches SEQ accuracy",
          f"WER(KAVG, 4) ≤ WER(SEQ) × {1 + WER_TOLERANCE:g} + spreads, with the LM and greedily",
          _without_loss("kavg", 4), "claims-at-4"),
    Claim("cong17", "adaptive KAVG scales to 20 learners (6.1×) with better accuracy than SEQ",
          f"at 20 learners (or the largest in 16-19, saying so), over {SEEDS_TO_BEAT} seeds or more: the speedup to "
          "SEQ's accuracy (time to the target dev loss) reaches 6.1× by its band's lower edge, and WER below SEQ's "
          "beyond both spreads, with the LM and greedily",
          _adaptive_kavg, "scaled-64"),
    Claim("zhang13", "ASGD gives 3.2× on 4 GPUs without loss",
          f"speedup(ASGD, 4) ≥ 3.2 by its band's lower edge and WER ≤ WER(SEQ) × {1 + WER_TOLERANCE:g} + spreads, "
          "with the LM and greedily", _without_loss("asgd", 4, 3.2), "claims-at-4"),
    Claim("rosc17", "there is an optimal range of averaging periods",
          "in the sweep of MA's frames_per_job (3 or more values), the best dev loss is lowest at an inner value, "
          "below both ends beyond the spreads", _optimal_period, "reproduction"),
    Claim("rosc17", "MPI ranks with data loading overlapped cut training time by 54.9% (against Kaldi's scripts)",
          f"MA's saving per epoch with train.prefetch > 0 against prefetch 0 within {100 * SAVING_TOLERANCE:.0f}% of "
          f"{100 * ROSC17_SAVING:.1f}% (its size, not its sign)", _overlap_saving, "reproduction"),
    Claim("povey14, su15", "NG-SGD makes averaging work",
          "MA's best dev loss with natural_gradient on below that with it off, beyond the spreads",
          _natural_gradient, "reproduction"),
    Claim("su15", "model averaging gives 9.3× at 16 and 17× at 32 with limited accuracy loss",
          "against MA at one learner, as su15 measured both: speedup(MA, 16) ≥ 9.3 and speedup(MA, 32) ≥ 17 by their "
          f"bands' lower edges, and at both WER ≤ WER(MA, 1) × {1 + SU15_LOSS:g} + spreads (su15's own loss, 14.7% "
          "→ 15.2%), with the LM and greedily", _ma_scaling, "reproduction"),
    Claim("zhang19", "ADPSGD on 32 GPUs: ~14.6× without loss (one week to 11.5 h on 32 V100)",
          f"speedup(ADPSGD, 32) ≥ 14.6 by its band's lower edge and WER ≤ WER(SEQ) × {1 + WER_TOLERANCE:g} + spreads, "
          "with the LM and greedily", _without_loss("adpsgd", 32, 14.6), "reproduction"),
    Claim("zhang19b", "ADPSGD converges at 3× the SSGD global batch",
          f"in the sweeps of train.batch_size at {LARGE_BATCH_LEARNERS} learners or more: converged = mean best dev "
          "loss at most the time-to-target dev loss; ADPSGD converges at 3× or more of the largest global batch at "
          "which SSGD converges", _larger_batch, "reproduction"),
    Claim("zhang19b", "H-ADPSGD on 64 GPUs: 40× without WER loss",
          f"speedup(H-ADPSGD, 64) ≥ 40 (its abstract) by its band's lower edge, and WER ≤ WER(SEQ) × "
          f"{1 + WER_TOLERANCE:g} + spreads, with the LM and greedily",
          _without_loss("hadpsgd", 64, 40.0, "; its own timings give 32× (one week on one V100) to 37× (192 h at batch "
                        "256) against 5.2 h"), "scaled-64"),
)  # fmt: skip


def verdicts(table: pd.DataFrame, points: pd.DataFrame) -> pd.DataFrame:
    """One row per claim (per kind of speedup, when a study has runs timed both ways): the study,
    the claim, its rule, what this study measured, the verdict and why. `table`: every run;
    `points`: the sweeps' points, each joined with its runs."""
    rows = []
    for kind, runs in table[table.variant == "default"].groupby("speedup_kind", sort=True):
        for claim in CLAIMS:
            verdict = claim.decide(runs, points[points.speedup_kind == kind])
            rows.append({"study": claim.study, "claim": claim.claim, "rule": claim.rule, "speedups": kind,
                         "measured": verdict.measured, "verdict": verdict.verdict, "why": verdict.why,
                         "decided_by": claim.decided_by})  # fmt: skip
    return pd.DataFrame(rows)
