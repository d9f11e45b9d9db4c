"""The MPI world: learner requests (`asrscale.worlds.ops`) carried out on real ranks with mpi4py.

Tensors travel through their buffers, never pickled on the hot path. Every request is timed
into the rank's `TimeSplit`: collectives and waits as communication, barriers as idle, and the
compute and data-wait time the learner reports.

Every model-sized exchange (SSGD's, KAVG's and MA's averaging, ADPSGD's gossip, ASGD's messages
to and from its server) goes by one of three `TRANSPORTS` (mpi.transport), the same for every
algorithm, so that they race on equal terms: "mpi" through host buffers (a GPU tensor is copied
to and from the host), "cuda-aware-mpi" with GPU buffers handed to MPI as they are (an MPI built
with CUDA support, mpi4py built against it), or "torch": torch.distributed set up from the MPI
ranks, NCCL on GPUs (Gloo on the CPU), point to point as well as collectives. MPI keeps what
torch.distributed cannot do: barriers, small reductions, and a message's envelope (its sender and
kind), which a receiver that takes whoever comes first (ASGD's server, a learner answering gossip)
matches before it receives the tensors themselves from that sender.
"""

import ctypes
import os
import re
import socket
import sys
import threading
import time
from functools import singledispatchmethod

import numpy as np
import torch
import torch.distributed as dist
from mpi4py import MPI

from asrscale.errors import ConfigError, UserError
from asrscale.provenance import available_cores
from asrscale.worlds import ops
from asrscale.worlds.devices import gpu_identity, resolve_device, synchronize
from asrscale.worlds.ops import flatten, unflatten
from asrscale.worlds.timing import TimeSplit, WallTimes

TRANSPORTS = ("mpi", "cuda-aware-mpi", "torch")
ENVELOPE = np.empty(0, np.float32)  # a message's envelope under torch: its sender and tag alone
GOSSIP, ANSWER, NOTIFY = 11, 12, 13  # point-to-point tags among learners


class _Responder:
    """A passive learner's answers to gossip (`ops.Serve`), in a thread of its own so that they
    come while the learner computes. An asking peer receives the served tensors as they are with
    every averaging answered so far (what they owe), and half the difference makes them the
    average; the learner's own thread adds what they owe between its requests, never under a
    computation it has started. So averagings answered together chain as if made one after
    another, and the model the learner computes on may lag them, as lian18 allows."""

    def __init__(
        self, world: "MPIWorld", group: str, tensors: list[torch.Tensor], peers: list[int]
    ):
        self.world, self.group, self.tensors, self.waiting = world, group, tensors, set(peers)
        self.lock, self.owed = threading.Lock(), torch.zeros_like(world.exchanged(flatten(tensors)))
        self.thread = threading.Thread(target=self._answer, daemon=True)
        self.thread.start()

    def _answer(self) -> None:
        self.world.on_device()
        theirs = torch.empty_like(self.owed)
        while self.waiting:
            source, tag = self.world.probe(self.group)
            if tag == NOTIFY:
                self.world.groups[self.group].Recv(ENVELOPE, source=source, tag=NOTIFY)
                self.waiting.discard(source)
                continue
            self.world.receive(theirs, self.group, source, GOSSIP)
            with self.lock:
                mine = self.world.exchanged(flatten(self.tensors)) + self.owed
                self.owed += (theirs - mine) / 2
            self.world.send(mine, source, self.group, ANSWER)

    def apply(self) -> None:
        """Add what the served tensors owe (the learner's own thread)."""
        with self.lock:
            owed, self.owed = self.owed, torch.zeros_like(self.owed)
            flat = flatten(self.tensors)
            unflatten(flat + owed.to(flat.device), self.tensors)


class _Summing:
    """An MPI allreduce under way, and what to do once it is done (a GPU tensor's copy back)."""

    def __init__(self, request, then):
        self.request, self.then = request, then

    def wait(self) -> None:
        self.request.Wait()
        self.then()


