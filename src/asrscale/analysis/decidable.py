"""Which claims' halves a study can decide, before it runs: each claim is decided by its own rules
(asrscale.analysis.claims) on the study's runs as planned, each as if it converged, at one WER
with a little noise a run, the speedup of perfect scaling, measured where its world would measure
it (real ranks on GPUs) and modelled elsewhere. A half the plan leaves undecided for a reason that
no result can change (its runs not in the study, too few seeds, a speed half without GPUs or beyond
what its learners can give, newbob's epochs of unequal updates) cannot be decided by this study;
any other half can, if its runs converge and its interval is narrow enough.
"""

import math

import numpy as np
import pandas as pd

from asrscale.analysis.claims import verdicts
from asrscale.analysis.halves import (
    ACCURACY_SEEDS,
    NOT_DECIDED,
    NOT_MEASURED,
    NOT_TESTABLE,
    SPEED_SEEDS,
)
from asrscale.config.study import TUNED, Study

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
                "updates": steps * train["epochs"],
                "schedule": train["schedule"],
                "best_dev_loss": 1.0,
                "target_dev_loss": 1.0,
                "global_batch": run.learners * train["batch_size"],
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
