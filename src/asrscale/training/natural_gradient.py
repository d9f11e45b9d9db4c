"""Online natural-gradient SGD (NG-SGD) after D. Povey, X. Zhang and S. Khudanpur, "Parallel
training of DNNs with natural gradient and parameter averaging", arXiv 1410.7455 (Kaldi's
NaturalGradientAffineComponent).

An affine map y = W x + b over a minibatch's frames has the gradient Gᵀ X̃ (X̃: the frames'
inputs with a column of ones for the bias, one row a frame; G: the derivatives at its outputs).
The Fisher matrix of W is approximated by the Kronecker product of an input-side factor (the
covariance of the rows of X̃) and an output-side factor (that of G), each estimated online as a
rank-R matrix plus a multiple of the identity, F ≈ Rᵀ diag(d) R + ρ I (R's rows orthonormal).
Preconditioning multiplies X̃ and G each by the inverse of its factor smoothed towards the
identity (ρ raised by α times the mean eigenvalue), each rescaled to keep its own Frobenius norm,
and makes the gradient of the preconditioned rows, as Kaldi does (whose OnlineNaturalGradient
returns each side's scale; nothing rescales the product). Since each side's inverse is the
identity less a rank-R term, that gradient is the plain one (autograd's Gᵀ X̃) multiplied on
each side by a matrix of the map's size with R-row factors: the cost beyond the plain gradient
is one product of the frames with each side's basis (for the norms; a refresh reuses it),
O(frames × dimension × R), and products of the map's size with R rows.

The factors follow the data with forgetting factor η = 1 - exp(-N / history) for N frames, and are
refreshed every `update_period` minibatches (every one of the first ten), in Kaldi's order: a
minibatch is preconditioned with the factors as they were, then refreshes them (the first minibatch
initialises them before it is preconditioned, as Kaldi's Init does). The refresh is one step of
subspace iteration, F_new = η X̃ᵀX̃/N + (1-η) F, R_new spanning F_new Rᵀ, d_new its Rayleigh
quotients, ρ_new the mean of the rest of its trace. Kaldi's defaults: rank 20 on the input side and
80 on the output side, α = 4, a history of 2000 frames, every 4 minibatches.

The maps are the model's affine maps as the per-frame computation makes them (a `Recorder` that
asrscale.training.fused.learners's forward pass fills): each LSTM direction's input-to-gates and
hidden-to-gates maps, the DNN's layers and the output layer. The arithmetic is written for many
learners at once (each tensor's first dimension the learners'), so that fused learners precondition
map by map in a few batched products (`precondition_together`) rather than a few hundred small ones
each; one learner alone is the case of one."""

import functools

import torch


class Factor:
    """One side's Fisher factor of one learner's map, F = Rᵀ diag(d) R + ρ I: R (`basis`, rank ×
    dim, orthonormal rows), d (`values`, each direction's excess over ρ) and ρ (`floor`); set by
    the first refresh."""

    def __init__(self, dim: int, rank: int, device: torch.device, seed: int = 0):
        rank = min(rank, max(dim - 1, 0))
        if (
            torch.device(device).type == "meta"
        ):  # a replay's stand-in (asrscale.costmodel.replay): sizes only
            start = torch.empty(rank, dim, device="meta")
        else:  # a copy of its own: refreshes write into it
            start = _random_basis(dim, rank, seed).clone()
        self.basis, self.values = start.to(device), torch.zeros(rank, device=device)
        self.floor = torch.ones((), device=device)


@functools.cache
def _random_basis(dim: int, rank: int, seed: int) -> torch.Tensor:
    """An orthonormal basis (rank × dim) drawn from `seed`: where a factor starts, the same for
    every learner's factor of a map (made once: 64 learners' took a second)."""
    if not rank:
        return torch.zeros(0, dim)
    generator = torch.Generator().manual_seed(seed)
    return torch.linalg.qr(torch.randn(dim, rank, generator=generator))[0].T


def stacked(factors: list[Factor]) -> tuple[torch.Tensor, ...]:
    """The factors' basis, values and floor, each stacked over the learners."""
    return tuple(
        torch.stack([getattr(f, key) for f in factors]) for key in ("basis", "values", "floor")
    )


def preconditioner(rows: torch.Tensor, along: torch.Tensor, values, floor, alpha: float):
    """Each learner's preconditioner of its rows ([N, frames, dim]; `along`: rows @ basisᵀ, their
    coordinates in the factor's subspace): the inverse of its smoothed factor (`stacked`), up to
    scale, is I - Rᵀ diag(shrink) R; returns shrink [N, R] and the scale [N] that keeps the
    preconditioned rows at the rows' own norm. The norm comes from the subspace's coordinates (R's
    rows orthonormal): the rows themselves are never multiplied out."""
    dim = rows.shape[-1]
    floor = floor + alpha * (values.sum(-1) + floor * dim) / dim
    shrink = values / (values + floor[:, None])  # (F + ρ'I)⁻¹ ∝ I - Rᵀ diag(d / (d + ρ')) R
    energy, inside = (
        torch.linalg.vector_norm(rows, dim=(1, 2)).square(),
        along.square().sum(1),
    )  # [N], [N, R]
    kept = ((1 - shrink).square() * inside).sum(-1) + (energy - inside.sum(-1)).clamp(min=0)
    return shrink, (energy / kept.clamp(min=1e-30)).sqrt()


