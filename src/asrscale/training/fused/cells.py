"""One time step of N stacked LSTMs' pointwise algebra (gate order i, f, g, o, as torch's), forward
and backward, for the fused recurrence (asrscale.training.fused.learners): in torch's operations,
and as one Triton kernel each way.

Why a kernel of our own: at batch 32 a step's algebra is a dozen small elementwise operations over
[learners × directions, 32, 4H] gates; under CUDA graphs their launches are cheap, but each still
reads and writes the gates through GPU memory, which bounds the fused learners (cuDNN's LSTM does a
step's algebra in one kernel). A Triton kernel reads each input once and writes each output once.

Every tensor is [N, B, width] with rows contiguous within each of the N (a time step's slice of a
[N, T, B, width] buffer is), so the kernels take one stride: the N's.
"""

import torch

try:  # a GPU build of torch brings Triton; the CPU build does not (and needs no kernel)
    import triton
    import triton.language as tl
except ImportError:
    triton = None


class TorchCell:
    """The step's algebra in torch's operations (any device)."""

    @staticmethod
    def forward(raw, c_before, gates, c, h) -> None:
        """raw [N, B, 4H]: the gates before activation; writes the activated gates, the cell and the
        hidden state (`gates` [N, B, 4H], `c` and `h` [N, B, H])."""
        units = raw.shape[-1] // 4
        torch.sigmoid(raw, out=gates)  # i, f and o; g's is then replaced by its tanh
        torch.tanh(raw[..., 2 * units : 3 * units], out=gates[..., 2 * units : 3 * units])
        i, f, g, o = gates.chunk(4, dim=-1)
        torch.addcmul(f * c_before, i, g, out=c)
        torch.mul(o, torch.tanh(c), out=h)

    @staticmethod
    def backward(gates, c, c_before, dh_after, grad_h, dc, grad_gates) -> None:
        """The gradient at the raw gates (written to `grad_gates`) from the hidden state's
        (`dh_after`, through the next step, plus `grad_h`, from above) and the cell's (`dc`, from
        the next step: replaced in place by the gradient reaching the cell before)."""
        i, f, g, o = gates.chunk(4, dim=-1)
        dh = dh_after + grad_h
        tanh_c = torch.tanh(c)
        dc.addcmul_(dh * o, 1 - tanh_c * tanh_c)
        di, df, dg, do = grad_gates.chunk(4, dim=-1)
        torch.mul(dc * g, i * (1 - i), out=di)
        torch.mul(dc * c_before, f * (1 - f), out=df)
        torch.mul(dc * i, 1 - g * g, out=dg)
        torch.mul(dh * tanh_c, o * (1 - o), out=do)
        dc.mul_(f)


