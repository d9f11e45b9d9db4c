"""SSGD: synchronous SGD; gradients are averaged over all learners at every step.

Every learner applies the same averaged gradient, so replicas stay identical and P learners
with batch B behave as one learner with batch P·B (hence learning-rate scaling and warm-up for
large P). See W. Zhang et al., "Distributed deep learning strategies for automatic speech
recognition", ICASSP 2019, where SSGD is the baseline of ADPSGD.
"""

from asrscale.training.algorithms.base import Algorithm
from asrscale.worlds import ops


class SynchronousSGD(Algorithm):
    name = "ssgd"
    replicated = True

    def step(self, learner, batch, lr):
        loss = yield from learner.backward(batch)
        # the barrier splits waiting for slower learners (idle) from the transfer (communication)
        yield ops.Barrier("learners")
        yield ops.Allreduce(learner.gradients, "learners")
        yield from learner.update(lr)
        return loss