def precondition_gradient(gradient: torch.Tensor, sides: list[tuple]) -> torch.Tensor:
    """NG-SGD's gradient of an affine map from its plain one ([N, out, in]: Gᵀ X̃, the outputs'
    derivatives against the inputs, frame by frame) and each side's preconditioner (basis,
    shrink, scale: inputs', then outputs'): (G Q_out)ᵀ (X̃ Q_in) = Q_out Gᵀ X̃ Q_in, each Q
    = I - Rᵀ diag(shrink) R, times both scales. Products of the map's size with R-row matrices: no
    product over the minibatch's frames beyond the plain gradient's, which autograd has made."""
    (in_basis, in_shrink, in_scale), (out_basis, out_shrink, out_scale) = sides
    left = gradient - out_basis.mT @ (out_shrink[:, :, None] * (out_basis @ gradient))
    both = left - ((left @ in_basis.mT) * in_shrink[:, None, :]) @ in_basis
    return both * (in_scale * out_scale)[:, None, None]


def refresh(
    rows: torch.Tensor,
    frames: torch.Tensor,
    eta: torch.Tensor,
    basis,
    values,
    floor,
    first: bool,
    along: torch.Tensor | None = None,
):
    """Each learner's factor (`stacked`) one step towards η·rowsᵀrows/N + (1-η)·F, kept at rank R
    plus the identity (rows [N, frames, dim]; N: `frames`, the rows that are frames, padding's
    being zero; the first estimate from the rows alone; `along`: rows @ basisᵀ where already
    made). Returns the new basis, values and floor."""
    dim, rank = rows.shape[-1], basis.shape[1]
    eta = torch.ones_like(eta) if first else eta
    weight, keep = (eta / frames)[:, None, None], (1 - eta)[:, None, None]
    trace = eta * rows.square().sum((1, 2)) / frames + (1 - eta) * (values.sum(-1) + floor * dim)
    identity = torch.eye(rank, device=rows.device)
    for _ in range(
        4 if first and rank else 1 if rank else 0
    ):  # the first: a few steps of subspace iteration
        along = rows @ basis.mT if along is None else along
        grown = weight * rows.mT @ along + keep * basis.mT * (values + floor[:, None])[:, None]
        new = torch.linalg.qr(grown)[0].mT
        # Rayleigh-Ritz: the new factor within the subspace, diagonalised (rank × rank)
        overlap, projected = new @ basis.mT, rows @ new.mT
        old = (overlap * values[:, None]) @ overlap.mT + floor[:, None, None] * identity
        values, rotation = torch.linalg.eigh(weight * projected.mT @ projected + keep * old)
        basis, along = rotation.mT @ new, None
    floor = ((trace - values.sum(-1)) / max(dim - rank, 1)).clamp(min=1e-10)
    return basis, (values - floor[:, None]).clamp(min=0), floor


class NaturalGradient:
    """Preconditions the gradients of a model's affine maps (`weights` by name, each one's bias in
    `biases`, or None) from the per-frame statistics a recording forward pass keeps (a `Recorder`
    of asrscale.training.fused.learners: `record[name] = (inputs, output_derivatives)`)."""

    def __init__(
        self,
        weights: dict,
        biases: dict,
        rank_in: int = 20,
        rank_out: int = 80,
        alpha: float = 4.0,
        history: int = 2000,
        update_period: int = 4,
    ):
        self.weights, self.biases = weights, biases
        self.factors = {}
        for index, (name, weight) in enumerate(weights.items()):
            inputs = weight.shape[1] + (1 if biases.get(name) is not None else 0)
            self.factors[name] = (
                Factor(inputs, rank_in, weight.device, seed=2 * index),
                Factor(weight.shape[0], rank_out, weight.device, seed=2 * index + 1),
            )
        self.alpha, self.history, self.update_period, self.steps = alpha, history, update_period, 0

    def state_dict(self) -> dict:
        factors = {
            name: (dict(vars(inputs)), dict(vars(outputs)))
            for name, (inputs, outputs) in self.factors.items()
        }
        return {"steps": self.steps, "factors": factors}

    def load_state_dict(self, state: dict) -> None:
        self.steps = state["steps"]
        for name, (saved_in, saved_out) in state["factors"].items():
            for factor, saved in zip(self.factors[name], (saved_in, saved_out)):
                for key in (
                    "basis",
                    "values",
                    "floor",
                ):  # into its own tensors: refreshes write there
                    getattr(factor, key).copy_(saved[key])

    def schedule(self) -> tuple:
        """What this step does besides preconditioning: whether it refreshes the factors (every
        one of the first ten steps, then every `update_period`), and whether for the first time;
        with the settings, what learners preconditioned together must share."""
        refresh = self.steps < 10 or self.steps % self.update_period == 0
        return refresh, self.steps == 0, self.alpha, self.history

    def precondition(self, recorder) -> None:
        """Replace each recorded map's gradients (as autograd made them: not clipped) by
        NG-SGD's; refresh the factors on schedule."""
        precondition_together([(self, recorder)])


