"""The cost model of the simulated world, in one place: how long each request takes on a modelled
cluster, from a named hardware profile (built in: src/asrscale/config/profiles.yaml; a study's
own: its `hardware:`), this machine's calibration, and what transports and software achieve of
their hardware (`Achieved`, fitted by asrscale.costmodel.fit). What each request costs, and why:
docs/internals.md, "The cost model"."""

import math
from dataclasses import asdict, dataclass
from importlib import resources

import numpy as np
import yaml

from asrscale.errors import ConfigError, UserError

DEVICES = ("shared", "dedicated")
RATES = ("backward_s_per_batch", "backward_s_per_frame", "update_s", "precondition_s")
#: how a link carries data: "measured" (its bandwidth as measured, taken as it is), or a kind of
#: transport whose achieved share of the nominal bandwidth is fitted (`Achieved.shares`): "mpi-host"
#: is MPI through host memory as one path (a non-CUDA-aware MPI's copies and transfer together)
TRANSPORTS = ("measured", "tcp", "infiniband", "nvlink", "pcie", "host-copy", "mpi-host")
#: the fit's record (made by asrscale.costmodel.fit), beside the clock that reads it
FITTED = resources.files("asrscale.worlds") / "fitted.yaml"


@dataclass(frozen=True)
class Link:
    latency_us: float
    bandwidth_gbps: float  # gigabits per second: nominal, or as measured ("measured")
    transport: str = "measured"

    def __post_init__(self):
        if self.latency_us < 0 or self.bandwidth_gbps <= 0:
            raise ConfigError(f"a link needs latency_us >= 0 and bandwidth_gbps > 0, not {self}")
        if self.transport not in TRANSPORTS:
            raise ConfigError(f"a link's transport is one of {TRANSPORTS}, not {self.transport!r}")

    @property
    def latency_s(self) -> float:
        return self.latency_us * 1e-6

    def seconds(self, nbytes: int) -> float:
        return nbytes * 8 / (self.bandwidth_gbps * 1e9)


@dataclass(frozen=True)
class Achieved:
    """What real software achieves of its hardware's nominal figures: properties of kinds of
    transport and software, the same in every cluster, fitted once over the studies' published
    speedups and su15's time table (asrscale.costmodel.fit) and read from fitted.yaml."""

    shares: dict  # transport -> the share of a link's nominal bandwidth it achieves
    serving: float  # the share of a gossip exchange's time its passive learner loses
    node_data_frames_per_s: float  # a node's loading, where a published cluster does not state it
    forward_share: (
        float  # a forward pass's time a frame (evaluation), as a share of a forward-backward's
    )

    def __post_init__(self):
        unknown = set(self.shares) ^ (set(TRANSPORTS) - {"measured"})
        if unknown or not all(0 < share for share in self.shares.values()):
            raise ConfigError(
                f"achieved shares are positive, one for each of {TRANSPORTS[1:]}: {self.shares}"
            )
        if self.serving < 0 or self.node_data_frames_per_s <= 0 or self.forward_share <= 0:
            raise ConfigError(
                f"achieved serving >= 0, node_data_frames_per_s and forward_share > 0, not {self}"
            )

    def link(self, link: Link) -> Link:
        """The link as its transport carries data: its achieved bandwidth."""
        if link.transport == "measured":
            return link
        return Link(link.latency_us, link.bandwidth_gbps * self.shares[link.transport])

    @classmethod
    def fitted(cls) -> "Achieved":
        """The values `asrscale fit-cost-model` found (fitted.yaml)."""
        return cls(**yaml.safe_load(FITTED.read_text())["achieved"])


@dataclass(frozen=True)
class HostStaging:
    """A cluster whose MPI is not CUDA-aware: every transfer goes through host memory, over
    `link` (a GPU's PCIe, transport "host-copy"), and an allreduce sums on the host at
    `memory_gbps`."""

    link: Link
    memory_gbps: float

    def __post_init__(self):
        if self.memory_gbps <= 0:
            raise ConfigError(f"host_staging.memory_gbps must be > 0, not {self.memory_gbps}")


