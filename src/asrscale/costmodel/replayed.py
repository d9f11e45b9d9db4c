"""The cost model's table of the studies' own figures, as every report shows it: for each published
speedup, what its facts are (complete, turning on a value nothing states, or not comparable), the
model's prediction with the fitted shared parameters, its prediction out of sample (fitted without
its system, from the fit's record), and their ratios; for a figure the model misses out of
sample, the single fact that would close the gap (its `unknown`, and the value at which the model
would agree). Your own setups in published.yaml's form are replayed the same way (not in the fit:
the fitted prediction is out of sample)."""

import math
from pathlib import Path

import pandas as pd

from asrscale.costmodel.fitted import PUBLISHED, TOLERANCE, digest, fitted_record
from asrscale.costmodel.validation import agreeing_value, load_figures, modelled_speedup
from asrscale.errors import UserError

COLUMNS = (
    "study",
    "figure",
    "learners",
    "facts",
    "published",
    "fitted",
    "held_out",
    "ratio",
    "agrees",
    "baseline",
    "assumptions",
    "history",
    "miss",
    "unknown",
    "assumed",
    "agrees_at",
)


def replayed_table(figures: Path | None = None) -> pd.DataFrame:
    """Each figure of published.yaml (or of `figures`, a file in its form) replayed on the fitted
    cost model with its structure; `ratio` is the out-of-sample prediction's over the published."""
    record = fitted_record()
    if figures is None and record["published_digest"] != digest():
        raise UserError(
            f"{PUBLISHED} changed since the cost model was fitted: run `asrscale fit-cost-model`"
        )
    held_out = {(row["study"], row["learners"]): row["held_out"] for row in record["figures"]}
    rows = []
    for figure in load_figures(figures or PUBLISHED, structure=record["structure"]):
        modelled = modelled_speedup(figure)
        out_of_sample = held_out[figure.study, figure.learners] if figures is None else modelled
        ratio = out_of_sample / figure.speedup
        agrees = abs(math.log(ratio)) <= math.log1p(TOLERANCE)
        agreeing = None if agrees else agreeing_value(figure)
        rows.append(
            {
                "study": figure.study,
                "figure": figure.figure,
                "learners": figure.learners,
                "facts": figure.facts,
                "published": figure.speedup,
                "fitted": round(modelled, 2),
                "held_out": out_of_sample,
                "ratio": round(ratio, 2),
                "agrees": agrees,
                "baseline": figure.baseline,
                "assumptions": " | ".join(figure.assumptions),
                "history": " | ".join(figure.history),
                "miss": figure.miss,
                "unknown": figure.unknown.what,
                "assumed": figure.assumed(),
                "agrees_at": float(f"{agreeing:.3g}") if agreeing is not None else None,
            }
        )
    return pd.DataFrame(rows, columns=COLUMNS)
