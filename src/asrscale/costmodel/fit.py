"""One cost model for every study: what transports and software achieve of their hardware
(`asrscale.worlds.clock.Achieved`), fitted on the published figures whose facts are complete,
validated one system out at a time, and the band each modelled run carries.

Each parameter is a property of a kind of hardware or software, the same wherever it occurs,
never of one figure: the share of a link's nominal bandwidth that TCP over Ethernet, MPI over
InfiniBand, NCCL over NVLink or PCIe, copies between a GPU and host memory and MPI through host
memory achieve; what serving a gossip exchange costs a passive learner; how fast a node loads data
where a study does not say; a forward pass's share of a forward-backward. Each has a prior from
independent evidence (priors.yaml: a factor of `PRIOR_WIDTH` is one standard deviation), so that a
parameter no figure constrains stays where the evidence puts it.

What the fit rests on: the figures that are comparable with a replay (the same epochs, or a
speedup to an accuracy whose epochs are stated) and whose setup turns on no value that nothing
states (published.yaml's `unstated`): a figure that does would bend the shared parameters towards
its own assumption. The fit minimises, over the parameters' logarithms, the sum of squares of each
such figure's log(modelled / published) speedup in units of log(1 + `TOLERANCE`) (a miss of 25% is
one unit), each row of its system's time table the same way and its share of time inside MPI in
units of `SHARE_TOLERANCE` (5 points), and the priors; from the priors, to tolerances tight enough
that another start gives the same answer (checked every fit: `starts` in fitted.yaml).

Validation, one system out at a time (as Paleo and ASTRA-sim validate): every figure of a system
(a cluster and model: zhang19 and zhang19b share one, as su15's two figures and its time table
do) is predicted by the parameters fitted without any of them, from the priors; a figure that
stays out of the fit is predicted by the fit of all the rest. Both ways of modelling MPI through
host memory (asrscale.costmodel.validation.STRUCTURES) are fitted and validated; the one whose
held-out predictions miss less is kept, and both are recorded.

The band a modelled run carries (`Band`): what the fitted parameters set is the run's time outside
its arithmetic (communication, staging, data waits, idle: the compute is measured); that time
varies by the spread of each parameter the run depends on over the fits with a system held out
(its links' transports, serving for gossip). Beside that, the model's structural error, which no
value of the parameters fixes: its held-out misses (modelled / published speedup) of the
comparable figures whose time is bound as the run's is, by its arithmetic, by links inside a node
or by links between nodes (a kind no figure is of takes every figure's). The band is the wider of
the two: a run is given a narrow band only where held-out figures of its kind say the model is
right. `asrscale fit-cost-model` writes all of it to src/asrscale/worlds/fitted.yaml, which every
simulated run and replay reads.
"""

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

from asrscale.costmodel.fitted import BOUNDS, TOLERANCE, bound_by, digest
from asrscale.costmodel.validation import (
    STRUCTURES,
    Figure,
    TimeTable,
    load_figures,
    load_time_tables,
    modelled_rows,
    modelled_speedup,
    parallel,
)
from asrscale.errors import ConfigError
from asrscale.io import atomic_write_text
from asrscale.worlds.clock import FITTED, Achieved

SHARE_TOLERANCE = 0.05  # a modelled share of time inside MPI within 5 points of a published one
PRIOR_WIDTH = 10.0  # a prior's standard deviation, as a factor
# a fit from another start lands within 1% of every parameter, or the fit is not to be trusted
STARTS_AGREE = 0.01


@dataclass(frozen=True)
class Parameter:
    """A shared parameter: where it sits in `Achieved` ("shares.<transport>", "serving",
    "node_data_frames_per_s", "forward_share"), its prior and bounds, and the independent
    evidence the prior rests on."""

    name: str
    prior: float
    bounds: tuple[float, float]
    evidence: str


#: the fit's parameters, in priors.yaml beside this module
PARAMETERS = tuple(
    Parameter(name, row["prior"], tuple(row["bounds"]), row["evidence"])
    for name, row in yaml.safe_load(
        resources.files("asrscale.costmodel").joinpath("priors.yaml").read_text()
    ).items()
)


