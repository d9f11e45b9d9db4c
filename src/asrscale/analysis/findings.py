"""What a study found, as plain data for its report: every algorithm at every learner count at a
glance (WER with its interval, speedup, converged or why not), the best run, SEQ's baseline, per
learner count the fastest algorithm and which keep SEQ's accuracy, the claims' verdicts half by
half (`asrscale.analysis.claims`), what the study can decide, its cost, how it was timed and
decoded, and its environment. Every figure here comes from the measures of
`asrscale.analysis.measures` and the bootstrap of `asrscale.analysis.bootstrap`; a study of any
outcome has findings (every run diverged, none converged, no SEQ run)."""

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from asrscale.analysis.answer import answer
from asrscale.analysis.bootstrap import error_rate
from asrscale.analysis.claims import NOT_REPRODUCED, REPRODUCED, STUDIES, verdicts
from asrscale.analysis.halves import compare, matches
from asrscale.analysis.measures import (
    KEYS,
    baseline,
    best_run,
    beyond_p,
    by_learners,
    diverged,
    learner_hours,
    modelled_against_measured,
    runs_of,
    trained,
)
from asrscale.analysis.tables import Tables
from asrscale.data.corpus.speakers import variant_of

DECIDED = (REPRODUCED, NOT_REPRODUCED)  # the verdicts of a claim, or a half, decided


@dataclass(frozen=True)
class AtLearners:
    """The algorithms at one learner count, against SEQ timed the same way (`timing`: measured, or
    modelled on a profile): one clock at a time, never two pooled."""

    learners: int
    timing: str
    fastest: tuple[str, float] | None  # by time speedup within P (None: no run has one)
    beyond: list[
        tuple[str, float, str]
    ]  # time speedups beyond P, each with its cause: ranked nowhere
    to_target: tuple[str, float, float] | None  # the fastest to the target: speedup, learner-hours
    kept: list[str]  # converged, and match SEQ's accuracy with the LM (the claims' rule)
    late: list[str]  # stopped by their budget before they converged
    wer_change: list[tuple[str, float | None]]  # WER points against SEQ (None: diverged)


@dataclass(frozen=True)
class Findings:
    runs: pd.DataFrame  # every run, as gathered
    best: pd.Series | None  # the trained run of lowest WER (None: every run diverged)
    best_mean: (
        pd.Series | None
    )  # the configured algorithm and learner count of lowest mean WER over seeds
    seq: pd.DataFrame  # SEQ's runs as configured (empty: none in the study)
    target_dev_loss: float  # NaN where no SEQ run converged
    grid: pd.DataFrame  # every algorithm at every learner count (`grid`)
    at_learners: list[AtLearners]
    claims: pd.DataFrame
    answer: (
        pd.DataFrame
    )  # at each learner count, the algorithm recommended (asrscale.analysis.answer)
    trained: int  # the runs trained (not reported under another name), sweeps' included
    converged: int  # of those
    unconverged: dict[
        str, int
    ]  # of the others, how many by why not: "unfinished", "budget", "untrained" or "diverged"
    undecided: int  # claims not decided here
    decided: list[str]  # the claims decided here (reproduced or not)
    halves_decided: dict[str, tuple[int, int]]  # accuracy and speed: (halves decided here, halves)
    under_trained: list[
        str
    ]  # the claims whose accuracy half is not decided: a run still gaining could flip it
    elsewhere: list[
        tuple[str, str, str, list[str]]
    ]  # study, what it runs, its time, the accuracy halves it decides
    gone: pd.DataFrame  # the runs that diverged
    learner_hours: dict[str, float]  # per kind of timing
    shared: list[
        tuple[str, str]
    ]  # (algorithm, the one whose run it reports: SEQ's alone, SSGD's in one node)
    modelled_on: list[tuple[str, str]]  # (hardware profile, what its compute rests on)
    validation: pd.DataFrame  # runs made in both worlds
    published: (
        pd.DataFrame
    )  # the cost model's replays of the studies' own speedups (costmodel.validation)
    confusions: pd.DataFrame  # the best run's most frequent word errors
    sweeps: list[dict]  # each setting swept: the runs it varied, its values
    skipped: dict[str, int]  # utterances left out, by report
    lm: dict  # what the word LM knows of dev and test (asrscale.decoding.lm.report)
    config: dict
    config_digest: str


