"""Many learners' forward and backward passes as one computation: every parameter stacked over
the learners (`[N, ...]`), one batched matrix product per time step for all of them.

The arithmetic is each learner's own, as `asrscale.models` defines it (the same padding rule,
the same reversal of the backward direction within each utterance's length, the same output
layer), so a learner's loss and gradients equal those of its model computed alone, to float
rounding. What is shared is only the launch of each kernel: at batch 32 a GPU is bound by kernel
launches (about 7 ms a step for any batch up to ~512), so N learners in turn cost N times one,
while N learners stacked cost little more than one.

The LSTM recurrence is asrscale.training.fused.recurrence's, with its hand-written backward; the
input projection and the output layer are batched products over all frames, left to autograd. The
learners' optimizer steps, too, are taken as one (`fused_updates`), and their NG-SGD
preconditionings (asrscale.training.natural_gradient); `fusers` gives the simulated world all three.
"""

from functools import partial

import torch
import torch.nn.functional as F
from torch.optim.adam import adam
from torch.optim.sgd import sgd

from asrscale.config.sections import ModelConfig
from asrscale.data.batches import Batch
from asrscale.models import reverse_within_lengths, stack_frames
from asrscale.training.fused.cells import best_cell
from asrscale.training.fused.recurrence import EAGER, GraphedLoops, Loops, Recurrence
from asrscale.training.natural_gradient import Recorder, precondition_together
from asrscale.worlds import ops


def lstm_direction(
    x,
    weight_ih,
    weight_hh,
    bias_ih,
    bias_hh,
    recorder: Recorder | None = None,
    names: tuple[str, ...] = (),
    loops: Loops = EAGER,
):
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


def fused_forward(
    config: ModelConfig,
    params: dict,
    features: torch.Tensor,
    lengths: torch.Tensor,
    recorder: Recorder | None = None,
    loops: Loops = EAGER,
):
    """Log-probabilities [N, B, T', V] and output lengths [N, B] of N models whose parameters are
    stacked in `params` (the models' state-dict names, each [N, ...]), on features [N, B, T, D];
    with a `recorder`, each affine map's per-frame statistics."""
    n, batch = features.shape[:2]
    x, out_lengths = stack_frames(features.flatten(0, 1), lengths.flatten(), config.stack)
    x, out_lengths = x.view(n, batch, *x.shape[1:]), out_lengths.view(n, batch)
    if config.kind == "lstm":
        keys = ("weight_ih", "weight_hh", "bias_ih", "bias_hh")
        for layer in range(config.layers):
            directions = [f"layers.{layer}.forward_lstm"] + [
                f"layers.{layer}.backward_lstm"
            ] * config.bidirectional
            # both directions as one stack of 2N LSTMs: half the launches of two
            weights = {
                k: torch.cat([params[f"{name}.{k}_l0"] for name in directions]) for k in keys
            }
            inputs = (
                torch.cat([x, reverse_within_lengths(x, out_lengths)])
                if config.bidirectional
                else x
            )
            out = lstm_direction(
                inputs, **weights, recorder=recorder, names=tuple(directions), loops=loops
            )
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
    out = torch.baddbmm(
        params[f"{name}.bias"][:, None, :], inputs, params[f"{name}.weight"].transpose(1, 2)
    )
    if recorder is not None:
        recorder.affine(out, [f"{name}.weight"], inputs)
    return out.view(n, batch, steps, -1)


