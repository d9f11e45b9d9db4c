"""The learning rate: one rule for every algorithm, one function of the step.

An update that combines P learners' minibatches (SSGD's averaged gradient; the average of P
models each moved by its own gradient, as KAVG, MA, ADPSGD and H-ADPSGD make) moves the model
as one step on a P-times larger batch would, so its rate is train.lr times `lr_scale` of P: P
("linear", Goyal et al. 2017, the default), √P ("sqrt"), or 1 ("none"). ASGD's server applies
each learner's gradient alone: P = 1 for it. The scaled rate is reached by a linear warm-up from
train.lr over train.warmup_epochs (Goyal et al.'s gradual warm-up), and every epoch's end
multiplies it by train.lr_decay.
"""

import math

from asrscale.errors import ConfigError

LR_SCALINGS = ("none", "sqrt", "linear")


def lr_scale(rule: str, learners: int) -> float:
    """The rate's multiplier for an update that combines `learners` minibatches."""
    if rule not in LR_SCALINGS:
        raise ConfigError(f"train.lr_scaling must be one of {LR_SCALINGS}, not {rule!r}")
    return {"none": 1.0, "sqrt": math.sqrt(learners), "linear": float(learners)}[rule]


def learning_rate(lr: float, scale: float, warmup_epochs: float, lr_decay: float, step: int,
                  steps_per_epoch: int) -> float:  # fmt: skip
    """The rate at global step `step` (from 1) of a run of `steps_per_epoch` steps an epoch."""
    warmup_steps = warmup_epochs * steps_per_epoch
    warmed = min(1.0, step / warmup_steps) if warmup_steps else 1.0
    return lr * (1 + (scale - 1) * warmed) * lr_decay ** ((step - 1) // steps_per_epoch)
