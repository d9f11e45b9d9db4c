"""Many learners' forward and backward passes as one computation: every parameter stacked over
the learners (`[N, ...]`), one batched matrix product per time step for all of them.

The arithmetic is each learner's own, as `asrscale.training.models` defines it (the same padding rule,
the same reversal of the backward direction within each utterance's length, the same output
layer), so a learner's loss and gradients equal those of its model computed alone, to float
rounding. What is shared is only the launch of each kernel: at batch 32 a GPU is bound by kernel
launches (about 7 ms a step for any batch up to ~512), so N learners in turn cost N times one,
while N learners stacked cost little more than one.

The LSTM recurrence has a hand-written backward (`Recurrence`): the per-step part is the
elementwise gate algebra and one small batched product, and the recurrent weights' gradient is
one large product over all time steps (autograd would make one per step). The input projection
and the output layer are batched products over all frames, left to autograd.
"""

import torch
import torch.nn.functional as F

from asrscale.training.models import ModelConfig, stack_frames


class Recurrence(torch.autograd.Function):
    """The hidden states of N independent LSTMs (gate order i, f, g, o, as torch's), time-major.

    projected: [N, T, B, 4H], the input projection plus both biases; recurrent: [N, H, 4H], the
    transposed hidden-to-hidden weights. Returns the hidden states [N, T, B, H]; the states start
    at zero."""

    @staticmethod
    def forward(ctx, projected, recurrent):
        n, steps, batch, four_h = projected.shape
        units = four_h // 4
        h = projected.new_zeros(n, batch, units)
        c = torch.zeros_like(h)
        gates = torch.empty_like(projected)  # activated
        cells = projected.new_empty(n, steps, batch, units)
        hidden = torch.empty_like(cells)
        for t in range(steps):
            raw, act = torch.baddbmm(projected[:, t], h, recurrent), gates[:, t]
            torch.sigmoid(raw, out=act)  # i, f and o; g's is then replaced by its tanh
            torch.tanh(raw[..., 2 * units : 3 * units], out=act[..., 2 * units : 3 * units])
            i, f, g, o = act.chunk(4, dim=-1)
            c = torch.addcmul(f * c, i, g)
            cells[:, t] = c
            h = o * torch.tanh(c)
            hidden[:, t] = h
        ctx.save_for_backward(gates, cells, hidden, recurrent)
        return hidden

    @staticmethod
    def backward(ctx, grad_hidden):
        gates, cells, hidden, recurrent = ctx.saved_tensors
        n, steps, batch, four_h = gates.shape
        units = four_h // 4
        grad_gates = torch.empty_like(gates)
        dh = grad_hidden.new_zeros(n, batch, units)
        dc = torch.zeros_like(dh)
        recurrent_t = recurrent.transpose(1, 2)
        for t in reversed(range(steps)):
            i, f, g, o = gates[:, t].chunk(4, dim=-1)
            dh = dh + grad_hidden[:, t]
            tanh_c = torch.tanh(cells[:, t])
            dc = torch.addcmul(dc, dh * o, 1 - tanh_c * tanh_c)
            c_before = cells[:, t - 1] if t > 0 else torch.zeros_like(dc)
            di, df, dg, do = grad_gates[:, t].chunk(4, dim=-1)
            torch.mul(dc * g, i * (1 - i), out=di)
            torch.mul(dc * c_before, f * (1 - f), out=df)
            torch.mul(dc * i, 1 - g * g, out=dg)
            torch.mul(dh * tanh_c, o * (1 - o), out=do)
            dc = dc * f
            dh = torch.bmm(grad_gates[:, t], recurrent_t)
        # the recurrent weights' gradient at once: h_{t-1} of every step against every step's gates
        before = torch.cat([hidden.new_zeros(n, 1, batch, units), hidden[:, :-1]], dim=1)
        grad_recurrent = torch.bmm(before.reshape(n, -1, units).transpose(1, 2), grad_gates.reshape(n, -1, four_h))
        return grad_gates, grad_recurrent


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
        self.inputs, self.record = {}, {}

    def affine(self, output: torch.Tensor, weight: str, inputs: torch.Tensor) -> None:
        self.inputs[weight] = inputs.detach()

        def keep(derivatives):
            self.record[weight] = (self.inputs[weight], derivatives.detach())

        if output.requires_grad:
            output.register_hook(keep)


def lstm_direction(x, weight_ih, weight_hh, bias_ih, bias_hh, recorder: Recorder | None = None, name: str = ""):
    """N one-layer LSTMs: x [N, B, T, in] -> [N, B, T, H]."""
    n, batch, steps, _ = x.shape
    time_major = x.transpose(1, 2).reshape(n, steps * batch, -1)
    bias = (bias_ih + bias_hh)[:, None, :]
    projected = torch.baddbmm(bias, time_major, weight_ih.transpose(1, 2)).view(n, steps, batch, -1)
    hidden = Recurrence.apply(projected, weight_hh.transpose(1, 2).contiguous())
    if recorder is not None:  # the gates' derivatives are the outputs' of both maps, frame by frame
        before = torch.cat([hidden.new_zeros(n, 1, batch, hidden.shape[-1]), hidden[:, :-1]], dim=1)
        recorder.affine(projected, f"{name}.weight_ih_l0", time_major)
        recorder.affine(projected, f"{name}.weight_hh_l0", before)
    return hidden.transpose(1, 2)


def fused_forward(config: ModelConfig, params: dict, features: torch.Tensor, lengths: torch.Tensor,
                  recorder: Recorder | None = None):  # fmt: skip
    """Log-probabilities [N, B, T', V] and output lengths [N, B] of N models whose parameters are
    stacked in `params` (the models' state-dict names, each [N, ...]), on features [N, B, T, D];
    with a `recorder`, each affine map's per-frame statistics."""
    n, batch = features.shape[:2]
    x, out_lengths = stack_frames(features.flatten(0, 1), lengths.flatten(), config.stack)
    x, out_lengths = x.view(n, batch, *x.shape[1:]), out_lengths.view(n, batch)
    if config.kind == "lstm":

        def direction(layer, name, inputs):
            names = ("weight_ih", "weight_hh", "bias_ih", "bias_hh")
            prefix = f"layers.{layer}.{name}"
            weights = {k: params[f"{prefix}.{k}_l0"] for k in names}
            return lstm_direction(inputs, **weights, recorder=recorder, name=prefix)

        for layer in range(config.layers):
            out = direction(layer, "forward_lstm", x)
            if config.bidirectional:
                back = direction(layer, "backward_lstm", reverse_within_lengths(x, out_lengths))
                out = torch.cat([out, reverse_within_lengths(back, out_lengths)], dim=-1)
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
        recorder.affine(out, f"{name}.weight", inputs)
    return out.view(n, batch, steps, -1)


def biases_of(weights) -> dict:
    """Each affine map's bias, by its weight's name (an LSTM's input-to-gates and hidden-to-gates
    maps each count its own bias as Kaldi's components do)."""
    return {name: name.replace("weight", "bias") for name in weights}
