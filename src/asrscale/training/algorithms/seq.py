"""SEQ: one learner, plain minibatch SGD; the baseline every speedup is measured against."""

from asrscale.errors import UserError
from asrscale.training.algorithms.base import Algorithm


class Sequential(Algorithm):
    name = "seq"
    replicated = True

    def __init__(self, layout):
        if layout.size != 1:
            raise UserError(f"seq runs one learner, but {layout.size} were started")
        super().__init__(layout)
