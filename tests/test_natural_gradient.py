import torch

from asrscale.training.natural_gradient import NaturalGradient


def test_preconditioned_gradient_keeps_the_norm_and_descends():
    torch.manual_seed(0)
    weight, bias = torch.nn.Parameter(torch.randn(64, 24)), torch.nn.Parameter(torch.randn(64))
    preconditioner = NaturalGradient([weight, bias], batch_size=32, rank_in=4, rank_out=8, update_period=2)
    for _ in range(6):
        # gradients with a dominant direction, as real ones have
        raw = torch.randn(64, 24) + 5 * torch.outer(torch.randn(64), torch.randn(24))
        weight.grad, bias.grad = raw.clone(), torch.ones(64)
        preconditioner.precondition()
        assert torch.allclose(weight.grad.norm(), raw.norm(), rtol=1e-4)
        assert (weight.grad * raw).sum() > 0  # a descent direction: positive inner product
        assert not torch.allclose(weight.grad, raw)  # and really a different direction
        assert torch.equal(bias.grad, torch.ones(64))  # vectors are left alone
