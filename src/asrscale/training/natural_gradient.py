"""Online natural-gradient SGD (NG-SGD) after D. Povey, X. Zhang and S. Khudanpur, "Parallel
training of DNNs with natural gradient and parameter averaging", arXiv 1410.7455 (Kaldi's
NaturalGradientAffineComponent).

An affine map y = W x + b over a minibatch's frames has the gradient Gᵀ X̃ (X̃: the frames'
inputs with a column of ones for the bias, one row a frame; G: the derivatives at its outputs).
The Fisher matrix of W is approximated by the Kronecker product of an input-side factor (the
covariance of the rows of X̃) and an output-side factor (that of G), each estimated online as a
rank-R matrix plus a multiple of the identity, F ≈ Rᵀ diag(d) R + ρ I (R's rows orthonormal).
Preconditioning multiplies X̃ and G each by the inverse of its factor smoothed towards the
identity (ρ raised by α times the mean eigenvalue), rescaled to keep its Frobenius norm, and
makes the gradient of the preconditioned rows, rescaled to the plain gradient's norm: NG-SGD
changes the direction of a step, never its size. The cost is a few products of a minibatch's
frames with R-column matrices per map: O(frames × dimension × R).

The factors follow the data with forgetting factor η = 1 - exp(-N / history) for N frames, and are
refreshed every `update_period` minibatches (every one of the first ten): the refresh is one step
of subspace iteration, F_new = η X̃ᵀX̃/N + (1-η) F, R_new spanning F_new Rᵀ, d_new its Rayleigh
quotients, ρ_new the mean of the rest of its trace. Kaldi's defaults: rank 20 on the input side and
80 on the output side, α = 4, a history of 2000 frames, every 4 minibatches.

The maps are the model's affine maps as the per-frame computation makes them (`record` of
asrscale.training.fused): each LSTM direction's input-to-gates and hidden-to-gates maps, the DNN's
layers and the output layer.
"""

import torch


class Factor:
    """One side's Fisher factor F = Rᵀ diag(d) R + ρ I: R (rank × dim, orthonormal rows), d
    (`values`, each direction's excess over ρ) and ρ (`floor`)."""

    def __init__(self, dim: int, rank: int, device: torch.device, seed: int = 0):
        self.rank = min(rank, max(dim - 1, 0))
        generator = torch.Generator().manual_seed(seed)
        start = torch.linalg.qr(torch.randn(dim, self.rank, generator=generator))[0].T if self.rank else None
        self.basis = (start if start is not None else torch.zeros(0, dim)).to(device)
        self.values = torch.zeros(self.rank, device=device)
        self.floor = torch.ones((), device=device)  # ρ: set by the first refresh
        self.started = False

    def precondition(self, rows: torch.Tensor, alpha: float) -> torch.Tensor:
        """rows (frames × dim) times the inverse of the smoothed factor, at the rows' own norm."""
        if not self.started:
            return rows
        floor = self.floor + alpha * (self.values.sum() + self.floor * rows.shape[1]) / rows.shape[1]
        shrink = self.values / (self.values + floor)  # (F + ρ'I)⁻¹ ∝ I - Rᵀ diag(d / (d + ρ')) R
        out = rows - (rows @ self.basis.T) * shrink @ self.basis
        return out * (rows.norm() / out.norm().clamp(min=1e-30))

    @torch.no_grad()
    def refresh(self, rows: torch.Tensor, frames: torch.Tensor, eta) -> None:
        """One step towards η·rowsᵀrows/N + (1-η)·F, kept at rank R plus the identity (N:
        `frames`, the rows that are frames: padding's are zero)."""
        dim = rows.shape[1]
        first = not self.started
        eta = 1.0 if first else eta
        trace = eta * rows.square().sum() / frames + (1 - eta) * (self.values.sum() + self.floor * dim)
        for _ in range(4 if first else 1):  # the first estimate: a few steps of subspace iteration
            if not self.rank:
                break
            projected = rows @ self.basis.T  # frames × rank
            grown = eta * rows.T @ projected / frames + (1 - eta) * self.basis.T * (self.values + self.floor)
            basis = torch.linalg.qr(grown)[0].T
            # Rayleigh-Ritz: the new factor within the subspace, diagonalised (rank × rank)
            overlap, projected = basis @ self.basis.T, rows @ basis.T
            old = (overlap * self.values) @ overlap.T + self.floor * torch.eye(self.rank, device=rows.device)
            totals, rotation = torch.linalg.eigh(eta * projected.T @ projected / frames + (1 - eta) * old)
            self.basis, self.values = rotation.T @ basis, totals
        totals = self.values if self.rank else self.values.new_zeros(0)
        self.floor = ((trace - totals.sum()) / max(dim - self.rank, 1)).clamp(min=1e-10)
        self.values = (totals - self.floor).clamp(min=0)
        self.started = True