if triton is not None:

    @triton.jit
    def _tanh(x):
        return 2 * tl.sigmoid(2 * x) - 1

    @triton.jit
    def _place(batch, units, BLOCK_ROWS: tl.constexpr, BLOCK_UNITS: tl.constexpr, rows):
        """This program's rows (n, b) and units, and which of them exist."""
        # offsets in 64 bits: N × T × B × 4H passes 2^31 for large models and long utterances
        row = tl.program_id(0).to(tl.int64) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)[:, None]
        unit = tl.arange(0, BLOCK_UNITS)[None, :]
        return row // batch, (row % batch), unit, (row < rows) & (unit < units)

    @triton.jit
    def _forward_kernel(
        raw,
        c_before,
        gates,
        c,
        h,
        rows,
        batch,
        units,
        raw_n,
        c_before_n,
        gates_n,
        c_n,
        h_n,
        BLOCK_ROWS: tl.constexpr,
        BLOCK_UNITS: tl.constexpr,
    ):
        n, b, unit, mask = _place(batch, units, BLOCK_ROWS, BLOCK_UNITS, rows)
        gate = n * raw_n + b * 4 * units + unit
        i = tl.sigmoid(tl.load(raw + gate, mask))
        f = tl.sigmoid(tl.load(raw + gate + units, mask))
        g = _tanh(tl.load(raw + gate + 2 * units, mask))
        o = tl.sigmoid(tl.load(raw + gate + 3 * units, mask))
        cell = f * tl.load(c_before + n * c_before_n + b * units + unit, mask) + i * g
        out = n * gates_n + b * 4 * units + unit
        tl.store(gates + out, i, mask)
        tl.store(gates + out + units, f, mask)
        tl.store(gates + out + 2 * units, g, mask)
        tl.store(gates + out + 3 * units, o, mask)
        tl.store(c + n * c_n + b * units + unit, cell, mask)
        tl.store(h + n * h_n + b * units + unit, o * _tanh(cell), mask)

    @triton.jit
    def _backward_kernel(
        gates,
        c,
        c_before,
        dh_after,
        grad_h,
        dc,
        grad_gates,
        rows,
        batch,
        units,
        gates_n,
        c_n,
        c_before_n,
        dh_after_n,
        grad_h_n,
        dc_n,
        grad_gates_n,
        BLOCK_ROWS: tl.constexpr,
        BLOCK_UNITS: tl.constexpr,
    ):
        n, b, unit, mask = _place(batch, units, BLOCK_ROWS, BLOCK_UNITS, rows)
        gate = n * gates_n + b * 4 * units + unit
        i = tl.load(gates + gate, mask)
        f = tl.load(gates + gate + units, mask)
        g = tl.load(gates + gate + 2 * units, mask)
        o = tl.load(gates + gate + 3 * units, mask)
        at = b * units + unit
        dh = tl.load(dh_after + n * dh_after_n + at, mask) + tl.load(
            grad_h + n * grad_h_n + at, mask
        )
        tanh_c = _tanh(tl.load(c + n * c_n + at, mask))
        d_cell = tl.load(dc + n * dc_n + at, mask) + dh * o * (1 - tanh_c * tanh_c)
        out = n * grad_gates_n + b * 4 * units + unit
        tl.store(grad_gates + out, d_cell * g * i * (1 - i), mask)
        tl.store(
            grad_gates + out + units,
            d_cell * tl.load(c_before + n * c_before_n + at, mask) * f * (1 - f),
            mask,
        )
        tl.store(grad_gates + out + 2 * units, d_cell * i * (1 - g * g), mask)
        tl.store(grad_gates + out + 3 * units, dh * tanh_c * o * (1 - o), mask)
        tl.store(dc + n * dc_n + at, d_cell * f, mask)


class TritonCell:
    """The step's algebra as one Triton kernel each way (TorchCell's arithmetic; tanh by way of
    the sigmoid, so results agree to float rounding)."""

    ROWS = 16  # rows (learner-direction, utterance) per program

    def _launch(self, kernel, tensors, like):
        for tensor in tensors:
            if tensor.stride(-1) != 1 or tensor.stride(1) != tensor.shape[-1]:
                raise ValueError(
                    f"a cell's tensors need contiguous rows, not strides {tensor.stride()}"
                )
        n, batch, units = like.shape
        rows, block = n * batch, triton.next_power_of_2(units)
        grid = (triton.cdiv(rows, self.ROWS),)
        kernel[grid](
            *tensors,
            rows,
            batch,
            units,
            *(t.stride(0) for t in tensors),
            BLOCK_ROWS=self.ROWS,
            BLOCK_UNITS=block,
        )

    def forward(self, raw, c_before, gates, c, h) -> None:
        self._launch(_forward_kernel, (raw, c_before, gates, c, h), like=c)

    def backward(self, gates, c, c_before, dh_after, grad_h, dc, grad_gates) -> None:
        self._launch(
            _backward_kernel, (gates, c, c_before, dh_after, grad_h, dc, grad_gates), like=c
        )


def best_cell(device: torch.device):
    """The cell a fused recurrence on `device` uses: Triton's kernels on a GPU where Triton is."""
    return TritonCell() if device.type == "cuda" and triton is not None else TorchCell()
