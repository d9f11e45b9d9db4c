"""Acoustic models for CTC: (B)LSTM and a feed-forward DNN on spliced frames, and the errors of
their transcripts against references (training's dev evaluation and the decoding stage share them).

Both stack `stack` consecutive frames and keep every `stack`-th (frame-rate reduction), then map
each output frame to log-probabilities over the tokens. The studies used 4×800 LSTMs and
6-layer BLSTMs; the defaults here are sized for a CPU (docs/sizing.md).
"""

import jiwer
import torch
from torch import nn

from asrscale.config.sections import ModelConfig
from asrscale.errors import ConfigError


def stack_frames(features: torch.Tensor, lengths: torch.Tensor, stack: int):
    batch, time, dim = features.shape
    time = time // stack * stack
    if time == 0:
        raise ValueError(f"utterances must have at least {stack} frames")
    stacked = features[:, :time].reshape(batch, time // stack, dim * stack)
    return stacked, torch.clamp(lengths // stack, min=1)


def reverse_within_lengths(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """Reverse each sequence inside its own length, leaving the padding in place: x [..., T, D],
    lengths [...] (a batch's, or the fused learners' [N, B]).

    Lets a plain LSTM run the backward direction on a padded batch: padded batches are 2-3×
    faster than PackedSequence on a CPU."""
    time = torch.arange(x.shape[-2], device=x.device)
    index = torch.where(time < lengths[..., None], lengths[..., None] - 1 - time, time)
    return x.gather(-2, index[..., None].expand_as(x))


class BLSTMLayer(nn.Module):
    def __init__(self, inputs: int, units: int, bidirectional: bool):
        super().__init__()
        self.forward_lstm = nn.LSTM(inputs, units, batch_first=True)
        self.backward_lstm = nn.LSTM(inputs, units, batch_first=True) if bidirectional else None

    def forward(self, x, lengths):
        out, _ = self.forward_lstm(x)
        if self.backward_lstm is None:
            return out
        back, _ = self.backward_lstm(reverse_within_lengths(x, lengths))
        return torch.cat([out, reverse_within_lengths(back, lengths)], dim=-1)


class LSTMModel(nn.Module):
    def __init__(self, config: ModelConfig, input_dim: int, tokens: int):
        super().__init__()
        self.config = config
        width = config.units * (2 if config.bidirectional else 1)
        inputs = [input_dim * config.stack] + [width] * (config.layers - 1)
        self.layers = nn.ModuleList(
            BLSTMLayer(i, config.units, config.bidirectional) for i in inputs
        )
        self.output = nn.Linear(width, tokens)

    def forward(self, features, lengths):
        x, lengths = stack_frames(features, lengths, self.config.stack)
        for layer in self.layers:
            x = layer(x, lengths)
        return self.output(x).log_softmax(-1), lengths


class DNNModel(nn.Module):
    def __init__(self, config: ModelConfig, input_dim: int, tokens: int):
        super().__init__()
        self.config = config
        spliced = input_dim * config.stack * (2 * config.context + 1)
        widths = [spliced] + [config.units] * config.layers
        hidden = [m for a, b in zip(widths, widths[1:]) for m in (nn.Linear(a, b), nn.ReLU())]
        self.hidden = nn.Sequential(*hidden)
        self.output = nn.Linear(config.units, tokens)

    def forward(self, features, lengths):
        x, lengths = stack_frames(features, lengths, self.config.stack)
        c = self.config.context
        padded = nn.functional.pad(x, (0, 0, c, c))
        spliced = torch.cat([padded[:, i : i + x.shape[1]] for i in range(2 * c + 1)], dim=-1)
        return self.output(self.hidden(spliced)).log_softmax(-1), lengths


def flops_per_frame(config: ModelConfig, input_dim: int, tokens: int) -> float:
    """Forward floating-point operations per input frame (a multiply-add counts 2), the measure by
    which a device's measured compute carries over to another model (`asrscale.worlds.clock`)."""
    directions = 2 if config.bidirectional else 1
    stacked = input_dim * config.stack
    if config.kind == "lstm":
        width = config.units * directions
        inputs = [stacked] + [width] * (config.layers - 1)
        layers = sum(directions * 2 * 4 * config.units * (i + config.units) for i in inputs)
    else:
        width = config.units
        widths = [stacked * (2 * config.context + 1)] + [config.units] * config.layers
        layers = sum(2 * a * b for a, b in zip(widths, widths[1:]))
    return (layers + 2 * width * tokens) / config.stack


def build_model(config: ModelConfig, input_dim: int, tokens: int) -> nn.Module:
    models = {"lstm": LSTMModel, "dnn": DNNModel}
    if config.kind not in models:
        raise ConfigError(f"model.kind must be one of {sorted(models)}, not {config.kind!r}")
    return models[config.kind](config, input_dim, tokens)


def error_counts(references: list[str], hypotheses: list[str], unit: str) -> tuple[int, int]:
    """(edit errors, reference length) in words or characters, for rates summed over many
    batches."""
    process = jiwer.process_words if unit == "word" else jiwer.process_characters
    out = process(references, hypotheses)
    errors = out.substitutions + out.deletions + out.insertions
    return errors, out.hits + out.substitutions + out.deletions
