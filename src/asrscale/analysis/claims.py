"""The studies' claims (docs/studies.md), each decided from a study's own runs by a
rule written out here and shown in the report: reproduced, not reproduced, not measured in this
study (saying what run is missing), or not decided (saying which runs did not converge, the
updates they had and what SEQ needed: an accuracy claim rests on converged runs only,
asrscale.analysis.measures).

Two rules serve every claim about the algorithms as configured. Accuracy "matches" SEQ's when the
mean test WER over seeds is at most SEQ's plus `WER_TOLERANCE` plus half the seeds' range of each
(the spread: one seed has none), by both measures of accuracy: WER decoded with the word LM, as the
studies scored (asrscale.decoding), and WER decoded greedily, by the acoustic model alone. An
accuracy claim holds only where the two agree; where they do not, its verdict says which one it
holds by ("not reproduced: holds with the LM only"), since an LM that knows the test sentences
can make any acoustic model look as good as SEQ. A claimed speedup is reached when the measured (or modelled) time
speedup over SEQ, its mean over seeds plus its spread, is at least `SPEEDUP_SHARE` of it: the
studies ran other models on other hardware, so only the order of magnitude can carry over. Claims
about a setting are decided from its sweep (study.sweeps): one value is better than another when
its mean is better by more than the spreads of both. Each claim is worded as its abstract words it:
cong17's adaptive KAVG claims better accuracy than SEQ (WER below SEQ's beyond both spreads), su15
its speedups with limited accuracy loss, measured against MA at one learner as su15 measured.
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

SPEEDUP_SHARE = 0.9
LARGE_BATCH_LEARNERS = 16  # zhang19b's larger-batch claim is about many learners' global batch
MODEL_TOLERANCE = 0.25  # a modelled speedup within 25% of a study's published one agrees with it
REPRODUCED, NOT_REPRODUCED, NOT_MEASURED = "reproduced", "not reproduced", "not measured in this study"
NOT_DECIDED = "not decided: did not converge"


@dataclass(frozen=True)
class Verdict:
    measured: str
    verdict: str


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
    "claims-at-4": ("the claims at 4 learners, 3 seeds", "about 80 minutes on 2 CPU cores"),
    "scaled-64": ("KAVG at 16 and H-ADPSGD at 64 learners, scaled down", "about 45 minutes on 2 CPU cores"),
    "reproduction": ("every claim, 1 to 64 learners, with its sweeps and seeds", "sized for one GPU"),
}


NAMES = {"hadpsgd": "H-ADPSGD"}


def _reaches(runs: pd.DataFrame, claimed: float, speedup: str = "time_speedup") -> bool:
    """Whether the runs' `speedup` (by default over SEQ) reaches `SPEEDUP_SHARE` of a claimed one,
    within their spread."""
    mean, spread = mean_spread(runs[speedup])
    return mean + spread >= SPEEDUP_SHARE * claimed


def _wers(runs: pd.DataFrame) -> str:
    """Mean WER with the LM and greedily, with their spreads over seeds."""
    (wer, spread), (greedy, greedy_spread) = mean_spread(runs.wer), mean_spread(runs.greedy_wer)
    if len(runs) == 1:
        return f"WER {100 * wer:.1f}% (greedy {100 * greedy:.1f}%)"
    return (f"WER {100 * wer:.1f}% ± {100 * spread:.1f} (greedy {100 * greedy:.1f}% ± {100 * greedy_spread:.1f}) "
            f"over {len(runs)} seeds")  # fmt: skip


def _describe(runs: pd.DataFrame, name: str) -> str:
    if diverged(runs).all():
        return f"{name} P={runs.learners.iloc[0]}: diverged"
    return f"{name} P={runs.learners.iloc[0]}: {_wers(runs)}, {runs.time_speedup.mean():.2f}×"


def _agreed(holds: dict[str, bool]) -> str:
    """The verdict of an accuracy claim by each measure of ACCURACY: it holds only where all agree."""
    if all(holds.values()):
        return REPRODUCED
    by = [ACCURACY[measure] for measure, held in holds.items() if held]
    return f"{NOT_REPRODUCED}: holds {' and '.join(by)} only" if by else NOT_REPRODUCED


def _speed(table: pd.DataFrame) -> str:
    return " (" + ", ".join(sorted(table.speedup_kind.unique())) + ")"


def _missing(what: str) -> Verdict:
    return Verdict("", f"{NOT_MEASURED}: {what}")


def _diverged(runs: pd.DataFrame) -> int:
    return int(diverged(runs).sum())


def _unconverged(table: pd.DataFrame, *groups: tuple[str, pd.DataFrame]) -> str | None:
    """Why an accuracy claim cannot rest on these runs, or None where SEQ and every run converged:
    each run that diverged, and each that did not converge, with its updates per learner and final
    dev loss, and what SEQ needed."""
    seq = baseline(table)
    if _diverged(seq):
        return f"SEQ diverged in {_diverged(seq)} of its {len(seq)} runs: lower train.lr"
    if not seq.converged.all():
        late = seq[~seq.converged].iloc[0]
        return (f"SEQ did not converge (in its last epoch its dev loss fell {100 * late.last_epoch_gain:.1f}%, "
                f"dev TER {100 * late.final_dev_ter:.0f}%): train it longer")  # fmt: skip
    diverged = [f"{name} P={runs.learners.iloc[0]} diverged in {_diverged(runs)} of {len(runs)} runs"
                for name, runs in groups if _diverged(runs)]  # fmt: skip
    late = [f"{name} P={runs.learners.iloc[0]} ({runs.updates.max():.0f} updates per learner, dev loss "
            f"{runs.final_dev_loss.mean():.3g}, its last epoch {100 * runs.last_epoch_gain.max():.1f}% below the best "
            f"before, dev TER {100 * runs.final_dev_ter.max():.0f}%)" for name, runs in groups
            if not _diverged(runs) and not runs.converged.all()]  # fmt: skip
    target, needed = seq.target_dev_loss.iloc[0], seq.updates_to_target.max()
    reasons = [f"{'; '.join(diverged)}: a lower rate"] if diverged else []
    if late:
        reasons.append(f"{'; '.join(late)} neither levelled off while transcribing nor reached the target dev loss "
                       f"{target:.3g}, which SEQ reached in {needed:.0f} updates: a longer run (more epochs or data), "
                       "or a rate that suits the learner count")  # fmt: skip
    return ". ".join(reasons) or None


def _swept(points: pd.DataFrame, algorithm: str, setting: str) -> pd.DataFrame:
    """The points of `algorithm`'s sweep of `setting` at the largest learner count swept."""
    found = points[(points.algorithm == algorithm) & (points.sweep == setting)]
    found = found[found.learners == found.learners.max()]
    return found


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
    losses = {v: swept[swept.value == v].final_dev_loss for v in values}
    best = min(values, key=lambda v: losses[v].mean())
    ends = (values[0], values[-1])
    inside = best not in ends and all(below(losses[best], losses[end]) for end in ends)
    by_value = _by_value(swept, "final_dev_loss", ".3f")
    measured = f"MA P={swept.learners.iloc[0]}, final dev loss by frames per job: {by_value}; lowest at {best}"
    if why := _unconverged(runs, (f"MA at {best} frames per job", swept[swept.value == best])):
        return Verdict(measured, f"{NOT_DECIDED}: {why}")
    return Verdict(measured, REPRODUCED if inside else NOT_REPRODUCED)


