import pytest
import torch

from asrscale.models import build_model, reverse_within_lengths
from helpers import model_config


def test_reverse_within_lengths_keeps_padding_in_place():
    x = torch.arange(10.0).reshape(2, 5, 1)
    out = reverse_within_lengths(x, torch.tensor([5, 3]))
    assert out[0, :, 0].tolist() == [4, 3, 2, 1, 0]
    assert out[1, :, 0].tolist() == [7, 6, 5, 8, 9]


@pytest.mark.parametrize(
    "config",
    [
        model_config(units=16),
        model_config(units=16, bidirectional=False),
        model_config(kind="dnn", units=32),
    ],
)
def test_outputs_do_not_depend_on_padding(config):
    torch.manual_seed(0)
    model = build_model(config, 40, 12).eval()
    short, long = torch.randn(1, 30, 40), torch.randn(1, 60, 40)
    alone, _ = model(short, torch.tensor([30]))
    batch = torch.zeros(2, 60, 40)
    batch[0, :30], batch[1] = short[0], long[0]
    together, lengths = model(batch, torch.tensor([30, 60]))
    assert lengths.tolist() == [10, 20]
    # a DNN's context window at the end of the short utterance sees padding, as it would see silence
    valid = 10 - (config.context if config.kind == "dnn" else 0)
    torch.testing.assert_close(together[0, :valid], alone[0, :valid], atol=1e-5, rtol=1e-5)
    assert torch.allclose(together.exp().sum(-1), torch.ones(2, 20), atol=1e-5)


def test_unknown_kind_is_named():
    with pytest.raises(ValueError, match="model.kind"):
        build_model(model_config(kind="transformer"), 40, 10)
