"""The answer a user came for: at each learner count, which algorithm reaches the target accuracy
in the least time, with its time, speedup and device-hours and what they rest on, and why each
other algorithm is not recommended. The target is SEQ's WER within the study's margin (a half of
"matches SEQ", asrscale.analysis.halves), or report.target_wer; only an algorithm whose reaching
it the rules decide is recommended: one not decided is named with why, never chosen."""

import pandas as pd

from asrscale.analysis.bootstrap import error_rate
from asrscale.analysis.halves import (
    NOT_DECIDED,
    NOT_REPRODUCED,
    REPRODUCED,
    WER_MARGIN,
    Half,
    blocked,
    bound_of,
    compare,
    matches,
)
from asrscale.analysis.measures import baseline, trained
from asrscale.config.algorithms import label

NONE = "none reaches the target"


def answer(runs: pd.DataFrame, utterances: pd.DataFrame, target_wer: float | None = None):
    """One row per kind of timing and learner count above 1 (the runs as configured): the
    algorithm recommended (or `NONE`), its time, speedup over SEQ with its band, device-hours, what
    they rest on, and each other algorithm with why not."""
    runs = trained(runs[runs.variant == "default"])
    rows = []
    for kind, timed in runs.groupby("speedup_kind", sort=True):
        seq = baseline(timed)
        for learners in sorted(set(timed.learners) - {1}):
            at = timed[timed.learners == learners]
            rows.append(_row(kind, learners, at, seq, utterances, target_wer))
    return pd.DataFrame(rows)


def target_of(target_wer: float | None) -> str:
    """The target, in words."""
    if target_wer is not None:
        return f"a test WER below {100 * target_wer:.1f}% (report.target_wer)"
    return f"SEQ's test WER within {100 * WER_MARGIN:g}% (relative)"


def _row(kind, learners, at, seq, utterances, target_wer) -> dict:
    reached, others = [], []
    for algorithm, runs in at.groupby("algorithm", sort=True):
        name = f"{label(algorithm)} P={learners}"
        half = _reaches(runs, seq, utterances, target_wer, name)
        if half.outcome == REPRODUCED:
            reached.append(runs)
        else:
            others.append(f"{name}: {_why_not(half)}")
    row = {"speedups": kind, "learners": learners, "target": target_of(target_wer)}
    if not reached:
        return row | {"algorithm": NONE, "others": "; ".join(others)}
    best = min(reached, key=lambda runs: runs.train_s.mean())
    for runs in reached:
        if runs is not best:
            others.insert(0, f"{label(runs.algorithm.iloc[0])} P={learners}: reaches it, slower")
    return row | {
        "algorithm": best.algorithm.iloc[0],
        "time_s": best.train_s.mean(),
        "speedup": best.time_speedup.mean(),
        "speedup_low": best.time_speedup_low.min(),
        "speedup_high": best.time_speedup_high.max(),
        "device_hours": (best.train_s * best.learners).mean() / 3600,
        "rests_on": _rests_on(best),
        "others": "; ".join(others),
    }


def _why_not(half: Half) -> str:
    """Why an algorithm is not recommended, in a few words with what it measured."""
    measured = half.measured.split(" relative")[0] if half.measured.startswith("WER") else ""
    said = half.verdict if half.outcome == NOT_DECIDED else "does not reach it"
    return f"{said} ({measured})" if measured else said


def _reaches(runs, seq, utterances, target_wer, name) -> Half:
    """Whether `runs` reach the target, as a half decides it."""
    if target_wer is None:
        if seq.empty:
            return Half(NOT_DECIDED, "no SEQ run", reason="no SEQ run")
        late = blocked(("SEQ", seq), (name, runs))
        return late or compare(utterances, runs, seq, matches(), "SEQ", name)
    late = blocked((name, runs))
    if late:
        return late
    wer = error_rate(utterances, runs.run)
    if wer.high < target_wer:  # more training could only lower it
        return Half(REPRODUCED, "")
    if wer.low * (1 - bound_of(runs)) >= target_wer:
        return Half(NOT_REPRODUCED, "")
    return Half(NOT_DECIDED, "", reason="the interval spans the target")


def _rests_on(runs: pd.DataFrame) -> str:
    kind = runs.speedup_kind.iloc[0]
    if kind.startswith("modelled"):
        return f"{kind} (the cost model's band), accuracy measured"
    return f"{kind} on {runs.gpu.iloc[0] or 'CPU'} ranks"


def answer_markdown(table: pd.DataFrame) -> list[str]:
    """The answer (`answer`'s table) as the lines of a Markdown table, for RESULTS.md."""
    if table.empty:
        return []
    lines = [
        f"The answer: at each learner count, the algorithm that reaches {table.target.iloc[0]} "
        "soonest (recommended only where this study's rules decide it reaches it).",
        "",
        "| timing | P | reaches the target soonest | training time | speedup over SEQ (band) | "
        "device-hours | the others |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in table.itertuples():
        if row.algorithm == NONE:
            cells = f"{NONE} | | | "
        else:
            cells = (
                f"**{label(row.algorithm)}** | {row.time_s:.3g} s | {row.speedup:.2f}× "
                f"({row.speedup_low:.2f}-{row.speedup_high:.2f}) | {row.device_hours:.3g} "
            )
        lines.append(f"| {row.speedups} | {row.learners} | {cells}| {row.others} |")
    return [*lines, ""]
