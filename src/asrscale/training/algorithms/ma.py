"""MA: Kaldi-style periodic model averaging over long-lived ranks. D. Povey, X. Zhang and
S. Khudanpur, arXiv 1410.7455 (2014); H. Su and H. Chen, arXiv 1507.01239 (2015);
P. Rościszewski and J. Kaliski, HPCS 2017.

Each of N jobs trains from the common model on its own data for a period measured in frames
(`frames_per_job`; Kaldi's default for LSTMs is about 400k, rosc17 chose 600k), then the N
models are averaged with equal weights. Kaldi's learning rate, N times the effective rate, is the
study's one rule (asrscale.training.schedule: the rate follows the learners an update combines;
train.lr_decay its geometric decay), the change of the parameters in one minibatch is capped
(`max_param_change`, Kaldi 2.0), and gradients are preconditioned by online natural-gradient SGD
(`natural_gradient`, see asrscale.training.natural_gradient). The period in steps is the frames
per job over the mean frames of a learner's step (over every learner's shard); the models are
averaged by one allreduce, or (`reduce: master`) through learner 0, as rosc17's MPI trainer sent
every model to a master rank. rosc17's point,
long-lived ranks that keep the model in memory and prefetch data while computing, is how every
asrscale run works; `train.prefetch: 0` turns the overlap off to measure what it saves.
Not reproduced: Kaldi's ramp of the number of jobs and its final combination of models.
"""

import torch

from asrscale.training.algorithms.base import PeriodicAveraging
from asrscale.training.natural_gradient import Recorder, natural_gradient_of
from asrscale.worlds import ops


class ModelAveraging(PeriodicAveraging):
    name = "ma"

    def __init__(
        self,
        layout,
        frames_per_job: int,
        natural_gradient: bool,
        max_param_change: float,
        averages: str,
        reduce: str,
    ):
        super().__init__(layout, averages)
        self.reduce = reduce
        self.frames_per_job, self.natural_gradient = frames_per_job, natural_gradient
        self.max_param_change = max_param_change
        self.preconditioner, self.period, self.local_steps, self._restored = None, None, 0, None

    def plan(self, frames_per_step: float):
        # every learner averages at the same step: the period comes from the mean over all shards
        self.period = max(1, round(self.frames_per_job / frames_per_step))
        yield from ()

    def step(self, learner, batch, lr):
        if self.natural_gradient and self.preconditioner is None:
            self.preconditioner = natural_gradient_of(learner.model)
            if self._restored is not None:
                self.preconditioner.load_state_dict(self._restored)
        recorder = Recorder() if self.preconditioner is not None else None
        loss = yield from learner.backward(batch, recorder)
        if recorder is not None:
            preconditioner = self.preconditioner
            yield ops.Precondition(
                lambda: preconditioner.precondition(recorder), (preconditioner, recorder)
            )
            # its per-frame statistics are a minibatch's size times the model's width: not kept
            # while this learner waits (64 simulated MA learners kept 15 GB of them)
            recorder = None
        before = [p.detach().clone() for p in learner.parameters] if self.max_param_change else None
        yield from learner.update(lr)
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
        if self.preconditioner is not None:
            state["natural_gradient"] = self.preconditioner.state_dict()
        return state

    def load_state_dict(self, state):
        state = dict(state)
        self._restored = state.pop("natural_gradient", None)  # applied when the statistics are made
        super().load_state_dict(state)