def _setting_helps(algorithm: str, setting: str, better: Callable, column: str, what: str, fmt: str,
                   accuracy: bool = False):  # fmt: skip
    """The claim that `algorithm` with `setting` at a value that `better` accepts has a lower
    `column` than at any other value of the sweep (an `accuracy` claim: on converged runs)."""

    def decide(runs: pd.DataFrame, points: pd.DataFrame) -> Verdict:
        swept = _swept(points, algorithm, setting)
        on, off = swept[swept.value.map(better)], swept[~swept.value.map(better)]
        if on.empty or off.empty:
            return _missing(f"needs a sweep of {algorithm} {setting} with it on and off (study.sweeps)")
        by_value = _by_value(swept, column, fmt)
        measured = f"{algorithm.upper()} P={swept.learners.iloc[0]}, {what} by {setting}: {by_value}" + _speed(swept)
        if accuracy and (why := _unconverged(runs, (f"{algorithm.upper()} with {setting} {on.value.iloc[0]}", on))):
            return Verdict(measured, f"{NOT_DECIDED}: {why}")
        return Verdict(measured, REPRODUCED if below(on[column], off[column]) else NOT_REPRODUCED)

    return decide


def _larger_batch(runs: pd.DataFrame, points: pd.DataFrame) -> Verdict:
    """Converged: the mean final dev loss over seeds reaches the time-to-target dev loss."""
    ssgd, adpsgd = _swept(points, "ssgd", "train.batch_size"), _swept(points, "adpsgd", "train.batch_size")
    if ssgd.empty or adpsgd.empty:
        return _missing("needs sweeps of train.batch_size for ssgd and adpsgd (study.sweeps)")
    if (fewest := min(ssgd.learners.min(), adpsgd.learners.min())) < LARGE_BATCH_LEARNERS:
        return _missing(f"needs the sweeps at {LARGE_BATCH_LEARNERS} learners or more (zhang19b's batches are "
                        f"global, over many learners), not {fewest}")  # fmt: skip
    target = points.target_dev_loss.iloc[0]

    def converged(swept):
        means = swept.groupby("global_batch").final_dev_loss.mean()
        return means, sorted(means[means <= target].index)

    (ssgd_loss, ssgd_ok), (adpsgd_loss, adpsgd_ok) = converged(ssgd), converged(adpsgd)
    measured = (f"final dev loss by global batch (target {target:.3f}): SSGD "
                + ", ".join(f"{b}: {v:.3f}" for b, v in ssgd_loss.items()) + "; ADPSGD "
                + ", ".join(f"{b}: {v:.3f}" for b, v in adpsgd_loss.items()))  # fmt: skip
    if not ssgd_ok:
        return Verdict(measured, f"{NOT_MEASURED}: SSGD reaches the target at no batch swept")
    if ssgd_ok[-1] == ssgd_loss.index.max():
        return Verdict(measured, f"{NOT_MEASURED}: SSGD reaches the target at every batch swept; sweep larger ones")
    needed = 3 * ssgd_ok[-1]
    if adpsgd_loss.index.max() < needed:
        return Verdict(measured, f"{NOT_MEASURED}: no ADPSGD run at a global batch of {needed} or more")
    return Verdict(measured, REPRODUCED if adpsgd_ok and adpsgd_ok[-1] >= needed else NOT_REPRODUCED)


