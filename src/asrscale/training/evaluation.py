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


def evaluate(model, subset: Subset, layout: ops.Layout, wall: WallTimes, batch_size: int = 64):
    """Dev loss and token (character) error rate, the utterances split over the learners."""
    model.eval()
    loss_sum, utts, errors, length = 0.0, 0, 0, 0
    with torch.no_grad(), wall.measure("evaluation"):
        for group in subset.batches(share(subset.frames, layout.rank, layout.size), batch_size, seed=None):
            batch = subset.collate(group)
            loss, log_probs, lengths = ctc_loss(model, batch, reduction="sum")
            hypotheses = subset.tokens.greedy(log_probs, lengths)
            e, n = error_counts([subset.text[u] for u in group], hypotheses, unit="char")
            loss_sum, utts, errors, length = loss_sum + loss.item(), utts + len(group), errors + e, length + n
    model.train()
    loss_sum, utts, errors, length = yield ops.Reduce([loss_sum, utts, errors, length], "learners")
    return loss_sum / utts, errors / length
