"""A fused LSTM step's algebra (asrscale.training.fused.cells): Triton's kernels compute what
torch's operations do, forward and backward, on the strided time-step slices the recurrence hands
them. On a GPU where Triton is; on the CPU through Triton's interpreter (TRITON_INTERPRET=1 set
before the import), where Triton is installed (CI's CPU build of torch comes without it:
skipped)."""

import os
from functools import partial

import pytest
import torch

from asrscale.training.fused import cells
from asrscale.training.fused.learners import fused_gradients
from asrscale.training.fused.recurrence import Loops, recurrence_backward, recurrence_forward
from asrscale.worlds import ops
from helpers import simulate

if torch.cuda.is_available():
    DEVICE, DTYPE = torch.device("cuda"), torch.float32
else:
    DEVICE, DTYPE = torch.device("cpu"), torch.float64
pytestmark = pytest.mark.skipif(
    cells.triton is None or (DEVICE.type == "cpu" and os.environ.get("TRITON_INTERPRET") != "1"),
    reason="needs Triton, on a GPU or through its interpreter",
)
TOLERANCE = dict(rtol=1e-5, atol=1e-6) if DTYPE == torch.float32 else dict(rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("units", [16, 20])  # 20: the block of units is wider than the units
def test_the_triton_cell_computes_what_torchs_operations_do(units):
    torch.manual_seed(0)
    n, steps, batch = 6, 5, 3
    projected = torch.randn(n, steps, batch, 4 * units, dtype=DTYPE, device=DEVICE)
    recurrent = torch.randn(n, units, 4 * units, dtype=DTYPE, device=DEVICE) / units**0.5
    grad_hidden = torch.randn(n, steps, batch, units, dtype=DTYPE, device=DEVICE)
    results = []
    for cell in (cells.TorchCell, cells.TritonCell()):
        gates, c, h = recurrence_forward(projected, recurrent, cell)
        results.append((gates, c, h, recurrence_backward(grad_hidden, gates, c, recurrent, cell)))
    for name, torchs, tritons in zip(("gates", "cells", "hidden", "gradient"), *results):
        torch.testing.assert_close(tritons, torchs, **TOLERANCE, msg=name)


def test_the_triton_cell_refuses_tensors_whose_rows_are_not_contiguous():
    gates = torch.zeros(2, 3, 4 * 8, dtype=DTYPE, device=DEVICE)
    c = torch.zeros(2, 3, 16, dtype=DTYPE, device=DEVICE)[..., :8]
    with pytest.raises(ValueError, match="contiguous rows"):
        cells.TritonCell().forward(gates, c, gates, c, c)


@pytest.mark.parametrize("algorithm", ["ssgd", "hadpsgd"])
def test_fused_learners_with_tritons_cells_train_as_learners_one_by_one(
    corpus, tmp_path, monkeypatch, algorithm
):
    """The simulated world's fuser with Triton's cells (on a GPU the world's own: CUDA graphs of
    them), where the gradient reaches the recurrence in the layout of its use: after an epoch, the
    models of learners computed one by one, to float rounding."""
    monkeypatch.setattr(torch.backends.cudnn, "allow_tf32", False)  # the unfused learners' LSTM
    fused = (
        {}
        if DEVICE.type == "cuda"
        else {ops.Gradient: partial(fused_gradients, loops=Loops(cells.TritonCell()))}
    )
    (alone, alone_metrics), (together, fused_metrics) = (
        simulate(
            corpus,
            tmp_path / str(fuse),
            algorithm,
            4,
            fuse,
            DEVICE.type,
            fused,
            optimizer="sgd",
            lr=0.05,
        )
        for fuse in (False, True)
    )
    for name, tensor in alone.items():
        torch.testing.assert_close(together[name], tensor, rtol=1e-3, atol=1e-4, msg=name)
    dev = [
        metrics[metrics.kind == "epoch"].dev_loss.round(3).tolist()
        for metrics in (alone_metrics, fused_metrics)
    ]
    assert dev[0] == dev[1]
