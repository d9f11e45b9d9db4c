"""One learner: its model, optimizer and the two halves of a step, as every algorithm uses them."""

import math
from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F

from asrscale.errors import ConfigError
from asrscale.training.fused.learners import fused_forward
from asrscale.training.natural_gradient import Recorder
from asrscale.worlds import ops


def ctc_loss(model, batch, reduction="mean", recorder: Recorder | None = None):
    """CTC loss per utterance divided by its target length; the mean (or sum) over the batch. With a
    `recorder`, the same arithmetic one affine map at a time (asrscale.training.fused.learners),
    keeping each map's per-frame statistics for NG-SGD."""
    batch = batch.to(next(model.parameters()).device)
    if recorder is None:
        log_probs, lengths = model(batch.features, batch.lengths)
    else:
        params = {name: p.unsqueeze(0) for name, p in model.named_parameters()}
        log_probs, lengths = fused_forward(
            model.config, params, batch.features[None], batch.lengths[None], recorder
        )
        log_probs, lengths = log_probs[0], lengths[0]
    losses = F.ctc_loss(
        log_probs.transpose(0, 1),
        batch.targets,
        lengths,
        batch.target_lengths,
        reduction="none",
        zero_infinity=True,
    )
    losses = losses / batch.target_lengths.clamp(min=1)
    return (losses.mean() if reduction == "mean" else losses.sum()), log_probs, lengths


def make_optimizer(optimizer: str, momentum: float, model) -> torch.optim.Optimizer:
    """train.optimizer over the model's parameters, with its state made now (so that an averaging
    algorithm can average it from the first step); the learning rate is set at every update.

    "sgd": minibatch SGD with momentum as Kaldi has it, which does not raise the effective rate:
    the velocity is a moving average of gradients, v = μv + (1-μ)g (torch's `dampening` = μ),
    starting at zero. "adam": Adam with torch's defaults."""
    parameters = list(model.parameters())
    if optimizer == "sgd":
        made = torch.optim.SGD(parameters, lr=0.0, momentum=momentum, dampening=momentum)
        if momentum:
            for p in parameters:
                made.state[p]["momentum_buffer"] = torch.zeros_like(p)
        return made
    if optimizer == "adam":
        made = torch.optim.Adam(parameters)
        for p in parameters:
            made.state[p].update(
                step=torch.tensor(0.0), exp_avg=torch.zeros_like(p), exp_avg_sq=torch.zeros_like(p)
            )
        return made
    raise ConfigError(f"train.optimizer must be 'adam' or 'sgd', not {optimizer!r}")


def optimizer_state(optimizer: torch.optim.Optimizer) -> list[torch.Tensor]:
    """The optimizer's per-parameter state tensors: SGD's velocities, Adam's two moments."""
    return [
        state[key]
        for p in optimizer.param_groups[0]["params"]
        for state in [optimizer.state[p]]
        for key in ("momentum_buffer", "exp_avg", "exp_avg_sq")
        if key in state
    ]


@dataclass
class GradientJob:
    """A learner's gradient as a world may defer it (`ops.Gradient`'s job; computed by
    asrscale.training.fused.learners.fused_gradients): the learner, whose gradients it writes, its
    minibatch, its recorder (NG-SGD's statistics, or None) and the parameters it computes with,
    by default the learner's own."""

    learner: "Learner"
    batch: object
    recorder: Recorder | None = None
    parameters: list | None = None
    clipped: bool = True  # False: the gradient is clipped once averaged (Learner.averaged_backward)

    def __post_init__(self):
        self.parameters = self.learner.parameters if self.parameters is None else self.parameters

    def fixed(self) -> "GradientJob":
        """The same job computing on a copy of the parameters as they are now: the learner's own
        may then change (be averaged) before it is carried out."""
        if self.parameters is not self.learner.parameters:
            return self
        return replace(self, parameters=[p.detach().clone() for p in self.parameters])


