"""Which claims' halves a study can decide, before it runs: each claim is decided by its own rules
(asrscale.analysis.claims) on the study's runs as planned, each as if it converged, at one WER
with a little noise a run, the speedup of perfect scaling, measured where its world would measure
it (real ranks on GPUs) and modelled elsewhere. A half the plan leaves undecided for a reason that
no result can change (its runs not in the study, too few seeds, a speed half without GPUs or beyond
what its learners can give, newbob's epochs of unequal updates) cannot be decided by this study;
any other half can, if its runs converge and its interval is narrow enough.
"""

import math
from pathlib import Path

import numpy as np
import pandas as pd

from asrscale.analysis.claims import verdicts
from asrscale.analysis.convergence import FINISHED, plateau
from asrscale.analysis.halves import (
    ACCURACY_SEEDS,
    NOT_DECIDED,
    NOT_MEASURED,
    NOT_TESTABLE,
    SPEED_SEEDS,
)
from asrscale.analysis.measures import curves_of, trained
from asrscale.analysis.records import reassessed, record_config
from asrscale.config.algorithms import algorithm_spec
from asrscale.config.study import TUNED, Study
from asrscale.training.schedule import last_factor

#: the reasons of a half that the study's configuration fixes, whatever its runs measure (a sweep
#: with no edge, say, is not: it depends on the accuracies measured)
FIXED = (
    NOT_MEASURED,
    f"needs {ACCURACY_SEEDS} seeds",
    f"needs {SPEED_SEEDS} seeds",
    "needs GPUs",
    "newbob's epochs unequal",
    "beyond ",
    "no Kaldi scripts to compare with",
)
PLACEHOLDER_WER = 0.15
PLACEHOLDER_SPEAKERS, PLACEHOLDER_UTTERANCES = (
    20,
    200,
)  # a placeholder test set: what a half decides on


def planned_runs(study: Study, training_utterances: int) -> pd.DataFrame:
    """The runs table the study would gather (asrscale.analysis.gather), every run converged by its
    schedule at `PLACEHOLDER_WER`, with its updates as configured (a tuned run at its untuned
    settings: its choice is not known yet)."""
    rows = []
    for run in study.runs():
        trained = study.trained_as(run)
        train = study.run_settings(trained)["train"]
        steps = math.ceil(training_utterances / (run.learners * train["batch_size"]))
        measured = run.world == "mpi" and study.device != "cpu"
        rows.append(
            {
                "algorithm": run.algorithm,
                "variant": run.variant,
                "learners": run.learners,
                "seed": run.seed,
                "world": run.world,
                "device": "cuda" if measured else "cpu",
                "speedup_kind": "measured" if measured else f"modelled on {study.hardware}",
                "wer": PLACEHOLDER_WER,
                "greedy_wer": 2 * PLACEHOLDER_WER,
                "converged": True,
                "converged_by": "schedule",
                "diverged": "",
                "stopped": "",
                "epochs": train["epochs"],
                "last_rate": last_factor(train),
                "updates": steps * train["epochs"],
                "schedule": train["schedule"],
                "corpus": study.config["corpus"]["name"],
                "best_dev_loss": 1.0,
                "target_dev_loss": 1.0,
                "global_batch": train["batch_size"]
                * (run.learners if algorithm_spec(run.algorithm).combines_learners else 1),
                "tuning": "tuned" if trained.variant == TUNED else None,
                "run": study.folder(run),
                "parameters": 0,
                "gpu": "",
                "hostname": "",
            }
        )
    table = pd.DataFrame(rows)
    speedups = {
        "time_speedup": table.learners.astype(float),
        "own_speedup": table.learners.astype(float),
        "accuracy_speedup": table.learners.astype(float),
        "accuracy_epochs_ratio": 1.0,
        "efficiency": 1.0,
    }
    table = table.assign(**speedups)
    bands = {
        f"{name}_{edge}": table[name]
        for name in ("time_speedup", "own_speedup", "accuracy_speedup")
        for edge in ("low", "high")
    }
    return table.assign(**bands)


def placeholder_scores(table: pd.DataFrame) -> pd.DataFrame:
    """Each run's word errors on a placeholder test set: the same WER a run, with noise of its
    own."""
    utterances = [f"s{i % PLACEHOLDER_SPEAKERS:02d}-{i:04d}" for i in range(PLACEHOLDER_UTTERANCES)]
    rows = []
    for index, run in enumerate(dict.fromkeys(table.run)):
        noise = np.random.default_rng(index).lognormal(0.0, 0.1, (2, len(utterances)))
        rows.append(
            pd.DataFrame(
                {
                    "run": run,
                    "utt": utterances,
                    "speaker": [utt.split("-")[0] for utt in utterances],
                    "words": 10,
                    "lm_errors": 10 * PLACEHOLDER_WER * noise[0],
                    "greedy_errors": 20 * PLACEHOLDER_WER * noise[1],
                }
            )
        )
    return pd.concat(rows, ignore_index=True)


