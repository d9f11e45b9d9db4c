"""Many learners' forward and backward passes as one computation: every parameter stacked over
the learners (`[N, ...]`), one batched matrix product per time step for all of them.

The arithmetic is each learner's own, as `asrscale.models` defines it (the same padding rule,
the same reversal of the backward direction within each utterance's length, the same output
layer), so a learner's loss and gradients equal those of its model computed alone, to float
rounding. What is shared is only the launch of each kernel: at batch 32 a GPU is bound by kernel
launches (about 7 ms a step for any batch up to ~512), so N learners in turn cost N times one,
while N learners stacked cost little more than one.

The LSTM recurrence has a hand-written backward (`Recurrence`): the per-step part is the
elementwise gate algebra (asrscale.training.cells: a Triton kernel each way on a GPU) and one
small batched product, and the recurrent weights' gradient is one large product over all time
steps (autograd would make one per step). The input projection and the output layer are batched
products over all frames, left to autograd. The learners' optimizer steps, too, are taken as one
(`fused_updates`), and their NG-SGD preconditionings (asrscale.training.natural_gradient); `fusers`
gives the simulated world all three.
"""

from functools import partial

import torch
import torch.nn.functional as F
from torch.optim.adam import adam
from torch.optim.sgd import sgd

from asrscale.config.sections import ModelConfig
from asrscale.models import stack_frames
from asrscale.training.cells import TorchCell, best_cell
from asrscale.training.natural_gradient import precondition_together
from asrscale.worlds import ops


