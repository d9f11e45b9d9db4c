"""What a learner asks of its world: the one way algorithms communicate and spend time.

An algorithm's step is a generator: it yields these requests and receives their results. The MPI
world (`asrscale.worlds.mpi.MPIWorld`) carries them out on real ranks with mpi4py; a simulated world
(`asrscale.worlds.simulated.SimWorld`) carries out the same requests for P learners in one process
against a modelled clock. So each algorithm has one implementation, whichever world runs it.

Groups: "world" is every rank, "learners" every rank but servers, "node" the learners of one
node, "leaders" one learner per node (the node's rank 0).
Tensors travel through their buffers and are changed in place.
"""

from collections.abc import Callable, Generator
from dataclasses import dataclass, replace
from typing import Protocol

import torch

from asrscale.worlds.timing import WallTimes

COMPUTE_KINDS = ("backward", "update", "precondition", "evaluate")


@dataclass
class Compute:
    """The learner has just spent `seconds` computing (one of `COMPUTE_KINDS`, over `frames` input
    frames; a learner's own arithmetic is asked for with `Gradient`, `Update` and `Precondition`,
    which a world carries out). A simulated world charges its modelled time for the kind and
    frames instead of the seconds measured."""

    seconds: float
    frames: int = 0
    kind: str = "backward"


# A learner's own arithmetic, which a world carries out: `alone()` does it alone (and returns its
# result); a world may instead defer it, never past anything that would read or change what it
# computes on, and carry out many learners' of one kind together through that kind's fuser (given
# their `job`s; asrscale.training.fused.learners), exactly as each alone. `kind` and `frames` model
# its time.


@dataclass
class Gradient:
    """Compute a learner's loss and gradient of a minibatch of `frames` input frames (into its
    parameters' gradients); returns the loss. `job.fixed()`: the job computing on a copy of its
    inputs as they are, so that a world may let the learner's model be averaged meanwhile."""

    alone: Callable[[], float]
    frames: int
    job: object = None
    #: the group whose average this gradient becomes, unclipped (`AveragedGradient`'s): a world
    #: may compute the group's minibatches as one where their parameters are equal (SSGD's)
    averaged_over: str | None = None
    kind = "backward"


@dataclass
class AveragedGradient:
    """A learner's `gradient` of its minibatch (computed unclipped into its `parameters`'
    gradients), averaged over the group's learners as one gradient of all their minibatches, then
    `finish()`ed (clipped). A world may allreduce it in buckets of about
    `bucket_mb` as the backward pass produces them, in the order every learner launches them, as
    DistributedDataParallel does (asrscale.worlds.mpi); `parts()` is the same in turn: compute,
    wait for every learner, average. Returns the learner's loss."""

    gradient: Gradient
    parameters: list[torch.Tensor]
    finish: Callable[[], None]
    group: str = "learners"
    bucket_mb: float = 25.0

    @property
    def gradients(self) -> list[torch.Tensor]:
        return [parameter.grad for parameter in self.parameters]

    def parts(self):
        loss = yield replace(self.gradient, averaged_over=self.group)
        # the barrier splits waiting for slower learners (idle) from the transfer (communication)
        yield Barrier(self.group)
        yield Allreduce(self.gradients, self.group)
        self.finish()
        return loss


def in_parts(program):
    """`program` with every request that a world carries out as its parts (`AveragedGradient`)
    asked for part by part."""
    result = None
    while True:
        try:
            request = program.send(result)
        except StopIteration as done:
            return done.value
        result = (
            (yield from request.parts())
            if isinstance(request, AveragedGradient)
            else (yield request)
        )


@dataclass
class Update:
    """Apply a learner's optimizer step (its gradient, at its learning rate)."""

    alone: Callable[[], None]
    job: object = None
    kind, frames = "update", 0


@dataclass
class Precondition:
    """Replace a learner's gradient by its natural gradient (NG-SGD,
    asrscale.training.natural_gradient) from the statistics its last `Gradient` recorded."""

    alone: Callable[[], None]
    job: object = None
    kind, frames = "precondition", 0


WORK = (Gradient, Update, Precondition)


@dataclass
class DataWait:
    """The learner has just waited `seconds` for its next batch, of `frames` input frames."""

    seconds: float
    frames: int = 0


@dataclass
class Allreduce:
    """Replace each tensor by its mean over the group."""

    tensors: list[torch.Tensor]
    group: str = "world"


@dataclass
class Broadcast:
    """Every member of the group receives the tensors of the group's rank `root`."""

    tensors: list[torch.Tensor]
    root: int = 0
    group: str = "world"


@dataclass
class Barrier:
    """Wait for every member of the group (time counted as idle)."""

    group: str = "world"


@dataclass
class Reduce:
    """Element-wise "sum", "min" or "max" of a small vector of statistics over the group;
    returns a NumPy array."""

    values: list[float]
    group: str = "world"
    op: str = "sum"