@dataclass(frozen=True)
class Compute:
    """A dedicated device's compute, measured on one device for one model (`asrscale calibrate`
    prints it for the machine it runs on)."""

    measured_on: str
    flops_per_frame: float  # of the model measured
    parameters: int
    backward_s_per_batch: float
    backward_s_per_frame: float
    update_s: float
    precondition_s: float
    relative_speed: float  # the profile's device against the one measured
    # other widths of the model measured: (flops_per_frame, backward_s_per_frame) pairs
    by_size: tuple = ()

    def __post_init__(self):
        if (
            min(getattr(self, rate) for rate in RATES) < 0
            or self.relative_speed <= 0
            or self.flops_per_frame <= 0
        ):
            raise ConfigError(
                f"compute rates must be >= 0, relative_speed and flops_per_frame > 0: {self}"
            )
        points = [tuple(point) for point in self.by_size]
        if any(
            len(point) != 2 or not all(math.isfinite(v) and v > 0 for v in point)
            for point in points
        ):
            raise ConfigError(
                "by_size holds [flops_per_frame, backward_s_per_frame] pairs, each > 0, not "
                f"{points}"
            )
        object.__setattr__(self, "by_size", tuple(sorted(points)))

    def seconds_per_frame(self, flops_per_frame: float) -> float:
        """Forward-backward seconds a frame of a model of `flops_per_frame`, on the device measured:
        at the measured model's efficiency, or read off the efficiency curve where by_size gives
        one."""
        if not self.by_size or self.backward_s_per_frame == 0:
            return self.backward_s_per_frame * flops_per_frame / self.flops_per_frame
        curve = sorted({*self.by_size, (self.flops_per_frame, self.backward_s_per_frame)})
        sizes = np.log([flops for flops, _ in curve])
        seconds_per_flop = np.log([seconds / flops for flops, seconds in curve])
        return flops_per_frame * float(
            np.exp(np.interp(math.log(flops_per_frame), sizes, seconds_per_flop))
        )

    def rates_for(self, model: dict) -> dict:
        """The rates for `model` ({flops_per_frame, parameters}), at this device's speed."""
        work = model["flops_per_frame"] / self.flops_per_frame
        size = model["parameters"] / self.parameters
        measured = {
            "backward_s_per_batch": self.backward_s_per_batch * (1.0 if self.by_size else work),
            "backward_s_per_frame": self.seconds_per_frame(model["flops_per_frame"]),
            "update_s": self.update_s * size,
            "precondition_s": self.precondition_s * size,
        }
        return {rate: seconds / self.relative_speed for rate, seconds in measured.items()}


@dataclass(frozen=True)
class Hardware:
    """A named hardware profile (`hardware.<name>`); see the module docstring."""

    name: str
    device: str
    learners_per_node: int
    nics_per_node: int
    # a node's (null: a dedicated device's node at the fitted rate, a shared one's learners each
    # at this machine's calibrated rate)
    data_frames_per_s: float | None
    node_link: Link
    network_link: Link
    jitter: float
    stragglers: dict  # learner rank -> slowdown factor
    compute: Compute | None = None  # a dedicated device's
    host_staging: HostStaging | None = None  # where MPI is not CUDA-aware

    @classmethod
    def from_config(cls, name: str, settings: dict) -> "Hardware":
        """Profile `name` from its validated settings (`hardware.<name>`, defaults filled)."""
        settings = {
            key: value for key, value in settings.items() if key not in ("description", "name")
        }
        for key in ("node_link", "network_link"):
            if key in settings:
                settings[key] = Link(**settings[key])
        if settings.get("host_staging") is not None:
            staging = settings["host_staging"]
            settings["host_staging"] = HostStaging(Link(**staging["link"]), staging["memory_gbps"])
        if settings.get("compute") is not None:
            try:
                settings["compute"] = Compute(**settings["compute"])
            except (TypeError, ValueError) as error:
                raise ConfigError(f"hardware.{name}.compute: {error}") from None
        settings["stragglers"] = {
            int(rank): float(f) for rank, f in settings.get("stragglers", {}).items()
        }
        return cls(name=name, **settings)

    def __post_init__(self):
        if self.device not in DEVICES:
            raise ConfigError(
                f"hardware.{self.name}.device must be one of {DEVICES}, not {self.device!r}"
            )
        if (self.device == "dedicated") != (self.compute is not None):
            raise ConfigError(
                f"hardware.{self.name}.compute: a dedicated device states its compute (measured "
                "with `asrscale calibrate` on it), a shared one takes this machine's calibration"
            )
        if min(self.learners_per_node, self.nics_per_node) < 1 or self.jitter < 0:
            raise ConfigError(
                f"hardware.{self.name}: learners_per_node >= 1, nics_per_node >= 1 and jitter >= 0 "
                "expected"
            )


