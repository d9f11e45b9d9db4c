"""One cost model for every study: what transports and software achieve of their hardware
(`asrscale.worlds.costmodel.Achieved`) fitted once over every published figure and su15's time
table together, and checked out of sample.

Each parameter is a property of a kind of hardware or software, the same wherever it occurs,
never of one figure: the share of a link's nominal bandwidth that TCP over Ethernet, MPI over
InfiniBand, NCCL over NVLink or PCIe, and copies between a GPU and host memory achieve; what
serving a gossip exchange costs a passive learner; how fast a node loads data where a study does
not say. Each has a prior from independent evidence (`PARAMETERS`), weak (a factor of
`PRIOR_WIDTH` is one standard deviation), so that a parameter no figure constrains stays where
the evidence puts it, and one that the figures do constrain is theirs.

The fit minimises, over the parameters' logarithms, the sum of squares of: each figure's
log(modelled / published) speedup in units of log(1 + `TOLERANCE`) (a miss of 25% is one
unit), each row of a time table's speedup the same way and its share of time inside MPI in
units of `SHARE_TOLERANCE` (5 points), and the priors. Leave-one-out: for each figure, the
parameters fitted without it (and without its study's time-table rows at its learner count)
predict it; the ratios of those predictions to the published figures are the model's
out-of-sample error, and their range is the band every modelled speedup carries (`Band`).
`asrscale fit-cost-model` writes the fit to src/asrscale/worlds/fitted.yaml, which every
simulated run and replay then reads.
"""

import hashlib
import math
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd
import yaml
from scipy.optimize import least_squares

from asrscale.analysis.validation import (
    PUBLISHED,
    Figure,
    TimeTable,
    load_figures,
    load_time_tables,
    modelled_rows,
    modelled_speedup,
)  # fmt: skip
from asrscale.errors import ConfigError
from asrscale.io import atomic_write_text
from asrscale.worlds.costmodel import FITTED, Achieved

TOLERANCE = 0.25  # a modelled speedup within 25% of a published one agrees with it
SHARE_TOLERANCE = 0.05  # a modelled share of time inside MPI within 5 points of a published one
PRIOR_WIDTH = 10.0  # a prior's standard deviation, as a factor


@dataclass(frozen=True)
class Parameter:
    """A shared parameter: where it sits in `Achieved` ("shares.<transport>", "serving",
    "node_data_frames_per_s"), its prior and bounds, and the independent evidence the prior rests on."""

    name: str
    prior: float
    bounds: tuple[float, float]
    evidence: str


#: the fit's parameters, in priors.yaml beside this module
PARAMETERS = tuple(
    Parameter(name, row["prior"], tuple(row["bounds"]), row["evidence"])
    for name, row in yaml.safe_load(resources.files("asrscale.analysis").joinpath("priors.yaml").read_text()).items()
)


def achieved_of(values: dict[str, float]) -> Achieved:
    """The `Achieved` of parameter values by name."""
    shares = {name.removeprefix("shares."): value for name, value in values.items() if name.startswith("shares.")}
    return Achieved(
        shares=shares,
        serving=values["serving"],
        node_data_frames_per_s=values["node_data_frames_per_s"],
        forward_share=values["forward_share"],
    )


@dataclass(frozen=True)
class Datum:
    """One published number the model must give: a figure's speedup, or a time-table row's
    speedup or share of time inside MPI; `figure` names the figure it is left out with."""

    what: str
    figure: str
    published: float
    kind: str  # "speedup" or "share"

    def residual(self, modelled: dict[str, float]) -> float:
        """The model's miss in units of its tolerance."""
        if self.kind == "share":
            return (modelled[self.what] - self.published) / SHARE_TOLERANCE
        return math.log(modelled[self.what] / self.published) / math.log1p(TOLERANCE)


def published_data(figures: list[Figure], tables: list[TimeTable]) -> list[Datum]:
    """Every figure's speedup; a time table's MPI share at every learner count, and its speedup
    where no figure of its study gives it (the figure's speedup is its own datum)."""
    if len({f.name for f in figures}) < len(figures):
        raise ConfigError(f"figures of one study at one learner count: {sorted(f.name for f in figures)}")
    data = [Datum(f"{f.name}: speedup", f.name, f.speedup, "speedup") for f in figures]
    for table in tables:
        named = {f.learners: f.name for f in figures if f.study == table.study}
        for learners in sorted(p for p in table.rows if p > 1):
            speedup, share = table.published(learners)
            figure = named.get(learners, f"{table.study} table, {learners}")
            data.append(Datum(f"{table.study} table, {learners}: MPI share", figure, share, "share"))
            if learners not in named:
                data.append(Datum(f"{table.study} table, {learners}: speedup", figure, speedup, "speedup"))
    return data


def modelled_values(figures: list[Figure], tables: list[TimeTable], achieved: Achieved) -> dict[str, float]:
    """What the model gives for every datum, by its name."""
    values = {f"{f.name}: speedup": modelled_speedup(f, achieved) for f in figures}
    for table in tables:
        for row in modelled_rows(table, achieved).itertuples():
            values[f"{table.study} table, {row.learners}: speedup"] = row.modelled_speedup
            values[f"{table.study} table, {row.learners}: MPI share"] = row.modelled_mpi_share
    return values


