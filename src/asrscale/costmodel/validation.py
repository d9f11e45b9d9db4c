"""The cost model against the studies' own published measurements, the way Paleo and ASTRA-sim
earned trust: given a published setup, predict the published scaling.

Each figure of `published.yaml` states the study's algorithm, learners and baseline, its model,
minibatch and cluster as far as the study gives them, and every assumption beyond (tagged read,
derived or assumed). The figure's algorithm is replayed (`asrscale.costmodel.replay`: its own
schedule of requests, charged by the cost model, without arithmetic) on that cluster, and so is
its baseline over the same frames: SEQ at one learner, the algorithm itself at one learner, or
Kaldi's own scripts (`stock_kaldi_s`). A time table (su15's, per GPU count: the whole time and
its MPI part) is replayed row by row on its figure's setup. What transports and software achieve
(`asrscale.worlds.clock.Achieved`) is the same for every figure: fitted once over all of them
(`asrscale.costmodel.fit`), never per figure. For each figure, the fact its miss turns on most
(its `unknown`: a key of its setup) and the value at which the model would give the published
speedup (`agreeing_value`) say which single fact would close a gap the shared costs leave.
"""

import copy
import dataclasses
import functools
import math
import operator
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import yaml

from asrscale.config.schema import profile_defaults
from asrscale.costmodel.fitted import PUBLISHED
from asrscale.costmodel.replay import Replayed, Workload, replay
from asrscale.errors import ConfigError
from asrscale.worlds.clock import Achieved, Hardware

BASELINES = ("seq", "same", "stock_kaldi")
READINGS = ("same-epochs", "to-accuracy")
#: how MPI through host memory (a non-CUDA-aware MPI: su15's, rosc17's) is modelled: "series", a
#: copy from the GPU to host memory and back around a transfer over the link at its transport's
#: share, sums on the host; "one path", the whole staged transfer as one link of its own transport
#: ("mpi-host", whose share is fitted), no copies apart. The fit tries both
#: (asrscale.costmodel.fit).
STRUCTURES = ("series", "one path")
DIRECT = ("infiniband", "pcie", "nvlink")  # the transports that "one path" replaces by "mpi-host"
# σ of a step's compute, as the project's GPU profiles assume, unless a figure states its own
JITTER = 0.05
STEPS_PER_LEARNER = 40  # enough for every figure's averaging period to recur (8 and 10 steps)
REQUIRED = (
    "study",
    "figure",
    "system",
    "reading",
    "history",
    "speedup",
    "algorithm",
    "learners",
    "baseline",
    "workload",
    "options",
    "compute",
    "cluster",
    "assumptions",
    "miss",
    "unknown",
)


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
    hardware: Hardware  # its data loading as stated, else the fitted rate of a node (`cluster_of`)
    assumptions: list[str]
    miss: str
    unknown: Unknown
    entry: dict  # as published.yaml states it
    system: (
        str  # the cluster and model it was measured on: a system's figures are held out together
    )
    reading: str  # READINGS
    history: list[str]
    steps_per_learner: int = STEPS_PER_LEARNER
    stock_kaldi: dict | None = None
    epochs_ratio: float | None = (
        1.0  # the parallel run's epochs against its baseline's (None: not stated)
    )
    held_out: float = (
        0.0  # the held-out frames every learner evaluates at an epoch's end, per training frame
    )
    unstated: str | None = (
        None  # the value its setup turns on that nothing states (None: its facts are complete)
    )
    structure: str = "series"  # how its MPI through host memory is modelled (STRUCTURES)

    @property
    def name(self) -> str:
        return f"{self.study}, {self.learners}"

    @property
    def comparable(self) -> bool:
        """Whether a replay can time what it states: the same epochs, or a to-accuracy speedup with
        its epochs."""
        return self.reading == "same-epochs" or self.epochs_ratio is not None

    @property
    def in_fit(self) -> bool:
        """Whether it constrains the shared parameters: comparable, and its facts complete."""
        return self.comparable and self.unstated is None

    @property
    def facts(self) -> str:
        if not self.comparable:
            return "not comparable: its epochs are not stated"
        return (
            "complete"
            if self.unstated is None
            else f"turns on a value nothing states: {self.unstated}"
        )

    @classmethod
    def from_entry(
        cls, entry: dict, source: Path = PUBLISHED, structure: str = "series"
    ) -> "Figure":
        """The figure of an entry of `source` (published.yaml, or a file in its form), its MPI
        through host memory modelled as `structure` says (STRUCTURES)."""
        stated, entry = copy.deepcopy(entry), restructured(entry, structure)
        name = f"{source}: {entry.get('study')}, {entry.get('figure')}"
        missing = sorted(set(REQUIRED) - entry.keys())
        if missing:
            raise ConfigError(
                f"{name}: {', '.join(missing)} missing (a figure states {', '.join(REQUIRED)})"
            )
        if entry["reading"] not in READINGS or (
            entry["reading"] == "same-epochs" and "epochs_ratio" in entry
        ):
            raise ConfigError(
                f"{name}: reading is one of {READINGS}; epochs_ratio belongs to a to-accuracy one"
            )
        if entry["baseline"] not in BASELINES or (entry["baseline"] == "stock_kaldi") != (
            "stock_kaldi" in entry
        ):
            raise ConfigError(
                f"{name}: baseline is one of {BASELINES}; stock_kaldi states its costs"
            )
        if entry["baseline"] == "stock_kaldi" and entry["algorithm"] != "ma":
            raise ConfigError(f"{name}: Kaldi's scripts average models: the algorithm is ma")
        workload = entry.pop("workload")
        compute = {
            "measured_on": f"derived for {entry['study']}",
            "precondition_s": 0.0,
            "relative_speed": 1.0,
            "parameters": workload["parameters"],
            "flops_per_frame": workload["flops_per_frame"],
            **entry.pop("compute"),
        }
        try:
            cluster = profile_defaults(
                **{
                    "device": "dedicated",
                    "compute": compute,
                    "jitter": JITTER,
                    **entry.pop("cluster"),
                }
            )
            hardware = Hardware.from_config(entry["study"], cluster)
        except (TypeError, ConfigError) as error:
            raise ConfigError(f"{name}: cluster: {error}") from None
        try:
            unknown = Unknown(**entry.pop("unknown"))
        except TypeError:
            raise ConfigError(f"{name}: unknown states key, what and range") from None
        try:
            functools.reduce(operator.getitem, unknown.key.split("."), stated)
        except (KeyError, TypeError):
            raise ConfigError(
                f"{name}: unknown.key {unknown.key!r} is not a key of its setup"
            ) from None
        if not 0 < unknown.range[0] < unknown.range[1]:
            raise ConfigError(
                f"{name}: unknown.range is [low, high] with 0 < low < high, not {unknown.range}"
            )
        return cls(
            **entry,
            workload=Workload(**workload, steps=1),
            unknown=unknown,
            entry=stated,
            hardware=hardware,
            structure=structure,
        )

    def cluster_of(self, achieved: Achieved) -> Hardware:
        """Its cluster, loading data at the fitted rate of a node where the study states none."""
        if self.hardware.data_frames_per_s is not None:
            return self.hardware
        return dataclasses.replace(self.hardware, data_frames_per_s=achieved.node_data_frames_per_s)

    def assumed(self) -> float:
        """The value its setup assumes for its unknown."""
        return functools.reduce(operator.getitem, self.unknown.key.split("."), self.entry)

    def with_unknown(self, value: float) -> "Figure":
        """The figure with `value` for its unknown."""
        entry = copy.deepcopy(self.entry)
        *path, last = self.unknown.key.split(".")
        functools.reduce(operator.getitem, path, entry)[last] = value
        return Figure.from_entry(entry, structure=self.structure)