@torch.no_grad()
def precondition_together(jobs: list[tuple]) -> None:
    """NG-SGD for many learners' gradients (`jobs`: (natural_gradient, recorder) each), learners
    of one model: map by map, every learner's in one batched computation (those on one schedule),
    each exactly as alone. The simulated world's fuser of `ops.Precondition`."""
    groups = {}
    for natural, recorder in jobs:
        groups.setdefault(natural.schedule(), []).append((natural, recorder.record))
    for (refreshing, first, alpha, history), group in groups.items():
        naturals = [natural for natural, _ in group]
        for natural in naturals:
            natural.steps += 1
        for name in group[0][1]:
            weights, biases = (
                [n.weights[name] for n in naturals],
                [n.biases.get(name) for n in naturals],
            )
            inputs, derivatives = (
                _rows([record[name][side] for _, record in group]) for side in (0, 1)
            )
            # padding's frames carry no derivative: left out as zero rows (no host sync)
            used = derivatives.ne(0).any(-1, keepdim=True).to(inputs.dtype)
            # the bias's column of ones, a frame's as its inputs: zero where padding
            inputs = (
                torch.cat([inputs * used, used], dim=-1) if biases[0] is not None else inputs * used
            )
            frames = used.sum((1, 2)).clamp(min=1)
            # the plain gradient as autograd made it (Gᵀ X̃; padding's rows carry no derivative)
            gradient = torch.stack([w.grad for w in weights])
            if biases[0] is not None:
                gradient = torch.cat(
                    [gradient, torch.stack([b.grad for b in biases])[..., None]], dim=-1
                )
            sides, eta = [], 1 - torch.exp(-frames / history)
            for side, rows in enumerate((inputs, derivatives)):
                factors = [n.factors[name][side] for n in naturals]
                if first:  # the first minibatch initialises the factors, then is preconditioned
                    _store(factors, refresh(rows, frames, eta, *stacked(factors), first=True))
                basis, values, floor = stacked(factors)
                along = rows @ basis.mT
                sides.append((basis, *preconditioner(rows, along, values, floor, alpha)))
                if refreshing and not first:  # with the factors as they were: then they follow it
                    _store(
                        factors,
                        refresh(rows, frames, eta, basis, values, floor, first=False, along=along),
                    )
            gradient = precondition_gradient(gradient, sides)
            width = weights[0].shape[1]
            torch._foreach_copy_([w.grad for w in weights], list(gradient[..., :width].unbind()))
            if biases[0] is not None:
                torch._foreach_copy_([b.grad for b in biases], list(gradient[..., width].unbind()))


def _store(factors: list[Factor], state: tuple[torch.Tensor, ...]) -> None:
    """Learners' refreshed factors (`refresh`'s stacked basis, values and floor) into their own."""
    for key, values in zip(("basis", "values", "floor"), state):
        torch._foreach_copy_([getattr(f, key) for f in factors], list(values.unbind()))


def _rows(statistics: list[torch.Tensor]) -> torch.Tensor:
    """Learners' per-frame statistics ([..., dim] each) as rows [N, frames, dim], zero rows added
    to the shorter (learners fused apart may have been padded apart; a zero row is a padding frame,
    which counts for nothing)."""
    rows = [x.reshape(-1, x.shape[-1]) for x in statistics]
    if len({len(x) for x in rows}) == 1:
        return torch.stack(rows)  # one copy, where padding would take one a learner
    return torch.nn.utils.rnn.pad_sequence(rows, batch_first=True)


class Recorder:
    """Per-frame statistics of a model's affine maps, for NG-SGD
    (asrscale.training.natural_gradient): for each weight, the frames' inputs and, once backward has
    run, the derivatives at its outputs (one row a frame, both in one order; a map's first dimension
    is the learners')."""

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
            for name, mine, theirs in zip(
                weights, inputs, derivatives.detach().chunk(len(weights))
            ):
                self.record[name] = (mine, theirs)

        if output.requires_grad:
            output.register_hook(keep)


def biases_of(weights) -> dict:
    """Each affine map's bias, by its weight's name (an LSTM's input-to-gates and hidden-to-gates
    maps each count its own bias as Kaldi's components do)."""
    return {name: name.replace("weight", "bias") for name in weights}


def natural_gradient_of(model) -> NaturalGradient:
    """NG-SGD over the model's affine maps (every 2-D weight), with Kaldi's defaults."""
    parameters = dict(model.named_parameters())
    weights = {name: p for name, p in parameters.items() if p.dim() == 2}
    return NaturalGradient(
        weights, {name: parameters.get(bias) for name, bias in biases_of(weights).items()}
    )
