"""H-ADPSGD: hierarchical ADPSGD. W. Zhang, X. Cui et al., "A highly efficient distributed deep
learning system for automatic speech recognition", Interspeech 2019.

Learners on one node form a super learner: they allreduce gradients every step inside the node
and so hold identical models. The node leaders (node rank 0) run ADPSGD among themselves, in lock
step (an asynchronous version would have a node answer averagings while its learners compute
together; not made): at every step the leaders matched on ADPSGD's graph (`pairing`) swap the
node's model while the node computes its gradients, average ½–½, and share the average back
inside the node before the common update. Nodes are
the world's (study.learners_per_node, or the machines: MPI's shared-memory split, the hardware
profile's nodes); learners that do not fill the last node form a smaller one.
"""

from asrscale.training.algorithms.adpsgd import average_with, distances, pairing
from asrscale.training.algorithms.base import Averaging
from asrscale.worlds import ops


class HierarchicalDecentralizedSGD(Averaging):
    name = "hadpsgd"
    alone_is_seq = True

    def __init__(self, layout, graph: str = "ring"):
        super().__init__(layout)
        distances(layout.nodes, graph)  # the graph's name checked
        self.graph, self.steps = graph, 0

    def step(self, learner, batch, lr):
        peer = pairing(self.layout.node, self.layout.nodes, self.steps, self.graph)
        self.steps += 1
        leader = self.layout.node_rank == 0
        if peer is not None and leader:
            theirs = self._buffers(learner)
            exchange = yield ops.StartExchange(learner.averaged, theirs, peer, "leaders")
        loss = yield from learner.backward(batch)
        yield ops.Allreduce(learner.gradients, "node")
        if peer is not None:
            if leader:
                yield ops.Wait(exchange)
                average_with(learner.averaged, theirs)
                self.exchanges.append((self.steps, self.layout.node, peer))
            yield ops.Broadcast(learner.averaged, root=0, group="node")
        yield from learner.update(lr)
        return loss