def _accuracy_at(algorithm: str, learners: list[int], claimed: float | None = None, better: bool = False):
    """The claim that `algorithm` at the largest of `learners` matches SEQ's accuracy (`better`:
    beats it, below SEQ's WER beyond both spreads) and reaches `claimed` speedup."""

    name = NAMES.get(algorithm, algorithm.upper())

    def decide(table: pd.DataFrame, points: pd.DataFrame) -> Verdict:
        present = [p for p in learners if not runs_of(table, algorithm, p).empty]
        if not present or baseline(table).empty:
            return _missing(f"no {name} run at {' or '.join(map(str, learners))} learners, or no SEQ run")
        runs = runs_of(table, algorithm, max(present))
        measured = _describe(runs, name) + f"; SEQ {_wers(baseline(table))}" + _speed(runs)
        if why := _unconverged(table, (name, runs)):
            return Verdict(measured, f"{NOT_DECIDED}: {why}")
        fast = claimed is None or _reaches(runs, claimed)
        holds = ({measure: below(runs[measure], baseline(table)[measure]) for measure in ACCURACY} if better
                 else keeps_accuracy(table, runs))  # fmt: skip
        return Verdict(measured, _agreed(holds) if fast else NOT_REPRODUCED)

    return decide


def _asgd_against_kavg(table: pd.DataFrame, points: pd.DataFrame) -> Verdict:
    common = sorted(p for p in set(table[table.algorithm == "asgd"].learners) if p >= 4
                    and not runs_of(table, "kavg", p).empty)  # fmt: skip
    if not common:
        return _missing("no ASGD and KAVG runs at the same P ≥ 4")
    measured = "; ".join(
        f"{_describe(runs_of(table, 'asgd', p), 'ASGD')} vs {_describe(runs_of(table, 'kavg', p), 'KAVG')}"
        for p in common
    ) + _speed(table)
    # KAVG must have converged; ASGD not converging in the same training counts as less accurate
    if why := _unconverged(table, *(("KAVG", runs_of(table, "kavg", p)) for p in common)):
        return Verdict(measured, f"{NOT_DECIDED}: {why}")

    def worse(p: int, measure: str) -> bool:
        asgd, kavg = runs_of(table, "asgd", p), runs_of(table, "kavg", p)
        (asgd_wer, asgd_spread), (kavg_wer, kavg_spread) = mean_spread(asgd[measure]), mean_spread(kavg[measure])
        less_accurate = not asgd.converged.all() or asgd_wer > kavg_wer + WER_TOLERANCE + asgd_spread + kavg_spread
        return less_accurate and asgd.time_speedup.mean() < kavg.time_speedup.mean()

    return Verdict(measured, _agreed({measure: all(worse(p, measure) for p in common) for measure in ACCURACY}))


