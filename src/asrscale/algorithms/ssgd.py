"""SSGD: synchronous SGD; gradients are averaged over all learners at every step.

Every learner applies the same averaged gradient, so replicas stay identical and P learners
with batch B behave as one learner with batch P·B (hence learning-rate scaling and warm-up for
large P). See W. Zhang et al., "Distributed deep learning strategies for automatic speech
recognition", ICASSP 2019, where SSGD is the baseline of ADPSGD.
"""

from asrscale.algorithms.base import Algorithm


class SynchronousSGD(Algorithm):
    name = "ssgd"
    scales_global_batch = True

    def reduce_gradients(self, model):
        grads = [p.grad for p in model.parameters() if p.grad is not None]
        self.comm.wait_for_all()
        self.comm.allreduce_mean_(grads)