def achieved_of(values: dict[str, float]) -> Achieved:
    """The `Achieved` of parameter values by name."""
    shares = {
        name.removeprefix("shares."): value
        for name, value in values.items()
        if name.startswith("shares.")
    }
    return Achieved(
        shares=shares,
        serving=values["serving"],
        node_data_frames_per_s=values["node_data_frames_per_s"],
        forward_share=values["forward_share"],
    )


@dataclass(frozen=True)
class Datum:
    """One published number the model must give: a figure's speedup, or a time-table row's
    speedup or share of time inside MPI; `system` names what it is held out with."""

    what: str
    system: str
    published: float
    kind: str  # "speedup" or "share"

    def residual(self, modelled: dict[str, float]) -> float:
        """The model's miss in units of its tolerance."""
        if self.kind == "share":
            return (modelled[self.what] - self.published) / SHARE_TOLERANCE
        return math.log(modelled[self.what] / self.published) / math.log1p(TOLERANCE)


def published_data(figures: list[Figure], tables: list[TimeTable]) -> list[Datum]:
    """What the fit rests on: the speedup of every figure in it (comparable, its facts complete),
    and its system's time tables: the MPI share at every learner count, and the speedup where no
    figure gives it (a figure's speedup is its own datum)."""
    if len({f.name for f in figures}) < len(figures):
        raise ConfigError(
            f"figures of one study at one learner count: {sorted(f.name for f in figures)}"
        )
    fitted = [f for f in figures if f.in_fit]
    data = [Datum(f"{f.name}: speedup", f.system, f.speedup, "speedup") for f in fitted]
    for table in tables:
        if not table.setup.in_fit:
            continue
        named = {f.learners for f in fitted if f.study == table.study}
        for learners in sorted(p for p in table.rows if p > 1):
            speedup, share = table.published(learners)
            data.append(
                Datum(
                    f"{table.study} table, {learners}: MPI share",
                    table.setup.system,
                    share,
                    "share",
                )
            )
            if learners not in named:
                data.append(
                    Datum(
                        f"{table.study} table, {learners}: speedup",
                        table.setup.system,
                        speedup,
                        "speedup",
                    )
                )
    return data


def modelled_values(
    figures: list[Figure], tables: list[TimeTable], achieved: Achieved
) -> dict[str, float]:
    """What the model gives for every datum, by its name."""
    values = {f"{f.name}: speedup": modelled_speedup(f, achieved) for f in figures if f.in_fit}
    for table in (t for t in tables if t.setup.in_fit):
        for row in modelled_rows(table, achieved).itertuples():
            values[f"{table.study} table, {row.learners}: speedup"] = row.modelled_speedup
            values[f"{table.study} table, {row.learners}: MPI share"] = row.modelled_mpi_share
    return values


def _values(x: np.ndarray) -> dict[str, float]:
    return {p.name: float(math.exp(v)) for p, v in zip(PARAMETERS, x)}


@dataclass(frozen=True)
class Problem:
    """The figures and tables a fit replays, and the data it fits (a system's may be left out)."""

    figures: list[Figure]
    tables: list[TimeTable]
    data: list[Datum]

    def residuals(self, x: np.ndarray) -> np.ndarray:
        kept = {d.what for d in self.data}
        figures = [f for f in self.figures if f"{f.name}: speedup" in kept]
        tables = [
            t for t in self.tables if any(d.what.startswith(f"{t.study} table") for d in self.data)
        ]
        modelled = modelled_values(figures, tables, achieved_of(_values(x)))
        priors = [(v - math.log(p.prior)) / math.log(PRIOR_WIDTH) for p, v in zip(PARAMETERS, x)]
        return np.array([d.residual(modelled) for d in self.data] + priors)


def problem(structure: str, without: str | None = None) -> Problem:
    """The fit of `structure`, leaving out every datum of the system `without`."""
    figures, tables = load_figures(structure=structure), load_time_tables(structure=structure)
    return Problem(
        figures, tables, [d for d in published_data(figures, tables) if d.system != without]
    )