class Learner:
    """One learner's model and optimizer. `backward` and `update` are the two halves of a step, each
    a request that the world carries out (`apply` is the update done alone). Every algorithm clips
    each learner's own gradient (to train.clip_grad_norm) as it is computed, before any exchange,
    and an averaging algorithm averages `averaged`: the model with the optimizer's state."""

    def __init__(self, model, optimizer, clip_grad_norm: float, name: str):
        self.model, self.optimizer, self.clip_grad_norm, self.name = (
            model,
            optimizer,
            clip_grad_norm,
            name,
        )
        self.parameters = list(model.parameters())
        for parameter in self.parameters:  # each its own (autograd may hand one tensor to two)
            parameter.grad = torch.zeros_like(parameter)
        self.state = list(model.state_dict().values())
        self.device = self.parameters[0].device
        self.steps = 0

    @property
    def gradients(self) -> list[torch.Tensor]:
        return [p.grad for p in self.parameters]

    @property
    def averaged(self) -> list[torch.Tensor]:
        """What an averaging makes common: the model and the optimizer's state."""
        return self.state + optimizer_state(self.optimizer)

    @torch.no_grad()
    def restart_momentum(self) -> None:
        """The optimizer's momentum from zero: SGD's velocities, Adam's first moments (its second,
        a scale of the gradients, kept: zeroed, its steps would blow up)."""
        for state in self.optimizer.state.values():
            for key in ("momentum_buffer", "exp_avg"):
                if key in state:
                    state[key].zero_()

    def momentum_correction(self, steps: int) -> float:
        """The factor of a step's rate that makes the optimizer's momentum, restarted from zero
        (`restart_momentum`) with this step its `steps`-th since, unbiased, as Adam's moments are
        made: SGD's velocity v = μv + (1 - μ)g is then 1 - μ^t times a weighted mean of its t
        gradients, so a step at lr / (1 - μ^t) moves by that mean; Adam divides its first moment by
        1 - β₁^n, n its steps in all, where 1 - β₁^t is due. A step is linear in the momentum, so
        the rate carries the correction."""
        group = self.optimizer.param_groups[0]
        if "betas" in group:  # Adam
            beta, state = group["betas"][0], next(iter(self.optimizer.state.values()))
            return (1 - beta ** (float(state["step"]) + 1)) / (1 - beta**steps)
        return 1 / (1 - group["momentum"] ** steps)

    def backward(self, batch, recorder: Recorder | None = None):
        """The gradient of a minibatch, computed by the world (`ops.Gradient`); returns its loss.
        A loss that is not finite leaves its gradient out (zero), so that the models stay finite
        until the learners meet and stop the run by the divergence rule (asrscale.training.loop)."""
        job = GradientJob(self, batch, recorder)
        value = yield ops.Gradient(lambda: self.compute(batch, recorder), batch.frames, job)
        if not math.isfinite(value):
            for gradient in self.gradients:
                gradient.zero_()
        return value

    def averaged_backward(self, batch, group: str, bucket_mb: float):
        """The gradient of a minibatch averaged over `group`'s learners as the world computes and
        exchanges it (`ops.AveragedGradient`), then clipped, as DistributedDataParallel's users
        clip; returns this learner's loss. An average that is not finite (a learner's loss was
        not) is left out (zero) by every learner alike."""
        job = GradientJob(self, batch, clipped=False)
        gradient = ops.Gradient(lambda: self.compute(batch, clip=False), batch.frames, job)
        return (
            yield ops.AveragedGradient(
                gradient, self.parameters, self._clip_average, group, bucket_mb
            )
        )

    def _clip_average(self) -> None:
        norm = torch.nn.utils.clip_grad_norm_(self.parameters, self.clip_grad_norm or math.inf)
        if not math.isfinite(norm):
            for gradient in self.gradients:
                gradient.zero_()

    def compute(self, batch, recorder: Recorder | None = None, clip: bool = True) -> float:
        """This learner's loss and clipped gradient of a minibatch, computed alone; with a
        `recorder`, not clipped: NG-SGD makes every parameter's gradient anew from it (at its own
        norm), so a clip would change nothing but the plain gradient NG-SGD starts from."""
        self.optimizer.zero_grad(set_to_none=False)
        loss, _, _ = ctc_loss(self.model, batch, recorder=recorder)
        loss.backward()
        if recorder is None and clip:
            self.clip()
        return loss.item()

    def clip(self) -> None:
        if self.clip_grad_norm:
            torch.nn.utils.clip_grad_norm_(self.parameters, self.clip_grad_norm)

    def update(self, lr: float):
        """An optimizer step at rate `lr`, carried out by the world (`ops.Update`)."""
        yield ops.Update(lambda: self.apply(lr), (self, lr))

    def apply(self, lr: float) -> None:
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        self.optimizer.step()
        self.steps += 1
