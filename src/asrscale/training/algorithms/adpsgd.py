"""ADPSGD: asynchronous decentralized parallel SGD. X. Lian, W. Zhang, C. Zhang and J. Liu,
"Asynchronous decentralized parallel stochastic gradient descent", ICML 2018; for LSTM acoustic
models W. Zhang, X. Cui et al., "Distributed deep learning strategies for automatic speech
recognition", ICASSP 2019.

No server and no barrier. Learners form a bipartite graph: active learners (odd ranks) and
passive ones (even ranks), each active learner's neighbours passive. At every step an active
learner picks one neighbour at random and asks it to average, while it computes the gradient of
its minibatch on its current model; the passive learner answers with its model as it is, without
stopping its own work (its world answers: `ops.Serve`), and takes the average of the two for
itself; the active learner, once the answer is in, takes the same average and applies its
gradient (computed before the averaging) to it. A slow learner delays only the learners that ask
it, never the others. Pairwise averaging keeps the mean of all models; the reported model is the
average over all learners. What an averaging makes common is the model and the optimizer's state.

Graphs (lian18's and zhang19's rings; connected for every P ≥ 2, tested): "ring" joins learners
at distance 1 along the ring of ranks, "exponential" at the odd distances 1, 3, 7, 15, ... (2^k - 1,
so that every edge joins an active and a passive learner).
"""

import random

import torch

from asrscale.training.algorithms.base import Averaging
from asrscale.worlds import ops


def distances(size: int, graph: str) -> list[int]:
    return (
        [1]
        if graph == "ring"
        else [2**k - 1 for k in range(1, size.bit_length() + 1) if 2**k - 1 < size]
    )


def neighbours(rank: int, size: int, graph: str) -> list[int]:
    """The learners `rank` may average with: along the ring of ranks, at the graph's distances,
    those of the other side (an active learner's are passive, and the other way round)."""
    peers = {(rank + sign * d) % size for d in distances(size, graph) for sign in (1, -1)}
    return sorted(p for p in peers if p % 2 != rank % 2)


def average_with(tensors: list[torch.Tensor], theirs: list[torch.Tensor]) -> None:
    with torch.no_grad():
        torch._foreach_add_(tensors, theirs)
        torch._foreach_mul_(tensors, 0.5)


class DecentralizedSGD(Averaging):
    name = "adpsgd"
    group = "learners"  # the group whose members gossip (H-ADPSGD: the node leaders)

    def __init__(self, layout, graph: str, averages: str):
        super().__init__(layout, averages)
        self.graph, self.steps, self._serving = (
            graph,
            0,
            False,
        )  # (serving is the world's: not checkpointed)

    def _vertex(self, layout) -> tuple[int | None, int]:
        return layout.rank, layout.size

    # a learner's place on the graph follows from its layout: not state, so never checkpointed (a
    # run extended from learner 0's state alone gives every learner that state, each its own place)
    @property
    def vertex(self) -> int | None:
        """This learner's place on the graph (None: not on it)."""
        return self._vertex(self.layout)[0]

    @property
    def active(self) -> bool:
        return self.vertex is not None and self.vertex % 2 == 1

    @property
    def neighbours(self) -> list[int]:
        vertex, size = self._vertex(self.layout)
        return [] if vertex is None else neighbours(vertex, size, self.graph)

    def gossip(self, learner):
        """Before computing: an active learner asks a neighbour at random to average (the request
        and where the answer will be); a passive one has its world begin answering."""
        if self.active and self.neighbours:
            peer = random.Random(self.vertex * 1_000_003 + self.steps).choice(self.neighbours)
            theirs = self._buffers(learner)
            averaging = yield ops.Gossip(self.shared(learner), theirs, peer, self.group)
            return peer, theirs, averaging
        if not self.active and self.neighbours and not self._serving:
            yield ops.Serve(self.shared(learner), self.neighbours, self.group)
            self._serving = True
        return None

    def average(self, learner, asked):
        """Once the gradient is computed: an active learner takes the average its peer answered."""
        if asked is not None:
            peer, theirs, averaging = asked
            yield ops.Wait(averaging)
            average_with(self.shared(learner), theirs)
            self.exchanges.append((self.steps, self.vertex, peer))

    def gradient(self, learner, batch):
        """The gradient the learner's update applies (H-ADPSGD: its node's)."""
        return (yield from learner.backward(batch))

    def step(self, learner, batch, lr):
        self.steps += 1
        asked = yield from self.gossip(learner)
        loss = yield from self.gradient(learner, batch)
        yield from self.average(learner, asked)
        yield from learner.update(lr)
        return loss

    def epoch_done(self, learner):
        """An active learner tells its neighbours it asks no more this epoch; a passive one
        answers until all of them have (the epoch's end is a synchronisation of every algorithm)."""
        if self.active:
            yield ops.Notify(self.neighbours, self.group)
        elif self._serving:
            yield ops.StopServing()
            self._serving = False
