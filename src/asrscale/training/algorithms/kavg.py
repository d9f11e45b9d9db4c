"""KAVG: K-step averaging. F. Zhou and G. Cong, "On the convergence properties of a K-step
averaging stochastic gradient descent algorithm for nonconvex optimization", IJCAI 2018
(arXiv 1708.01012); used for LVCSR acoustic models by G. Cong, B. Kingsbury et al., MLHPC 2017.

Each of P learners runs K local SGD steps on its own shard from the common model; then the P
models are averaged with equal weights (one allreduce) and every learner continues from the
average. With plain or momentum SGD, K=1 is SSGD; P=1 is SEQ.

cong17 scales KAVG to 20 learners with "adaptive measures" it does not detail. These policies
are documented choices, selected by `period_policy` (the learning rate follows the study's one
rule, asrscale.training.schedule):
- "fixed": K stays `period`.
- "by_learners": K = max(1, round(period * reference_learners / P)): more learners drift apart
  faster, so they average more often (K = `period` at `reference_learners`).
- "plateau": K halves (down to 1) after an epoch whose dev loss improved by less than
  `plateau` (relative): averaging more often when progress stalls.

The learners' optimizer momentum across averagings (`learner_momentum`):
- "kept": each learner goes on with its own (averaged with the models where `averages` says);
- "restarted": from zero after every averaging, as CNTK's block-momentum learner does (BMUF);
- "corrected": restarted, and unbiased as Adam's moments are: at a block's t-th step the rate is
  divided by 1 − μ^t (`Learner.momentum_correction`), so that no momentum crosses an averaging and
  a block still moves as far as with the momentum kept: over K steps of a steady gradient g,
  K·lr·g, where "restarted" moves lr·g·Σ(1 − μ^t), 0.9·lr·g at K = 4 and μ = 0.9.
A lone learner averages with no one: its momentum is kept, whatever the setting (P = 1 is SEQ).
BMUF (bmuf.py) is this class with a filter over each averaging: KAVG at BMUF's K and
`learner_momentum` is the arm that differs from it by the filter alone.
"""

import math

from asrscale.training.algorithms.base import PeriodicAveraging


class KStepAveraging(PeriodicAveraging):
    name = "kavg"

    def __init__(
        self,
        layout,
        period: int,
        period_policy: str,
        reference_learners: int,
        plateau: float,
        learner_momentum: str,
        averages: str,
    ):
        super().__init__(layout, averages)
        self.period_policy, self.plateau = period_policy, plateau
        self.learner_momentum = learner_momentum if layout.size > 1 else "kept"
        self.period = period
        if period_policy == "by_learners":
            self.period = max(1, round(period * reference_learners / layout.size))
        self.local_steps, self.last_dev_loss = 0, math.inf
        self.block_steps = 0  # the steps since the last averaging (the learners' momentum's age)

    def step(self, learner, batch, lr):
        loss = yield from learner.backward(batch)
        self.block_steps += 1
        if self.learner_momentum == "corrected":
            lr *= learner.momentum_correction(self.block_steps)
        yield from learner.update(lr)
        yield from self.count_step(learner)
        return loss

    def after_averaging(self, learner) -> None:
        """A new block: each learner's momentum from zero, unless kept."""
        if self.learner_momentum != "kept":
            learner.restart_momentum()
        self.block_steps = 0

    def end_epoch(self, learner, dev_loss):
        improved = (
            (self.last_dev_loss - dev_loss) / abs(self.last_dev_loss)
            if math.isfinite(self.last_dev_loss)
            else 1
        )
        if self.period_policy == "plateau" and improved < self.plateau:
            self.period = max(1, self.period // 2)
        self.last_dev_loss = dev_loss
        yield from ()
