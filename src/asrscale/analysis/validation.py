"""The cost model checked against the studies' own published speedups, the way Paleo and
ASTRA-sim earned trust: given a published setup, predict the published scaling.

Each figure of `published.yaml` states the study's algorithm, learners and baseline, its model,
minibatch and cluster as far as the study gives them, and every assumption beyond (tagged read,
derived or assumed). The figure's algorithm is replayed (`asrscale.training.replay`: its own
schedule of requests, charged by the cost model, without arithmetic) on that cluster, and so is
its baseline over the same frames: SEQ at one learner, the algorithm itself at one learner, or
Kaldi's own scripts (`stock_kaldi_s`). The table gives the modelled speedup beside the published
one, and their ratio; and, for the fact that the figure's miss turns on most (its `unknown`: a key
of its setup), the value at which the model would give the published speedup (`agreeing_value`),
beside the value assumed: a miss explained is a fact that a reader of the paper can check.
"""

import copy
import dataclasses
import functools
import math
import operator
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import pandas as pd
import yaml

from asrscale.analysis.claims import MODEL_TOLERANCE
from asrscale.config.schema import defaults
from asrscale.errors import ConfigError
from asrscale.training.replay import Workload, replay
from asrscale.worlds.costmodel import Hardware

PUBLISHED = resources.files("asrscale.analysis") / "published.yaml"
BASELINES = ("seq", "same", "stock_kaldi")
JITTER = 0.05  # σ of a step's compute, as the project's GPU profiles assume, unless a figure states its own
STEPS_PER_LEARNER = 40  # enough for every figure's averaging period to recur (8 and 10 steps)
REQUIRED = ("study", "figure", "speedup", "algorithm", "learners", "baseline", "workload", "options", "compute",
            "cluster", "assumptions", "miss", "unknown")  # fmt: skip
COLUMNS = ("study", "figure", "published", "modelled", "ratio", "agrees", "baseline", "assumptions", "miss",
           "unknown", "assumed", "agrees_at")  # fmt: skip


@dataclass(frozen=True)
class Unknown:
    """The fact a figure's miss turns on most: a key of its setup (a dotted path into its entry
    of published.yaml), what it is, and the range in which a value agreeing with the published
    speedup is sought."""

    key: str
    what: str
    range: tuple[float, float]


@dataclass(frozen=True)
class Figure:
    """A published speedup and the setup under which it is replayed (see published.yaml)."""

    study: str
    figure: str
    speedup: float
    algorithm: str
    learners: int
    baseline: str
    workload: Workload
    options: dict
    hardware: Hardware
    assumptions: list[str]
    miss: str
    unknown: Unknown
    entry: dict  # as published.yaml states it
    steps_per_learner: int = STEPS_PER_LEARNER
    stock_kaldi: dict | None = None
    epochs_ratio: float = 1.0  # the parallel run's epochs against its baseline's (for a speedup to an accuracy)

    @classmethod
    def from_entry(cls, entry: dict, source: Path = PUBLISHED) -> "Figure":
        """The figure of an entry of `source` (published.yaml, or a file in its form)."""
        stated, entry = copy.deepcopy(entry), dict(entry)
        name = f"{source}: {entry.get('study')}, {entry.get('figure')}"
        missing = sorted(set(REQUIRED) - entry.keys())
        if missing:
            raise ConfigError(f"{name}: {', '.join(missing)} missing (a figure states {', '.join(REQUIRED)})")
        if entry["baseline"] not in BASELINES or (entry["baseline"] == "stock_kaldi") != ("stock_kaldi" in entry):
            raise ConfigError(f"{name}: baseline is one of {BASELINES}; stock_kaldi states its costs")
        if entry["baseline"] == "stock_kaldi" and entry["algorithm"] != "ma":
            raise ConfigError(f"{name}: Kaldi's scripts average models: the algorithm is ma")
        workload = entry.pop("workload")
        compute = {"measured_on": f"derived for {entry['study']}", "precondition_s": 0.0, "relative_speed": 1.0,
                   "parameters": workload["parameters"], "flops_per_frame": workload["flops_per_frame"],
                   **entry.pop("compute")}  # fmt: skip
        cluster = defaults("hardware.this-machine", **{"device": "dedicated", "compute": compute, "jitter": JITTER,
                                                       **entry.pop("cluster")})  # fmt: skip
        try:
            unknown = Unknown(**entry.pop("unknown"))
        except TypeError:
            raise ConfigError(f"{name}: unknown states key, what and range") from None
        try:
            functools.reduce(operator.getitem, unknown.key.split("."), stated)
        except (KeyError, TypeError):
            raise ConfigError(f"{name}: unknown.key {unknown.key!r} is not a key of its setup") from None
        if not 0 < unknown.range[0] < unknown.range[1]:
            raise ConfigError(f"{name}: unknown.range is [low, high] with 0 < low < high, not {unknown.range}")
        return cls(**entry, workload=Workload(**workload, steps=1), unknown=unknown, entry=stated,
                   hardware=Hardware.from_config(entry["study"], cluster))  # fmt: skip

    def assumed(self) -> float:
        """The value its setup assumes for its unknown."""
        return functools.reduce(operator.getitem, self.unknown.key.split("."), self.entry)

    def with_unknown(self, value: float) -> "Figure":
        """The figure with `value` for its unknown."""
        entry = copy.deepcopy(self.entry)
        *path, last = self.unknown.key.split(".")
        functools.reduce(operator.getitem, path, entry)[last] = value
        return Figure.from_entry(entry)