def _values(x: np.ndarray) -> dict[str, float]:
    return {p.name: float(math.exp(v)) for p, v in zip(PARAMETERS, x)}


@dataclass(frozen=True)
class Problem:
    """The figures and tables a fit replays, and the data it fits (some may be left out)."""

    figures: list[Figure]
    tables: list[TimeTable]
    data: list[Datum]

    def residuals(self, x: np.ndarray) -> np.ndarray:
        modelled = modelled_values(self.figures, self.tables, achieved_of(_values(x)))
        priors = [(v - math.log(p.prior)) / math.log(PRIOR_WIDTH) for p, v in zip(PARAMETERS, x)]
        return np.array([d.residual(modelled) for d in self.data] + priors)


def fit(problem: Problem, start: dict[str, float] | None = None) -> dict[str, float]:
    """The parameters that fit the problem's data best (least squares over their logarithms,
    from `start`, by default the priors)."""
    start = start or {p.name: p.prior for p in PARAMETERS}
    low, high = (np.log([p.bounds[i] for p in PARAMETERS]) for i in (0, 1))
    x0 = np.clip(np.log([start[p.name] for p in PARAMETERS]), low + 1e-9, high - 1e-9)
    found = least_squares(problem.residuals, x0, bounds=(low, high), diff_step=0.05, xtol=1e-3, ftol=1e-4,
                          max_nfev=200)  # fmt: skip
    return _values(found.x)


def _left_out(args) -> tuple[str, float]:
    """One figure's leave-one-out prediction: the fit without its data, from the full fit."""
    name, full = args
    figures, tables = load_figures(), load_time_tables()
    data = [d for d in published_data(figures, tables) if d.figure != name]
    figure = next(f for f in figures if f.name == name)
    return name, modelled_speedup(figure, achieved_of(fit(Problem(figures, tables, data), start=full)))


@dataclass(frozen=True)
class Band:
    """How far a modelled speedup is from a measured one out of sample: a measured speedup lies
    within [`low`, `high`] times the modelled (the range of published / leave-one-out-predicted
    over the published figures)."""

    low: float
    high: float

    def of(self, speedup: float) -> tuple[float, float]:
        return speedup * self.low, speedup * self.high

    @classmethod
    def fitted(cls) -> "Band":
        stated = fitted_record()["band"]
        return cls(stated["low"], stated["high"])


def fitted_record() -> dict:
    """What `asrscale fit-cost-model` wrote: the parameters with their priors and evidence, each
    figure's fitted and leave-one-out predictions, the time tables, the band (fitted.yaml)."""
    return yaml.safe_load(FITTED.read_text())


def digest(path: Path = PUBLISHED) -> str:
    """What a fit was made on: published.yaml's sha256 (a changed file needs a new fit)."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]


def fit_cost_model(out: Path | None = None, workers: int = 2) -> dict:
    """Fit the shared parameters over every published figure and time table, predict each figure
    leaving it out, and write the fit (`out`, fitted.yaml); returns what it wrote."""
    began = time.perf_counter()
    figures, tables = load_figures(), load_time_tables()
    full = fit(Problem(figures, tables, published_data(figures, tables)))
    achieved = achieved_of(full)
    with ProcessPoolExecutor(workers) as pool:
        left_out = dict(pool.map(_left_out, [(f.name, full) for f in figures]))
    rows = [{"study": f.study, "figure": f.figure, "learners": f.learners, "published": f.speedup,
             "fitted": round(modelled_speedup(f, achieved), 3), "left_out": round(left_out[f.name], 3),
             "ratio": round(left_out[f.name] / f.speedup, 3)} for f in figures]  # fmt: skip
    ratios = [f.speedup / left_out[f.name] for f in figures]
    table = pd.concat([modelled_rows(t, achieved) for t in tables]).round(4)
    written = {
        "achieved": {"shares": {name.removeprefix("shares."): round(value, 4) for name, value in full.items()
                                if name.startswith("shares.")},
                     "serving": round(full["serving"], 4),
                     "node_data_frames_per_s": float(f"{full['node_data_frames_per_s']:.4g}"),
                     "forward_share": round(full["forward_share"], 4)},
        "parameters": [{"name": p.name, "fitted": float(f"{full[p.name]:.4g}"), "prior": p.prior,
                        "evidence": p.evidence} for p in PARAMETERS],
        "figures": rows,
        "time_tables": table.to_dict(orient="records"),
        "band": {"low": round(min(ratios), 3), "high": round(max(ratios), 3)},
        "within_tolerance": sum(abs(math.log(r["ratio"])) <= math.log1p(TOLERANCE) for r in rows),
        "published_digest": digest(),
        "seconds": round(time.perf_counter() - began, 1),
    }  # fmt: skip
    header = ("# What transports and software achieve of their hardware's nominal figures: the cost model's shared\n"
              "# parameters (asrscale.worlds.costmodel.Achieved), fitted once over the studies' published figures\n"
              "# and su15's time table, with each figure's leave-one-out prediction and the band they give\n"
              "# (asrscale.analysis.fit). Written by `asrscale fit-cost-model`; do not edit.\n")  # fmt: skip
    atomic_write_text(Path(out or FITTED), header + yaml.safe_dump(written, sort_keys=False, allow_unicode=True,
                                                                   width=120))  # fmt: skip
    return written
