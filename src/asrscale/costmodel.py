"""The cost model of the simulated world, in one place: how long each request takes on a modelled
cluster. Every parameter comes from a named hardware profile in config.yaml (`hardware:`) or from
a calibration measured on the machine that runs the simulation.

Compute. A forward and backward pass over a minibatch of F input frames takes a + b·F seconds,
an optimizer update u seconds and NG-SGD preconditioning n seconds, as calibrated by timing this
model on this machine (`calibrate`). A profile's `device` says whose compute that is:
- "shared-cpu": the learners of one node share the calibrating machine's C cores, as MPI ranks on
  this machine do: with R ranks on a machine each has max(1, C // R) threads (the calibration at that
  thread count) and runs max(1, R / C) times slower when the cores are oversubscribed;
- "dedicated": each learner has a device of its own (a GPU) that runs the calibration at all
  cores `speed_factor` times faster, or at `frames_per_s` input frames per second (which sets
  the speed factor from the calibrated throughput of a typical minibatch).
Stragglers: learner r's compute takes `stragglers[r]` times longer, and every forward-backward
pass is multiplied by a log-normal jitter exp(σz - σ²/2), σ = `jitter`, z ~ N(0, 1) drawn from
the run's seed, so that a run is deterministic.

Data. Building a minibatch of F frames takes F / `data_frames_per_s` seconds (calibrated when
null). With prefetch (train.prefetch = D > 0) a loader builds batches back to back while the
learner computes, at most D ahead; without, the learner waits for the whole build.

Communication, over a link of latency α and bandwidth β: the node link between ranks on one
machine of the profile (`learners_per_node` learners each), the network link otherwise (a
collective uses the network link if it spans machines).
- point to point, n bytes: α + n/β; a rank's link carries one message in and one out at a time,
  so messages to one rank (ASGD's parameter server) queue behind each other: contention.
- allreduce over R ranks (ring): 2(R-1)·α + 2(R-1)/R · n/β;
- broadcast (binomial tree): ⌈log₂R⌉·(α + n/β);
- barrier and the small reductions of statistics: 2⌈log₂R⌉·α.
"""

import math
import time
from dataclasses import asdict, dataclass, field

import numpy as np
import torch

from asrscale.models import build_model
from asrscale.natural_gradient import NaturalGradient
from asrscale.provenance import available_cores
from asrscale.train import Learner, make_optimizer

DEVICES = ("shared-cpu", "dedicated")


@dataclass(frozen=True)
class Link:
    latency_us: float
    bandwidth_gbps: float  # gigabits per second

    def __post_init__(self):
        if self.latency_us < 0 or self.bandwidth_gbps <= 0:
            raise ValueError(f"a link needs latency_us >= 0 and bandwidth_gbps > 0, not {self}")

    @property
    def latency_s(self) -> float:
        return self.latency_us * 1e-6

    def seconds(self, nbytes: int) -> float:
        return nbytes * 8 / (self.bandwidth_gbps * 1e9)


@dataclass(frozen=True)
class Hardware:
    """A named hardware profile (config.yaml `hardware.<name>`); see the module docstring."""

    name: str
    device: str = "shared-cpu"
    learners_per_node: int = 1024
    speed_factor: float = 1.0
    frames_per_s: float | None = None
    data_frames_per_s: float | None = None
    node_link: Link = field(default_factory=lambda: Link(3.3, 35.0))
    network_link: Link = field(default_factory=lambda: Link(20.0, 10.0))
    jitter: float = 0.0
    stragglers: dict = field(default_factory=dict)  # learner rank -> slowdown factor

    @classmethod
    def from_config(cls, name: str, settings: dict) -> "Hardware":
        settings = {key: value for key, value in settings.items() if key != "description"}
        for key in ("node_link", "network_link"):
            if key in settings:
                settings[key] = Link(**settings[key])
        settings["stragglers"] = {int(rank): float(f) for rank, f in settings.get("stragglers", {}).items()}
        hardware = cls(name=name, **settings)
        if hardware.device not in DEVICES:
            raise ValueError(f"hardware.{name}.device must be one of {DEVICES}, not {hardware.device!r}")
        if hardware.learners_per_node < 1 or hardware.speed_factor <= 0 or hardware.jitter < 0:
            raise ValueError(f"hardware.{name}: learners_per_node >= 1, speed_factor > 0 and jitter >= 0 expected")
        return hardware


def _drain(program) -> None:
    """Run a learner's generator alone, ignoring what it asks of a world."""
    for _ in program:
        pass


def _seconds(function, repeat: int = 1) -> float:
    start = time.perf_counter()
    for _ in range(repeat):
        function()
    return (time.perf_counter() - start) / repeat


