"""Timing at the studies' scale: an algorithm's schedule of requests replayed on a modelled cluster
for a stated model, minibatch and optimizer, without its arithmetic.

A simulated run trains every learner for real, which on this machine caps a study at small
models. The modelled clock, though, needs only each request's kind, frames and bytes. A replay
runs the algorithm's own program (the same generator of `asrscale.worlds.ops` requests a trained
run yields) for `StandIn` learners: their tensors live on PyTorch's meta device, so they have
shapes and byte counts but no values, and a world's exchanges move nothing; their gradients,
updates and preconditionings are charged by the cost model and never computed (the simulated
world's fusers, which carry out learners' work, are given ones that do nothing). So a schedule of
64 learners of a 43M-parameter model replays in seconds on a CPU, with the orders of the
asynchronous algorithms (ASGD's pushes, ADPSGD's pairings) coming from the modelled clock as in a
trained run. What a replay leaves out: the data (every step has the stated frames; no loader
waits beyond the profile's data rate: a node's, shared by its learners, at the fitted rate where
the profile states none), dev evaluation and checkpoints (a trained run's epoch time leaves them
out too), and anything that depends on values (KAVG's plateau policy sees no dev loss).

The compute a step costs is the hardware profile's (`hardware.<name>.compute`), carried to the
stated model by the ratio of FLOPs per frame and of parameters: a profile whose compute was
measured for the replayed model's own size (or derived from a study's own single-GPU time) is
charged as measured.
"""

import math
from dataclasses import dataclass

import numpy as np
import torch

from asrscale.config.algorithms import algorithm_spec
from asrscale.training.algorithms import make_algorithm
from asrscale.training.learner import Learner, make_optimizer
from asrscale.worlds import ops
from asrscale.worlds.clock import Achieved, CostModel, Hardware
from asrscale.worlds.simulated import SimWorld
from asrscale.worlds.timing import CATEGORIES

#: the optimizers a workload may state (an averaging of the model and the optimizer's state moves
#: Adam's two moments, SGD's velocity)
OPTIMIZERS = ("adam", "sgd")


@dataclass(frozen=True)
class Workload:
    """What one learner computes: a model of `parameters` (fp32) at `flops_per_frame` forward FLOPs
    per input frame, minibatches of `frames_per_step` input frames, `steps` of them an epoch, under
    `optimizer` (its state travels with an averaging of the model and the optimizer's state)."""

    parameters: int
    flops_per_frame: float
    frames_per_step: int
    steps: int
    optimizer: str = "adam"

    def __post_init__(self):
        if min(self.parameters, self.frames_per_step, self.steps) < 1 or self.flops_per_frame <= 0:
            raise ValueError(f"a workload needs positive sizes: {self}")
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(
                f"a workload's optimizer is one of {OPTIMIZERS}, not {self.optimizer!r}"
            )


@dataclass(frozen=True)
class _Batch:
    frames: int


class _Job:
    """A stand-in's gradient as a world may defer it: nothing to compute, nothing to fix."""

    def fixed(self) -> "_Job":
        return self


class _Sizes(torch.nn.Module):
    """A model of `parameters` values that holds none: on the meta device, one square affine map
    (NG-SGD sizes its statistics by a map's sides: a square keeps them small) and the values left
    over. With `headers`, one real value first, so that the messages whose headers are made beside
    the first parameter (a parameter server's) carry real ones."""

    def __init__(self, parameters: int, headers: bool):
        super().__init__()
        if headers:
            self.header = torch.nn.Parameter(torch.zeros(1))
            parameters -= 1
        side = math.isqrt(parameters)
        self.weight = torch.nn.Parameter(torch.empty(side, side, device="meta"))
        self.rest = torch.nn.Parameter(torch.empty(parameters - side * side, device="meta"))


class StandIn(Learner):
    """A learner of `Workload` without arithmetic: a `Learner` of a model and optimizer whose
    tensors have sizes but no values, whose gradients and updates are requests a world charges
    and never computes."""

    def __init__(self, workload: Workload, headers: bool = False):
        model = _Sizes(workload.parameters, headers)
        super().__init__(model, make_optimizer(workload.optimizer, 0.9, model), 0.0, "a stand-in")

    def backward(self, batch, recorder=None):
        yield ops.Gradient(lambda: 0.0, batch.frames, _Job())
        return 0.0

    def averaged_backward(self, batch, group: str, bucket_mb: float):
        gradient = ops.Gradient(lambda: 0.0, batch.frames, _Job())
        yield ops.AveragedGradient(gradient, self.parameters, lambda: None, group, bucket_mb)
        return 0.0

    def update(self, lr: float):
        self.steps += 1
        yield ops.Update(lambda: None, None)