class _Buckets:
    """SSGD's gradients allreduced while the backward pass runs, as DistributedDataParallel does:
    the parameters in buckets of about `bucket_mb`, in the reverse of their order (the order a
    backward pass finishes them); a bucket is launched once its last gradient is in and every
    bucket before it is launched, so every learner launches them in one order."""

    def __init__(self, world: "MPIWorld", request: ops.AveragedGradient):
        self.world, self.request = world, request
        self.buckets, size = [[]], 0
        for index in reversed(range(len(request.parameters))):
            if size >= request.bucket_mb * 2**20:
                self.buckets.append([])
                size = 0
            self.buckets[-1].append(index)
            size += request.parameters[index].nbytes
        self.bucket_of = {index: b for b, members in enumerate(self.buckets) for index in members}
        self.missing = [len(members) for members in self.buckets]
        self.launched: list[tuple[torch.Tensor, object]] = []
        self.hooks = [
            parameter.register_post_accumulate_grad_hook(lambda _, index=index: self._in(index))
            for index, parameter in enumerate(request.parameters)
        ]

    def _in(self, index: int) -> None:
        self.missing[self.bucket_of[index]] -= 1
        self._launch_ready()

    def _launch_ready(self, every: bool = False) -> None:
        while len(self.launched) < len(self.buckets) and (
            every or self.missing[len(self.launched)] == 0
        ):
            members = self.buckets[len(self.launched)]
            flat = flatten([self.request.parameters[index].grad for index in members])
            self.launched.append((flat, self.world.start_allreduce(flat, self.request.group)))
            self.world.wall.exchanged_bytes += 2 * flat.nbytes

    def wait(self) -> None:
        """Launch what the backward pass did not reach, then the averages into the gradients."""
        self._launch_ready(every=True)
        learners = self.world.groups[self.request.group].Get_size()
        for members, (flat, handle) in zip(self.buckets, self.launched):
            handle.wait()
            unflatten(flat / learners, [self.request.parameters[index].grad for index in members])
        synchronize(self.world.device)

    def remove(self) -> None:
        for hook in self.hooks:
            hook.remove()


def mpi_cuda_support() -> bool | None:
    """Whether the loaded MPI library says it takes GPU buffers (MPICH and Open MPI both answer
    `MPIX_Query_cuda_support`); None where it cannot tell."""
    try:
        with open("/proc/self/maps") as maps:
            libraries = sorted(set(re.findall(r"/\S*libmpi[^/\s]*\.so[.\d]*", maps.read())))
        for library in libraries:
            query = getattr(ctypes.CDLL(library), "MPIX_Query_cuda_support", None)
            if query is not None:
                return bool(query())
    except OSError:
        pass
    return None


def choose_transport(requested: str, gpus: list[str | None], mpi_cuda: bool | None) -> str:
    """How model-sized exchanges go, given every rank's GPU (`gpu_identity`, None on the CPU).
    auto: NCCL (torch) where every rank has a GPU of its own, else MPI through host memory. A
    choice that cannot work on these ranks stops here, before any training, naming the setting."""
    if requested not in ("auto", *TRANSPORTS):
        raise ConfigError(f"mpi.transport must be auto or one of {TRANSPORTS}, not {requested!r}")
    on_gpus = all(g is not None for g in gpus)
    own_gpus = on_gpus and len(set(gpus)) == len(gpus)
    if requested == "auto":
        return "torch" if own_gpus else "mpi"
    if requested == "torch" and on_gpus and not own_gpus:
        raise ConfigError(
            f"mpi.transport is torch (NCCL between GPUs), but {len(gpus)} ranks share "
            f"{len(set(gpus))} GPU(s), "
            "and NCCL needs a GPU per rank: set mpi.transport to auto or mpi"
        )
    if requested == "cuda-aware-mpi" and any(g is not None for g in gpus) and mpi_cuda is False:
        library = MPI.Get_library_version().splitlines()[0].strip()
        raise ConfigError(
            f"mpi.transport is cuda-aware-mpi, but this MPI ({library}) says it takes no GPU "
            "buffers: set mpi.transport to auto or mpi"
        )
    return requested


