"""The one thin layer between algorithms and the transport (mpi4py today).

Tensors travel through their buffers (no pickling on the hot path); each call is timed as
communication, and barriers as idle, into the learner's `TimeSplit`. A GPU build can put
CUDA-aware MPI or NCCL behind the same calls.
"""

import numpy as np
import torch
from mpi4py import MPI

from asrscale.timing import TimeSplit


class Comm:
    def __init__(self, mpi_comm=None, clock: TimeSplit | None = None):
        self.mpi = mpi_comm or MPI.COMM_WORLD
        self.rank, self.size = self.mpi.Get_rank(), self.mpi.Get_size()
        self.clock = clock or TimeSplit()
        self._flat: torch.Tensor | None = None

    def _flatten(self, tensors: list[torch.Tensor]) -> torch.Tensor:
        numel = sum(t.numel() for t in tensors)
        if self._flat is None or self._flat.numel() != numel or self._flat.dtype != tensors[0].dtype:
            self._flat = torch.empty(numel, dtype=tensors[0].dtype)
        torch.cat([t.reshape(-1) for t in tensors], out=self._flat)
        return self._flat

    def _unflatten(self, flat: torch.Tensor, tensors: list[torch.Tensor]) -> None:
        for tensor, part in zip(tensors, flat.split([t.numel() for t in tensors])):
            tensor.copy_(part.view_as(tensor))

    def allreduce_mean_(self, tensors: list[torch.Tensor]) -> None:
        """Replace each tensor, in place, by its mean over all learners (one allreduce)."""
        if self.size == 1:
            return
        with self.clock.measure("communication"):
            flat = self._flatten(tensors)
            self.mpi.Allreduce(MPI.IN_PLACE, flat.numpy(), op=MPI.SUM)
            flat /= self.size
            self._unflatten(flat, tensors)

    def broadcast_(self, tensors: list[torch.Tensor], root: int = 0) -> None:
        if self.size == 1:
            return
        with self.clock.measure("communication"):
            flat = self._flatten(tensors)
            self.mpi.Bcast(flat.numpy(), root=root)
            self._unflatten(flat, tensors)

    def wait_for_all(self) -> None:
        """A barrier, timed as idle: separates waiting for slower learners from transfer time."""
        if self.size > 1:
            with self.clock.measure("idle"):
                self.mpi.Barrier()

    def sum(self, values) -> np.ndarray:
        """Element-wise sum of a small vector over all learners (statistics, not parameters)."""
        array = np.asarray(values, dtype=np.float64)
        if self.size > 1:
            self.mpi.Allreduce(MPI.IN_PLACE, array, op=MPI.SUM)
        return array

    def min(self, value: int) -> int:
        return self.mpi.allreduce(value, op=MPI.MIN) if self.size > 1 else value

    def gather(self, value) -> list | None:
        """Small Python objects (metrics rows) to rank 0; pickled, off the hot path."""
        return self.mpi.gather(value, root=0) if self.size > 1 else [value]

    def abort(self, code: int = 1) -> None:
        """End every rank: one learner's error must not leave the others waiting forever."""
        if self.size > 1:
            self.mpi.Abort(code)