def restructured(entry: dict, structure: str) -> dict:
    """A figure's entry with its MPI through host memory modelled as `structure` (STRUCTURES)."""
    if structure not in STRUCTURES:
        raise ConfigError(f"a structure is one of {STRUCTURES}, not {structure!r}")
    entry = copy.deepcopy(dict(entry))
    cluster = entry.get("cluster", {})
    if structure == "one path" and cluster.pop("host_staging", None) is not None:
        for link in ("node_link", "network_link"):
            if cluster.get(link, {}).get("transport") in DIRECT:
                cluster[link]["transport"] = "mpi-host"
    return entry


@dataclass(frozen=True)
class TimeTable:
    """A study's own times per learner count, on one figure's setup with its learners varied:
    the whole time and its part inside MPI, in the table's own unit (`rows`: P -> (whole, MPI))."""

    study: str
    figure: str
    setup: Figure
    rows: dict  # learners -> (whole time, the part of it inside MPI)
    source: str

    def published(self, learners: int) -> tuple[float, float]:
        """The speedup over the table's one-learner row, and the share of time inside MPI."""
        whole, mpi = self.rows[learners]
        return self.rows[1][0] / whole, mpi / whole


def load_figures(path: Path = PUBLISHED, structure: str = "series") -> list[Figure]:
    """The figures of published.yaml, or of a file in its form (your own setups to replay)."""
    return [
        Figure.from_entry(entry, path, structure)
        for entry in yaml.safe_load(Path(path).read_text())["figures"]
    ]


