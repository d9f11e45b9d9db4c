"""H-ADPSGD: hierarchical ADPSGD. W. Zhang, X. Cui et al., "A highly efficient distributed deep
learning system for automatic speech recognition", Interspeech 2019.

Learners on one node form a super learner: they allreduce gradients every step inside the node
and so hold identical models. The node leaders (node rank 0) run ADPSGD among themselves: the
leader swaps the node's model with another leader's while the node computes its gradients,
averages ½–½, and shares the average back inside the node before the common update. Nodes are
the world's (study.learners_per_node, or the machines: MPI's shared-memory split, the hardware
profile's nodes); learners that do not fill the last node form a smaller one.
"""

from asrscale.training.algorithms.adpsgd import DecentralizedSGD, average_with, partner
from asrscale.worlds import ops


class HierarchicalDecentralizedSGD(DecentralizedSGD):
    """ADPSGD's graph and consensus, among nodes instead of learners."""

    name = "hadpsgd"

    def step(self, learner, batch, lr):
        peer = partner(self.layout.node, self.layout.nodes, self.steps, self.graph)
        self.steps += 1
        leader = self.layout.node_rank == 0
        if peer is not None and leader:
            theirs = self._buffers(learner)
            exchange = yield ops.StartExchange(learner.state, theirs, peer, "leaders")
        loss = yield from learner.backward(batch)
        yield ops.Allreduce(learner.gradients, "node")
        if peer is not None:
            if leader:
                yield ops.Wait(exchange)
                average_with(learner.state, theirs)
                self.exchanges.append((self.steps, self.layout.node, peer))
            yield ops.Broadcast(learner.state, root=0, group="node")
        yield from learner.update(lr)
        return loss