def load_figures(path: Path = PUBLISHED) -> list[Figure]:
    """The figures of published.yaml, or of a file in its form (your own setups to replay)."""
    return [Figure.from_entry(entry, path) for entry in yaml.safe_load(Path(path).read_text())["figures"]]


def _seconds(figure: Figure, algorithm: str, learners: int, steps: int, prefetch: int = 4) -> float:
    workload = dataclasses.replace(figure.workload, steps=steps)
    options = figure.options if algorithm == figure.algorithm else {}
    return replay(algorithm, learners, workload, figure.hardware, options, prefetch=prefetch)


def stock_kaldi_s(figure: Figure) -> float:
    """Kaldi's own scripts on the figure's GPUs: each job loads its data before it trains (no
    overlap), and every averaging period (an iteration) costs a job's launch and the models'
    round trip through a shared filesystem (each job writes its model, the averaging job reads
    them all and writes one, every job of the next iteration reads it)."""
    steps, learners = figure.steps_per_learner, figure.learners
    periods = steps * figure.workload.frames_per_step / figure.options["frames_per_job"]
    trained = _seconds(figure, figure.algorithm, learners, steps, prefetch=0)
    model_bits = 32 * figure.workload.parameters
    round_trip_s = (3 * learners + 1) * model_bits / (figure.stock_kaldi["filesystem_gbps"] * 1e9)
    return trained + periods * (figure.stock_kaldi["launch_s"] + round_trip_s)


def modelled_speedup(figure: Figure) -> float:
    """The figure's algorithm against its baseline, over the same frames (times `epochs_ratio`)."""
    steps = figure.steps_per_learner
    parallel = _seconds(figure, figure.algorithm, figure.learners, steps) * figure.epochs_ratio
    if figure.baseline == "stock_kaldi":
        return stock_kaldi_s(figure) / parallel
    alone = "seq" if figure.baseline == "seq" else figure.algorithm
    return _seconds(figure, alone, 1, steps * figure.learners) / parallel


def agreeing_value(figure: Figure, tolerance: float = 0.01, tries: int = 8) -> float | None:
    """The value of the figure's unknown at which the modelled speedup is the published one (to
    `tolerance`, relative): the Illinois method on log(modelled / published) against log(value),
    from the ends of the unknown's range; None where no value in the range gives it."""

    def error(log_value: float) -> float:
        return math.log(modelled_speedup(figure.with_unknown(math.exp(log_value))) / figure.speedup)

    (a, b), tolerance = map(math.log, figure.unknown.range), math.log1p(tolerance)
    fa, fb = error(a), error(b)
    if fa * fb > 0:
        return None
    for _ in range(tries):
        if abs(fb) <= tolerance:
            break
        c = b - fb * (b - a) / (fb - fa)
        fc = error(c)
        if fc * fb < 0:
            a, fa = b, fb
        else:
            fa /= 2  # the end kept twice: halve its weight, so that it is let go of
        b, fb = c, fc
    return math.exp(b if abs(fb) <= abs(fa) else a)


def validate(figures: list[Figure]) -> pd.DataFrame:
    rows = []
    for figure in figures:
        modelled = modelled_speedup(figure)
        ratio = modelled / figure.speedup
        agreeing = agreeing_value(figure)
        rows.append({"study": figure.study, "figure": figure.figure, "published": figure.speedup,
                     "modelled": round(modelled, 2), "ratio": round(ratio, 2),
                     "agrees": math.isclose(ratio, 1.0, abs_tol=MODEL_TOLERANCE), "baseline": figure.baseline,
                     "assumptions": " | ".join(figure.assumptions), "miss": figure.miss,
                     "unknown": figure.unknown.what, "assumed": figure.assumed(),
                     "agrees_at": float(f"{agreeing:.3g}") if agreeing is not None else None})  # fmt: skip
    return pd.DataFrame(rows, columns=COLUMNS)