def _ma_speedups(table: pd.DataFrame, points: pd.DataFrame) -> Verdict:
    """su15 measured MA against its own one-GPU run (NG-SGD's cost in both): the speedup over MA at
    one learner decides; the one over SEQ is stated beside it."""
    claimed = {16: 9.3, 32: 17.0}
    found = {p: runs_of(table, "ma", p) for p in claimed if not runs_of(table, "ma", p).empty}
    measured = "; ".join(f"{_describe(runs, 'MA')} against SEQ, {runs.own_speedup.mean():.2f}× against MA alone"
                         for runs in found.values()) + (_speed(table) if found else "")  # fmt: skip
    absent = ["1 learner"] * runs_of(table, "ma", 1).empty + [f"{p} learners" for p in claimed if p not in found]
    if absent:
        return Verdict(measured, f"{NOT_MEASURED}: no MA run at {' and '.join(absent)} (su15's baseline is MA alone)")
    if not all(_reaches(runs, claimed[p], "own_speedup") for p, runs in found.items()):
        return Verdict(measured, NOT_REPRODUCED)
    # "with limited decoding accuracy loss": SEQ's accuracy within the tolerance, on converged runs
    if why := _unconverged(table, *((f"MA at {p}", runs) for p, runs in found.items())):
        return Verdict(measured, f"{NOT_DECIDED}: {why}")
    held = [keeps_accuracy(table, runs) for runs in found.values()]
    return Verdict(measured, _agreed({measure: all(h[measure] for h in held) for measure in ACCURACY}))


