"""Dev evaluation during training: loss and token error rate, with greedy CTC decoding (which the
decoding stage uses too)."""

import jiwer
import torch

from asrscale.data.batches import Subset
from asrscale.data.tokens import Tokens
from asrscale.training.learner import ctc_loss
from asrscale.worlds import ops


def greedy(log_probs: torch.Tensor, lengths: torch.Tensor, tokens: Tokens) -> list[str]:
    """Best token per frame, repeats collapsed, blanks removed."""
    best = log_probs.argmax(-1)
    texts = []
    for path, length in zip(best, lengths):
        path = torch.unique_consecutive(path[:length]).tolist()
        texts.append(" ".join(tokens.decode(path).split()))
    return texts


def error_counts(references: list[str], hypotheses: list[str], unit: str) -> tuple[int, int]:
    """(edit errors, reference length) in words or characters, for rates summed over many batches."""
    process = jiwer.process_words if unit == "word" else jiwer.process_characters
    out = process(references, hypotheses)
    errors = out.substitutions + out.deletions + out.insertions
    return errors, out.hits + out.substitutions + out.deletions


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


def evaluate(model, subset: Subset, layout: ops.Layout, batch_size: int = 64):
    """Dev loss and token (character) error rate, the utterances split over the learners."""
    model.eval()
    loss_sum, utts, errors, length = 0.0, 0, 0, 0
    with torch.no_grad():
        for group in subset.batches(share(subset.frames, layout.rank, layout.size), batch_size, seed=None):
            batch = subset.collate(group)
            loss, log_probs, lengths = ctc_loss(model, batch, reduction="sum")
            hypotheses = greedy(log_probs, lengths, subset.tokens)
            e, n = error_counts([subset.text[u] for u in group], hypotheses, unit="char")
            loss_sum, utts, errors, length = loss_sum + loss.item(), utts + len(group), errors + e, length + n
    model.train()
    loss_sum, utts, errors, length = yield ops.Reduce([loss_sum, utts, errors, length], "learners")
    return loss_sum / utts, errors / length
