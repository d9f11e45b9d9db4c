"""The simulated world: P learners (and any server rank) live in one process and really train, on
real data with real gradients, while time is kept by a discrete-event virtual clock that charges
each request what the cost model (`asrscale.worlds.clock`) says it costs on a hardware profile.

Each rank runs the same program as in the MPI world (a generator of `asrscale.worlds.ops` requests)
and has its own virtual time. The simulator always advances the rank whose time is earliest
(ties by rank), so requests are carried out in the order of virtual time: a message goes to
whichever sender reached it first in modelled time, a collective completes when its last member
arrives, and ASGD's staleness or ADPSGD's pairings arise from the modelled timings. Jitter is
drawn from the run's seed, so a run is deterministic. A program that waits for something that
can never come (a deadlock) ends the run with an error naming every blocked rank's request.
"""

import heapq
from collections import deque
from dataclasses import dataclass
from functools import singledispatchmethod

import numpy as np
import torch

from asrscale.provenance import available_cores
from asrscale.worlds import ops
from asrscale.worlds.clock import CostModel
from asrscale.worlds.devices import resolve_device
from asrscale.worlds.timing import TimeSplit, WallTimes


def _nbytes(tensors: list[torch.Tensor]) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


class _Rank:
    """One simulated rank: its program, virtual time and the state of its modelled data loader."""

    def __init__(
        self, rank: int, layout: ops.Layout, serving: bool, node: int, machine: int, nic: int
    ):
        # `node` groups learners for the algorithm (the layout); `machine` is where the rank runs
        # on the modelled hardware, `nic` the machine's network card it uses: links and shared
        # cores go by machine
        self.rank, self.layout, self.serving, self.node = rank, layout, serving, node
        self.machine, self.nic = machine, nic
        self.time, self.result, self.blocked_in, self.done = 0.0, None, None, False
        self.clock = TimeSplit(now=lambda: self.time)
        self.taken = deque()  # when its batches in the prefetch queue were taken
        self.owed_s = 0.0  # serving gossip: what the next computation loses
        self.program = None
        # serving gossip (ops.Serve): the tensors answered on, the peers to hear from, their
        # notifications' arrival times, and gossip that arrived before serving began
        self.served, self.expecting, self.notified, self.early = None, set(), {}, []

    @property
    def name(self) -> str:
        return (
            f"{'server' if self.serving else 'rank'} "
            f"{self.rank if self.serving else self.layout.rank}"
        )


@dataclass
class _Gossip:
    """An averaging an active learner asked for: where the peer's answer goes and when it is in."""

    receive: list[torch.Tensor]
    ends: float | None = None
    waiting: bool = False