def recurrence_forward(projected: torch.Tensor, recurrent: torch.Tensor, cell=TorchCell):
    """The hidden states of N independent LSTMs, time-major, step by step; `cell` does each step's
    pointwise algebra (asrscale.training.cells). projected: [N, T, B, 4H], the input projection
    plus both biases; recurrent: [N, H, 4H], the transposed hidden-to-hidden weights. Returns the
    activated gates, the cells and the hidden states ([N, T, B, 4H], [N, T, B, H] twice); the
    states start at zero."""
    n, steps, batch, four_h = projected.shape
    start = projected.new_zeros(n, batch, four_h // 4)
    gates = torch.empty_like(projected)
    cells = projected.new_empty(n, steps, batch, four_h // 4)
    hidden = torch.empty_like(cells)
    for t in range(steps):
        h, c = (hidden[:, t - 1], cells[:, t - 1]) if t > 0 else (start, start)
        cell.forward(torch.baddbmm(projected[:, t], h, recurrent), c, gates[:, t], cells[:, t], hidden[:, t])
    return gates, cells, hidden


def recurrence_backward(grad_hidden: torch.Tensor, gates: torch.Tensor, cells: torch.Tensor,
                        recurrent: torch.Tensor, cell=TorchCell) -> torch.Tensor:  # fmt: skip
    """The gradient at the raw gates [N, T, B, 4H], step by step back in time."""
    n, steps, batch, four_h = gates.shape
    grad_gates = torch.empty_like(gates)
    dh = grad_hidden.new_zeros(n, batch, four_h // 4)
    dc, start = torch.zeros_like(dh), torch.zeros_like(dh)
    recurrent_t = recurrent.transpose(1, 2)
    for t in reversed(range(steps)):
        c_before = cells[:, t - 1] if t > 0 else start
        cell.backward(gates[:, t], cells[:, t], c_before, dh, grad_hidden[:, t], dc, grad_gates[:, t])
        dh = torch.bmm(grad_gates[:, t], recurrent_t)
    return grad_gates


class Loops:
    """How the recurrence's two time loops run: eagerly, each step's algebra by `cell`
    (asrscale.training.cells). `bucket`: the loops run over a multiple of this many steps (steps
    past every utterance's end change nothing: their outputs are never read and the gradient that
    reaches them is zero)."""

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
    """The hidden states [N, T, B, H] of N LSTMs (see recurrence_forward), with a hand-written backward
    whose recurrent weights' gradient is one product over all steps; `loops` run the time loops."""

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
        # contiguous: autograd hands the gradient in the layout of its use ([N, B, T, H], transposed)
        grad_gates = loops.backward(loops.padded(grad_hidden.contiguous()), gates, cells, recurrent)
        # the recurrent weights' gradient at once: h_{t-1} of every step against every step's gates
        n, _, batch, units = hidden.shape
        before = torch.cat([hidden.new_zeros(n, 1, batch, units), hidden[:, :-1]], dim=1)
        grad_recurrent = torch.bmm(before.reshape(n, -1, units).transpose(1, 2), grad_gates.reshape(n, -1, 4 * units))
        return grad_gates[:, :steps], grad_recurrent, None


def reverse_within_lengths(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """x: [N, B, T, D]; each sequence reversed inside its own length (as models.reverse_within_lengths)."""
    time = torch.arange(x.shape[2], device=x.device)
    index = torch.where(time < lengths[..., None], lengths[..., None] - 1 - time, time)
    return x.gather(2, index[..., None].expand_as(x))


class Recorder:
    """Per-frame statistics of a model's affine maps, for NG-SGD (asrscale.training.natural_gradient):
    for each weight, the frames' inputs and, once backward has run, the derivatives at its outputs
    (one row a frame, both in one order; a map's first dimension is the learners')."""

    def __init__(self):
        self.record = {}

    def affine(self, output: torch.Tensor, weights: list[str], inputs: torch.Tensor) -> None:
        """An affine map's statistics: `weights` name the maps stacked along the first dimension
        (a bidirectional layer's two directions), each an equal share of it."""

        # the hook must not hold `inputs` itself: through its autograd graph it leads back to the
        # node the hook sits on, a cycle through C++ that Python's collector cannot free (each
        # step's graph leaked: 12 GB in a 2-epoch MA run)
        inputs = inputs.detach().chunk(len(weights))

        def keep(derivatives):
            for name, mine, theirs in zip(weights, inputs, derivatives.detach().chunk(len(weights))):
                self.record[name] = (mine, theirs)

        if output.requires_grad:
            output.register_hook(keep)


def lstm_direction(x, weight_ih, weight_hh, bias_ih, bias_hh, recorder: Recorder | None = None,
                   names: tuple[str, ...] = (), loops: Loops = EAGER):  # fmt: skip
    """N one-layer LSTMs: x [N, B, T, in] -> [N, B, T, H]; `names`: the directions stacked in N."""
    n, batch, steps, _ = x.shape
    time_major = x.transpose(1, 2).reshape(n, steps * batch, -1)
    bias = (bias_ih + bias_hh)[:, None, :]
    projected = torch.baddbmm(bias, time_major, weight_ih.transpose(1, 2)).view(n, steps, batch, -1)
    hidden = Recurrence.apply(projected, weight_hh.transpose(1, 2).contiguous(), loops)
    if recorder is not None:  # the gates' derivatives are the outputs' of both maps, frame by frame
        before = torch.cat([hidden.new_zeros(n, 1, batch, hidden.shape[-1]), hidden[:, :-1]], dim=1)
        recorder.affine(projected, [f"{name}.weight_ih_l0" for name in names], time_major)
        recorder.affine(projected, [f"{name}.weight_hh_l0" for name in names], before)
    return hidden.transpose(1, 2)


def fused_forward(config: ModelConfig, params: dict, features: torch.Tensor, lengths: torch.Tensor,
                  recorder: Recorder | None = None, loops: Loops = EAGER):  # fmt: skip
    """Log-probabilities [N, B, T', V] and output lengths [N, B] of N models whose parameters are
    stacked in `params` (the models' state-dict names, each [N, ...]), on features [N, B, T, D];
    with a `recorder`, each affine map's per-frame statistics."""
    n, batch = features.shape[:2]
    x, out_lengths = stack_frames(features.flatten(0, 1), lengths.flatten(), config.stack)
    x, out_lengths = x.view(n, batch, *x.shape[1:]), out_lengths.view(n, batch)
    if config.kind == "lstm":
        keys = ("weight_ih", "weight_hh", "bias_ih", "bias_hh")
        for layer in range(config.layers):
            directions = [f"layers.{layer}.forward_lstm"] + [f"layers.{layer}.backward_lstm"] * config.bidirectional
            # both directions as one stack of 2N LSTMs: half the launches of two
            weights = {k: torch.cat([params[f"{name}.{k}_l0"] for name in directions]) for k in keys}
            inputs = torch.cat([x, reverse_within_lengths(x, out_lengths)]) if config.bidirectional else x
            out = lstm_direction(inputs, **weights, recorder=recorder, names=tuple(directions), loops=loops)
            if config.bidirectional:
                out = torch.cat([out[:n], reverse_within_lengths(out[n:], out_lengths)], dim=-1)
            x = out
    else:
        c = config.context
        padded = F.pad(x, (0, 0, c, c))
        x = torch.cat([padded[:, :, i : i + x.shape[2]] for i in range(2 * c + 1)], dim=-1)
        for index in range(config.layers):
            x = torch.relu(_linear(x, params, f"hidden.{2 * index}", recorder))
    logits = _linear(x, params, "output", recorder)
    return logits.log_softmax(-1), out_lengths


def _linear(x, params: dict, name: str, recorder: Recorder | None):
    """x [N, B, T, in] through N linear maps `name`: weight [N, out, in], bias [N, out]."""
    n, batch, steps, _ = x.shape
    inputs = x.reshape(n, batch * steps, -1)
    out = torch.baddbmm(params[f"{name}.bias"][:, None, :], inputs, params[f"{name}.weight"].transpose(1, 2))
    if recorder is not None:
        recorder.affine(out, [f"{name}.weight"], inputs)
    return out.view(n, batch, steps, -1)


def biases_of(weights) -> dict:
    """Each affine map's bias, by its weight's name (an LSTM's input-to-gates and hidden-to-gates
    maps each count its own bias as Kaldi's components do)."""
    return {name: name.replace("weight", "bias") for name in weights}


def fused_gradients(jobs: list, loops: Loops = EAGER) -> list[float]:
    """The simulated world's fuser: the losses and clipped gradients of many learners' minibatches
    (`jobs`: asrscale.training.learner.GradientJob each, learners of one model on one device),
    computed as one: every job's parameters stacked, every batch padded to the longest of all (an
    added utterance weighing nothing where batches differ in size), the loss one per learner,
    clipping per learner; each learner's gradient and statistics written back. Returns the losses."""
    learners = [job.learner for job in jobs]
    model, device = learners[0].model, learners[0].device
    names = [name for name, _ in model.named_parameters()]
    stacked = {name: torch.stack([job.parameters[k].detach() for job in jobs]).requires_grad_()
               for k, name in enumerate(names)}  # fmt: skip
    features, lengths, targets, target_lengths, weights = _joint_batch([job.batch for job in jobs], device)
    recorder = Recorder() if any(job.recorder is not None for job in jobs) else None
    log_probs, out_lengths = fused_forward(model.config, stacked, features, lengths, recorder, loops)
    losses = F.ctc_loss(log_probs.flatten(0, 1).transpose(0, 1), targets, out_lengths.flatten(),
                        target_lengths.flatten(), reduction="none", zero_infinity=True)  # fmt: skip
    per_utterance = (losses / target_lengths.flatten().clamp(min=1)).view_as(weights) * weights
    per_learner = per_utterance.sum(1) / weights.sum(1)
    per_learner.sum().backward()
    gradients = [stacked[name].grad for name in names]
    clips = torch.tensor([learner.clip_grad_norm for learner in learners], device=device)
    if clips.any():  # as torch.nn.utils.clip_grad_norm_ does, for each learner alone
        norms = torch.stack([g.flatten(1).norm(dim=1) for g in gradients]).norm(dim=0)
        scale = torch.where(clips > 0, (clips / (norms + 1e-6)).clamp(max=1.0), torch.ones_like(norms))
        for gradient in gradients:
            gradient.mul_(scale.view(-1, *[1] * (gradient.dim() - 1)))
    for index, job in enumerate(jobs):
        torch._foreach_copy_(job.learner.gradients, [gradient[index] for gradient in gradients])
        if job.recorder is not None:
            job.recorder.record = {name: (x[index], d[index]) for name, (x, d) in recorder.record.items()}
    return per_learner.tolist()


@torch.no_grad()  # as an optimizer's step
def fused_updates(jobs: list[tuple]) -> None:
    """The simulated world's updater: many learners' optimizer steps (`jobs`: (learner, learning
    rate) each), one multi-tensor step for all learners of one optimizer, settings and rate:
    torch's functional Adam or SGD, which each learner's own step calls, over every learner's
    parameters and state at once (each tensor's arithmetic its own: the same result as one step
    per learner, at a few launches instead of a dozen per learner)."""
    groups = {}
    for learner, lr in jobs:
        settings = {k: v for k, v in learner.optimizer.param_groups[0].items() if k not in ("params", "lr")}
        groups.setdefault((type(learner.optimizer), lr, tuple(settings.items())), []).append(learner)
    for (kind, lr, settings), learners in groups.items():
        settings = dict(settings)
        params = [p for learner in learners for p in learner.parameters]
        states = [learner.optimizer.state[p] for learner in learners for p in learner.parameters]
        grads = [p.grad for p in params]
        common = {k: settings[k] for k in ("foreach", "fused", "maximize")}
        if kind is torch.optim.Adam:
            adam(params, grads, [s["exp_avg"] for s in states], [s["exp_avg_sq"] for s in states], [],
                 [s["step"] for s in states], amsgrad=settings["amsgrad"], beta1=settings["betas"][0],
                 beta2=settings["betas"][1], lr=lr, weight_decay=settings["weight_decay"], eps=settings["eps"],
                 capturable=settings["capturable"], differentiable=settings["differentiable"],
                 decoupled_weight_decay=settings["decoupled_weight_decay"], **common)  # fmt: skip
        elif kind is torch.optim.SGD:
            sgd(params, grads, [s.get("momentum_buffer") for s in states], lr=lr,
                weight_decay=settings["weight_decay"], momentum=settings["momentum"],
                dampening=settings["dampening"], nesterov=settings["nesterov"], **common)  # fmt: skip
        else:
            raise TypeError(f"no fused update for {kind.__name__}")
        for learner in learners:
            learner.steps += 1


def fusers(device: torch.device) -> dict:
    """The simulated world's fusers on `device`, by kind of a learner's work (asrscale.worlds.ops):
    gradients (fused_gradients; on a GPU, the recurrence's loops replayed as CUDA graphs, each
    step's algebra one Triton kernel each way where Triton is), updates (fused_updates) and NG-SGD's
    preconditionings (asrscale.training.natural_gradient.precondition_together)."""
    gradients = fused_gradients
    if device.type == "cuda":
        gradients = partial(fused_gradients, loops=GraphedLoops(best_cell(device)))
    return {ops.Gradient: gradients, ops.Update: fused_updates, ops.Precondition: precondition_together}


def _joint_batch(batches: list, device: torch.device):
    """N minibatches as one [N, B, T, D] batch, padded to the most utterances and frames of any;
    `weights` [N, B]: 1 for an utterance, 0 for padding. Assembled where the batches are (batches
    loaded on the host go to the device in one copy; batches on the device stay there)."""
    count, frames = max(len(b.utts) for b in batches), max(b.features.shape[1] for b in batches)
    n, dim = len(batches), batches[0].features.shape[2]
    features = batches[0].features.new_zeros(n, count, frames, dim)
    lengths, target_lengths = batches[0].lengths.new_ones(n, count), batches[0].target_lengths.new_zeros(n, count)
    weights = features.new_zeros(n, count)
    targets = []
    for i, batch in enumerate(batches):
        size = len(batch.utts)
        features[i, :size, : batch.features.shape[1]] = batch.features
        lengths[i, :size], target_lengths[i, :size], weights[i, :size] = batch.lengths, batch.target_lengths, 1.0
        targets.append(batch.targets)
    moved = (features, lengths, torch.cat(targets), target_lengths, weights)
    return tuple(tensor.to(device, non_blocking=True) for tensor in moved)
