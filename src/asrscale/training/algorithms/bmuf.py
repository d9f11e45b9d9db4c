"""BMUF: blockwise model-update filtering. K. Chen and Q. Huo, "Scalable training of deep learning
machines by incremental block training with intra-block parallel optimization and blockwise
model-update filtering", ICASSP 2016; recommended over ASGD, BSP and EASGD for acoustic models by
W. Li et al., "Empirical evaluation of parallel training algorithms on acoustic modeling",
Interspeech 2017.

A block is K local steps of every learner from the block's start W_g, as in KAVG; then the P models
are averaged (W̄) and the global model moves by the filtered update of the block:

    Δ = W̄ − W_g,   G ← η·G + ζ·Δ,   W ← W + G

with block momentum η and block learning rate ζ (1 − 1/P and 1 by default: those of CNTK's
block-momentum learner, from Chen and Huo's group). The next block starts from W (classical block
momentum), or from the look-ahead W + η·G (`nesterov`, Chen and Huo's Nesterov-like block
momentum). With η = 0 and ζ = 1 it is KAVG (at its K and `learner_momentum`) exactly: W is
computed as W̄ plus the filter's correction (η·G and (ζ − 1)·Δ), which is then zero. Every learner
holds the same W_g and G and computes the same filter, so it exchanges what KAVG does; the model
evaluated between blocks is the learners' average, as KAVG's. A rejected epoch (newbob) averages
the learners' restored models into a new block start, the filter's momentum cleared and the
learners' restarted (unless kept).

The learners' rate. Once its momentum has built up (over about 1/(1 − η) blocks), the filter moves
the model ζ/(1 − η) times the blocks' average change (a steady Δ gives G = ζ·Δ/(1 − η), the
look-ahead too). The learners step at the rule's rate (train.lr × s(P), as KAVG's) times
(1 − η)/ζ, so that, once the filter's momentum has built, a block moves the model as far as KAVG's
would and the two differ in the filter alone: with linear scaling and η = 1 − 1/P, ζ = 1 (the
defaults of CNTK's block-momentum learner, from Chen and Huo's group: docs/studies.md) that is
train.lr itself, the single learner's rate, as CNTK's; η = 0, ζ = 1 leaves KAVG's. Before it has
built, BMUF moves less than KAVG at the same train.lr.

The block and the learners' own momentum are KAVG's settings: K local steps (`period`), and the
learners' momentum across blocks (`learner_momentum`, kavg.py). By default it is restarted each
block, as CNTK's learner restarts it (its resetSGDMomentum), so that the filter's is the only
momentum across blocks, and bias-corrected, as Adam's moments are, so that a block of a few steps
still moves as far as with the momentum kept (CNTK's blocks are of 120,000 frames a learner, many
steps; scaled to a small corpus by their share of an epoch, a step or a few: docs/studies.md). KAVG
at the same `period` and `learner_momentum` is the arm that differs from BMUF by the filter alone.

Its descendants are these settings: an outer SGD on the outer gradient W_g − W̄ at rate α with
momentum β, heavy-ball (SlowMo: Wang et al., ICLR 2020) or Nesterov (DiLoCo's outer optimizer:
Douillard et al., 2023, α = 0.7, β = 0.9), is BMUF with ζ = α and η = β, classical or `nesterov`
(G is the outer momentum buffer times −ζ; a test steps torch's SGD beside it). Their inner rate is
then train.lr × s(P) × (1 − β)/α: to train at a published inner rate, set train.lr to match.
"""

import torch

from asrscale.training.algorithms.kavg import KStepAveraging
from asrscale.worlds import ops


class BlockwiseModelUpdateFiltering(KStepAveraging):
    """KAVG at a fixed K, each averaging filtered (`after_averaging`)."""

    name = "bmuf"

    def __init__(
        self,
        layout,
        period: int,
        block_momentum: float | None,
        block_lr: float,
        nesterov: bool,
        learner_momentum: str,
        averages: str,
    ):
        super().__init__(layout, period, "fixed", layout.size, 0.0, learner_momentum, averages)
        self.block_momentum = 1 - 1 / layout.size if block_momentum is None else block_momentum
        self.block_lr, self.nesterov = block_lr, nesterov
        self.rate_factor = (
            1 - self.block_momentum
        ) / block_lr  # the filter's gain taken out (see the module)
        self._start: list[torch.Tensor] = []  # W_g: the block's start, the same on every learner
        self._momentum: list[torch.Tensor] = []  # G

    def start(self, learner):
        yield from super().start(learner)
        self._new_block(learner)

    def _new_block(self, learner):
        """The learners' (common) model as a block's start, with no momentum."""
        self._start = [tensor.detach().clone() for tensor in _weights(learner)]
        self._momentum = [torch.zeros_like(tensor) for tensor in self._start]

    @torch.no_grad()
    def after_averaging(self, learner):
        """The learner's averaged model W̄ becomes the next block's start (see the module)."""
        weights, eta, zeta = _weights(learner), self.block_momentum, self.block_lr
        device = weights[0].device  # a resumed run's start and momentum were read onto the CPU
        self._start, self._momentum = (
            [t.to(device) for t in held] for held in (self._start, self._momentum)
        )
        for average, start, momentum in zip(weights, self._start, self._momentum):
            delta = average - start
            correction = (
                (zeta - 1) * delta if self.nesterov else eta * momentum + (zeta - 1) * delta
            )
            momentum.mul_(eta).add_(delta, alpha=zeta)
            average.add_(correction)  # W
            if self.nesterov:
                average.add_(momentum, alpha=eta)  # the look-ahead
            start.copy_(average)
        super().after_averaging(learner)

    def roll_back(self, learner):
        yield ops.Allreduce(self.shared(learner), "learners")
        self._new_block(learner)
        self.local_steps = 0
        super().after_averaging(learner)

    def state_dict(self) -> dict:
        return super().state_dict() | {"start": self._start, "momentum": self._momentum}

    def load_state_dict(self, state: dict) -> None:
        state = dict(state)
        self._start, self._momentum = state.pop("start"), state.pop("momentum")
        super().load_state_dict(state)


def _weights(learner) -> list[torch.Tensor]:
    """The model's floating-point tensors: what the filter moves."""
    return [tensor for tensor in learner.state if tensor.is_floating_point()]
