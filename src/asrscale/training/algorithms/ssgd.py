"""SSGD: synchronous SGD; gradients are averaged over all learners at every step.

Every learner applies the same averaged gradient, so replicas stay identical and P learners
with batch B behave as one learner with batch P·B (hence learning-rate scaling and warm-up for
large P). See W. Zhang et al., "Distributed deep learning strategies for automatic speech
recognition", ICASSP 2019, where SSGD is the baseline of ADPSGD.

As users train it (PyTorch's DistributedDataParallel, Li et al., "PyTorch Distributed", VLDB
2020): the gradients are allreduced in buckets while the backward pass is still running, and
their average is clipped (`overlap`); without it, each learner's gradient is clipped, and the
learners wait for each other, then allreduce it whole.
"""

from asrscale.training.algorithms.base import Algorithm
from asrscale.worlds import ops


class SynchronousSGD(Algorithm):
    name = "ssgd"
    replicated = True

    def __init__(self, layout, overlap: bool, bucket_mb: float):
        super().__init__(layout)
        self.overlap, self.bucket_mb = overlap, bucket_mb

    def step(self, learner, batch, lr):
        if self.overlap:
            loss = yield from learner.averaged_backward(batch, "learners", self.bucket_mb)
            yield from learner.update(lr)
            return loss
        loss = yield from learner.backward(batch)
        # the barrier splits waiting for slower learners (idle) from the transfer (communication)
        yield ops.Barrier("learners")
        yield ops.Allreduce(learner.gradients, "learners")
        yield from learner.update(lr)
        return loss
