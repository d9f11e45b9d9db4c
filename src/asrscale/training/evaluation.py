"""What the learners measure at each epoch's end: the dev set's loss and token error rate (greedy
CTC decoding), and the training set's gradient noise (asrscale.training.noise_scale)."""

import random

import torch

from asrscale.data.batches import Subset
from asrscale.models import error_counts
from asrscale.training.learner import ctc_loss
from asrscale.training.noise_scale import Tally, norms
from asrscale.worlds import ops
from asrscale.worlds.timing import WallTimes


def share(frames: dict[str, int], rank: int, size: int) -> list[str]:
    """Learner `rank`'s share of the utterances (`frames` of each): in order of length, cut into
    `size` runs of about equal frames, so that a share's batches pad little (a share of every
    64th utterance padded a 64-learner dev set by 31%) and the learners' loads are even."""
    total, before, mine = sum(frames.values()), 0, []
    for utt in sorted(frames, key=lambda u: (frames[u], u)):
        if min(size - 1, before * size // max(total, 1)) == rank:
            mine.append(utt)
        before += frames[utt]
    return mine


def evaluate(
    model, subset: Subset, part: tuple[int, int] | None, wall: WallTimes, batch_size: int = 64
):
    """Dev loss and token (character) error rate of the learners' model, each learner evaluating
    its `part` (part, parts) of the utterances (None: none; `ops.World.evaluation_part`)."""
    counts = [0.0, 0, 0, 0]
    if part is not None:
        with wall.measure("evaluation"):
            counts = _counts(model, subset, share(subset.frames, *part), batch_size)
    loss_sum, utts, errors, length = yield ops.Reduce(counts, "learners")
    return loss_sum / utts, errors / length


@torch.no_grad()
def _counts(model, subset: Subset, utts: list[str], batch_size: int) -> list:
    """The summed loss, utterances, character errors and reference characters of `utts`."""
    model.eval()
    loss_sum, errors, length = 0.0, 0, 0
    for group in subset.batches(utts, batch_size, seed=None):
        batch = subset.collate(group)
        loss, log_probs, lengths = ctc_loss(model, batch, reduction="sum")
        e, n = error_counts(
            [subset.text[u] for u in group], subset.tokens.greedy(log_probs, lengths), unit="char"
        )
        loss_sum, errors, length = loss_sum + loss.item(), errors + e, length + n
    model.train()
    return [loss_sum, len(utts), errors, length]


def noise_groups(utts: list[str], settings: dict, seed: str) -> list[list[list[str]]]:
    """The gradient noise measurement's draw (train.noise_scale `settings`): big batches of
    `batches` small batches of `batch_size` utterances (fewer where the set is that small), drawn
    at random from `seed` without replacement, as many as `share` of the set fills, one at least."""
    per_group = settings["batches"]
    size = min(settings["batch_size"], len(utts) // per_group)
    if size < 1:
        raise ValueError(
            f"train.noise_scale.batches ({per_group}) is more than the training set's "
            f"{len(utts)} utterances"
        )
    wanted = round(settings["share"] * len(utts) / (per_group * size))
    groups = max(1, min(wanted, len(utts) // (per_group * size)))
    drawn = random.Random(seed).sample(utts, groups * per_group * size)
    batches = [drawn[i : i + size] for i in range(0, len(drawn), size)]
    return [batches[i : i + per_group] for i in range(0, len(batches), per_group)]


def gradient_noise(model, subset: Subset, part, wall: WallTimes, settings: dict, seed: str, loader):
    """The squared gradient norms at the noise scale's two batch sizes of the learners' model on
    the training set's `noise_groups` (the same draw on every learner), each learner measuring its
    `part` of the big batches (the dev evaluation's: `ops.World.evaluation_part`) with batches built
    by `loader` (the run's), the gradients taken apart from the model's own
    (`torch.autograd.grad`: nothing of training changes); the learners' tallies summed."""
    groups = noise_groups(sorted(subset.frames), settings, seed)
    tally = Tally()
    if part is not None:
        with wall.measure("noise"):
            _tally(model, groups[part[0] :: part[1]], loader, tally)
    summed = yield ops.Reduce(tally.values(), "learners")
    return norms(summed, len(groups[0][0]), len(groups[0]))


def _tally(model, groups: list[list[list[str]]], loader, tally: Tally) -> None:
    parameters = list(model.parameters())
    batches = loader([batch for group in groups for batch in group])
    built = iter(batches)
    for group in groups:
        tally.add(_gradient(model, next(built), parameters) for _ in group)
    batches.close()


def _gradient(model, batch, parameters: list[torch.Tensor]) -> torch.Tensor:
    """The gradient of one batch's training loss (unclipped), as one flat tensor."""
    loss, _, _ = ctc_loss(model, batch)
    return torch.cat([g.reshape(-1) for g in torch.autograd.grad(loss, parameters)])
