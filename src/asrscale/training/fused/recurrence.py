"""N independent LSTMs' recurrence, stacked (each tensor's first dimension the learners'), with a
hand-written backward (`Recurrence`): the per-step part is the elementwise gate algebra
(asrscale.training.fused.cells: a Triton kernel each way on a GPU) and one small batched product,
and the recurrent weights' gradient is one large product over all time steps (autograd would make
one per step). `Loops` run the two time loops eagerly, `GraphedLoops` replay them as CUDA graphs.
asrscale.training.fused.learners builds the fused learners' LSTM layers on it.
"""

from functools import partial

import torch

from asrscale.training.fused.cells import TorchCell


def recurrence_forward(projected: torch.Tensor, recurrent: torch.Tensor, cell=TorchCell):
    """The hidden states of N independent LSTMs, time-major, step by step; `cell` does each step's
    pointwise algebra (asrscale.training.fused.cells). projected: [N, T, B, 4H], the input
    projection plus both biases; recurrent: [N, H, 4H], the transposed hidden-to-hidden weights.
    Returns the activated gates, the cells and the hidden states ([N, T, B, 4H], [N, T, B, H]
    twice); the states start at zero."""
    n, steps, batch, four_h = projected.shape
    start = projected.new_zeros(n, batch, four_h // 4)
    gates = torch.empty_like(projected)
    cells = projected.new_empty(n, steps, batch, four_h // 4)
    hidden = torch.empty_like(cells)
    for t in range(steps):
        h, c = (hidden[:, t - 1], cells[:, t - 1]) if t > 0 else (start, start)
        cell.forward(
            torch.baddbmm(projected[:, t], h, recurrent), c, gates[:, t], cells[:, t], hidden[:, t]
        )
    return gates, cells, hidden


def recurrence_backward(
    grad_hidden: torch.Tensor,
    gates: torch.Tensor,
    cells: torch.Tensor,
    recurrent: torch.Tensor,
    cell=TorchCell,
) -> torch.Tensor:
    """The gradient at the raw gates [N, T, B, 4H], step by step back in time."""
    n, steps, batch, four_h = gates.shape
    grad_gates = torch.empty_like(gates)
    dh = grad_hidden.new_zeros(n, batch, four_h // 4)
    dc, start = torch.zeros_like(dh), torch.zeros_like(dh)
    recurrent_t = recurrent.transpose(1, 2)
    for t in reversed(range(steps)):
        c_before = cells[:, t - 1] if t > 0 else start
        cell.backward(
            gates[:, t], cells[:, t], c_before, dh, grad_hidden[:, t], dc, grad_gates[:, t]
        )
        dh = torch.bmm(grad_gates[:, t], recurrent_t)
    return grad_gates


class Loops:
    """How the recurrence's two time loops run: eagerly, each step's algebra by `cell`
    (asrscale.training.fused.cells). `bucket`: the loops run over a multiple of this many steps
    (steps past every utterance's end change nothing: their outputs are never read and the gradient
    that reaches them is zero)."""

    bucket = 1

    def __init__(self, cell=TorchCell):
        self.forward = partial(recurrence_forward, cell=cell)
        self.backward = partial(recurrence_backward, cell=cell)

    def padded(self, x: torch.Tensor) -> torch.Tensor:
        """x [N, T, ...] with zero steps added up to a multiple of the bucket."""
        extra = -x.shape[1] % self.bucket
        return torch.cat([x, x.new_zeros(x.shape[0], extra, *x.shape[2:])], dim=1) if extra else x


class GraphedLoops(Loops):
    """The loops replayed as CUDA graphs: at batch 32 a GPU is bound by launching the loops' few
    thousand small kernels, which a graph launches at once. One graph per shape, captured the
    second time a shape comes (a shape met once, such as an asynchronous algorithm's odd number
    of learners computing together, is not worth a capture); lengths padded to a bucket of 8
    steps, so that an epoch's batches share a few shapes."""

    bucket = 8

    def __init__(self, cell=TorchCell):
        super().__init__(cell)
        self.forward, self.backward = Graphed(self.forward), Graphed(self.backward)


class Graphed:
    """A function of CUDA tensors (to a tensor or a tuple of them) replayed as a CUDA graph per
    shape of its inputs (see GraphedLoops). The graphs share one memory pool: each is replayed by
    itself and its outputs copied out at once, so none needs another's memory kept."""

    def __init__(self, function):
        self.function, self.seen, self.graphs, self.pool = function, set(), {}, None

    def __call__(self, *inputs: torch.Tensor):
        key = tuple((x.shape, x.dtype, x.device) for x in inputs)
        if key not in self.graphs:
            if key not in self.seen:
                self.seen.add(key)
                return self.function(*inputs)
            self.graphs[key] = self._capture(inputs)
        static_inputs, graph, static_outputs = self.graphs[key]
        for static, x in zip(static_inputs, inputs):
            static.copy_(x)
        graph.replay()
        if isinstance(static_outputs, torch.Tensor):
            return static_outputs.clone()
        return tuple(output.clone() for output in static_outputs)

    def _capture(self, inputs: tuple) -> tuple:
        static_inputs = [x.clone() for x in inputs]
        side = torch.cuda.Stream(inputs[0].device)
        side.wait_stream(torch.cuda.current_stream(inputs[0].device))
        with torch.cuda.stream(side):  # warm up outside the capture, as CUDA graphs ask
            self.function(*static_inputs)
        torch.cuda.current_stream(inputs[0].device).wait_stream(side)
        self.pool = self.pool or torch.cuda.graph_pool_handle()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=self.pool, capture_error_mode="thread_local"):
            static_outputs = self.function(*static_inputs)
        return static_inputs, graph, static_outputs


EAGER = Loops()


class Recurrence(torch.autograd.Function):
    """The hidden states [N, T, B, H] of N LSTMs (see recurrence_forward), with a hand-written
    backward whose recurrent weights' gradient is one product over all steps; `loops` run the time
    loops."""

    @staticmethod
    def forward(ctx, projected, recurrent, loops: Loops):
        steps = projected.shape[1]
        gates, cells, hidden = loops.forward(loops.padded(projected), recurrent)
        ctx.loops, ctx.steps = loops, steps
        ctx.save_for_backward(gates, cells, hidden, recurrent)
        return hidden[:, :steps]

    @staticmethod
    def backward(ctx, grad_hidden):
        gates, cells, hidden, recurrent = ctx.saved_tensors
        loops, steps = ctx.loops, ctx.steps
        # contiguous: autograd hands the gradient in the layout of its use ([N, B, T, H],
        # transposed)
        grad_gates = loops.backward(loops.padded(grad_hidden.contiguous()), gates, cells, recurrent)
        # the recurrent weights' gradient at once: h_{t-1} of every step against every step's gates
        n, _, batch, units = hidden.shape
        before = torch.cat([hidden.new_zeros(n, 1, batch, units), hidden[:, :-1]], dim=1)
        grad_recurrent = torch.bmm(
            before.reshape(n, -1, units).transpose(1, 2), grad_gates.reshape(n, -1, 4 * units)
        )
        return grad_gates[:, :steps], grad_recurrent, None
