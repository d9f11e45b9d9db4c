"""MA: Kaldi-style periodic model averaging over long-lived ranks. D. Povey, X. Zhang and
S. Khudanpur, arXiv 1410.7455 (2014); H. Su and H. Chen, arXiv 1507.01239 (2015);
P. Rościszewski and J. Kaliski, HPCS 2017.

Each of N jobs trains from the common model on its own data for a period measured in frames
(`frames_per_job`; Kaldi's default for LSTMs is about 400k, rosc17 chose 600k), then the N
models are averaged with equal weights. As in Kaldi the learning rate is N times the effective
rate (train.lr is the effective rate; its geometric decay is train.lr_decay per epoch), the
change of the parameters in one minibatch is capped (`max_param_change`, Kaldi 2.0), and
gradients are preconditioned by online natural-gradient SGD (`natural_gradient`, see
asrscale.training.natural_gradient). Kaldi uses plain SGD: run MA with train.optimizer sgd. rosc17's
point, long-lived ranks that keep the model in memory and prefetch data while computing, is how
every asrscale run works; `train.prefetch: 0` turns the overlap off to measure what it saves.
Not reproduced: Kaldi's ramp of the number of jobs and its final combination of models.
"""

import time

import torch

from asrscale.training.algorithms.base import PeriodicAveraging
from asrscale.training.natural_gradient import NaturalGradient
from asrscale.worlds import ops


class ModelAveraging(PeriodicAveraging):
    name = "ma"

    def __init__(self, layout, frames_per_job: int = 400_000, natural_gradient: bool = True,
                 max_param_change: float = 2.0):  # fmt: skip
        super().__init__(layout)
        if frames_per_job < 1:
            raise ValueError(f"ma: frames_per_job must be positive, not {frames_per_job}")
        if max_param_change < 0:
            raise ValueError(f"ma: max_param_change must be at least 0 (0 disables), not {max_param_change}")
        self.frames_per_job, self.use_natural_gradient = frames_per_job, natural_gradient
        self.max_param_change = max_param_change
        self.natural_gradient, self.period, self.local_steps = None, None, 0
        self.batch_size, self._restored = None, None

    def step(self, learner, batch, lr):
        if self.period is None:
            # learners must average at the same step: the period in steps comes from the mean batch
            (frames,) = yield ops.Reduce([batch.frames], "learners")
            self.period = max(1, round(self.frames_per_job / (frames / self.layout.size)))
            self.batch_size = len(batch.utts)
        if self.use_natural_gradient and self.natural_gradient is None:
            self.natural_gradient = NaturalGradient(learner.parameters, self.batch_size)
            if self._restored is not None:
                self.natural_gradient.load_state_dict(self._restored)
        loss = yield from learner.backward(batch)
        start = time.perf_counter()
        if self.natural_gradient is not None:
            self.natural_gradient.precondition()
        before = [p.detach().clone() for p in learner.parameters] if self.max_param_change else None
        yield ops.Compute(learner.seconds_since(start), kind="precondition")
        yield from learner.update(lr * self.layout.size)
        if before is not None:
            self._cap_change(learner.parameters, before)
        yield from self.count_step(learner)
        return loss

    @torch.no_grad()
    def _cap_change(self, parameters, before) -> None:
        change = torch.sqrt(sum(((p - b) ** 2).sum() for p, b in zip(parameters, before)))
        capped, scale = change > self.max_param_change, self.max_param_change / change
        for p, b in zip(parameters, before):  # decided on the device: no host sync
            p.copy_(torch.where(capped, b + (p - b) * scale, p))

    def state_dict(self):
        state = super().state_dict()
        if self.natural_gradient is not None:
            state["natural_gradient"] = self.natural_gradient.state_dict()
        return state

    def load_state_dict(self, state):
        state = dict(state)
        self._restored = state.pop("natural_gradient", None)  # applied when the statistics are made
        super().load_state_dict(state)

