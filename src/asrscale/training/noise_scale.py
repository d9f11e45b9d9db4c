"""The gradient noise scale of a run's training data (McCandlish, Kaplan, Amodei and the OpenAI
Dota team, "An empirical model of large-batch training", 2018, appendix A.1): how large a batch
can grow before a larger one stops buying fewer steps.

With G the gradient of the whole training set and Σ the covariance of one utterance's gradient,
the simple noise scale B = tr(Σ) / |G|² estimates the critical batch (the paper's B_crit ≈
B_simple): well below it a batch twice as large takes about half the steps (the small-batch
regime), well above it about as many, each of twice the utterances (the large-batch regime). A
batch of b utterances drawn at random has E|g_b|² = |G|² + tr(Σ) / b, so the squared gradient
norms at two batch sizes give both unknowns, each estimate unbiased and noisy. As the paper does,
the two are smoothed apart over a run's measurements (exponential moving averages) and their
ratio taken. How a run measures them: asrscale.training.evaluation.gradient_noise.
"""

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Norms:
    """Squared gradient norms at two batch sizes: `small`, the mean |g|² of batches of `small_batch`
    utterances, and `big`, that of batches of `big_batch`."""

    small: float
    big: float
    small_batch: int
    big_batch: int

    @property
    def gradient_sq(self) -> float:
        """|G|², the squared norm of the true gradient."""
        b, big = self.small_batch, self.big_batch
        return (big * self.big - b * self.small) / (big - b)

    @property
    def trace(self) -> float:
        """tr(Σ), the summed variance of one utterance's gradient."""
        return (self.small - self.big) / (1 / self.small_batch - 1 / self.big_batch)


class Tally:
    """What a learner's share of a measurement adds up: every small batch's |g|² and every big
    batch's (of the mean of its small batches' gradients), with their counts; `values`, a small
    vector that the learners sum."""

    def __init__(self):
        self.small, self.smalls, self.big, self.bigs = 0.0, 0, 0.0, 0

    def add(self, gradients) -> None:
        """One big batch: its small batches' gradients (flat tensors), in turn."""
        total, count = 0.0, 0
        for gradient in gradients:
            gradient = gradient.double()
            self.small, self.smalls = self.small + float(gradient @ gradient), self.smalls + 1
            total, count = total + gradient, count + 1
        mean = total / count
        self.big, self.bigs = self.big + float(mean @ mean), self.bigs + 1

    def values(self) -> list[float]:
        return [self.small, self.smalls, self.big, self.bigs]


def norms(values, small_batch: int, batches: int) -> Norms:
    """The norms of the learners' summed `Tally.values`, big batches of `batches` small ones."""
    small, smalls, big, bigs = values
    return Norms(small / smalls, big / bigs, small_batch, small_batch * batches)


def smoothed(estimates: list[tuple[float, float]], decay: float) -> float:
    """The noise scale from a run's (|G|², tr(Σ)) estimates so far, oldest first: the ratio of their
    exponential moving averages, each new estimate weighing 1 − `decay`. Where an average is not
    above zero the measurements have not resolved it, and the ratio takes its limit: infinite where
    |G|² is not (the gradient's mean lost in its noise), zero where tr(Σ) is not; NaN without
    estimates."""
    if not estimates:
        return math.nan
    gradient_sq = trace = 0.0
    for g, t in estimates:
        gradient_sq = decay * gradient_sq + (1 - decay) * g
        trace = decay * trace + (1 - decay) * t
    return max(trace, 0.0) / gradient_sq if gradient_sq > 0 else math.inf
