"""The interface every training algorithm implements.

The trainer owns the loop (data, metrics, dev evaluation, checkpoints); an algorithm decides how
a learner turns a minibatch into an update and how learners exchange what they learn. Every
method is a generator of `asrscale.worlds.ops` requests, so one implementation runs in any world
(real MPI ranks, or a simulated cluster). A learner offers `backward(batch)` (its clipped
gradient; returns the loss), `update(lr)` (the optimizer's step), and `parameters`, `gradients`,
`state` (the model) and `averaged` (the model and the optimizer's state).

Every algorithm trains under the study's one policy: the study's optimizer, each learner's own
gradient clipped, the learning rate of `asrscale.training.schedule` (scaled by P where an update
combines P learners' minibatches), and, at an averaging, the optimizer's state averaged with the
model, over the same learners, in the same transfer.
"""

import torch

from asrscale.config.algorithms import algorithm_spec
from asrscale.worlds import ops


class Algorithm:
    name: str = ""
    #: the learners' rate as a multiple of the rule's (1 but for an algorithm that amplifies the
    #: learners' steps itself, as BMUF's block momentum does)
    rate_factor: float = 1.0
    #: whether every learner holds the same model and optimizer state after every step, so that
    #: a checkpoint needs learner 0's alone
    replicated: bool = False

    @property
    def combines_learners(self) -> bool:
        """Whether an update combines every learner's minibatch (the table of algorithms says)."""
        return algorithm_spec(self.name).combines_learners

    def __init__(self, layout: ops.Layout):
        self.layout = layout
        #: (step, rank, peer) of every model averaging with one peer, for the report (the trainer
        #: collects and clears it each epoch; ranks are nodes where node leaders exchange)
        self.exchanges: list[tuple[int, int, int]] = []

    def start(self, learner):
        """Before the first step: every learner starts from learner 0's model."""
        yield ops.Broadcast(learner.state, group="learners")

    def plan(self, frames_per_step: float):
        """Once the learners know their epoch: the mean frames of a step over every shard."""
        yield from ()

    def step(self, learner, batch, lr: float):
        """One minibatch; returns its loss. By default a local SGD step with no exchange."""
        loss = yield from learner.backward(batch)
        yield from learner.update(lr)
        return loss

    def epoch_done(self, learner):
        """After the epoch's last step, before the learners meet to end it."""
        yield from ()

    def end_epoch(self, learner, dev_loss: float):
        """After each epoch's dev evaluation (adaptive policies)."""
        yield from ()

    def consensus(self, learner):
        """The model to evaluate and save after an epoch (the learners' own models stay as they
        are: a consensus is measured, not a synchronisation the algorithm gets for free). Where
        every learner holds the same model, that model."""
        yield from ()
        return learner.state

    def serve(self, learner, checkpoint, roll_back):
        """The program of a server rank (algorithms whose table entry has servers);
        `checkpoint(step)` saves the server's state, `roll_back()` takes its model back to the last
        accepted epoch's."""
        raise NotImplementedError(f"{self.name} has no server role")

    def checkpoint(self, learner, step: int):
        """While the trainer checkpoints `step` (e.g. have the server save its state too)."""
        yield from ()

    def roll_back(self, learner):
        """Once every learner has gone back to the last accepted epoch's model (a rejected epoch:
        asrscale.training.schedule), e.g. have the server go back too."""
        yield from ()

    def state_dict(self) -> dict:
        """What a resumed run needs to go on as if never stopped: the counters and records an
        algorithm keeps (its plain attributes)."""
        plain = (
            int,
            float,
            bool,
            str,
            list,
            tuple,
            type(None),
        )  # not the layout, buffers or NG-SGD
        private = ("_", "exchanges")  # the trainer checkpoints the exchanges itself
        return {
            k: v
            for k, v in vars(self).items()
            if not k.startswith(private) and isinstance(v, plain)
        }

    def load_state_dict(self, state: dict) -> None:
        vars(self).update(state)

    def finish(self, learner):
        """After the last epoch (e.g. tell the server to stop)."""
        yield from ()


class Averaging(Algorithm):
    """An algorithm whose learners hold different models between averagings: the model it evaluates
    and saves is their average. `averages` says what an averaging makes common: the model and the
    optimizer's state (the study's one policy, 3× the model's bytes under Adam), or the model's
    weights alone, as the studies averaged (each learner keeps its own optimizer state)."""

    def __init__(self, layout: ops.Layout, averages: str):
        super().__init__(layout)
        self.averages, self._received = averages, None

    def shared(self, learner) -> list[torch.Tensor]:
        """What an averaging makes common (`averages`)."""
        return learner.averaged if self.averages == "model_and_optimizer" else learner.state

    def _buffers(self, learner) -> list:
        """One set of buffers to receive a peer's share into, made once per run."""
        if self._received is None:
            self._received = [torch.empty_like(t) for t in self.shared(learner)]
        return self._received

    def consensus(self, learner):
        average = [tensor.detach().clone() for tensor in learner.state]
        yield ops.Allreduce(average, "learners")
        return average


class PeriodicAveraging(Averaging):
    """Local steps, and at every `period`-th the average of every learner's model (KAVG, MA): by
    one allreduce, or (`reduce` "master") through learner 0, which receives every other learner's
    model in turn, averages them and sends the average back to each, as rosc17's MPI trainer did."""

    local_steps: int  # set by the algorithm, as is its period
    period: int
    reduce: str = "allreduce"

    def count_step(self, learner):
        """One local step done: average the models if it ends a period."""
        self.local_steps += 1
        if self.local_steps % self.period == 0:
            yield ops.Barrier(
                "learners"
            )  # waiting for slower learners is idle time, not communication
            if self.reduce == "allreduce":
                yield ops.Allreduce(self.shared(learner), "learners")
            else:
                yield from self._through_master(learner)
            self.after_averaging(learner)

    def after_averaging(self, learner) -> None:
        """Once the learner holds the period's average (BMUF filters it here)."""

    def _through_master(self, learner):
        """The average made by learner 0: the others' models received in rank order (a fixed order
        of sums), then the average sent back to each."""
        shared, first = self.shared(learner), self.layout.servers  # learner 0's world rank
        if self.layout.rank == 0:
            received = self._buffers(learner)
            with torch.no_grad():
                for other in range(1, self.layout.size):
                    yield ops.Receive(received, first + other, tag=AVERAGE)
                    torch._foreach_add_(shared, received)
                torch._foreach_div_(shared, self.layout.size)
            for other in range(1, self.layout.size):
                yield ops.Send(shared, first + other, tag=AVERAGED)
        else:
            yield ops.Send(shared, first, tag=AVERAGE)
            yield ops.Receive(shared, first, tag=AVERAGED)


AVERAGE, AVERAGED = (
    101,
    102,
)  # the tags of a model sent to be averaged, and of the average sent back