CLAIMS = (
    Claim("cong17", "ASGD loses accuracy and efficiency as P grows",
          "at every P ≥ 4 run with both: ASGD's WER above KAVG's (beyond tolerance and spread) and its speedup below; "
          "WER with the LM and greedily",
          _asgd_against_kavg, "claims-at-4"),
    Claim("cong17", "KAVG with 4 learners matches SEQ accuracy",
          "WER(KAVG, 4) ≤ WER(SEQ) + tolerance + spread, with the LM and greedily",
          _accuracy_at("kavg", [4]), "claims-at-4"),
    Claim("cong17", "adaptive KAVG scales to 20 learners (6.1×) with better accuracy than SEQ",
          "at the largest P in 16-20: speedup ≥ 0.9 × 6.1 and WER below WER(SEQ) beyond both spreads, with the LM "
          "and greedily",
          _accuracy_at("kavg", [16, 17, 18, 19, 20], claimed=6.1, better=True), "scaled-64"),
    Claim("zhang13", "ASGD gives 3.2× on 4 GPUs without loss",
          "speedup(ASGD, 4) ≥ 0.9 × 3.2 and WER ≤ WER(SEQ) + tolerance + spread, with the LM and greedily",
          _accuracy_at("asgd", [4], 3.2), "claims-at-4"),
    Claim("rosc17", "there is an optimal range of averaging periods",
          "in the sweep of MA's frames_per_job (3 or more values), the final dev loss is lowest at an inner value, "
          "below both ends beyond the spreads", _optimal_period, "reproduction"),
    Claim("rosc17", "overlapping data loading with compute cuts time",
          "MA's training time with train.prefetch > 0 below that with prefetch 0, beyond the spreads",
          _setting_helps("ma", "train.prefetch", lambda depth: depth > 0, "train_s", "training time (s)", ".3g"),
          "reproduction"),
    Claim("povey14, su15", "NG-SGD makes averaging work",
          "MA's final dev loss with natural_gradient on below that with it off, beyond the spreads",
          _setting_helps("ma", "natural_gradient", bool, "final_dev_loss", "final dev loss", ".3f", accuracy=True),
          "reproduction"),
    Claim("su15", "model averaging gives 9.3× at 16 and 17× at 32 with limited accuracy loss",
          "against MA at one learner, as su15 measured: speedup(MA, 16) ≥ 0.9 × 9.3 and speedup(MA, 32) ≥ 0.9 × 17, "
          "and at both WER ≤ WER(SEQ) + tolerance + spread, with the LM and greedily",
          _ma_speedups, "reproduction"),
    Claim("zhang19", "ADPSGD on 32 GPUs: ~14.6× without loss (one week to 11.5 h on 32 V100)",
          "speedup(ADPSGD, 32) ≥ 0.9 × 14.6 and WER ≤ WER(SEQ) + tolerance + spread, with the LM and greedily",
          _accuracy_at("adpsgd", [32], 14.6), "reproduction"),
    Claim("zhang19b", "ADPSGD converges at 3× the SSGD global batch",
          f"in the sweeps of train.batch_size at {LARGE_BATCH_LEARNERS} learners or more: converged = mean final dev "
          "loss at most the time-to-target dev loss; "
          "ADPSGD converges at 3× or more of the largest global batch at which SSGD converges",
          _larger_batch, "reproduction"),
    Claim("zhang19b", "H-ADPSGD on 64 GPUs: ~32× without WER loss (one week to 5.2 h; its abstract says 40×)",
          "speedup(H-ADPSGD, 64) ≥ 0.9 × 32 (the smaller of the two) and WER ≤ WER(SEQ) + tolerance + spread, with "
          "the LM and greedily",
          _accuracy_at("hadpsgd", [64], 32.0), "scaled-64"),
)  # fmt: skip


def verdicts(table: pd.DataFrame, points: pd.DataFrame) -> pd.DataFrame:
    """One row per claim (per kind of speedup, when a study has runs timed both ways): the study,
    the claim, its rule, what this study measured, the verdict. `table`: every run; `points`: the
    sweeps' points, each joined with its runs."""
    rows = []
    for kind, runs in table[table.variant == "default"].groupby("speedup_kind", sort=True):
        for claim in CLAIMS:
            verdict = claim.decide(runs, points[points.speedup_kind == kind])
            rows.append({"study": claim.study, "claim": claim.claim, "rule": claim.rule, "speedups": kind,
                         "measured": verdict.measured, "verdict": verdict.verdict,
                         "decided_by": claim.decided_by})  # fmt: skip
    return pd.DataFrame(rows)
