"""Dev evaluation during training: loss and token error rate, with greedy CTC decoding."""

import torch

from asrscale.data.batches import Subset
from asrscale.models import error_counts
from asrscale.training.learner import ctc_loss
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
