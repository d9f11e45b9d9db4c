"""ADPSGD: asynchronous decentralized parallel SGD. X. Lian, W. Zhang, C. Zhang and J. Liu,
"Asynchronous decentralized parallel stochastic gradient descent", ICML 2018; for LSTM acoustic
models W. Zhang, X. Cui et al., "Distributed deep learning strategies for automatic speech
recognition", ICASSP 2019.

No server and no global barrier. At every step a learner swaps its model with one neighbour
while it computes the gradient of its minibatch on its current model; it then averages the two
models ½–½ and applies the gradient (computed before the averaging) to the average. Pairs come
from a bipartite graph: active learners (odd ranks) pair with passive ones (even ranks), the
pairing rotating every step along a ring or an exponential graph, so every learner meets every
other in turn and no step can deadlock, for any P ≥ 2. Pairwise averaging keeps the mean of all
models unchanged; the reported model is the average over all learners.
"""

import math

import torch

from asrscale.training.algorithms.base import Averaging
from asrscale.worlds import ops

GRAPHS = ("ring", "exponential")


def partner(rank: int, size: int, step: int, graph: str = "ring") -> int | None:
    """This step's neighbour of `rank` among `size` learners, or None when it sits the step out
    (one even learner does when `size` is odd). Odd learner j pairs with even learner
    (j + shift) mod E, E the number of even learners; the shift rotates with the step."""
    evens, odds = (size + 1) // 2, size // 2
    if odds == 0:
        return None
    if graph == "ring":
        shift = step % evens
    else:
        shift = (1 << (step % max(1, math.ceil(math.log2(evens))))) % evens if evens > 1 else 0
    if rank % 2:
        return 2 * ((rank // 2 + shift) % evens)
    active = (rank // 2 - shift) % evens
    return 2 * active + 1 if active < odds else None


def average_with(tensors: list[torch.Tensor], theirs: list[torch.Tensor]) -> None:
    with torch.no_grad():
        for mine, other in zip(tensors, theirs):
            mine.add_(other).mul_(0.5)


class DecentralizedSGD(Averaging):
    name = "adpsgd"
    alone_is_seq = True

    def __init__(self, layout, graph: str = "ring"):
        super().__init__(layout)
        if graph not in GRAPHS:
            raise ValueError(f"{self.name}: graph must be one of {GRAPHS}, not {graph!r}")
        self.graph, self.steps = graph, 0

    def step(self, learner, batch, lr):
        peer = partner(self.layout.rank, self.layout.size, self.steps, self.graph)
        self.steps += 1
        if peer is not None:
            theirs = self._buffers(learner)
            exchange = yield ops.StartExchange(learner.state, theirs, peer, "learners")
        loss = yield from learner.backward(batch)
        if peer is not None:
            yield ops.Wait(exchange)
            average_with(learner.state, theirs)
            self.exchanges.append((self.steps, self.layout.rank, peer))
        yield from learner.update(lr)
        return loss