def load_time_tables(path: Path = PUBLISHED, structure: str = "series") -> list[TimeTable]:
    """The time tables of published.yaml, each on the setup of its study's figure it names."""
    stated = yaml.safe_load(Path(path).read_text())
    figures = {entry["figure"]: entry for entry in stated["figures"]}
    tables = []
    for table in stated.get("time_tables", []):
        if table["setup"] not in figures or 1 not in table["rows"]:
            raise ConfigError(
                f"{path}: time table of {table['study']}: setup names a figure of figures:, and "
                "rows have one learner's (the baseline)"
            )
        setup = Figure.from_entry(figures[table["setup"]], path, structure)
        rows = {int(p): tuple(times) for p, times in table["rows"].items()}
        tables.append(TimeTable(table["study"], table["figure"], setup, rows, table["source"]))
    return tables


def _replayed(
    figure: Figure, algorithm: str, learners: int, steps: int, achieved: Achieved, prefetch: int = 4
) -> Replayed:
    workload = dataclasses.replace(figure.workload, steps=steps)
    options = figure.options if algorithm == figure.algorithm else {}
    return replay(
        algorithm,
        learners,
        workload,
        figure.cluster_of(achieved),
        options,
        prefetch=prefetch,
        achieved=achieved,
        held_out=figure.held_out,
    )


def stock_kaldi_s(figure: Figure, achieved: Achieved) -> float:
    """Kaldi's own scripts on the figure's GPUs: each job loads its data before it trains (no
    overlap), and every averaging period (an iteration) costs a job's launch and the models'
    round trip through a shared filesystem (each job writes its model, the averaging job reads
    them all and writes one, every job of the next iteration reads it)."""
    steps, learners = figure.steps_per_learner, figure.learners
    periods = steps * figure.workload.frames_per_step / figure.options["frames_per_job"]
    trained = _replayed(figure, figure.algorithm, learners, steps, achieved, prefetch=0).seconds
    model_bits = 32 * figure.workload.parameters
    round_trip_s = (3 * learners + 1) * model_bits / (figure.stock_kaldi["filesystem_gbps"] * 1e9)
    return trained + periods * (figure.stock_kaldi["launch_s"] + round_trip_s)


def baseline_s(figure: Figure, achieved: Achieved) -> float:
    """The figure's baseline over the frames of its parallel run."""
    if figure.baseline == "stock_kaldi":
        return stock_kaldi_s(figure, achieved)
    alone = "seq" if figure.baseline == "seq" else figure.algorithm
    return _replayed(figure, alone, 1, figure.steps_per_learner * figure.learners, achieved).seconds


def parallel(figure: Figure, achieved: Achieved, learners: int | None = None) -> Replayed:
    """The figure's algorithm at its learners (or `learners`), over `steps_per_learner` steps
    each."""
    return _replayed(
        figure, figure.algorithm, learners or figure.learners, figure.steps_per_learner, achieved
    )


def modelled_speedup(figure: Figure, achieved: Achieved | None = None) -> float:
    """The figure's algorithm against its baseline, over the same frames (times `epochs_ratio`
    where it is a speedup to an accuracy; where its epochs are not stated, the same-epochs
    speedup, for information)."""
    achieved = achieved or Achieved.fitted()
    return baseline_s(figure, achieved) / (
        parallel(figure, achieved).seconds * (figure.epochs_ratio or 1.0)
    )


def modelled_rows(table: TimeTable, achieved: Achieved | None = None) -> pd.DataFrame:
    """Each row of a time table beside the model's: speedup over its one-learner row, and share
    of time inside MPI, published and modelled."""
    achieved = achieved or Achieved.fitted()
    setup = table.setup
    alone = _replayed(
        setup, setup.algorithm, 1, setup.steps_per_learner * max(table.rows), achieved
    ).seconds
    rows = []
    for learners in sorted(p for p in table.rows if p > 1):
        steps = setup.steps_per_learner * max(table.rows) // learners  # the same frames at every P
        replayed = _replayed(setup, setup.algorithm, learners, steps, achieved)
        speedup, mpi_share = table.published(learners)
        rows.append(
            {
                "study": table.study,
                "learners": learners,
                "speedup": speedup,
                "modelled_speedup": alone / replayed.seconds,
                "mpi_share": mpi_share,
                "modelled_mpi_share": replayed.mpi_share,
            }
        )
    return pd.DataFrame(rows)


def agreeing_value(
    figure: Figure, achieved: Achieved | None = None, tolerance: float = 0.01, tries: int = 8
) -> float | None:
    """The value of the figure's unknown at which the modelled speedup is the published one (to
    `tolerance`, relative), every shared cost as `achieved`: the Illinois method on
    log(modelled / published) against log(value), from the ends of the unknown's range; None
    where no value in the range gives it."""
    achieved = achieved or Achieved.fitted()

    def error(log_value: float) -> float:
        return math.log(
            modelled_speedup(figure.with_unknown(math.exp(log_value)), achieved) / figure.speedup
        )

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
