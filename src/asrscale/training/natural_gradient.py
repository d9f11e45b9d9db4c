"""Online natural-gradient preconditioning (NG-SGD) after D. Povey, X. Zhang and S. Khudanpur,
"Parallel training of DNNs with natural gradient and parameter averaging", arXiv 1410.7455.

For each weight matrix W (out × in) the Fisher matrix is approximated by a Kronecker product of
an input-side factor F_in (in × in) and an output-side factor F_out (out × out), each kept as
its top-R eigenvectors plus a multiple of the identity. The gradient G becomes
F_out⁻¹ G F_in⁻¹, rescaled to G's norm, so NG-SGD changes the direction of a step, never its size.

Kaldi estimates the factors from per-frame input vectors and output derivatives inside its
affine components; autograd gives us the minibatch gradient only, so here the factors are running
averages of GᵀG and GGᵀ (a documented difference). Kaldi's defaults are kept: rank 20 on the input
side and 80 on the output side, alpha 4 (smoothing towards the identity, relative to the
factor's mean eigenvalue), a history of about 2000 samples, factors refreshed every 4 minibatches.
"""

import math

import torch


class Factor:
    """One side's Fisher factor: a decaying average, its top-`rank` eigenpairs and the floor ρ."""

    def __init__(self, dim: int, rank: int, device: torch.device):
        self.average = torch.zeros(dim, dim, device=device)
        self.rank = min(rank, dim - 1) if dim > 1 else 0
        self.vectors = torch.zeros(dim, self.rank, device=device)
        self.inverse_gain = torch.zeros(self.rank, device=device)  # 1/(d + ρ) - 1/ρ on the eigen-directions
        self.inverse_floor = torch.ones((), device=device)  # 1/ρ elsewhere (a tensor: no host sync)

    def accumulate(self, statistics: torch.Tensor, decay: float) -> None:
        self.average.mul_(decay).add_(statistics, alpha=1 - decay)

    def refresh(self, alpha: float) -> None:
        values, vectors = torch.linalg.eigh(self.average)
        floor = alpha * values.clamp(min=0).mean() + 1e-10
        top = values[-self.rank :].clamp(min=0) if self.rank else values[:0]
        self.vectors = vectors[:, -self.rank :] if self.rank else vectors[:, :0]
        self.inverse_gain = 1 / (top + floor) - 1 / floor
        self.inverse_floor = 1 / floor

    def apply_left(self, matrix: torch.Tensor) -> torch.Tensor:
        """F⁻¹ @ matrix, using the low-rank-plus-identity form (no dense inverse)."""
        return matrix * self.inverse_floor + self.vectors @ (self.inverse_gain[:, None] * (self.vectors.T @ matrix))


class NaturalGradient:
    """Preconditions the gradients of every 2-D parameter in place; others are left as they are."""

    def __init__(self, parameters, batch_size: int, rank_in: int = 20, rank_out: int = 80, alpha: float = 4.0,
                 history: int = 2000, update_period: int = 4):  # fmt: skip
        self.parameters = [p for p in parameters if p.dim() == 2]
        self.factors = [(Factor(p.shape[0], rank_out, p.device), Factor(p.shape[1], rank_in, p.device))
                        for p in self.parameters]  # fmt: skip
        self.decay = math.exp(-batch_size / history)
        self.alpha, self.update_period, self.steps = alpha, update_period, 0

    def state_dict(self) -> dict:
        return {"steps": self.steps, "factors": [(dict(vars(out)), dict(vars(into))) for out, into in self.factors]}

    def load_state_dict(self, state: dict) -> None:
        self.steps = state["steps"]
        for (out, into), (saved_out, saved_into) in zip(self.factors, state["factors"]):
            vars(out).update(saved_out)
            vars(into).update(saved_into)

    @torch.no_grad()
    def precondition(self) -> None:
        refresh = self.steps % self.update_period == 0
        first = self.steps == 0
        self.steps += 1
        for parameter, (output_side, input_side) in zip(self.parameters, self.factors):
            gradient = parameter.grad
            output_side.accumulate(gradient @ gradient.T / gradient.shape[1], 0.0 if first else self.decay)
            input_side.accumulate(gradient.T @ gradient / gradient.shape[0], 0.0 if first else self.decay)
            if refresh:
                output_side.refresh(self.alpha)
                input_side.refresh(self.alpha)
            preconditioned = input_side.apply_left(output_side.apply_left(gradient).T).T
            # F⁻¹ is positive definite: the preconditioned gradient is zero only where G is
            gradient.copy_(preconditioned * (gradient.norm() / preconditioned.norm().clamp(min=1e-30)))
