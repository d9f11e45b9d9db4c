"""Decoding a test set with a trained model (greedy CTC) and its WER/CER (jiwer)."""

from pathlib import Path

import torch

from asrscale.data.batches import Subset
from asrscale.data.features import FeatureConfig
from asrscale.data.tokens import Tokens
from asrscale.io import atomic_write_json, atomic_write_text
from asrscale.training.evaluation import error_counts, greedy
from asrscale.training.models import ModelConfig, build_model
from asrscale.worlds.devices import resolve_device


def unknown_characters(references: list[str], tokens: Tokens) -> int:
    """Reference characters outside the model's token set (e.g. a test corpus with another alphabet
    than the training text): no hypothesis can hold them, so each counts as an error."""
    return sum(c not in tokens for text in references for c in text.replace(" ", ""))


def decode_subset(model_path, data_dir, feats_dir, train_feats_dir, out_dir, batch_size: int = 64,
                  device: str = "auto") -> dict:  # fmt: skip
    """Decode a subset with a trained model on `device` (train.device's choices); writes
    per-utterance hypotheses and the scores."""
    saved = torch.load(model_path, weights_only=False)
    tokens, features = Tokens(saved["tokens"]), FeatureConfig(**saved["features"])
    model = build_model(ModelConfig(**saved["model_config"]), features.dim, len(tokens))
    model.load_state_dict(saved["model"])
    model.to(resolve_device(device)).eval()
    subset = Subset(data_dir, feats_dir, train_feats_dir, saved["cmvn"], tokens)
    hypotheses = {}
    with torch.no_grad():
        for group in subset.batches(list(subset.frames), batch_size, seed=None):
            batch = subset.collate(group).to(next(model.parameters()).device)
            log_probs, lengths = model(batch.features, batch.lengths)
            hypotheses.update(zip(group, greedy(log_probs, lengths, tokens)))
    utts = sorted(hypotheses)
    references, guesses = [subset.text[u] for u in utts], [hypotheses[u] for u in utts]
    word_errors, words = error_counts(references, guesses, "word")
    char_errors, chars = error_counts(references, guesses, "char")
    unknown = unknown_characters(references, tokens)
    if unknown:
        print(f"note: {unknown} reference characters are not in the model's token set; they count as errors")
    scores = {"wer": word_errors / words, "cer": char_errors / chars, "utterances": len(utts), "words": words,
              "unknown_characters": unknown}  # fmt: skip
    out_dir = Path(out_dir)
    atomic_write_text(
        out_dir / "hypotheses.tsv",
        "utt\treference\thypothesis\n" + "".join(f"{u}\t{r}\t{h}\n" for u, r, h in zip(utts, references, guesses)),
    )
    atomic_write_json(out_dir / "scores.json", scores)
    return scores