@dataclass
class Gossip:
    """Begin an averaging with `peer`, which serves (`Serve`): it answers with a copy of its
    tensors as they are, received into `receive`, and makes its own the average of theirs and
    `send` (a copy of `send` as it is now); returns a handle to `Wait` on. The learner goes on
    computing meanwhile, and averages its own when the answer is in."""

    send: list[torch.Tensor]
    receive: list[torch.Tensor]
    peer: int
    group: str = "world"


@dataclass
class Serve:
    """Until `StopServing`, answer the `Gossip` of the group's `peers` on `tensors`, without the
    learner taking part: each asking peer receives a copy of them as they are, and they become
    the average of that copy and the peer's (between the learner's requests, never under a
    computation it has started)."""

    tensors: list[torch.Tensor]
    peers: list[int]
    group: str = "world"


@dataclass
class Notify:
    """Tell the group's `peers` that this learner will gossip no more (until the next epoch)."""

    peers: list[int]
    group: str = "world"


@dataclass
class StopServing:
    """Block until every peer served has said (`Notify`) that it gossips no more, answering
    meanwhile (time counted as idle)."""


@dataclass
class Wait:
    """Block until a gossip has been answered (time counted as communication)."""

    handle: object


@dataclass
class Send:
    """Send tensors to rank `to` of the world (blocking until they are on their way)."""

    tensors: list[torch.Tensor]
    to: int
    tag: int = 0


@dataclass
class Receive:
    """Receive into `tensors` from rank `source` of the world, or from whoever sends first
    when `source` is None; returns (source, tag)."""

    tensors: list[torch.Tensor]
    source: int | None = None
    tag: int | None = None


@dataclass
class Gather:
    """Small Python objects (metrics rows) from every member to the group's rank 0, which
    receives the list; the others receive None. Pickled: never on the hot path."""

    value: object
    group: str = "learners"


@dataclass
class Layout:
    """Where a rank stands: `rank` and `size` among the learners, its node, its rank within the
    node, and how many server ranks (not learners) the world has."""

    rank: int
    size: int
    node: int = 0
    node_rank: int = 0
    node_size: int = 1
    nodes: int = 1
    servers: int = 0


def run_alone(program):
    """Run a learner's program by itself, as no world would: its own arithmetic (`WORK`) carried
    out, every other request ignored (timing one learner's work, as calibration and the
    benchmarks do). Returns the program's value."""
    program, reply = in_parts(program), None
    try:
        while True:
            request = program.send(reply)
            reply = request.alone() if isinstance(request, WORK) else None
    except StopIteration as stop:
        return stop.value


def flatten(tensors: list[torch.Tensor]) -> torch.Tensor:
    """The tensors' values in one new 1-D tensor (one buffer to send)."""
    return torch.cat([t.detach().reshape(-1) for t in tensors])


def unflatten(flat: torch.Tensor, tensors: list[torch.Tensor]) -> None:
    """Copy a flat buffer back into the tensors, in place."""
    with torch.no_grad():
        for tensor, part in zip(tensors, flat.split([t.numel() for t in tensors])):
            tensor.copy_(part.view_as(tensor))


class World(Protocol):
    """What the trainer asks of a world, besides carrying out every request of this module: both
    `asrscale.worlds.mpi.MPIWorld` and `asrscale.worlds.simulated.SimWorld` serve it."""

    device: torch.device  # where this process's learners compute
    threads_per_rank: int  # torch threads a learner may use
    label: str  # names the world (and this rank) in error messages
    # where this process's wall time went, by phase (measured by the world and the trainer)
    wall: WallTimes
    all_ranks_here: bool  # whether every rank of the run lives in this process (a simulated world)

    def launch(self, program: Callable[[Layout, bool, object], Generator]) -> None:
        """Run every rank's program that lives in this process: `program(layout, serving, clock)`
        makes one (a server's where `serving`), `clock` its `asrscale.worlds.timing.TimeSplit`."""

    def evaluation_part(self, layout: Layout) -> tuple[int, int] | None:
        """Which part of the dev set a learner evaluates with the learners' consensus model, as
        (part, parts), or None for no part: in the MPI world each rank evaluates its share; a
        simulated world's learner 0 evaluates the whole set at once (in full batches), and the
        others need no copy of the consensus model."""

    def batches_ahead(self, prefetch: int) -> int:
        """How many batches each learner has built ahead while it computes, given train.prefetch
        (asrscale.data.batches.Prefetcher; 0: each built when taken)."""

    def description(self) -> dict:
        """What a run's timings rest on (recorded with the run, part of a checkpoint's identity)."""

    def abort(self, code: int = 1) -> None:
        """End every rank of the run: one rank's error must not leave the others waiting."""