def decidable(study: Study, training_utterances: int) -> pd.DataFrame:
    """One row per claim half: its claim, the half, whether this study can decide it and, where it
    cannot, why (the half's own words); the kind of speedup where the study has both kinds."""
    table = planned_runs(study, training_utterances)
    points = pd.DataFrame(
        study.sweep_points(),
        columns=["sweep", "algorithm", "learners", "value", "variant", "world"],
    )
    points = points.merge(table, on=["algorithm", "variant", "learners", "world"])
    found = verdicts(table, points, placeholder_scores(table))
    rows = []
    for claim in found.itertuples():
        for half in ("accuracy", "speed"):
            verdict = getattr(claim, half)
            if not verdict:
                continue
            fixed = any(
                verdict.startswith(f"{outcome}: {reason}")
                for outcome in (NOT_DECIDED, NOT_TESTABLE)
                for reason in FIXED
            )
            why = getattr(claim, f"{half}_why") if fixed else ""
            if verdict.endswith("needs GPUs"):  # its own words go on to the placeholder's speedups
                why = f"{why.split(';')[0]}; this study's runs are {claim.speedups}"
            why = why.replace(
                " (below)", ""
            )  # the report's words: the replay is beside the verdict there
            rows.append(
                {
                    "claim": f"{claim.study}: {claim.claim}",
                    "half": half,
                    "speedups": claim.speedups,
                    "can_decide": not fixed,
                    "why_not": why,
                }
            )
    return pd.DataFrame(rows)


#: a recorded run is like a planned one where it is the same algorithm at a global batch within
#: this factor of the planned one's
LIKE_BATCH = 2.0
#: a curve gaining this many times its measure's plateau an epoch is still steep: a schedule
#: annealed from there is unlikely to flatten it
STEEP = 5


def under_trained_risks(
    study: Study, training_utterances: int, recorded: pd.DataFrame | None = None
) -> list[str]:
    """Where the study's design is likely to leave its runs under-trained, each in words: a
    fixed-epoch schedule that stops above `convergence.FINISHED` of its peak rate (its runs cannot
    converge: docs/studies.md), and a configuration whose recorded likes (`recorded`:
    `recorded_gains` of records/) were still steep after as many updates a learner as it plans: a
    warning from their curves, not a verdict."""
    table = planned_runs(study, training_utterances)
    said = [
        f"{run.algorithm} at {run.learners}: its schedule stops at {100 * run.last_rate:.1f}% of "
        f"its peak rate, above {100 * FINISHED:g}%: its runs cannot converge (train.lr_final, or "
        "train.lr_decay)"
        for run in table.drop_duplicates(["algorithm", "learners"]).itertuples()
        if run.last_rate is not None and run.last_rate > FINISHED + 1e-9
    ]
    if recorded is None or recorded.empty:
        return said
    configurations = table.drop_duplicates(["algorithm", "learners", "global_batch"])
    return said + [
        risk for run in configurations.itertuples() if (risk := _steep_in_records(run, recorded))
    ]


def _steep_in_records(run, recorded: pd.DataFrame) -> str:
    """Why a planned configuration (`run`) may end under-trained by its recorded likes (on its own
    corpus), or "": the median of their recent gains at their last epoch within its updates a
    learner is steep."""
    like = recorded[
        (recorded.corpus == run.corpus)
        & (recorded.algorithm == run.algorithm)
        & (recorded.global_batch <= LIKE_BATCH * run.global_batch)
        & (recorded.global_batch >= run.global_batch / LIKE_BATCH)
    ]
    within = like[like.updates <= run.updates]
    if within.empty:
        return ""
    at = within.sort_values("updates").groupby(["study", "run"]).last()
    gain, steep = at.gain.median(), STEEP * at.plateau.median()
    if not gain > steep:
        return ""
    return (
        f"{run.algorithm} at {run.learners} (global batch {run.global_batch:,.0f}, "
        f"{run.updates:,.0f} updates a learner): {len(at)} recorded runs like it "
        f"({', '.join(sorted(set(at.index.get_level_values('study'))))}) were still gaining "
        f"{100 * gain:.2f}% an epoch (their median) after as many updates, {STEEP} times the "
        "plateau or more: it may end under-trained (more epochs, or a larger corpus)"
    )


def recorded_gains(records: list[Path]) -> pd.DataFrame:
    """Every recorded run's curve, epoch by epoch: its study, algorithm, global batch, the updates
    a learner up to each epoch, its recent gain there (asrscale.analysis.convergence) and its
    measure's plateau."""
    rows = []
    for record in records:
        config = record_config(record)
        runs = trained(reassessed(record, config))
        epochs = pd.read_csv(record / "epochs.tsv.gz", sep="\t").drop_duplicates(["run", "epoch"])
        updates = epochs.sort_values("epoch").groupby("run").step.cumsum()
        epochs = epochs.assign(updates=updates)
        for run, curve in curves_of(runs, epochs).items():
            found = runs[runs.run == run].iloc[0]
            mine = epochs[epochs.run == run].sort_values("epoch")
            rows += [
                {
                    "study": record.name,
                    "corpus": config["corpus"]["name"],
                    "run": run,
                    "algorithm": found.algorithm,
                    "global_batch": found.global_batch,
                    "updates": done,
                    "gain": curve.recent_gain(index),
                    "plateau": plateau(curve.measure),
                }
                for index, done in enumerate(mine.updates[: len(curve.values)])
            ]
    return pd.DataFrame(rows)