def fit(problem: Problem, start: dict[str, float] | None = None) -> dict[str, float]:
    """The parameters that fit the problem's data best: least squares over their logarithms, from
    `start` (by default the priors), to tolerances at which another start lands on the same
    answer."""
    start = start or {p.name: p.prior for p in PARAMETERS}
    low, high = (np.log([p.bounds[i] for p in PARAMETERS]) for i in (0, 1))
    x0 = np.clip(np.log([start[p.name] for p in PARAMETERS]), low + 1e-9, high - 1e-9)
    found = least_squares(
        problem.residuals,
        x0,
        bounds=(low, high),
        diff_step=1e-3,
        x_scale="jac",
        xtol=1e-14,
        ftol=1e-15,
        gtol=1e-15,
        max_nfev=400,
    )
    return _values(found.x)


def _fitted(
    task: tuple[str, str | None, float],
) -> tuple[tuple[str, str | None, float], dict[str, float]]:
    """One fit of the validation: (structure, the system left out or None, the start as a factor on
    the priors)."""
    structure, without, start = task
    return task, fit(problem(structure, without), {p.name: p.prior * start for p in PARAMETERS})


def bound_of(figure: Figure, achieved: Achieved) -> tuple[float, str]:
    """The share of the figure's modelled parallel run outside its arithmetic, and what bounds
    its time (asrscale.costmodel.fitted.bound_by)."""
    replayed = parallel(figure, achieved)
    outside = 1 - replayed.split["compute"] / sum(replayed.split.values())
    return outside, bound_by(
        outside, figure.learners > figure.hardware.learners_per_node, figure.learners
    )


def _validation(structure: str, fits: dict) -> dict:
    """Every figure predicted out of sample with `structure`: by the fit without its system, or,
    for a figure out of the fit, by the fit of all the rest; with each fit's parameters."""
    figures, full = load_figures(structure=structure), fits[structure, None, 1.0]
    rows = []
    for figure in figures:
        held = fits.get((structure, figure.system, 1.0), full) if figure.in_fit else full
        predicted = modelled_speedup(figure, achieved_of(held))
        outside, bound = bound_of(figure, achieved_of(full))
        rows.append(
            {
                "study": figure.study,
                "figure": figure.figure,
                "learners": figure.learners,
                "system": figure.system,
                "facts": figure.facts,
                "comparable": figure.comparable,
                "in_fit": figure.in_fit,
                "published": figure.speedup,
                "fitted": round(modelled_speedup(figure, achieved_of(full)), 3),
                "held_out": round(predicted, 3),
                "ratio": round(predicted / figure.speedup, 3),
                "outside_share": round(outside, 3),
                "bound_by": bound,
            }
        )
    judged = [math.log(r["ratio"]) for r in rows if r["in_fit"]]
    return {
        "rms_log_miss": round(math.sqrt(np.mean(np.square(judged))), 4),
        "within_tolerance": sum(abs(m) <= math.log1p(TOLERANCE) for m in judged),
        "judged": len(judged),
        "figures": rows,
        "held_out_parameters": {
            system: {p.name: float(f"{held[p.name]:.4g}") for p in PARAMETERS}
            for (s, system, start), held in fits.items()
            if s == structure and system is not None
        },
    }


def band_of(validation: dict, full: dict[str, float]) -> dict:
    """The band's record: by what bounds their time, the held-out misses of the comparable
    figures (a figure whose epochs are not stated misses by what it does not state), with 1; and
    each parameter's spread over the fits with a system held out."""
    structural = {}
    for row in validation["figures"]:
        if row["comparable"]:
            structural.setdefault(row["bound_by"], []).append(row)
    spread = {
        p.name: [v[p.name] / full[p.name] for v in validation["held_out_parameters"].values()]
        + [1.0]
        for p in PARAMETERS
    }
    return {
        "structural": {
            bound: {
                "misses": [
                    round(min(r["ratio"] for r in rows + [{"ratio": 1.0}]), 3),
                    round(max(r["ratio"] for r in rows + [{"ratio": 1.0}]), 3),
                ],
                "figures": [f"{r['study']}, {r['learners']}" for r in rows],
            }
            for bound, rows in sorted(structural.items(), key=lambda item: BOUNDS.index(item[0]))
        },
        "parameters": {name: [round(min(v), 3), round(max(v), 3)] for name, v in spread.items()},
    }