class SimWorld:
    """`learners` learners after `servers` server ranks. The hardware profile puts its
    `learners_per_node` on each machine, server ranks on the first; the algorithm sees nodes of
    `node_size` learners when given (as MPI ranks of one machine can act as several
    nodes), else the machines. Every learner computes on the process's `device` (`train.device`:
    its GPU where it has one); the modelled devices are the profile's. With `fusers`
    (asrscale.training.fused.learners.fusers: by kind of learner's work, `ops.WORK`, the function
    that carries out many learners' at once), learners' gradients, updates and preconditionings are
    carried out together: a learner's is deferred until that learner needs it, and is then carried
    out with every deferred one of its kind, each exactly as alone (a gossip with a learner whose
    gradient waits fixes what that gradient computes on). A fuser of `ops.AveragedGradient` takes
    the gradients that a group averages (SSGD's), with the group's others: their average is what
    they compute. It computes with `cores` threads (the job's; by default every core the process may
    run on): its clock is modelled, not measured."""

    def __init__(
        self,
        learners: int,
        costs: CostModel,
        servers: int = 0,
        node_size: int | None = None,
        prefetch: int = 4,
        name: str = "asrscale",
        device: str = "cpu",
        fusers: dict | None = None,
        cores: int | None = None,
    ):
        if learners < 1:
            raise ValueError(f"a simulated world needs at least one learner, not {learners}")
        self.costs, self.prefetch, self.name, self.wall = costs, prefetch, name, WallTimes()
        self.all_ranks_here = True
        self.device = resolve_device(device)
        # fusing learners: `fusers[kind](jobs)` carries out many requests of a kind as one
        # (deferred: by rank, at most one a rank)
        self.fusers, self._deferred = fusers or {}, {}
        self.label = f"{name}: {learners} simulated learners on {costs.hardware.name}"
        self.threads_per_rank = (
            cores or available_cores()
        )  # one rank computes at a time, on the job's cores
        per_machine = costs.hardware.learners_per_node
        per_node = node_size or per_machine
        nodes = -(-learners // per_node)
        self.ranks: list[_Rank] = []
        for rank in range(servers + learners):
            serving = rank < servers
            learner = rank - servers
            node = 0 if serving else learner // per_node
            machine, on_machine = (0, rank) if serving else divmod(learner, per_machine)
            node_size = min(per_node, learners - node * per_node)
            layout = ops.Layout(
                rank=rank if serving else learner,
                size=learners,
                node=node,
                node_rank=0 if serving else learner % per_node,
                node_size=node_size,
                nodes=nodes,
                servers=servers,
            )
            nic = on_machine % costs.hardware.nics_per_node
            self.ranks.append(_Rank(rank, layout, serving, node, machine, nic))
        self.sharing = [sum(r.machine == rank.machine for r in self.ranks) for rank in self.ranks]
        learner_ranks = [r for r in self.ranks if not r.serving]
        self._groups = {
            "world": self.ranks,
            "learners": learner_ranks,
            "leaders": [r for r in learner_ranks if r.layout.node_rank == 0],
            **{("node", n): [r for r in learner_ranks if r.node == n] for n in range(nodes)},
        }
        self._ready: list[tuple[float, int]] = []
        self._collectives: dict[object, list[tuple[_Rank, object]]] = {}
        self._mail: dict[int, list[tuple[float, int, _Rank, ops.Send]]] = {}
        self._receiving: dict[int, tuple[_Rank, ops.Receive]] = {}
        # when each port of the node links and each network card is free, by direction: what a
        # transfer or a collective crosses is busy until it ends (costmodel's docstring); and when
        # each loader is free: a node's where the profile loads per node, else a learner's own
        self._free: dict[tuple, float] = {}

    def evaluation_part(self, layout: ops.Layout) -> tuple[int, int] | None:
        """Learner 0 evaluates the whole dev set, in full batches (64 learners' shares of 6
        utterances each computed in turn were most of a GPU epoch's time); evaluation is not
        modelled, so its clock is the same."""
        return (0, 1) if layout.rank == 0 else None

    def batches_ahead(self, prefetch: int) -> int:
        """Batches are really built by the process's one loader thread, for every learner in the
        order they ask (`prefetch` is the modelled loaders' depth): one ahead each keeps it busy
        while the others compute, and memory stays one batch a learner."""
        return min(prefetch, 1)

    def description(self) -> dict:
        servers = sum(r.serving for r in self.ranks)
        return {
            "kind": "simulated",
            "ranks": len(self.ranks),
            "servers": servers,
            **self.costs.description(),
        }

    def state_dict(self) -> dict:
        """The modelled clock's state for a checkpoint, taken where every learner waits at one
        barrier (the trainer's checkpoints): each learner's stream of jitter, and when each link,
        port and loader is free and each learner's queued batches were taken, relative to the
        latest rank's time. A resumed run's ranks start at 0: it goes on as if never stopped."""
        now = max(rank.time for rank in self.ranks)
        return {
            "jitter": self.costs.jitter_state(),
            "free": {key: at - now for key, at in self._free.items()},
            "taken": {rank.rank: [at - now for at in rank.taken] for rank in self.ranks},
            "owed_s": {rank.rank: rank.owed_s for rank in self.ranks},
        }

    def load_state_dict(self, state: dict) -> None:
        """The modelled clock where a checkpoint's `state_dict` left it, before any rank goes on."""
        self.costs.load_jitter_state(state["jitter"])
        self._free = dict(state["free"])
        for rank in self.ranks:
            rank.taken = deque(state["taken"].get(rank.rank, []))
            rank.owed_s = state["owed_s"].get(rank.rank, 0.0)

    def abort(self, code: int = 1) -> None:
        """Nothing else to end: every simulated rank lives in this process."""

    # driving the programs in virtual-time order
    def launch(self, program) -> None:
        """Run every rank's program to its end: `program(layout, serving, clock)` makes each."""
        for rank in self.ranks:
            # requests carried out as their parts: its transfers modelled after the computation
            rank.program = ops.in_parts(program(rank.layout, rank.serving, rank.clock))
            self._resume(rank, 0.0)
        while self._ready:
            _, index = heapq.heappop(self._ready)
            rank = self.ranks[index]
            if rank.rank in self._deferred:  # its result is needed now
                self._carry_out_deferred(rank)
            result, rank.result = rank.result, None
            try:
                request = rank.program.send(result)
            except StopIteration:
                rank.done = True
                continue
            self.execute(request, rank)
        stuck = [f"{r.name} in {type(r.blocked_in).__name__}" for r in self.ranks if not r.done]
        if stuck:
            raise RuntimeError(
                f"{self.name}: simulated ranks wait forever (deadlock): {'; '.join(stuck)}"
            )

    def _resume(self, rank: _Rank, at: float, result=None) -> None:
        rank.time, rank.result, rank.blocked_in = at, result, None
        heapq.heappush(self._ready, (at, rank.rank))

    def _group(self, rank: _Rank, name: str) -> tuple[object, list[_Rank]]:
        key = ("node", rank.node) if name == "node" else name
        return key, self._groups[key]

    def _same_machine(self, members) -> bool:
        return len({m.machine for m in members}) == 1

    @singledispatchmethod
    def execute(self, request, rank: _Rank):
        raise TypeError(f"the simulated world cannot carry out {request!r}")

    def _computing(self, rank: _Rank, kind: str, frames: int) -> float:
        """The rank computes for its modelled time (and what serving gossip took from it since it
        last computed): its clock charged, its time when done."""
        learner = None if rank.serving else rank.layout.rank
        seconds = self.costs.compute_s(kind, frames, learner, self.sharing[rank.rank]) + rank.owed_s
        rank.owed_s = 0.0
        rank.clock.add("compute", seconds)
        return rank.time + seconds

    @execute.register
    def _(self, request: ops.Compute, rank: _Rank):
        self._resume(rank, self._computing(rank, request.kind, request.frames))

    @execute.register(ops.Gradient)
    @execute.register(ops.Update)
    @execute.register(ops.Precondition)
    def _(self, request, rank: _Rank):
        """A learner's own arithmetic, whose modelled time depends on its kind and frames alone:
        with a fuser for it, it waits (`_carry_out_deferred`)."""
        done = self._computing(rank, request.kind, request.frames)
        if self._fusion(request, rank) is not None:
            self._deferred[rank.rank] = request
            self._resume(rank, done)
        else:
            with self.wall.measure("arithmetic"):
                result = request.alone()
            self._resume(rank, done, result)

    def _carry_out_deferred(self, rank: _Rank) -> None:
        """The rank's deferred request, and with it every deferred one of its kind, at once. Those
        of other kinds wait on for more company: the learners' requests are independent, and
        none waits past anything that reads or changes what it computes on (a learner waits for
        what it asked, so it has one at most; a peer about to be averaged has its update carried
        out, its gradient's parameters fixed)."""
        fusion = self._fusion(self._deferred[rank.rank], rank)
        ranks = [
            index
            for index, request in self._deferred.items()
            if self._fusion(request, self.ranks[index]) == fusion
        ]
        jobs = [self._deferred.pop(index).job for index in ranks]
        with self.wall.measure("arithmetic"):
            results = self.fusers[fusion[0]](jobs) or ()  # gradients' losses; others return nothing
        for index, result in zip(ranks, results):
            self.ranks[index].result = result

    def _fusion(self, request, rank: _Rank) -> tuple | None:
        """Which requests `request` is carried out with, as (the fuser's key, what they share): a
        gradient averaged over a group (SSGD's), by the fuser of `ops.AveragedGradient`, with the
        group's others (their average is what they compute); else by its kind's fuser, with every
        deferred one of its kind; None where no fuser takes it."""
        averaged = isinstance(request, ops.Gradient) and request.averaged_over
        if averaged and ops.AveragedGradient in self.fusers:
            return ops.AveragedGradient, self._group(rank, request.averaged_over)[0]
        return (type(request), None) if type(request) in self.fusers else None

    @execute.register
    def _(self, request: ops.DataWait, rank: _Rank):
        load = self.costs.load_s(request.frames)
        loader = ("loader", rank.machine if self.costs.loading_per_node else rank.rank)
        if self.prefetch == 0:  # the learner builds its batch itself, once its loader is free
            ready = max(rank.time, self._free.get(loader, 0.0)) + load
        else:
            room = (
                rank.taken[0] if len(rank.taken) == self.prefetch else 0.0
            )  # the queue holds `prefetch`
            ready = max(self._free.get(loader, 0.0), room) + load
            if len(rank.taken) == self.prefetch:
                rank.taken.popleft()
            rank.taken.append(max(rank.time, ready))
        self._free[loader], wait = ready, max(0.0, ready - rank.time)
        rank.clock.add("data_wait", wait)
        self._resume(rank, rank.time + wait)

    # collectives: complete when the last member arrives
    @execute.register(ops.Allreduce)
    @execute.register(ops.Broadcast)
    @execute.register(ops.Barrier)
    @execute.register(ops.Reduce)
    @execute.register(ops.Gather)
    def _(self, request, rank: _Rank):
        key, members = self._group(rank, request.group)
        arrived = self._collectives.setdefault(key, [])
        if arrived and type(arrived[0][1]) is not type(request):
            other = arrived[0]
            raise RuntimeError(
                f"{self.name}: {rank.name} entered {type(request).__name__} on group "
                f"{request.group!r} while "
                f"{other[0].name} is in {type(other[1]).__name__}: the ranks' programs disagree"
            )
        arrived.append((rank, request))
        rank.blocked_in = request
        if len(arrived) == len(members):
            del self._collectives[key]
            arrived.sort(key=lambda pair: members.index(pair[0]))
            self._complete(arrived, self._same_machine(members))

    def _complete(self, arrived, same_node: bool) -> None:
        with self.wall.measure("exchanges"):
            self._combine(arrived, same_node)

    def _combine(self, arrived, same_node: bool) -> None:
        """A completed collective: its tensors combined, every member resumed when it ends."""
        ranks, requests = [r for r, _ in arrived], [q for _, q in arrived]
        first, size, last = requests[0], len(arrived), max(r.time for r in ranks)
        results, category = [None] * size, "communication"
        if isinstance(first, ops.Allreduce):
            seconds = self._allreduce(requests, same_node)
        elif isinstance(first, ops.Broadcast):
            seconds = self._broadcast(requests, same_node)
        else:
            seconds, category = (self.costs.small_s(size, same_node) if size > 1 else 0.0), "idle"
            results = self._small_results(requests)
        if size == 1:
            category = None
        ends, staging = last + seconds, 0.0
        if category == "communication":  # the data's collectives wait for, and occupy, their links
            ports = [port for r in ranks for port in self._ports(r, same_node)]
            staging = self.costs.staging_s(_nbytes(first.tensors))  # out to host memory, and back
            ends = self._occupy(ports, last + staging, seconds) + staging
        for rank, result in zip(ranks, results):
            if category == "communication":
                rank.clock.add(category, ends - rank.time - 2 * staging)
                rank.clock.add("staging", 2 * staging)
            self._resume(rank, ends, result)

    def _allreduce(self, requests: list[ops.Allreduce], same_node: bool) -> float:
        """An allreduce's tensors averaged into every member's: its modelled seconds."""
        first, size = requests[0], len(requests)
        with torch.no_grad():  # tensor by tensor, as the learners' own: no flat copies of 64 models
            total = [t.detach().clone() for t in first.tensors]
            for q in requests[1:]:
                torch._foreach_add_(total, q.tensors)
            torch._foreach_div_(total, size)
            for q in requests:
                torch._foreach_copy_(q.tensors, total)
        return self.costs.allreduce_s(_nbytes(first.tensors), size, same_node) if size > 1 else 0.0

    def _broadcast(self, requests: list[ops.Broadcast], same_node: bool) -> float:
        """A broadcast's root's tensors copied into every other member's: its modelled seconds."""
        first, size = requests[0], len(requests)
        root = requests[first.root]
        with torch.no_grad():
            for q in requests:
                if q is not root:
                    torch._foreach_copy_(q.tensors, root.tensors)
        return self.costs.broadcast_s(_nbytes(first.tensors), size, same_node) if size > 1 else 0.0

    @staticmethod
    def _small_results(requests: list) -> list:
        """What each member of a collective of no tensors gets back: a reduction's value, the
        gathered values (the first member), or nothing (a barrier)."""
        first = requests[0]
        if isinstance(first, ops.Reduce):
            combine = {"sum": np.sum, "min": np.min, "max": np.max}[first.op]
            value = combine(np.array([q.values for q in requests], dtype=np.float64), axis=0)
            return [value.copy() for _ in requests]
        results = [None] * len(requests)
        if isinstance(first, ops.Gather):
            results[0] = [q.value for q in requests]
        return results

    # links: the ports and network cards that transfers and collectives occupy
    def _ports(self, rank: _Rank, same_machine: bool, directions=("out", "in")) -> list[tuple]:
        """What `rank` sends or receives on: its port of the node link, or its machine's card."""
        where = ("port", rank.rank) if same_machine else ("card", rank.machine, rank.nic)
        return [(*where, direction) for direction in directions]

    def _occupy(self, ports: list[tuple], ready: float, seconds: float) -> float:
        """Occupy `ports` for `seconds` from when they are all free (and `ready`): the end."""
        ends = max([ready, *(self._free.get(port, 0.0) for port in ports)]) + seconds
        self._free.update(dict.fromkeys(ports, ends))
        return ends

    def _transfer(self, sender: _Rank, receiver: _Rank, nbytes: int, posted: float) -> float:
        """A message on the sender's outgoing and the receiver's incoming port (or card), staged
        through host memory at both ends where MPI is not CUDA-aware (a gossip's copies count as
        its communication)."""
        same = sender.machine == receiver.machine
        ports = self._ports(sender, same, ("out",)) + self._ports(receiver, same, ("in",))
        staging = self.costs.staging_s(nbytes)
        return (
            self._occupy(ports, posted + staging, self.costs.point_to_point_s(nbytes, same))
            + staging
        )

    @execute.register
    def _(self, request: ops.Wait, rank: _Rank):
        handle = request.handle
        if handle.ends is None:
            handle.waiting, rank.blocked_in = True, request
        else:
            self._finish_gossip(rank, handle)

    # gossip: a passive learner's world answers while the learner goes on (ADPSGD)
    @execute.register
    def _(self, request: ops.Gossip, rank: _Rank):
        _, members = self._group(rank, request.group)
        peer, gossip = members[request.peer], _Gossip(request.receive)
        deferred = self._deferred.get(peer.rank)
        if isinstance(
            deferred, ops.Gradient
        ):  # what it computes on, fixed as it is: it may wait on
            deferred.job = deferred.job.fixed()
        elif deferred is not None:  # its update, before it is averaged
            self._carry_out_deferred(peer)
        if peer.served is None:  # not serving yet: answered when it begins
            peer.early.append((rank, request.send, gossip))
        else:
            self._answer(peer, rank, request.send, gossip, rank.time)
        self._resume(rank, rank.time, gossip)

    @torch.no_grad()
    def _answer(
        self, peer: _Rank, asking: _Rank, sent: list[torch.Tensor], gossip: _Gossip, at: float
    ) -> None:
        """The peer answers with its tensors as they are, and takes the average for itself: the
        simulator runs requests in virtual-time order, so what it has computed so far is done.
        The asking learner's tensors are read where they are: it waits for the answer before it
        changes them (and an active learner never serves)."""
        with self.wall.measure("exchanges"):
            torch._foreach_copy_(gossip.receive, peer.served)
            torch._foreach_add_(peer.served, sent)
            torch._foreach_mul_(peer.served, 0.5)
        nbytes = _nbytes(peer.served)
        arrived = self._transfer(asking, peer, nbytes, at)
        gossip.ends = self._transfer(peer, asking, nbytes, arrived)
        peer.owed_s += self.costs.serving_s(gossip.ends - at)
        if gossip.waiting:
            self._finish_gossip(asking, gossip)

    def _finish_gossip(self, rank: _Rank, gossip: _Gossip) -> None:
        wait = max(0.0, gossip.ends - rank.time)
        rank.clock.add("communication", wait)
        self._resume(rank, rank.time + wait)

    @execute.register
    def _(self, request: ops.Serve, rank: _Rank):
        _, members = self._group(rank, request.group)
        rank.served, rank.expecting, rank.notified = (
            request.tensors,
            {members[p].rank for p in request.peers},
            {},
        )
        early, rank.early = rank.early, []
        for asking, sent, gossip in early:
            self._answer(rank, asking, sent, gossip, rank.time)
        self._resume(rank, rank.time)

    @execute.register
    def _(self, request: ops.Notify, rank: _Rank):
        _, members = self._group(rank, request.group)
        for peer in (members[p] for p in request.peers):
            peer.notified[rank.rank] = rank.time + self.costs.point_to_point_s(
                0, peer.machine == rank.machine
            )
            if isinstance(peer.blocked_in, ops.StopServing):
                self._stop_serving(peer)
        self._resume(rank, rank.time)

    @execute.register
    def _(self, request: ops.StopServing, rank: _Rank):
        rank.blocked_in = request
        self._stop_serving(rank)

    def _stop_serving(self, rank: _Rank) -> None:
        if not rank.expecting <= set(rank.notified):
            return
        ends = max([rank.time, *(rank.notified[p] for p in rank.expecting)])
        rank.clock.add("idle", ends - rank.time)
        rank.served, rank.expecting, rank.notified = None, set(), {}
        self._resume(rank, ends)

    @execute.register
    def _(self, request: ops.Send, rank: _Rank):
        receiver = self.ranks[request.to]
        waiting = self._receiving.get(receiver.rank)
        rank.blocked_in = request
        if (
            waiting
            and waiting[1].source in (None, rank.rank)
            and waiting[1].tag in (None, request.tag)
        ):
            del self._receiving[receiver.rank]
            self._deliver(rank, request, rank.time, receiver, waiting[1])
        else:
            self._mail.setdefault(receiver.rank, []).append((rank.time, rank.rank, rank, request))

    @execute.register
    def _(self, request: ops.Receive, rank: _Rank):
        mail = self._mail.get(rank.rank, [])
        matching = [
            m for m in mail if request.source in (None, m[1]) and request.tag in (None, m[3].tag)
        ]
        rank.blocked_in = request
        if matching:
            first = min(matching, key=lambda m: (m[0], m[1]))  # the earliest sender in virtual time
            mail.remove(first)
            self._deliver(first[2], first[3], first[0], rank, request)
        else:
            self._receiving[rank.rank] = (rank, request)

    def _deliver(
        self, sender: _Rank, send: ops.Send, sent_at: float, receiver: _Rank, receive: ops.Receive
    ):
        sent, expected = [t.shape for t in send.tensors], [t.shape for t in receive.tensors]
        if sent != expected:
            raise RuntimeError(
                f"{self.name}: {sender.name} sent tensors of shapes {sent}, {receiver.name} "
                "expects "
                f"{expected}"
            )
        with (
            self.wall.measure("exchanges"),
            torch.no_grad(),
        ):  # tensor by tensor: no flat copy, any device each
            torch._foreach_copy_(receive.tensors, send.tensors)
        nbytes = _nbytes(send.tensors)
        ends, staging = (
            self._transfer(sender, receiver, nbytes, max(sent_at, receiver.time)),
            self.costs.staging_s(nbytes),
        )
        for rank in (sender, receiver):  # each copies its end of the message through host memory
            rank.clock.add("communication", ends - rank.time - staging)
            rank.clock.add("staging", staging)
        self._resume(sender, ends)
        self._resume(receiver, ends, (sender.rank, send.tag))
