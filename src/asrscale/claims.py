"""The studies' claims (shared/reference/algorithms.md), each decided from a study's own runs by a
rule written out here and shown in the report: reproduced, not reproduced, or not measured in this
study (saying what run is missing).

Two rules serve every claim. Accuracy "matches" SEQ's when the mean test WER over seeds is at most
SEQ's plus `WER_TOLERANCE` plus half the seeds' range of each (the spread: one seed has none).
A claimed speedup is reached when the measured (or modelled) time speedup over SEQ is at least
`SPEEDUP_SHARE` of it: the studies ran other models on other hardware, so only the order of
magnitude can carry over.
"""

from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd

WER_TOLERANCE = 0.01  # one WER point, absolute
SPEEDUP_SHARE = 0.9
REPRODUCED, NOT_REPRODUCED, NOT_MEASURED = "reproduced", "not reproduced", "not measured in this study"


@dataclass(frozen=True)
class Verdict:
    measured: str
    verdict: str


@dataclass(frozen=True)
class Claim:
    study: str
    claim: str
    rule: str
    decide: Callable[[pd.DataFrame], Verdict]


NAMES = {"hadpsgd": "H-ADPSGD"}


def _runs(table: pd.DataFrame, algorithm: str, learners: int) -> pd.DataFrame:
    return table[(table.algorithm == algorithm) & (table.learners == learners)]


def _wer(runs: pd.DataFrame) -> tuple[float, float]:
    """Mean test WER over seeds, and half its range (the spread)."""
    return runs.wer.mean(), (runs.wer.max() - runs.wer.min()) / 2


def _matches_seq(table: pd.DataFrame, runs: pd.DataFrame) -> bool:
    (wer, spread), (seq_wer, seq_spread) = _wer(runs), _wer(table[table.algorithm == "seq"])
    return wer <= seq_wer + WER_TOLERANCE + spread + seq_spread


def _describe(runs: pd.DataFrame, name: str) -> str:
    wer, spread = _wer(runs)
    seeds = f" ± {100 * spread:.1f} over {len(runs)} seeds" if len(runs) > 1 else ""
    return f"{name} P={runs.learners.iloc[0]}: WER {100 * wer:.1f}%{seeds}, {runs.time_speedup.mean():.2f}×"


def _speed(table: pd.DataFrame) -> str:
    return " (" + ", ".join(sorted(table.speedup_kind.unique())) + ")"


def _missing(what: str) -> Verdict:
    return Verdict("", f"{NOT_MEASURED}: {what}")


def _sweep(what: str) -> Callable[[pd.DataFrame], Verdict]:
    return lambda table: _missing(f"needs {what}, which this study does not run")


def _accuracy_at(algorithm: str, learners: list[int], claimed: float | None = None):
    """The claim that `algorithm` at the largest of `learners` matches SEQ's accuracy (and reaches
    `claimed` speedup)."""

    name = NAMES.get(algorithm, algorithm.upper())

    def decide(table: pd.DataFrame) -> Verdict:
        present = [p for p in learners if not _runs(table, algorithm, p).empty]
        if not present or (table.algorithm == "seq").sum() == 0:
            return _missing(f"no {name} run at {' or '.join(map(str, learners))} learners, or no SEQ run")
        runs, seq = _runs(table, algorithm, max(present)), table[table.algorithm == "seq"]
        measured = _describe(runs, name) + f"; SEQ WER {100 * _wer(seq)[0]:.1f}%" + _speed(runs)
        fast = claimed is None or runs.time_speedup.mean() >= SPEEDUP_SHARE * claimed
        return Verdict(measured, REPRODUCED if fast and _matches_seq(table, runs) else NOT_REPRODUCED)

    return decide


def _asgd_against_kavg(table: pd.DataFrame) -> Verdict:
    common = sorted(p for p in set(table[table.algorithm == "asgd"].learners) if p >= 4
                    and not _runs(table, "kavg", p).empty)  # fmt: skip
    if not common:
        return _missing("no ASGD and KAVG runs at the same P ≥ 4")
    worse = []
    for p in common:
        asgd, kavg = _runs(table, "asgd", p), _runs(table, "kavg", p)
        (asgd_wer, asgd_spread), (kavg_wer, kavg_spread) = _wer(asgd), _wer(kavg)
        less_accurate = asgd_wer > kavg_wer + WER_TOLERANCE + asgd_spread + kavg_spread
        worse.append(less_accurate and asgd.time_speedup.mean() < kavg.time_speedup.mean())
    measured = "; ".join(f"{_describe(_runs(table, 'asgd', p), 'ASGD')} vs {_describe(_runs(table, 'kavg', p), 'KAVG')}"
                         for p in common)  # fmt: skip
    return Verdict(measured + _speed(table), REPRODUCED if all(worse) else NOT_REPRODUCED)