def analyse(
    tables: Tables, lm: dict, published: pd.DataFrame, skipped_reports: list[Path], config: dict
) -> Findings:
    runs = tables.runs.assign(lm_change=tables.runs.wer - tables.runs.greedy_wer)
    configured = runs[runs.variant == "default"]
    utterances = drawn_together(tables.utterances, config)
    claims = verdicts(runs, tables.points, utterances)
    answered = answer(runs, utterances, config.get("report", {}).get("target_wer"))
    decided = claims.verdict.isin(DECIDED)
    best = best_run(runs)
    return Findings(
        runs=runs,
        best=best,
        best_mean=_best_mean(configured),
        seq=baseline(configured),
        target_dev_loss=runs.target_dev_loss.iloc[0],
        grid=grid(configured, utterances),
        at_learners=at_learners(configured, utterances),
        claims=claims,
        answer=answered,
        trained=len(trained(runs)),
        converged=int(trained(runs).converged.sum()),
        unconverged=_unconverged(runs),
        undecided=int((~decided).sum()),
        decided=list(dict.fromkeys(claims[decided].claim)),
        halves_decided={
            half: (int(claims[half].isin(DECIDED).sum()), int((claims[half] != "").sum()))
            for half in ("accuracy", "speed")
        },
        under_trained=list(
            dict.fromkeys(claims[claims.accuracy.str.endswith("under-trained")].claim)
        ),
        elsewhere=_elsewhere(claims, config.get("study", {}).get("name")),
        gone=trained(runs)[diverged(trained(runs))],
        learner_hours=learner_hours(runs).to_dict(),
        shared=sorted(
            set(
                runs[runs.algorithm != runs.trained_as][["algorithm", "trained_as"]].itertuples(
                    index=False, name=None
                )
            )
        ),
        modelled_on=list(
            runs[runs.world == "simulated"][["hardware", "compute_basis"]]
            .drop_duplicates()
            .itertuples(index=False, name=None)
        ),
        validation=modelled_against_measured(runs),
        published=published,
        confusions=_confusions(tables.confusions, best),
        sweeps=_sweeps(tables.points),
        skipped={
            str(report): len(Path(report).read_text().splitlines()) - 1
            for report in skipped_reports
        },
        lm=lm,
        config=config,
        config_digest=hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()[:12],
    )


def drawn_together(utterances: pd.DataFrame, config: dict) -> pd.DataFrame:
    """The test utterances, each with its voice where the intervals draw voices (report.drawn; by
    default for the built-in corpus, whose test speakers are settings of a few held-out voices,
    e.g. claims-at-4's 160 of 12: drawn apart, they would pass for 160 independent voices). A
    record made before report.drawn (its config without it) is read as the default."""
    drawn = config.get("report", {}).get("drawn") or (
        "speakers" if "subsets" in config["corpus"] else "voices"
    )
    if drawn == "speakers" or "speaker" not in utterances:
        return utterances
    return utterances.assign(voice=utterances.speaker.map(variant_of))


def grid(table: pd.DataFrame, utterances: pd.DataFrame) -> pd.DataFrame:
    """Every algorithm at every learner count (runs as configured, seeds pooled), per kind of
    timing: its WER with the LM and its 95% interval (over the speakers and seeds: `error_rate`),
    its greedy WER, its time speedup over SEQ (with its band where modelled), what it cost (its
    learners × training time in device-hours, a seed's mean: `device_hours`), whether every seed
    converged (else why not: "budget", "untrained", "diverged") and whether it is the most accurate
    at its learner count (`best`)."""
    rows = []
    for (kind, algorithm, learners), runs in table.groupby(
        ["speedup_kind", "algorithm", "learners"], sort=True
    ):
        live = runs[~diverged(runs)]
        row = {"speedups": kind, "algorithm": algorithm, "learners": learners, "seeds": len(runs)}
        if live.empty:
            rows.append(row | {"wer": float("nan"), "why_not": "diverged"})
            continue
        wer = error_rate(utterances, live.run)
        late = runs[~runs.converged]
        why_not = ", ".join(sorted(set(late.converged_by)))
        why_not = "diverged" if diverged(runs).any() else why_not
        rows.append(
            row
            | {
                "wer": wer.estimate,
                "wer_low": wer.low,
                "wer_high": wer.high,
                "greedy_wer": live.greedy_wer.mean(),
                "speedup": live.time_speedup.mean(),
                "speedup_low": live.time_speedup_low.min(),
                "speedup_high": live.time_speedup_high.max(),
                "device_hours": (live.train_s * live.learners).mean() / 3600,
                "converged": not len(late),
                "why_not": why_not,
            }
        )
    found = pd.DataFrame(rows)
    if found.empty:
        return found
    lowest = found.groupby(["speedups", "learners"]).wer.transform("min")
    return found.assign(best=found.wer == lowest)


def at_learners(table: pd.DataFrame, utterances: pd.DataFrame) -> list[AtLearners]:
    """Per kind of timing and learner count, the algorithms against SEQ timed the same way (none
    where the study has no SEQ run of that kind): a measured speedup and a modelled one are never
    averaged, ranked or compared."""
    return [
        at
        for timing, runs in table.groupby("speedup_kind", sort=False)
        for at in _at_learners(runs, utterances)
    ]


