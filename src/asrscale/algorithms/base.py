"""The interface every training algorithm implements.

The trainer owns the loop (data, forward, backward, optimizer step, metrics, checkpoints); an
algorithm only decides how learners exchange what they learn, through these hooks. All
communication goes through `asrscale.comm.Comm`.
"""

from torch import nn

from asrscale.comm import Comm


class Algorithm:
    name: str = ""
    #: whether P learners act as one learner with a P-times larger batch (learning-rate scaling applies)
    scales_global_batch: bool = False

    def __init__(self, comm: Comm):
        self.comm = comm

    def start(self, model: nn.Module) -> None:
        """Before the first step: every learner starts from rank 0's model."""
        self.comm.broadcast_(list(model.state_dict().values()))

    def reduce_gradients(self, model: nn.Module) -> None:
        """After backward, before the optimizer step."""

    def after_step(self, model: nn.Module, step: int) -> None:
        """After the optimizer step; `step` counts this learner's steps from 1."""

    def consensus(self, model: nn.Module) -> None:
        """Make every learner hold the model to evaluate and save (e.g. the average)."""
