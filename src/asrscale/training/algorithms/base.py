"""The interface every training algorithm implements.

The trainer owns the loop (data, metrics, dev evaluation, checkpoints); an algorithm decides how
a learner turns a minibatch into an update and how learners exchange what they learn. Every
method is a generator of `asrscale.worlds.ops` requests, so one implementation runs in any world
(real MPI ranks, or a simulated cluster). A learner offers `backward(batch)` (gradients, returns
the loss), `update(lr)` (clip and optimizer step), and `parameters`, `gradients` and `state`.
"""

import math

import torch

from asrscale.worlds import ops

LR_SCALINGS = ("none", "sqrt", "linear")


def lr_scale(rule: str, learners: int) -> float:
    """Learning-rate multiplier for `learners` learners: 1, √P or P."""
    if rule not in LR_SCALINGS:
        raise ValueError(f"lr_scaling must be one of {LR_SCALINGS}, not {rule!r}")
    return {"none": 1.0, "sqrt": math.sqrt(learners), "linear": float(learners)}[rule]


class Algorithm:
    name: str = ""
    #: whether P learners act as one learner with a P-times larger batch (learning-rate scaling applies)
    scales_global_batch: bool = False
    #: world ranks that serve rather than learn (ASGD's parameter server)
    servers: int = 0
    #: with one learner, exactly SEQ's computation at SEQ's cost (no exchange happens), so a study
    #: trains SEQ once and reports its run for this algorithm too (tests/test_mpi.py checks it)
    alone_is_seq: bool = False
    #: whether every learner holds the same model and optimizer state after every step, so that
    #: a checkpoint needs learner 0's alone
    replicated: bool = False

    def __init__(self, layout: ops.Layout):
        self.layout = layout
        self._received = None
        #: (step, rank, peer) of every model averaging with one peer, for the report (the trainer
        #: collects and clears it each epoch; ranks are nodes where node leaders exchange)
        self.exchanges: list[tuple[int, int, int]] = []

    def _buffers(self, learner) -> list:
        """One model-sized set of buffers to receive a peer's model into, made once per run."""
        if self._received is None:
            self._received = [torch.empty_like(t) for t in learner.state]
        return self._received

    def start(self, learner):
        """Before the first step: every learner starts from learner 0's model."""
        yield ops.Broadcast(learner.state, group="learners")

    def step(self, learner, batch, lr: float):
        """One minibatch; returns its loss. By default a local SGD step with no exchange."""
        loss = yield from learner.backward(batch)
        yield from learner.update(lr)
        return loss

    def end_epoch(self, learner, dev_loss: float):
        """After each epoch's dev evaluation (adaptive policies)."""
        yield from ()

    def consensus(self, learner):
        """Make every learner hold the model to evaluate and save (e.g. the average)."""
        yield from ()

    def serve(self, learner, checkpoint):
        """The program of a server rank (algorithms with `servers` > 0); `checkpoint(step)` saves
        the server's state."""
        raise NotImplementedError(f"{self.name} has no server role")

    def checkpoint(self, learner, step: int):
        """While the trainer checkpoints `step` (e.g. have the server save its state too)."""
        yield from ()

    def state_dict(self) -> dict:
        """What a resumed run needs to go on as if never stopped: the counters and records an
        algorithm keeps (its plain attributes)."""
        plain = (int, float, bool, str, list, tuple, type(None))  # not the layout, buffers or NG-SGD
        private = ("_", "exchanges")  # the trainer checkpoints the exchanges itself
        return {k: v for k, v in vars(self).items() if not k.startswith(private) and isinstance(v, plain)}

    def load_state_dict(self, state: dict) -> None:
        vars(self).update(state)

    def finish(self, learner):
        """After the last epoch (e.g. tell the server to stop)."""
        yield from ()


class Averaging(Algorithm):
    """An algorithm whose learners hold different models between averagings: the model it
    evaluates and saves is their average."""

    def consensus(self, learner):
        yield ops.Allreduce(learner.state, "learners")


class PeriodicAveraging(Averaging):
    """Local steps, and at every `period`-th the average of every learner's model (KAVG, MA)."""

    local_steps: int  # set by the algorithm, as is its period
    period: int

    def count_step(self, learner):
        """One local step done: average the models if it ends a period."""
        self.local_steps += 1
        if self.local_steps % self.period == 0:
            yield ops.Barrier("learners")  # waiting for slower learners is idle time, not communication
            yield ops.Allreduce(learner.state, "learners")

