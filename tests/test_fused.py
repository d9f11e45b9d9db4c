"""Many learners computed as one (asrscale.training.fused): each learner's outputs and gradients are those
of its own model computed alone, to float rounding."""

import pytest
import torch

from asrscale.training.fused import fused_forward
from asrscale.training.models import build_model
from conftest import model_config

CONFIGS = [model_config(units=16), model_config(units=16, bidirectional=False), model_config(kind="dnn", units=32)]


@pytest.mark.parametrize("config", CONFIGS, ids=["blstm", "lstm", "dnn"])
def test_stacked_learners_compute_what_each_computes_alone(config):
    torch.manual_seed(0)
    learners, batch, dim, tokens = 3, 4, 40, 12
    models = [build_model(config, dim, tokens).double() for _ in range(learners)]
    features = torch.randn(learners, batch, 50, dim, dtype=torch.double)
    lengths = torch.randint(10, 51, (learners, batch))  # each learner's batch padded to the longest of all
    stacked = {k: torch.stack([m.state_dict()[k] for m in models]).requires_grad_() for k in models[0].state_dict()}
    log_probs, out_lengths = fused_forward(config, stacked, features, lengths)
    weights = torch.randn_like(log_probs)  # any loss of the outputs
    (log_probs * weights).sum().backward()
    for n, model in enumerate(models):
        alone, alone_lengths = model(features[n], lengths[n])
        assert torch.equal(alone_lengths, out_lengths[n])
        torch.testing.assert_close(log_probs[n].detach(), alone.detach(), rtol=1e-12, atol=1e-12)
        (alone * weights[n]).sum().backward()
        for name, parameter in model.named_parameters():
            torch.testing.assert_close(stacked[name].grad[n], parameter.grad, rtol=1e-10, atol=1e-12, msg=name)