def fused_gradients(jobs: list, loops: Loops = EAGER) -> list[float]:
    """The simulated world's fuser: the losses and clipped gradients of many learners' minibatches
    (`jobs`: asrscale.training.learner.GradientJob each, learners of one model on one device),
    computed as one: every job's parameters stacked, every batch padded to the longest of all (an
    added utterance weighing nothing where batches differ in size), the loss one per learner,
    clipping per learner; each learner's gradient and statistics written back. Returns the
    losses."""
    learners = [job.learner for job in jobs]
    model, device = learners[0].model, learners[0].device
    names = [name for name, _ in model.named_parameters()]
    stacked = {
        name: torch.stack([job.parameters[k].detach() for job in jobs]).requires_grad_()
        for k, name in enumerate(names)
    }
    features, lengths, targets, target_lengths, weights = _joint_batch(
        [job.batch for job in jobs], device
    )
    recorder = Recorder() if any(job.recorder is not None for job in jobs) else None
    log_probs, out_lengths = fused_forward(
        model.config, stacked, features, lengths, recorder, loops
    )
    losses = utterance_losses(
        log_probs.flatten(0, 1), out_lengths.flatten(), targets, target_lengths.flatten()
    )
    per_utterance = losses.view_as(weights) * weights
    per_learner = per_utterance.sum(1) / weights.sum(1)
    per_learner.sum().backward()
    gradients = [stacked[name].grad for name in names]
    # each learner's clip, but where NG-SGD makes its gradients anew (Learner.compute)
    clips = torch.tensor(
        [
            job.learner.clip_grad_norm if job.recorder is None and job.clipped else 0.0
            for job in jobs
        ],
        device=device,
    )
    if clips.any():  # as torch.nn.utils.clip_grad_norm_ does, for each learner alone
        norms = torch.stack([g.flatten(1).norm(dim=1) for g in gradients]).norm(dim=0)
        scale = torch.where(
            clips > 0, (clips / (norms + 1e-6)).clamp(max=1.0), torch.ones_like(norms)
        )
        for gradient in gradients:
            gradient.mul_(scale.view(-1, *[1] * (gradient.dim() - 1)))
    for index, job in enumerate(jobs):
        torch._foreach_copy_(job.learner.gradients, [gradient[index] for gradient in gradients])
        if job.recorder is not None:
            job.recorder.record = {
                name: (x[index], d[index]) for name, (x, d) in recorder.record.items()
            }
    return per_learner.tolist()


def utterance_losses(log_probs, lengths, targets, target_lengths) -> torch.Tensor:
    """Each utterance's CTC loss over its target length (as asrscale.training.learner's), from
    log-probabilities [B, T, V] and output lengths [B]."""
    losses = F.ctc_loss(
        log_probs.transpose(0, 1),
        targets,
        lengths,
        target_lengths,
        reduction="none",
        zero_infinity=True,
    )
    return losses / target_lengths.clamp(min=1)


def one_batch_gradients(jobs: list, loops: Loops = EAGER) -> list[float]:
    """The simulated world's fuser of gradients that a group averages unclipped (SSGD's: the jobs
    of asrscale.worlds.ops.AveragedGradient): where the learners hold equal parameters (SSGD's
    replicas), their minibatches computed as one batch of the model, whose gradient of the mean
    of the learners' losses is the mean of their gradients, up to the order of summation; that
    mean written as each learner's gradient (the group's average keeps it), each learner's loss
    its own utterances'. A small minibatch costs a CPU a fixed time a step: 64 learners of 2
    utterances cost about twice what one batch of 128 does. Where the parameters differ (or NG-SGD
    records statistics), each as alone (`fused_gradients`). Returns the losses."""
    if not _one_model(jobs):
        return fused_gradients(jobs, loops)
    first = jobs[0].learner
    batch = _one_batch([job.batch for job in jobs], first.device)
    first.optimizer.zero_grad(set_to_none=False)
    log_probs, lengths = first.model(batch.features, batch.lengths)
    losses = utterance_losses(log_probs, lengths, batch.targets, batch.target_lengths)
    sizes = [len(job.batch.utts) for job in jobs]
    per_learner = torch.stack([part.mean() for part in losses.split(sizes)])
    per_learner.mean().backward()
    for job in jobs[1:]:
        torch._foreach_copy_(job.learner.gradients, first.gradients)
    return per_learner.tolist()


def _one_model(jobs: list) -> bool:
    """Whether the jobs compute on one model: each on its learner's own parameters, all equal to
    the first's, none recording NG-SGD's statistics or clipped before the average."""
    first = jobs[0].parameters
    own = all(
        job.recorder is None and not job.clipped and job.parameters is job.learner.parameters
        for job in jobs
    )
    return own and all(
        all(torch.equal(mine, theirs) for mine, theirs in zip(job.parameters, first))
        for job in jobs[1:]
    )


