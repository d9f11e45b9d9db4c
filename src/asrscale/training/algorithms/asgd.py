"""ASGD: asynchronous SGD against a parameter server. S. Zhang, C. Zhang, Z. You, R. Zheng and
B. Xu, "Asynchronous stochastic gradient descent for DNN training", ICASSP 2013; the foil of
G. Cong, B. Kingsbury et al., MLHPC 2017.

World rank 0 is the server: it holds the global model and its optimizer. Each learner loops:
compute a gradient on its copy of the model, push it, and receive the model the server holds
after applying it. The server applies gradients in the order they arrive, with no barrier, so a
gradient is stale by the updates other learners made since its learner's last pull (about P-1).
The server records, for every applied gradient, its learner and staleness (server version at
apply minus version at pull). Options: `staleness_lr` divides the learning rate by
1 + staleness; `max_staleness` drops (does not apply) gradients staler than the bound.

The exchange is two-sided (send, then receive the reply), so the server needs no asynchronous
progress from MPI: it waits in a receive for whichever learner sends first. A message is the
payload with a small header (kind, version, learning rate) in the payload's own dtype and device,
so that nothing is promoted or moved: float32 holds versions exactly up to 2**24.
"""

import torch

from asrscale.training.algorithms.base import Algorithm
from asrscale.worlds import ops

SERVER = 0
GRADIENT, PULL, DONE, MODEL, SAVE, SAVED, ROLL_BACK, ROLLED_BACK = range(8)
MAX_VERSION = 2**24  # the largest count a float32 header holds exactly


def header(like: torch.Tensor, *values: float) -> torch.Tensor:
    """Message header values in the payload's dtype, on its device."""
    return torch.tensor(values, dtype=like.dtype, device=like.device)


class AsynchronousSGD(Algorithm):
    name = "asgd"

    def __init__(self, layout, staleness_lr: bool, max_staleness: int | None):
        super().__init__(layout)
        self.staleness_lr, self.max_staleness = staleness_lr, max_staleness
        # a learner's: the server's version at its last pull; the server's: its own, and a record
        # per pushed gradient
        self.version, self.records = 0, []

    # the learners' side
    def _request(self, learner, kind: int, lr: float = 0.0, payload=None, into=None):
        """Send a request to the server (a gradient's with its rate); except DONE, receive the
        server's model into `into` (the learner's own model, whose version it then holds, unless
        given)."""
        like = learner.parameters[0]
        meta = header(like, kind, self.version, lr)
        yield ops.Send(
            [*(payload or [torch.zeros_like(p) for p in learner.parameters]), meta],
            SERVER,
            tag=kind,
        )
        if kind != DONE:
            reply = header(like, 0)
            yield ops.Receive([*(into or learner.state), reply], SERVER, tag=MODEL)
            if into is None:
                self.version = int(reply.item())

    def start(self, learner):
        yield from self._request(learner, PULL)

    def step(self, learner, batch, lr):
        loss = yield from learner.backward(batch)
        yield from self._request(learner, GRADIENT, lr, learner.gradients)
        return loss

    def consensus(self, learner):
        # once every learner has its last reply no gradient is in flight: the server's model
        server_model = [torch.empty_like(t) for t in learner.state]
        yield ops.Barrier("learners")
        yield from self._request(learner, PULL, into=server_model)
        yield ops.Barrier("learners")
        return server_model

    def finish(self, learner):
        yield from self._request(learner, DONE)

    def checkpoint(self, learner, step):
        # learner 0 has the server save its state, and waits until it has
        yield from self._ask_server(learner, SAVE, step, SAVED)

    def roll_back(self, learner):
        # learner 0 has the server go back to its model of the last accepted epoch; then every
        # learner takes the server's model
        yield from self._ask_server(learner, ROLL_BACK, 0, ROLLED_BACK)
        yield ops.Barrier("learners")
        yield from self._request(learner, PULL)

    def _ask_server(self, learner, kind: int, value: float, answer: int):
        """Learner 0 asks the server to do `kind` (with `value`), and waits until it has."""
        if self.layout.rank == 0:
            like = learner.parameters[0]
            meta = header(like, kind, self.version, value)
            yield ops.Send(
                [*(torch.zeros_like(p) for p in learner.parameters), meta], SERVER, tag=kind
            )
            yield ops.Receive([header(like, 0)], SERVER, tag=answer)

    # the server's side
    def serve(self, learner, checkpoint, roll_back):
        """Apply gradients as they come until every learner is done, recording for every pushed
        gradient (learner, version at pull, version at apply, staleness, applied)."""
        gradients = [torch.zeros_like(p) for p in learner.parameters]
        meta = header(gradients[0], 0, 0, 0)
        active = self.layout.size
        while active:
            source, _ = yield ops.Receive([*gradients, meta])
            # a header: the request's kind, the version the learner pulled, and a value: a
            # gradient's learning rate, a save's step
            kind, pulled, value = meta.tolist()
            kind, pulled = int(kind), int(pulled)
            if kind == DONE:
                active -= 1
                continue
            if kind == SAVE:
                checkpoint(int(value))
                yield ops.Send([header(meta, 1)], source, tag=SAVED)
                continue
            if kind == ROLL_BACK:
                roll_back()
                yield ops.Send([header(meta, 1)], source, tag=ROLLED_BACK)
                continue
            if kind == GRADIENT:
                staleness = self.version - pulled
                applied = self.max_staleness is None or staleness <= self.max_staleness
                if applied:
                    for parameter, gradient in zip(learner.parameters, gradients):
                        parameter.grad = gradient.clone()
                    yield from learner.update(
                        value / (1 + staleness) if self.staleness_lr else value
                    )
                    self.version += 1
                    if self.version >= MAX_VERSION:
                        raise ValueError(
                            f"asgd: over {MAX_VERSION} server updates; a float32 header counts no "
                            "further"
                        )
                self.records.append(
                    (source - self.layout.servers, pulled, self.version, staleness, applied)
                )
            yield ops.Send([*learner.state, header(meta, self.version)], source, tag=MODEL)
