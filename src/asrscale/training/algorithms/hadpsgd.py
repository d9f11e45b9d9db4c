"""H-ADPSGD: hierarchical ADPSGD. W. Zhang, X. Cui et al., "A highly efficient distributed deep
learning system for automatic speech recognition", Interspeech 2019.

Learners on one node form a super learner: they allreduce gradients every step inside the node
and so hold the same model. The node leaders (node rank 0) run ADPSGD among themselves, on its
graph over the nodes, wait-free as ADPSGD is (asrscale.training.algorithms.adpsgd): an active
leader asks a neighbouring node's leader to average while its node computes; a passive leader's
world answers without stopping its node. After the node's gradients are allreduced, the leader
shares its model (as its gossip, or its world's answers, left it) inside the node before the
common update, at every step and at the epoch's end. Nodes are the world's (study.node_size,
or the machines: MPI's shared-memory split, the hardware profile's nodes); learners that do not
fill the last node form a smaller one.
"""

from asrscale.training.algorithms.adpsgd import DecentralizedSGD
from asrscale.worlds import ops


class HierarchicalDecentralizedSGD(DecentralizedSGD):
    name = "hadpsgd"
    group = "leaders"

    def _vertex(self, layout) -> tuple[int | None, int]:
        return (layout.node if layout.node_rank == 0 else None), layout.nodes

    def gradient(self, learner, batch):
        loss = yield from learner.backward(batch)
        yield ops.Allreduce(learner.gradients, "node")  # the super learner's gradient
        return loss

    def average(self, learner, asked):
        yield from super().average(learner, asked)
        yield from self._share(learner)

    def epoch_done(self, learner):
        yield from super().epoch_done(learner)
        yield from self._share(learner)  # the averagings a passive leader answered last

    def _share(self, learner):
        """The leader's share (its model, and its optimizer's state where averaged) to its node."""
        if self.layout.nodes > 1:
            yield ops.Broadcast(self.shared(learner), root=0, group="node")