class NaturalGradient:
    """Preconditions the gradients of a model's affine maps (`weights` by name, each one's bias in
    `biases`, or None) from the per-frame statistics a recording forward pass keeps:
    `record[name] = (inputs, output_derivatives)`."""

    def __init__(self, weights: dict, biases: dict, rank_in: int = 20, rank_out: int = 80,
                 alpha: float = 4.0, history: int = 2000, update_period: int = 4):  # fmt: skip
        self.weights, self.biases = weights, biases
        self.factors = {}
        for index, (name, weight) in enumerate(weights.items()):
            inputs = weight.shape[1] + (1 if biases.get(name) is not None else 0)
            self.factors[name] = (Factor(inputs, rank_in, weight.device, seed=2 * index),
                                  Factor(weight.shape[0], rank_out, weight.device, seed=2 * index + 1))  # fmt: skip
        self.alpha, self.history, self.update_period, self.steps = alpha, history, update_period, 0

    def state_dict(self) -> dict:
        factors = {name: (dict(vars(inputs)), dict(vars(outputs))) for name, (inputs, outputs) in self.factors.items()}
        return {"steps": self.steps, "factors": factors}

    def load_state_dict(self, state: dict) -> None:
        self.steps = state["steps"]
        for name, (saved_in, saved_out) in state["factors"].items():
            vars(self.factors[name][0]).update(saved_in)
            vars(self.factors[name][1]).update(saved_out)

    @torch.no_grad()
    def precondition(self, record: dict) -> None:
        """Replace each recorded map's gradients by NG-SGD's, at their norm; refresh the factors
        on schedule."""
        refresh = self.steps < 10 or self.steps % self.update_period == 0
        self.steps += 1
        for name, (inputs, derivatives) in record.items():
            weight, bias = self.weights[name], self.biases.get(name)
            inputs, derivatives = inputs.reshape(-1, inputs.shape[-1]), derivatives.reshape(-1, derivatives.shape[-1])
            # padding's frames carry no derivative: left out as zero rows (no host sync)
            used = (derivatives.abs().amax(1, keepdim=True) > 0).to(inputs.dtype)
            if bias is not None:
                inputs = torch.cat([inputs, torch.ones_like(inputs[:, :1])], dim=1)
            inputs, frames = inputs * used, used.sum().clamp(min=1)
            input_side, output_side = self.factors[name]
            if refresh:
                eta = 1 - torch.exp(-frames / self.history)
                input_side.refresh(inputs, frames, eta)
                output_side.refresh(derivatives, frames, eta)
            gradient = output_side.precondition(derivatives, self.alpha).T @ input_side.precondition(inputs, self.alpha)
            plain = torch.cat([weight.grad, bias.grad[:, None]], dim=1) if bias is not None else weight.grad
            gradient *= plain.norm() / gradient.norm().clamp(min=1e-30)
            weight.grad.copy_(gradient[:, : weight.shape[1]])
            if bias is not None:
                bias.grad.copy_(gradient[:, -1])