def _at_learners(table: pd.DataFrame, utterances: pd.DataFrame) -> list[AtLearners]:
    """`at_learners` of runs all timed one way."""
    seq = baseline(table)
    if seq.empty or diverged(seq).all():
        return []
    means, found = by_learners(table).drop("seq", level=0, errors="ignore"), []
    for p, group in means.groupby(level="learners"):
        speedups, reached = group.speedup.dropna(), group.to_target.dropna()
        impossible = speedups[[beyond_p(x, p) for x in speedups]]
        speedups = speedups.drop(impossible.index)
        reached = reached.drop(impossible.index, errors="ignore")  # its times are as suspect
        first = reached.idxmax()[0] if not reached.empty else None
        runs = {a: runs_of(trained(table), a, p) for a, _ in group.index}
        late = [a for a, r in runs.items() if not r.converged.all()]
        kept = [
            a
            for a, r in runs.items()
            if a not in late
            and seq.converged.all()
            and compare(utterances, r, seq, matches()).outcome == REPRODUCED
        ]
        found.append(
            AtLearners(
                learners=int(p),
                timing=table.speedup_kind.iloc[0],
                fastest=(speedups.idxmax()[0], speedups.max()) if not speedups.empty else None,
                beyond=[
                    (a, x, _beyond_cause(runs[a], trained(seq))) for (a, _), x in impossible.items()
                ],
                to_target=(first, reached.max(), group.hours[first, p]) if first else None,
                kept=kept,
                late=late,
                wer_change=[
                    (a, None if pd.isna(w) else w - seq.wer.mean())
                    for (a, _), w in group.wer.items()
                ],
            )
        )
    return found


def _beyond_cause(runs: pd.DataFrame, seq: pd.DataFrame) -> str:
    """Why a time speedup beyond P was found: the rates its runs and SEQ's trained at, which runs,
    and what their times rest on."""
    learners = int(runs.learners.iloc[0])
    each, alone = runs.frames_per_s.mean() / learners, seq.frames_per_s.mean()
    rates = (
        f"each of its {learners} learners trained {each:,.0f} frames/s, {each / alone:.2g}× SEQ's "
        f"{alone:,.0f} (seeds {', '.join(map(str, sorted(runs.seed)))} against SEQ's "
        f"{', '.join(map(str, sorted(seq.seed)))})"
    )
    if runs.world.iloc[0] == "simulated":
        return (
            f"{rates}; modelled on {runs.compute_basis.iloc[0]}: a calibration timed while another "
            "process held the cores makes each learner's rate too fast against SEQ's (calibrate on "
            "a machine to itself)"
        )
    return (
        f"{rates}; measured: SEQ's own runs may have been slowed while they were timed (time them "
        "again on a quiet machine)"
    )


def _elsewhere(
    claims: pd.DataFrame, this_study: str | None
) -> list[tuple[str, str, str, list[str]]]:
    """The studies that decide the accuracy halves this one leaves undecided (claims.STUDIES), each
    with what it runs, its time and those claims."""
    left = claims[(claims.accuracy != "") & ~claims.accuracy.isin(DECIDED)]
    return [
        (study, *STUDIES[study], list(dict.fromkeys(group.claim)))
        for study, group in left.groupby("decided_by", sort=False)
        if study != this_study
    ]


def _sweeps(points: pd.DataFrame) -> list[dict]:
    return [
        {
            "setting": setting,
            "runs": ", ".join(
                f"{a} P={p}" for a, p in group.groupby("algorithm").learners.first().items()
            ),
            "values": ", ".join(dict.fromkeys(group.value.map(json.dumps))),
        }
        for setting, group in points.groupby("sweep", sort=True)
    ]


def _unconverged(runs: pd.DataFrame) -> dict[str, int]:
    """How many of the trained runs did not converge, by why not (a diverged run is diverged
    whatever its schedule did)."""
    runs = trained(runs)
    why_not = runs.converged_by.mask(diverged(runs), "diverged")[~runs.converged]
    return why_not.value_counts().sort_index().to_dict()


def _best_mean(table: pd.DataFrame) -> pd.Series | None:
    """The algorithm and learner count of lowest mean WER (named by its index), with its greedy
    WER."""
    means = by_learners(table).dropna(subset=["wer"])
    return None if means.empty else means.loc[means.wer.idxmin()]


def _confusions(confusions: pd.DataFrame, best: pd.Series | None, kept: int = 10) -> pd.DataFrame:
    """The most frequent word errors of the best run."""
    if best is None:
        return confusions.iloc[:0]
    return confusions.merge(best[KEYS].to_frame().T.astype(confusions[KEYS].dtypes), on=KEYS).head(
        kept
    )