class MPIWorld:
    """The world of real MPI ranks, timed by the wall clock. Ranks below `servers` serve (e.g.
    ASGD's parameter server); the others are learners. Every rank's layout counts the learners
    (`size`), so a server knows whom it serves.

    Learners are grouped into nodes by MPI's shared-memory split, or `node_size` at a
    time when given (so that 4 ranks on one machine can act as 2 nodes of 2). A request that
    has not completed after `timeout_s` (a peer hangs) ends every rank with an error naming this
    one; a peer that dies ends the job through the MPI launcher.

    `device` (train.device) places the rank: on a GPU, the machine's GPU of the rank's index among
    the ranks there; `transport` is agreed by every rank (`choose_transport`)."""

    def __init__(
        self,
        mpi_comm=None,
        servers: int = 0,
        node_size: int | None = None,
        timeout_s: float | None = None,
        name: str = "asrscale",
        transport: str = "auto",
        device: str = "cpu",
    ):
        world = mpi_comm or MPI.COMM_WORLD
        self.world, self.clock, self.wall = world, TimeSplit(), WallTimes()
        self.all_ranks_here = False  # each rank its own process
        self.rank, self.size = world.Get_rank(), world.Get_size()
        self.label = f"{name}: rank {self.rank} of {self.size}"
        if self.size <= servers:
            raise UserError(f"{servers} server rank(s) leave no learner among {self.size} ranks")
        self.serving = self.rank < servers
        self._group_ranks(servers, node_size)
        self._place_rank(device, transport)
        self._pending: tuple[float, object] | None = None
        self._responder: _Responder | None = None
        if timeout_s:
            threading.Thread(target=self._watch, args=(timeout_s,), daemon=True).start()

    def _group_ranks(self, servers: int, node_size: int | None) -> None:
        """The ranks' groups (every rank, the learners, this rank's node, the nodes' leaders) and
        this rank's place among the learners (`layout`)."""
        world = self.world
        learners = world.Split(1 if self.serving else 0, self.rank)
        if node_size:
            node = learners.Split(learners.Get_rank() // node_size, learners.Get_rank())
        else:
            node = learners.Split_type(MPI.COMM_TYPE_SHARED, learners.Get_rank())
        node_rank = node.Get_rank()
        leaders = learners.Split(0 if node_rank == 0 else MPI.UNDEFINED, learners.Get_rank())
        self.groups = {"world": world, "learners": learners, "node": node, "leaders": leaders}
        node_index = np.array([learners.Get_rank() if node_rank == 0 else 0])
        node.Bcast(node_index, root=0)  # the node's id: its leader's learner rank
        leader_ids = sorted(set(learners.allgather(int(node_index[0]))))
        self.layout = ops.Layout(
            rank=learners.Get_rank(),
            size=self.size - servers,
            node=leader_ids.index(int(node_index[0])),
            node_rank=node_rank,
            node_size=node.Get_size(),
            nodes=len(leader_ids),
            servers=servers,
        )

    def _place_rank(self, device: str, transport: str) -> None:
        """This rank's GPU and threads on its machine, its device, and the transport every rank
        agrees on."""
        world = self.world
        # the machine's cores are shared by the ranks that run on it (SLURM gives each its own)
        here = world.Split_type(MPI.COMM_TYPE_SHARED, self.rank)
        # which of the machine's GPUs is this rank's: SLURM's number for it where srun started this
        # very rank (mpiexec's ranks inherit the numbers of the shell they were started from)
        started_by_srun = (
            os.environ.get("SLURM_PROCID") == str(self.rank) and "SLURM_LOCALID" in os.environ
        )
        self.local_rank = int(os.environ["SLURM_LOCALID"]) if started_by_srun else here.Get_rank()
        cores = os.environ.get("SLURM_CPUS_PER_TASK")
        self.threads_per_rank = (
            int(cores) if cores else max(1, available_cores() // here.Get_size())
        )
        self.device = resolve_device(device, self.local_rank)
        gpus = world.allgather(gpu_identity(self.device))
        mpi_cuda = mpi_cuda_support() if self.device.type == "cuda" else None
        self.transport = choose_transport(transport, gpus, mpi_cuda)
        self.torch_groups = self._torch_groups() if self.transport == "torch" else None

    def _torch_groups(self) -> dict:
        """torch.distributed over the same ranks, with a process group per MPI group (every rank
        must create every group, its own or not, in one order)."""
        if self.rank == 0:
            with socket.socket() as probe:  # a free port for the rendezvous
                probe.bind(("", 0))
                address = (socket.gethostname(), probe.getsockname()[1])
        address = self.world.bcast(address if self.rank == 0 else None, root=0)
        backend = "nccl" if self.device.type == "cuda" else "gloo"
        dist.init_process_group(
            backend,
            init_method="tcp://{}:{}".format(*address),
            rank=self.rank,
            world_size=self.size,
        )
        # messages (gossip, a server's) in a group of their own: threads that answer gossip use it
        # while the learner's own thread takes part in collectives
        groups = {"world": None, "messages": dist.new_group(list(range(self.size)))}
        for name in ("learners", "node", "leaders"):
            mine = self.groups[name]
            members = tuple(mine.allgather(self.rank)) if mine != MPI.COMM_NULL else ()
            every = sorted({m for m in self.world.allgather(members) if m})
            made = {m: dist.new_group(list(m)) for m in every}
            groups[name] = made.get(members)
        return groups

    def _watch(self, timeout_s: float) -> None:
        while True:
            time.sleep(min(1.0, timeout_s / 4))
            pending = self._pending
            if pending is not None and time.monotonic() - pending[0] > timeout_s:
                request = type(pending[1]).__name__
                print(
                    f"asrscale: {self.label}: no progress for {timeout_s:g} s "
                    f"in {request} (a peer has hung or died); ending the job",
                    file=sys.stderr,
                    flush=True,
                )
                time.sleep(1)  # let the launcher forward the message before Abort kills the ranks
                self.world.Abort(3)

    def evaluation_part(self, layout: ops.Layout) -> tuple[int, int]:
        return layout.rank, layout.size

    def batches_ahead(self, prefetch: int) -> int:
        """A rank's learner has the loader thread to itself."""
        return prefetch

    def description(self) -> dict:
        return {
            "kind": "mpi",
            "ranks": self.size,
            "nodes": self.layout.nodes,
            "transport": self.transport_name(),
        }

    def transport_name(self) -> str:
        """What the exchanges went by: mpi, cuda-aware-mpi, or torch.distributed's nccl or gloo."""
        if self.transport != "torch":
            return self.transport
        return "nccl" if self.device.type == "cuda" else "gloo"

    def launch(self, program) -> None:
        """Run this rank's program: `program(layout, serving, clock)` makes it."""
        self.run(program(self.layout, self.serving, self.clock))

    def run(self, program):
        """Drive a learner (or server) program to its end; returns what it returns."""
        result = None
        while True:
            try:
                request = program.send(result)
            except StopIteration as done:
                return done.value
            self._pending = (time.monotonic(), request)
            if self._responder is not None:
                self._responder.apply()
            result = self.execute(request)
            self._pending = None

    @singledispatchmethod
    def execute(self, request):
        raise TypeError(f"the MPI world cannot carry out {request!r}")

    @execute.register
    def _(self, request: ops.Compute):
        self.clock.add("compute", request.seconds)

    @execute.register(ops.Gradient)
    @execute.register(ops.Update)
    @execute.register(ops.Precondition)
    def _(self, request):
        with self.clock.measure("compute"), self.wall.measure("arithmetic"):
            result = request.alone()
            synchronize(self.device)
        return result

    @execute.register
    def _(self, request: ops.DataWait):
        self.clock.add("data_wait", request.seconds)

    def _buffer(self, flat: torch.Tensor):
        """What MPI reads and writes for `flat`: its memory, or a host copy of a GPU tensor."""
        if not flat.is_cuda:
            return flat.numpy()
        return flat if self.transport == "cuda-aware-mpi" else flat.cpu().numpy()

    def _through_one_buffer(self, request, mpi_transfer, torch_transfer) -> None:
        """The request's tensors flattened into one buffer, transferred in place."""
        group = self.groups[request.group]
        if group.Get_size() == 1:
            return
        with self.clock.measure("communication"), self.wall.measure("exchanges"):
            flat = flatten(request.tensors)
            if self.torch_groups is not None:
                torch_transfer(self.torch_groups[request.group], flat)
            else:
                buffer = self._buffer(flat)
                mpi_transfer(group, buffer)
                self._copy_back(buffer, flat)
            unflatten(flat, request.tensors)
            self.wall.exchanged_bytes += (
                2 * flat.nbytes
            )  # its share sent and received, as a ring allreduce moves it

    def _copy_back(self, buffer, flat: torch.Tensor) -> None:
        """Into a GPU tensor, what MPI wrote into its host copy."""
        if flat.is_cuda and self.transport == "mpi":
            flat.copy_(torch.as_tensor(buffer))

    # messages: gossip and a server's, over the transport; their envelopes by MPI under torch
    def on_device(self) -> None:
        """A thread of this rank's that exchanges computes on the rank's GPU (threads start on GPU
        0)."""
        if self.device.type == "cuda":
            torch.cuda.set_device(self.device)

    def exchanged(self, flat: torch.Tensor) -> torch.Tensor:
        """Where a message's tensor travels from: where it is under torch and CUDA-aware MPI, the
        host under MPI."""
        return flat.cpu() if self.transport == "mpi" else flat

    def _global(self, group: str, rank: int) -> int:
        """A rank of `group` as the world (and torch.distributed) number it."""
        return self.groups[group].Get_group().Translate_ranks([rank], self.world.Get_group())[0]

    def send(self, flat: torch.Tensor, to: int, group: str, tag: int) -> None:
        """A message of `flat` to rank `to` of `group`."""
        if self.torch_groups is None:
            self.groups[group].Send(self._buffer(flat), dest=to, tag=tag)
        else:
            self.groups[group].Send(ENVELOPE, dest=to, tag=tag)
            dist.send(flat, dst=self._global(group, to), group=self.torch_groups["messages"])
        self.wall.exchanged_bytes += flat.nbytes

    def probe(
        self, group: str, source: int | None = None, tag: int | None = None
    ) -> tuple[int, int]:
        """Wait for a message of `group` from `source` with `tag` (None: any); its sender and
        tag."""
        status = MPI.Status()
        any_source, any_tag = (
            MPI.ANY_SOURCE if source is None else source,
            MPI.ANY_TAG if tag is None else tag,
        )
        self.groups[group].Probe(source=any_source, tag=any_tag, status=status)
        return status.Get_source(), status.Get_tag()

    def receive(self, flat: torch.Tensor, group: str, sender: int, tag: int) -> None:
        """Into `flat`, the message from `sender` of `group` with `tag`."""
        comm = self.groups[group]
        if self.torch_groups is None:
            buffer = self._buffer(flat)
            comm.Recv(buffer, source=sender, tag=tag)
            self._copy_back(buffer, flat)
        else:
            comm.Recv(ENVELOPE, source=sender, tag=tag)
            dist.recv(flat, src=self._global(group, sender), group=self.torch_groups["messages"])
        self.wall.exchanged_bytes += flat.nbytes

    @execute.register
    def _(self, request: ops.Allreduce):
        def mpi_mean(group, buffer):
            group.Allreduce(MPI.IN_PLACE, buffer, op=MPI.SUM)
            buffer /= group.Get_size()

        def torch_mean(group, flat):
            dist.all_reduce(flat, group=group)
            flat /= dist.get_world_size(group)

        self._through_one_buffer(request, mpi_mean, torch_mean)

    @execute.register
    def _(self, request: ops.AveragedGradient):
        if self.groups[request.group].Get_size() == 1:
            loss = self.execute(request.gradient)
            request.finish()
            return loss
        buckets = _Buckets(self, request)
        try:
            with self.clock.measure("compute"), self.wall.measure("arithmetic"):
                loss = (
                    request.gradient.alone()
                )  # buckets launched by its backward pass as they fill
            with self.clock.measure("communication"), self.wall.measure("exchanges"):
                buckets.wait()  # the rest, waits for slower learners included
        finally:
            buckets.remove()
        request.finish()
        return loss

    def start_allreduce(self, flat: torch.Tensor, group: str):
        """Begin summing `flat` over `group` in place; returns what to `wait()` on."""
        if self.torch_groups is not None:
            return dist.all_reduce(flat, group=self.torch_groups[group], async_op=True)
        buffer = self._buffer(flat)
        return _Summing(
            self.groups[group].Iallreduce(MPI.IN_PLACE, buffer, op=MPI.SUM),
            lambda: self._copy_back(buffer, flat),
        )

    @execute.register
    def _(self, request: ops.Broadcast):
        def torch_broadcast(group, flat):
            dist.broadcast(flat, group=group, group_src=request.root)

        self._through_one_buffer(
            request, lambda group, buffer: group.Bcast(buffer, root=request.root), torch_broadcast
        )

    @execute.register
    def _(self, request: ops.Barrier):
        group = self.groups[request.group]
        if group.Get_size() > 1:
            with self.clock.measure("idle"):
                group.Barrier()

    @execute.register
    def _(self, request: ops.Reduce):
        array = np.asarray(request.values, dtype=np.float64)
        if self.groups[request.group].Get_size() > 1:
            operation = {"sum": MPI.SUM, "min": MPI.MIN, "max": MPI.MAX}[request.op]
            self.groups[request.group].Allreduce(MPI.IN_PLACE, array, op=operation)
        return array

    @execute.register
    def _(self, request: ops.Wait):
        transfer, received, tensors = request.handle
        with self.clock.measure("communication"), self.wall.measure("exchanges"):
            transfer.join()
            unflatten(received, tensors)

    @execute.register
    def _(self, request: ops.Gossip):
        send = self.exchanged(flatten(request.send))
        answer = torch.empty_like(send)

        def exchange():
            self.on_device()
            self.send(send, request.peer, request.group, GOSSIP)
            self.receive(answer, request.group, request.peer, ANSWER)

        thread = threading.Thread(target=exchange)
        thread.start()
        return thread, answer, request.receive

    @execute.register
    def _(self, request: ops.Serve):
        self._responder = _Responder(self, request.group, request.tensors, request.peers)

    @execute.register
    def _(self, request: ops.Notify):
        group = self.groups[request.group]
        with self.clock.measure("communication"):
            for peer in request.peers:
                group.Send(ENVELOPE, dest=peer, tag=NOTIFY)

    @execute.register
    def _(self, request: ops.StopServing):
        with self.clock.measure("idle"):
            self._responder.thread.join()
        self._responder.apply()
        self._responder = None

    @execute.register
    def _(self, request: ops.Send):
        with self.clock.measure("communication"), self.wall.measure("exchanges"):
            self.send(self.exchanged(flatten(request.tensors)), request.to, "world", request.tag)

    @execute.register
    def _(self, request: ops.Receive):
        flat = self.exchanged(flatten(request.tensors))
        with self.clock.measure("communication"), self.wall.measure("exchanges"):
            source, tag = self.probe("world", request.source, request.tag)
            self.receive(flat, "world", source, tag)
        unflatten(flat, request.tensors)
        return source, tag

    @execute.register
    def _(self, request: ops.Gather):
        return self.groups[request.group].gather(request.value, root=0)

    def abort(self, code: int = 1) -> None:
        """End every rank: one rank's error must not leave the others waiting forever."""
        if self.size > 1:
            time.sleep(
                1
            )  # let the launcher forward this rank's last words before Abort kills the ranks
            self.world.Abort(code)
