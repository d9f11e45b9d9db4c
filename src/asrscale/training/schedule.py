"""The learning rate: one rule for every algorithm, one function of the step and the schedule's
factor.

An update that combines P learners' minibatches (SSGD's averaged gradient; the average of P models
each moved by its own gradient, as KAVG, MA, ADPSGD and H-ADPSGD make) moves the model as one step
on a P-times larger batch would, so its rate is train.lr times `lr_scale` of P: P ("linear", Goyal
et al. 2017, for SGD), √P ("sqrt", the default, for Adam), or 1 ("none"). ASGD's server applies each
learner's gradient alone: P = 1 for it. The scaled rate, the run's peak, is reached by a linear
warm-up from train.lr over train.warmup_epochs (Goyal et al.'s gradual warm-up), and multiplied by
the schedule's factor, which each epoch's end sets (`Schedule`):
- "cosine": from the peak at the first epoch to train.lr_final of it at the last of train.epochs,
  along half a cosine (Loshchilov and Hutter's annealing, an epoch at a time): a fixed budget whose
  last epochs are its annealed ones, as a run must be to converge (asrscale.analysis.convergence);
- "exponential": train.lr_decay to the power of the epochs done, for train.epochs epochs (su15's
  main schedule, 15 fixed epochs);
- "newbob" (Kaldi nnet1's steps/nnet/train_scheduler.sh, which su15 ran beside it): the rate is
  held while an epoch gains at least `start_halving` (relative to the best dev loss before it);
  an epoch that made it worse is rejected (every learner goes back to the model of the last
  accepted epoch); once an epoch gains less, the rate halves at every epoch's end, and the run
  stops once, halving, an epoch gains less than `stop`. As in nnet1 the rate has no floor: the
  schedule's own stop, not a rate, ends a run that has converged.
Either stops after train.epochs at most (the trainer's loop): stopped by its budget.
"""

import math
from dataclasses import dataclass

from asrscale.errors import ConfigError

LR_SCALINGS = ("none", "sqrt", "linear")
SCHEDULES = ("cosine", "exponential", "newbob")


def lr_scale(rule: str, learners: int) -> float:
    """The rate's multiplier for an update that combines `learners` minibatches."""
    if rule not in LR_SCALINGS:
        raise ConfigError(f"train.lr_scaling must be one of {LR_SCALINGS}, not {rule!r}")
    return {"none": 1.0, "sqrt": math.sqrt(learners), "linear": float(learners)}[rule]


def learning_rate(
    lr: float, scale: float, warmup_epochs: float, factor: float, step: int, steps_per_epoch: int
) -> float:
    """The rate at global step `step` (from 1) of a run of `steps_per_epoch` steps an epoch, at
    the schedule's `factor` of its peak."""
    warmup_steps = warmup_epochs * steps_per_epoch
    warmed = min(1.0, step / warmup_steps) if warmup_steps else 1.0
    return lr * (1 + (scale - 1) * warmed) * factor


@dataclass(frozen=True)
class Decision:
    """What an epoch's end decides: whether the epoch is kept (else every learner goes back to
    the last accepted epoch's model), the factor of the next epoch's rate, and why training stops
    (None: it goes on; whether the run has converged is the analysis's to say, from its epochs)."""

    accepted: bool
    factor: float
    stop: str | None


class Schedule:
    """train.schedule with its settings; `after_epoch` decides at each epoch's end from the dev
    loss. Its state is the learner's progress's `schedule` dict (checkpointed with it)."""

    def __init__(self, train):
        """`train`: the run's train settings (asrscale.config.sections.TrainConfig)."""
        if train.schedule not in SCHEDULES:
            raise ConfigError(f"train.schedule must be one of {SCHEDULES}, not {train.schedule!r}")
        self.kind, self.lr_decay, self.newbob = train.schedule, train.lr_decay, train.newbob
        self.epochs, self.lr_final = train.epochs, train.lr_final

    @staticmethod
    def start() -> dict:
        """The state before the first epoch: the full rate, no halving, no accepted dev loss."""
        return {"factor": 1.0, "halving": False, "accepted_loss": math.inf, "epochs": 0}

    def after_epoch(self, state: dict, dev_loss: float) -> Decision:
        """The decision at an epoch's end, `state` updated in place."""
        state["epochs"] = state.get("epochs", 0) + 1
        if self.kind == "cosine":
            state["factor"] = cosine(state["epochs"] + 1, self.epochs, self.lr_final)
            return Decision(True, state["factor"], None)
        if self.kind == "exponential":
            state["factor"] *= self.lr_decay
            return Decision(True, state["factor"], None)
        best = state["accepted_loss"]
        gain = (best - dev_loss) / best if math.isfinite(best) else math.inf
        accepted = dev_loss < best
        if accepted:
            state["accepted_loss"] = dev_loss
        stop = None
        if state["halving"] and gain < self.newbob["stop"]:
            stop = (
                f"halving, an epoch gained {100 * gain:.2f}% at {state['factor']:.3g} of the "
                "peak rate"
            )
        if gain < self.newbob["start_halving"]:
            state["halving"] = True
        if state["halving"] and stop is None:
            state["factor"] *= self.newbob["halving"]
        return Decision(accepted, state["factor"], stop)


def cosine(epoch: int, epochs: int, final: float) -> float:
    """The cosine schedule's factor of the peak rate at `epoch` (from 1) of `epochs`: 1 at the
    first, `final` at the last."""
    if epochs < 2:
        return 1.0
    done = min(epoch - 1, epochs - 1) / (epochs - 1)
    return final + (1 - final) * (1 + math.cos(math.pi * done)) / 2


def last_factor(train: dict) -> float | None:
    """The share of the peak rate a fixed-epoch schedule runs its last epoch at, from a run's train
    settings (None under newbob, which stops by its own rule)."""
    if train["schedule"] == "cosine":
        return cosine(train["epochs"], train["epochs"], train["lr_final"])
    if train["schedule"] == "exponential":
        return train["lr_decay"] ** (train["epochs"] - 1)
    return None