def calibrate(train_config, model_config, feature_config, train_set, batches: int = 12) -> dict:
    """Time this model on this machine, at one thread and at all cores: forward-backward seconds
    a + b·frames (least squares over minibatches of the training data), update and
    preconditioning seconds, and the single-thread data loading rate."""
    groups = train_set.batches(sorted(train_set.frames), train_config.batch_size, seed=train_config.seed)
    groups = groups[: batches + 2]
    threads_before = torch.get_num_threads()
    torch.set_num_threads(1)
    load_s = [_seconds(lambda g=g: train_set.collate(g)) for g in groups]
    minibatches = [train_set.collate(g) for g in groups]
    frames = sum(b.frames for b in minibatches)
    calibration = {"data_frames_per_s": frames / sum(load_s), "cores": available_cores(), "by_threads": {}}
    for threads in sorted({1, available_cores()}):
        torch.set_num_threads(threads)
        torch.manual_seed(train_config.seed)
        model = build_model(model_config, feature_config.dim, len(train_set.tokens))
        learner = Learner(model, make_optimizer(train_config, model), train_config.clip_grad_norm, "calibration")
        calibration["by_threads"][str(threads)] = _time_learner(learner, minibatches, train_config.lr)
    torch.set_num_threads(threads_before)
    return calibration


def _time_learner(learner, minibatches, lr: float) -> dict:
    for batch in minibatches[:2]:  # warm-up
        _drain(learner.backward(batch))
    timed = minibatches[2:]
    frames = np.array([b.frames for b in timed], dtype=float)
    seconds = np.array([_seconds(lambda b=b: _drain(learner.backward(b))) for b in timed])
    slope, intercept = np.polyfit(frames, seconds, 1) if len(timed) > 1 else (0.0, -1.0)
    if intercept < 0 or slope <= 0:  # a negative cost is noise: keep the total time, all per frame
        slope, intercept = seconds.sum() / frames.sum(), 0.0
    natural_gradient = NaturalGradient(learner.parameters, len(timed[0].utts))
    return {
        "backward_s_per_frame": float(slope),
        "backward_s_per_batch": float(intercept),
        "update_s": _seconds(lambda: _drain(learner.update(lr)), 5),
        # two refresh periods, so the eigendecompositions weigh as they do in a run
        "precondition_s": _seconds(natural_gradient.precondition, 2 * natural_gradient.update_period),
        "frames_per_s": float(frames.sum() / seconds.sum()),
    }


class CostModel:
    """Seconds for each request on a hardware profile, from a calibration (see the module docstring)."""

    def __init__(self, hardware: Hardware, calibration: dict, seed: int = 1):
        self.hardware, self.calibration = hardware, calibration
        self.rng = np.random.default_rng(seed)
        cores = calibration["cores"]
        self.cores = cores
        fastest = calibration["by_threads"][str(max(int(t) for t in calibration["by_threads"]))]
        if hardware.device == "dedicated" and hardware.frames_per_s:
            self.speed = hardware.frames_per_s / fastest["frames_per_s"]
        else:
            self.speed = hardware.speed_factor
        self.data_frames_per_s = hardware.data_frames_per_s or calibration["data_frames_per_s"]

    def _rates(self, ranks_on_machine: int) -> tuple[dict, float]:
        """The calibration that applies to one rank, and how much slower it runs."""
        by_threads = {int(t): rates for t, rates in self.calibration["by_threads"].items()}
        if self.hardware.device == "dedicated":
            return by_threads[max(by_threads)], 1 / self.speed
        threads = max(1, self.cores // ranks_on_machine)
        nearest = max(t for t in by_threads if t <= threads) if min(by_threads) <= threads else min(by_threads)
        return by_threads[nearest], max(1.0, ranks_on_machine / self.cores) / self.speed

    def compute_s(self, kind: str, frames: int, learner: int | None, ranks_on_machine: int) -> float:
        rates, slowdown = self._rates(ranks_on_machine)
        if kind == "backward":
            seconds = rates["backward_s_per_batch"] + rates["backward_s_per_frame"] * frames
            if self.hardware.jitter:
                sigma = self.hardware.jitter
                seconds *= math.exp(sigma * self.rng.standard_normal() - sigma**2 / 2)
        elif kind == "update":
            seconds = rates["update_s"]
        elif kind == "precondition":
            seconds = rates["precondition_s"]
        else:
            raise ValueError(f"no cost for compute of kind {kind!r}")
        return seconds * slowdown * self.hardware.stragglers.get(learner, 1.0)

    def load_s(self, frames: int) -> float:
        return frames / self.data_frames_per_s

    def link(self, same_node: bool) -> Link:
        return self.hardware.node_link if same_node else self.hardware.network_link

    def point_to_point_s(self, nbytes: int, same_node: bool) -> float:
        link = self.link(same_node)
        return link.latency_s + link.seconds(nbytes)

    def allreduce_s(self, nbytes: int, ranks: int, same_node: bool) -> float:
        link = self.link(same_node)
        return 2 * (ranks - 1) * link.latency_s + 2 * (ranks - 1) / ranks * link.seconds(nbytes)

    def broadcast_s(self, nbytes: int, ranks: int, same_node: bool) -> float:
        link = self.link(same_node)
        return math.ceil(math.log2(ranks)) * (link.latency_s + link.seconds(nbytes))

    def small_s(self, ranks: int, same_node: bool) -> float:
        return 2 * math.ceil(math.log2(ranks)) * self.link(same_node).latency_s

    def description(self) -> dict:
        return {"hardware": asdict(self.hardware), "calibration": self.calibration, "speed_factor": self.speed}