def _nothing(jobs: list) -> list:
    return [0.0] * len(jobs)


#: the simulated world's fusers for stand-ins: every learner's work charged, none computed
NO_ARITHMETIC = {ops.Gradient: _nothing, ops.Update: _nothing, ops.Precondition: _nothing}


@dataclass(frozen=True)
class Replayed:
    """A replay's modelled time: from the first learner's start of the first epoch to the last
    learner's end of the last (`seconds`), and the learners' mean time split within it."""

    seconds: float
    split: dict  # category -> mean seconds a learner over that span (asrscale.worlds.timing)

    @property
    def mpi_share(self) -> float:
        """The share of a learner's time inside MPI calls: its communication (not the copies to and
        from host memory around them) and its waits at barriers (idle: inside an MPI_Allreduce in
        codes that make no barrier of their own, as su15's)."""
        return (self.split["communication"] + self.split["idle"]) / sum(
            self.split[c] for c in CATEGORIES
        )


def replay(
    algorithm: str,
    learners: int,
    workload: Workload,
    hardware: Hardware,
    options: dict | None = None,
    epochs: int = 1,
    prefetch: int = 4,
    seed: int = 1,
    achieved: Achieved | None = None,
    held_out: float = 0.0,
) -> Replayed:
    """`epochs` epochs of `algorithm` with `learners` learners of `workload` on `hardware` (an
    epoch ends when its last learner ends it), at what transports and software `achieved`; at
    each epoch's end every learner evaluates a held-out set of `held_out` times the epoch's frames
    (as Kaldi nnet1's cross-validation, not divided among learners)."""
    if hardware.device != "dedicated":
        raise ValueError(
            f"a replay needs a profile whose devices state their compute (dedicated): "
            f"hardware.{hardware.name} shares this machine's"
        )
    servers = algorithm_spec(algorithm).servers
    model = {"flops_per_frame": workload.flops_per_frame, "parameters": workload.parameters}
    costs = CostModel(hardware, {"model": model}, seed=seed, achieved=achieved)
    world = SimWorld(
        learners,
        costs,
        servers,
        prefetch=prefetch,
        name=f"replay of {algorithm}",
        fusers=NO_ARITHMETIC,
    )
    begins, ends, splits = [], [], []

    def program(layout: ops.Layout, serving: bool, clock):
        replayed, learner = (
            make_algorithm(algorithm, layout, options),
            StandIn(workload, headers=servers > 0),
        )
        if serving:
            return replayed.serve(learner, lambda step: None, lambda: None)
        return _schedule(
            replayed, learner, workload, epochs, clock, (begins, ends, splits), held_out * learners
        )

    world.launch(program)
    split = {
        category: float(np.mean([s[f"{category}_s"] for s in splits])) for category in CATEGORIES
    }
    return Replayed(max(ends) - min(begins), split)


def _schedule(
    algorithm,
    learner: StandIn,
    workload: Workload,
    epochs: int,
    clock,
    times: tuple[list, list, list],
    held_out: float,
):
    """A learner's program as the trainer's loop (asrscale.training.loop) runs it, without data
    or checkpoints: the algorithm's start and plan, each epoch's steps, its evaluation of
    `held_out` times the learner's own frames, and its end, then the algorithm's finish. `times`:
    when it began its first epoch and ended its last, and its time split between them."""
    yield from algorithm.start(learner)
    yield from algorithm.plan(workload.frames_per_step)
    batch = _Batch(workload.frames_per_step)
    times[0].append(clock.now())
    clock.reset()
    for _ in range(epochs):
        for _ in range(workload.steps):
            yield ops.DataWait(0.0, batch.frames)
            yield from algorithm.step(learner, batch, 0.0)
        yield from algorithm.epoch_done(learner)
        if held_out:
            yield ops.Compute(
                0.0, round(held_out * workload.steps * workload.frames_per_step), "evaluate"
            )
        yield from algorithm.end_epoch(learner, math.inf)
    times[1].append(clock.now())
    times[2].append(clock.snapshot())
    yield from algorithm.finish(learner)