class CostModel:
    """Seconds for each request on a hardware profile (see the module docstring); `calibration`,
    this machine's, gives a shared device's rates and, where the profile states no loading rate,
    its learners' own loaders' rate. A dedicated device takes from it only the size of the model
    that its measured compute is carried over to: no time of the simulating machine reaches its
    clock, so the order of its events (ASGD's updates, ADPSGD's pairings) is the same on any
    machine. `achieved`, what transports and software achieve (by default as fitted)."""

    def __init__(
        self, hardware: Hardware, calibration: dict, seed: int = 1, achieved: Achieved | None = None
    ):
        self.hardware = hardware
        self.calibration = calibration if hardware.device == "shared" else None
        self.achieved = achieved or Achieved.fitted()
        # each learner's jitter drawn from a stream of its own: a learner's n-th computation is as
        # slow whatever order the world charges the learners' requests in (which the times decide)
        self.seed, self.jitters = seed, {}
        self.node_link, self.network_link = map(
            self.achieved.link, (hardware.node_link, hardware.network_link)
        )
        # a ring collective across nodes: the network's latency at the narrower of the node link
        # and the node's cards together (one ring channel a card)
        cards = self.network_link.bandwidth_gbps * hardware.nics_per_node
        self.ring_between_nodes = Link(
            self.network_link.latency_us, min(self.node_link.bandwidth_gbps, cards)
        )
        staging = hardware.host_staging
        self.host_link = self.achieved.link(staging.link) if staging else None
        if hardware.compute is not None:
            if "model" not in calibration:
                raise UserError(
                    "the calibration predates dedicated profiles' measured compute: delete it, and "
                    "the workflow calibrates again"
                )
            self.dedicated_rates = hardware.compute.rates_for(calibration["model"])
        self.data_frames_per_s, self.loading_per_node = self._loading(calibration)

    def _loading(self, calibration: dict) -> tuple[float, bool]:
        """The loading rate, and whether it is a node's (shared by its learners): the profile's
        where it states one; else a dedicated device's node loads at the fitted rate (as a
        published cluster that states none), and a shared device's learners each at this
        machine's calibrated rate."""
        if self.hardware.data_frames_per_s is not None:
            return self.hardware.data_frames_per_s, True
        if self.hardware.device == "dedicated":
            return self.achieved.node_data_frames_per_s, True
        return calibration["data_frames_per_s"], False

    def _rates(self, ranks_on_machine: int) -> tuple[dict, float]:
        """The rates that apply to one rank, and how much slower it runs."""
        if self.hardware.device == "dedicated":
            return self.dedicated_rates, 1.0
        by_threads = {int(t): rates for t, rates in self.calibration["by_threads"].items()}
        if (
            self.calibration.get("device", "cpu") != "cpu"
        ):  # one calibration of the GPU, shared in turn
            return by_threads[max(by_threads)], max(
                1.0, ranks_on_machine / self.calibration["gpus"]
            )
        cores = self.calibration["cores"]
        threads = max(1, cores // ranks_on_machine)
        nearest = (
            max(t for t in by_threads if t <= threads)
            if min(by_threads) <= threads
            else min(by_threads)
        )
        return by_threads[nearest], max(1.0, ranks_on_machine / cores)

    def compute_s(
        self, kind: str, frames: int, learner: int | None, ranks_on_machine: int
    ) -> float:
        rates, slowdown = self._rates(ranks_on_machine)
        if kind == "backward":
            seconds = rates["backward_s_per_batch"] + rates["backward_s_per_frame"] * frames
            if self.hardware.jitter:
                sigma = self.hardware.jitter
                seconds *= math.exp(sigma * self._jitter(learner).standard_normal() - sigma**2 / 2)
        elif kind == "update":
            seconds = rates["update_s"]
        elif kind == "precondition":
            seconds = rates["precondition_s"]
        elif kind == "evaluate":  # forward passes over a held-out set, in large batches
            seconds = self.achieved.forward_share * rates["backward_s_per_frame"] * frames
        else:
            raise ValueError(f"no cost for compute of kind {kind!r}")
        return seconds * slowdown * self.hardware.stragglers.get(learner, 1.0)

    def _jitter(self, learner: int | None):
        """A learner's stream of jitter, drawn from the run's seed and the learner (a server's from
        the seed alone: it shares none of a learner's draws)."""
        if learner not in self.jitters:
            key = [self.seed] if learner is None else [self.seed, learner]
            self.jitters[learner] = np.random.default_rng(key)
        return self.jitters[learner]

    def jitter_state(self) -> dict:
        """Where each stream of jitter stands, for a checkpoint (`load_jitter_state`)."""
        return {learner: stream.bit_generator.state for learner, stream in self.jitters.items()}

    def load_jitter_state(self, state: dict) -> None:
        """Each stream of jitter where a checkpoint's `jitter_state` had it."""
        for learner, position in state.items():
            self._jitter(learner).bit_generator.state = position

    def load_s(self, frames: int) -> float:
        return frames / self.data_frames_per_s

    def link(self, same_node: bool) -> Link:
        """The link a transfer crosses, as achieved: the node link inside a node, one network card
        between."""
        return self.node_link if same_node else self.network_link

    def point_to_point_s(self, nbytes: int, same_node: bool) -> float:
        link = self.link(same_node)
        return link.latency_s + link.seconds(nbytes)

    def _ring_link(self, same_node: bool) -> Link:
        return self.node_link if same_node else self.ring_between_nodes

    def allreduce_s(self, nbytes: int, ranks: int, same_node: bool) -> float:
        """The ring's time, with its sums on the host where MPI stages through host memory."""
        link = self._ring_link(same_node)
        ring = 2 * (ranks - 1) * link.latency_s + 2 * (ranks - 1) / ranks * link.seconds(nbytes)
        if self.hardware.host_staging is None:
            return ring
        return ring + 3 * (ranks - 1) / ranks * nbytes * 8 / (
            self.hardware.host_staging.memory_gbps * 1e9
        )

    def broadcast_s(self, nbytes: int, ranks: int, same_node: bool) -> float:
        link = self._ring_link(same_node)
        return math.ceil(math.log2(ranks)) * (link.latency_s + link.seconds(nbytes))

    def small_s(self, ranks: int, same_node: bool) -> float:
        return 2 * math.ceil(math.log2(ranks)) * self.link(same_node).latency_s

    def staging_s(self, nbytes: int) -> float:
        """One copy of `nbytes` between a device and host memory where MPI stages through it (0
        where it does not)."""
        return (
            0.0
            if self.host_link is None
            else self.host_link.latency_s + self.host_link.seconds(nbytes)
        )

    def serving_s(self, exchange_s: float) -> float:
        """What serving a gossip exchange of `exchange_s` costs its passive learner's computing."""
        return self.achieved.serving * exchange_s

    def description(self) -> dict:
        """What the modelled times rest on: the profile, what its links achieve, and a dedicated
        device's compute carried to the model, or the calibration that a shared device's rates
        come from."""
        described = {"hardware": asdict(self.hardware), "achieved": asdict(self.achieved)}
        if self.hardware.device == "dedicated":
            described["compute"] = self.dedicated_rates
        else:
            described["calibration"] = self.calibration
        return described
