"""Many learners computed as one (asrscale.training.fused.learners): each learner's outputs and
gradients are those of its own model computed alone, to float rounding."""

import pytest
import torch

from asrscale.training.fused.learners import fused_forward
from asrscale.training.fused.recurrence import EAGER, Loops
from conftest import FUSED_CONFIGS, learners_and_batch, stack


@pytest.mark.parametrize("config", FUSED_CONFIGS, ids=["blstm", "lstm", "dnn"])
def test_stacked_learners_compute_what_each_computes_alone(config):
    models, features, lengths = learners_and_batch(config)
    stacked = stack(models)
    log_probs, out_lengths = fused_forward(config, stacked, features, lengths)
    weights = torch.randn_like(log_probs)  # any loss of the outputs
    (log_probs * weights).sum().backward()
    for n, model in enumerate(models):
        alone, alone_lengths = model(features[n], lengths[n])
        assert torch.equal(alone_lengths, out_lengths[n])
        torch.testing.assert_close(log_probs[n].detach(), alone.detach(), rtol=1e-12, atol=1e-12)
        (alone * weights[n]).sum().backward()
        for name, parameter in model.named_parameters():
            torch.testing.assert_close(
                stacked[name].grad[n], parameter.grad, rtol=1e-10, atol=1e-12, msg=name
            )


class Bucketed(Loops):
    bucket = 8  # as GraphedLoops pads; 50 frames stacked by 3 make 17 steps, run as 24


def test_loops_run_past_the_longest_utterance_change_nothing():
    config = FUSED_CONFIGS[0]
    models, features, lengths = learners_and_batch(config)
    weights = None
    outputs, gradients = [], []
    for loops in (EAGER, Bucketed()):
        stacked = stack(models)
        log_probs, _ = fused_forward(config, stacked, features, lengths, loops=loops)
        weights = torch.randn_like(log_probs) if weights is None else weights
        (log_probs * weights).sum().backward()
        outputs.append(log_probs.detach())
        gradients.append({name: tensor.grad for name, tensor in stacked.items()})
    torch.testing.assert_close(outputs[1], outputs[0], rtol=1e-12, atol=1e-12)
    for name, gradient in gradients[0].items():
        torch.testing.assert_close(gradients[1][name], gradient, rtol=1e-10, atol=1e-12, msg=name)
