"""One learner: its model, optimizer and the two halves of a step, as every algorithm uses them."""

import math
import time

import torch
import torch.nn.functional as F

from asrscale.worlds import ops
from asrscale.worlds.devices import synchronize


class Diverged(RuntimeError):
    """A learner's loss is not finite: the run stops and keeps its last good checkpoint."""


def ctc_loss(model, batch, reduction="mean"):
    """CTC loss per utterance divided by its target length; the mean (or sum) over the batch."""
    batch = batch.to(next(model.parameters()).device)
    log_probs, lengths = model(batch.features, batch.lengths)
    losses = F.ctc_loss(
        log_probs.transpose(0, 1), batch.targets, lengths, batch.target_lengths, reduction="none", zero_infinity=True
    )
    losses = losses / batch.target_lengths.clamp(min=1)
    return (losses.mean() if reduction == "mean" else losses.sum()), log_probs, lengths


def make_optimizer(optimizer: str, momentum: float, model) -> torch.optim.Optimizer:
    """train.optimizer over the model's parameters; the learning rate is set at every update."""
    if optimizer == "adam":
        return torch.optim.Adam(model.parameters())
    if optimizer == "sgd":
        return torch.optim.SGD(model.parameters(), lr=0.0, momentum=momentum)
    raise ValueError(f"train.optimizer must be 'adam' or 'sgd', not {optimizer!r}")


class Learner:
    """One learner's model and optimizer. `backward` and `update` are the two halves of a step;
    they report the compute time they spent to the world."""

    def __init__(self, model, optimizer, clip_grad_norm: float, name: str):
        self.model, self.optimizer, self.clip_grad_norm, self.name = model, optimizer, clip_grad_norm, name
        self.parameters = list(model.parameters())
        self.state = list(model.state_dict().values())
        self.device = self.parameters[0].device
        self.steps = 0

    @property
    def gradients(self) -> list[torch.Tensor]:
        return [p.grad for p in self.parameters]

    def seconds_since(self, start: float) -> float:
        """Compute time since `start` (perf_counter), once the device has finished what was asked."""
        synchronize(self.device)
        return time.perf_counter() - start

    def backward(self, batch):
        start = time.perf_counter()
        self.optimizer.zero_grad(set_to_none=False)
        loss, _, _ = ctc_loss(self.model, batch)
        loss.backward()
        value = loss.item()
        if not math.isfinite(value):
            raise Diverged(f"{self.name}: loss {value} at step {self.steps + 1}")
        yield ops.Compute(time.perf_counter() - start, batch.frames)
        return value

    def update(self, lr: float):
        start = time.perf_counter()
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        if self.clip_grad_norm:
            torch.nn.utils.clip_grad_norm_(self.parameters, self.clip_grad_norm)
        self.optimizer.step()
        self.steps += 1
        yield ops.Compute(self.seconds_since(start), kind="update")
