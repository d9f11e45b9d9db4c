"""SEQ: one learner, plain minibatch SGD; the baseline every speedup is measured against."""

from asrscale.algorithms.base import Algorithm


class Sequential(Algorithm):
    name = "seq"

    def __init__(self, comm):
        if comm.size != 1:
            raise ValueError(f"seq runs one learner, but {comm.size} were started")
        super().__init__(comm)