@torch.no_grad()  # as an optimizer's step
def fused_updates(jobs: list[tuple]) -> None:
    """The simulated world's updater: many learners' optimizer steps (`jobs`: (learner, learning
    rate) each), one multi-tensor step for all learners of one optimizer, settings and rate:
    torch's functional Adam or SGD, which each learner's own step calls, over every learner's
    parameters and state at once (each tensor's arithmetic its own: the same result as one step
    per learner, at a few launches instead of a dozen per learner)."""
    groups = {}
    for learner, lr in jobs:
        settings = {
            k: v for k, v in learner.optimizer.param_groups[0].items() if k not in ("params", "lr")
        }
        groups.setdefault((type(learner.optimizer), lr, tuple(settings.items())), []).append(
            learner
        )
    for (kind, lr, settings), learners in groups.items():
        settings = dict(settings)
        params = [p for learner in learners for p in learner.parameters]
        states = [learner.optimizer.state[p] for learner in learners for p in learner.parameters]
        grads = [p.grad for p in params]
        common = {k: settings[k] for k in ("foreach", "fused", "maximize")}
        if kind is torch.optim.Adam:
            adam(
                params,
                grads,
                [s["exp_avg"] for s in states],
                [s["exp_avg_sq"] for s in states],
                [],
                [s["step"] for s in states],
                amsgrad=settings["amsgrad"],
                beta1=settings["betas"][0],
                beta2=settings["betas"][1],
                lr=lr,
                weight_decay=settings["weight_decay"],
                eps=settings["eps"],
                capturable=settings["capturable"],
                differentiable=settings["differentiable"],
                decoupled_weight_decay=settings["decoupled_weight_decay"],
                **common,
            )
        elif kind is torch.optim.SGD:
            sgd(
                params,
                grads,
                [s.get("momentum_buffer") for s in states],
                lr=lr,
                weight_decay=settings["weight_decay"],
                momentum=settings["momentum"],
                dampening=settings["dampening"],
                nesterov=settings["nesterov"],
                **common,
            )
        else:
            raise TypeError(f"no fused update for {kind.__name__}")
        for learner in learners:
            learner.steps += 1


def fusers(device: torch.device, fuse: str = "on") -> dict:
    """The simulated world's fusers on `device`, by kind of a learner's work (asrscale.worlds.ops),
    as study.fuse_learners has them (`fuse`): gradients that a group averages as one batch
    (one_batch_gradients) unless "off"; and, "on", every learner's gradients (fused_gradients; on
    a GPU, the recurrence's loops replayed as CUDA graphs, each step's algebra one Triton kernel
    each way where Triton is), updates (fused_updates) and NG-SGD's preconditionings
    (asrscale.training.natural_gradient.precondition_together). "auto" is "on" on a GPU."""
    if fuse == "off":
        return {}
    loops = GraphedLoops(best_cell(device)) if device.type == "cuda" else EAGER
    averaged = {ops.AveragedGradient: partial(one_batch_gradients, loops=loops)}
    if fuse == "auto" and device.type != "cuda":  # each learner alone is faster on a CPU
        return averaged
    return {
        ops.Gradient: partial(fused_gradients, loops=loops),
        ops.Update: fused_updates,
        ops.Precondition: precondition_together,
        **averaged,
    }


def _one_batch(batches: list, device: torch.device) -> Batch:
    """Minibatches as one, in order, each utterance padded to the longest of all, on `device`."""
    frames = max(batch.features.shape[1] for batch in batches)
    return Batch(
        torch.cat([F.pad(b.features, (0, 0, 0, frames - b.features.shape[1])) for b in batches]),
        torch.cat([batch.lengths for batch in batches]),
        torch.cat([batch.targets for batch in batches]),
        torch.cat([batch.target_lengths for batch in batches]),
        [utt for batch in batches for utt in batch.utts],
    ).to(device)


def _joint_batch(batches: list, device: torch.device):
    """N minibatches as one [N, B, T, D] batch, padded to the most utterances and frames of any;
    `weights` [N, B]: 1 for an utterance, 0 for padding. Assembled where the batches are (batches
    loaded on the host go to the device in one copy; batches on the device stay there)."""
    count, frames = max(len(b.utts) for b in batches), max(b.features.shape[1] for b in batches)
    n, dim = len(batches), batches[0].features.shape[2]
    features = batches[0].features.new_zeros(n, count, frames, dim)
    lengths, target_lengths = (
        batches[0].lengths.new_ones(n, count),
        batches[0].target_lengths.new_zeros(n, count),
    )
    weights = features.new_zeros(n, count)
    targets = []
    for i, batch in enumerate(batches):
        size = len(batch.utts)
        features[i, :size, : batch.features.shape[1]] = batch.features
        lengths[i, :size], target_lengths[i, :size], weights[i, :size] = (
            batch.lengths,
            batch.target_lengths,
            1.0,
        )
        targets.append(batch.targets)
    moved = (features, lengths, torch.cat(targets), target_lengths, weights)
    return tuple(tensor.to(device, non_blocking=True) for tensor in moved)