def _ma_speedups(table: pd.DataFrame) -> Verdict:
    claimed = {16: 9.3, 32: 17.0}
    found = {p: _runs(table, "ma", p) for p in claimed if not _runs(table, "ma", p).empty}
    measured = "; ".join(_describe(runs, "MA") for runs in found.values()) + (_speed(table) if found else "")
    if len(found) < len(claimed):
        absent = " and ".join(str(p) for p in claimed if p not in found)
        return Verdict(measured, f"{NOT_MEASURED}: no MA run at {absent} learners")
    reached = all(runs.time_speedup.mean() >= SPEEDUP_SHARE * claimed[p] for p, runs in found.items())
    return Verdict(measured, REPRODUCED if reached else NOT_REPRODUCED)


CLAIMS = (
    Claim("cong17", "ASGD loses accuracy and efficiency as P grows",
          "at every P ≥ 4 run with both: ASGD's WER above KAVG's (beyond tolerance and spread) and its speedup below",
          _asgd_against_kavg),
    Claim("cong17", "KAVG with 4 learners matches SEQ accuracy", "WER(KAVG, 4) ≤ WER(SEQ) + tolerance + spread",
          _accuracy_at("kavg", [4])),
    Claim("cong17", "adaptive KAVG scales to 20 learners (6.1×) with ≥ SEQ accuracy",
          "at the largest P in 16-20: speedup ≥ 0.9 × 6.1 and WER ≤ WER(SEQ) + tolerance + spread",
          _accuracy_at("kavg", [16, 17, 18, 19, 20], claimed=6.1)),
    Claim("zhang13", "ASGD gives 3.2× on 4 GPUs without loss",
          "speedup(ASGD, 4) ≥ 0.9 × 3.2 and WER ≤ WER(SEQ) + tolerance + spread", _accuracy_at("asgd", [4], 3.2)),
    Claim("rosc17", "there is an optimal range of averaging periods", "dev loss and WER lowest inside a period sweep",
          _sweep("a sweep of ma.frames_per_job")),
    Claim("rosc17", "overlapping data loading with compute cuts time", "MA total time with overlap below without",
          _sweep("MA with and without data overlap")),
    Claim("povey14, su15", "NG-SGD makes averaging work", "MA's WER with NG-SGD below MA's without",
          _sweep("MA with and without NG-SGD")),
    Claim("su15", "model averaging gives 9.3× at 16 and 17× at 32",
          "speedup(MA, 16) ≥ 0.9 × 9.3 and speedup(MA, 32) ≥ 0.9 × 17", _ma_speedups),
    Claim("zhang19b", "ADPSGD converges at 3× the SSGD global batch",
          "ADPSGD's final dev loss at 3× the largest global batch at which SSGD converges is within SSGD's",
          _sweep("SSGD and ADPSGD at growing global batch")),
    Claim("zhang19b", "H-ADPSGD on 64 GPUs: ~32× without WER loss",
          "speedup(H-ADPSGD, 64) ≥ 0.9 × 32 and WER ≤ WER(SEQ) + tolerance + spread",
          _accuracy_at("hadpsgd", [64], 32.0)),
)  # fmt: skip


def verdicts(table: pd.DataFrame) -> pd.DataFrame:
    """One row per claim (per kind of speedup, when a study has runs timed both ways): the study,
    the claim, its rule, what this study measured, the verdict."""
    rows = []
    for kind, runs in table.groupby("speedup_kind", sort=True):
        for claim in CLAIMS:
            verdict = claim.decide(runs)
            rows.append({"study": claim.study, "claim": claim.claim, "rule": claim.rule, "speedups": kind,
                         "measured": verdict.measured, "verdict": verdict.verdict})  # fmt: skip
    return pd.DataFrame(rows)
