"""The cost model checked against the studies' own published speedups, the way Paleo and
ASTRA-sim earned trust: given a published setup, predict the published scaling.

Each figure of `published.yaml` states the study's algorithm, learners and baseline, its model,
minibatch and cluster as far as the study gives them, and every assumption beyond (tagged read,
derived or assumed). The figure's algorithm is replayed (`asrscale.training.replay`: its own
schedule of requests, charged by the cost model, without arithmetic) on that cluster, and so is
its baseline over the same frames: SEQ at one learner, the algorithm itself at one learner, or
Kaldi's own scripts (`stock_kaldi_s`). The table gives the modelled speedup beside the published
one, and their ratio.
"""

import dataclasses
import math
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
COLUMNS = ("study", "figure", "published", "modelled", "ratio", "agrees", "baseline", "assumptions", "miss")


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
    steps_per_learner: int = STEPS_PER_LEARNER
    stock_kaldi: dict | None = None

    @classmethod
    def from_entry(cls, entry: dict) -> "Figure":
        entry = dict(entry)
        name = f"{entry['study']}, {entry['figure']}"
        if entry["baseline"] not in BASELINES or (entry["baseline"] == "stock_kaldi") != ("stock_kaldi" in entry):
            raise ConfigError(f"{PUBLISHED}: {name}: baseline is one of {BASELINES}; stock_kaldi states its costs")
        if entry["baseline"] == "stock_kaldi" and entry["algorithm"] != "ma":
            raise ConfigError(f"{PUBLISHED}: {name}: Kaldi's scripts average models: the algorithm is ma")
        workload = entry.pop("workload")
        compute = {"measured_on": f"derived for {entry['study']}", "precondition_s": 0.0, "relative_speed": 1.0,
                   "parameters": workload["parameters"], "flops_per_frame": workload["flops_per_frame"],
                   **entry.pop("compute")}  # fmt: skip
        cluster = defaults("hardware.this-machine", **{"device": "dedicated", "compute": compute, "jitter": JITTER,
                                                       **entry.pop("cluster")})  # fmt: skip
        return cls(
            **entry, workload=Workload(**workload, steps=1), hardware=Hardware.from_config(entry["study"], cluster)
        )


def load_figures(path: Path = PUBLISHED) -> list[Figure]:
    return [Figure.from_entry(entry) for entry in yaml.safe_load(Path(path).read_text())["figures"]]


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
    """The figure's algorithm against its baseline, over the same frames."""
    steps = figure.steps_per_learner
    parallel = _seconds(figure, figure.algorithm, figure.learners, steps)
    if figure.baseline == "stock_kaldi":
        return stock_kaldi_s(figure) / parallel
    alone = "seq" if figure.baseline == "seq" else figure.algorithm
    return _seconds(figure, alone, 1, steps * figure.learners) / parallel


def validate(figures: list[Figure]) -> pd.DataFrame:
    rows = []
    for figure in figures:
        modelled = modelled_speedup(figure)
        ratio = modelled / figure.speedup
        rows.append({"study": figure.study, "figure": figure.figure, "published": figure.speedup,
                     "modelled": round(modelled, 2), "ratio": round(ratio, 2),
                     "agrees": math.isclose(ratio, 1.0, abs_tol=MODEL_TOLERANCE), "baseline": figure.baseline,
                     "assumptions": " | ".join(figure.assumptions), "miss": figure.miss})  # fmt: skip
    return pd.DataFrame(rows, columns=COLUMNS)