SECOND_START = 3.0  # the other start of the check of two starts: every prior times this


def fit_cost_model(out: Path | None = None, workers: int = 2) -> dict:
    """Fit the shared parameters with each structure, from the priors and from another start,
    and with each system held out; validate; keep the structure whose held-out predictions miss
    less; write the record (`out`, fitted.yaml) and return it."""
    began = time.perf_counter()
    systems = sorted({f.system for f in load_figures() if f.in_fit})
    tasks = [(s, without, 1.0) for s in STRUCTURES for without in (None, *systems)]
    with ProcessPoolExecutor(workers) as pool:
        fits = dict(pool.map(_fitted, tasks + [(s, None, SECOND_START) for s in STRUCTURES]))
    starts = {
        s: round(
            max(
                abs(math.log(fits[s, None, SECOND_START][p.name] / fits[s, None, 1.0][p.name]))
                for p in PARAMETERS
            ),
            5,
        )
        for s in STRUCTURES
    }
    if max(starts.values()) > math.log1p(STARTS_AGREE):
        raise RuntimeError(
            f"the fit depends on where it starts (largest difference of a parameter's logarithm: "
            f"{starts}): tighten its tolerances"
        )
    validations = {s: _validation(s, fits) for s in STRUCTURES}
    chosen = min(STRUCTURES, key=lambda s: validations[s]["rms_log_miss"])
    written = _record(chosen, fits[chosen, None, 1.0], validations) | {
        "starts": {"factor": SECOND_START, "largest_log_difference": starts},
        "published_digest": digest(),
        "seconds": round(time.perf_counter() - began, 1),
    }
    header = (
        "# What transports and software achieve of their hardware's nominal figures: the cost "
        "model's shared\n# parameters (asrscale.worlds.clock.Achieved), fitted on the published "
        "figures whose facts are\n# complete and validated one system out at a time, with both "
        "structures of MPI through host memory,\n# the band a modelled run carries and the check "
        "of two starts (asrscale.costmodel.fit). Written by\n# `asrscale fit-cost-model`; do not "
        "edit.\n"
    )
    atomic_write_text(
        Path(out or FITTED),
        header + yaml.safe_dump(written, sort_keys=False, allow_unicode=True, width=120),
    )
    return written


def _record(chosen: str, full: dict[str, float], validations: dict) -> dict:
    """What fitted.yaml records of the fit of the `chosen` structure (`full`) and both
    validations."""
    held_out = validations[chosen]["held_out_parameters"]
    shares = {
        name.removeprefix("shares."): float(f"{value:.4g}")
        for name, value in full.items()
        if name.startswith("shares.")
    }
    rest = {
        name: float(f"{full[name]:.4g}")
        for name in ("serving", "node_data_frames_per_s", "forward_share")
    }
    tables = load_time_tables(structure=chosen)
    return {
        "structure": chosen,
        "achieved": {"shares": shares, **rest},
        "parameters": [
            {
                "name": p.name,
                "fitted": float(f"{full[p.name]:.4g}"),
                "prior": p.prior,
                "held_out": {system: values[p.name] for system, values in held_out.items()},
                "evidence": p.evidence,
            }
            for p in PARAMETERS
        ],
        "figures": validations[chosen]["figures"],
        "structures": {
            s: {key: v[key] for key in ("rms_log_miss", "within_tolerance", "judged")}
            | {"held_out": {f"{r['study']}, {r['learners']}": r["held_out"] for r in v["figures"]}}
            for s, v in validations.items()
        },
        "time_tables": pd.concat([modelled_rows(t, achieved_of(full)) for t in tables])
        .round(4)
        .to_dict(orient="records"),
        "band": band_of(validations[chosen], full),
    }
