"""Decoding a run's test set twice, greedy CTC and a beam search with the word LM (its weight and
word bonus chosen on the dev set, never on test), and scoring both (jiwer) with their alignments.

A run's "WER" is the LM decode's, as the studies scored (a lexicon and an n-gram LM); greedy WER
is kept beside it, the model's accuracy without any LM. The same model decoded twice, in one
process or in two, gives the same hypotheses: its outputs are computed with deterministic
kernels (on a GPU, cuBLAS and cuDNN pick non-deterministic ones by default, and the beam search
follows the last bit of a log-probability), and the beam search is a function of them."""

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from asrscale.config.sections import DecodeSettings, FeatureConfig, ModelConfig
from asrscale.data.batches import Subset
from asrscale.data.tokens import Tokens
from asrscale.decoding.beam import LexiconBeamSearch, Weights
from asrscale.decoding.scoring import align
from asrscale.io import atomic_write_json, atomic_write_text
from asrscale.models import build_model, error_counts
from asrscale.progress import Ticker
from asrscale.worlds.devices import resolve_device

CONFUSIONS_KEPT = 20


@dataclass
class Outputs:
    """A subset's utterances (sorted), references, greedy hypotheses and log-probabilities, and
    each utterance's speaker (the analysis's intervals draw a speaker's utterances together)."""

    utts: list[str]
    references: list[str]
    greedy: list[str]
    log_probs: list[np.ndarray]
    speakers: list[str]


def unknown_characters(references: list[str], tokens: Tokens) -> int:
    """Reference characters outside the model's token set (e.g. a test corpus with another alphabet
    than the training text): no hypothesis can hold them, so each counts as an error."""
    return sum(c not in tokens for text in references for c in text.replace(" ", ""))


@contextlib.contextmanager
def deterministic():
    """Torch's deterministic kernels, as long as the block runs (cuBLAS's workspace as it asks)."""
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    before = torch.are_deterministic_algorithms_enabled(), torch.backends.cudnn.benchmark
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.benchmark = False
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(before[0])
        torch.backends.cudnn.benchmark = before[1]


def model_outputs(model, subset: Subset, batch_size: int = 64) -> Outputs:
    """The model's log-probabilities of every utterance of a subset (computed deterministically),
    and its greedy hypotheses."""
    by_utt = {}
    device = next(model.parameters()).device
    ticker = Ticker("forward passes", len(subset.frames))
    with torch.no_grad(), deterministic():
        for group in subset.batches(list(subset.frames), batch_size, seed=None):
            ticker(len(by_utt))
            batch = subset.collate(group).to(device)
            log_probs, lengths = model(batch.features, batch.lengths)
            texts = subset.tokens.greedy(log_probs, lengths)
            for utt, scores, length, text in zip(
                group, log_probs.float().cpu().numpy(), lengths.tolist(), texts
            ):
                by_utt[utt] = (text, scores[:length])
    ticker(len(by_utt))
    utts = sorted(by_utt)
    return Outputs(
        utts,
        [subset.text[u] for u in utts],
        [by_utt[u][0] for u in utts],
        [by_utt[u][1] for u in utts],
        [subset.utt2spk.get(u, u) for u in utts],
    )


def wer(references: list[str], hypotheses: list[str]) -> float:
    errors, words = error_counts(references, hypotheses, "word")
    return errors / words


def choose_weights(search: LexiconBeamSearch, dev: Outputs, settings: DecodeSettings) -> list[dict]:
    """Dev WER of every LM weight and word bonus of the grid, best first (ties: the order given)."""
    tried = []
    ticker = Ticker(
        "dev decodes of the LM weights", len(settings.lm_weights) * len(settings.word_bonuses)
    )
    for lm_weight in settings.lm_weights:
        for word_bonus in settings.word_bonuses:
            ticker(len(tried))
            decoder = search.decoder(Weights(lm_weight, word_bonus))
            hypotheses = [search.decode(decoder, scores) for scores in dev.log_probs]
            tried.append(
                {
                    "lm_weight": lm_weight,
                    "word_bonus": word_bonus,
                    "dev_wer": wer(dev.references, hypotheses),
                }
            )
    ticker(len(tried))
    return sorted(tried, key=lambda t: t["dev_wer"])


def score(test: Outputs, decodes: dict[str, list[str]], out_dir: Path) -> dict:
    """Each decode's (`decodes`: its hypotheses by name) WER, CER and most frequent confusions, with
    its alignments, every hypothesis (hypotheses.tsv) and each utterance's word errors
    (utterances.tsv, with its speaker: what the analysis's intervals resample) written to
    `out_dir`."""
    scores, errors = {"utterances": len(test.utts)}, {}
    for name, hypotheses in decodes.items():
        word_errors, words = error_counts(test.references, hypotheses, "word")
        char_errors, chars = error_counts(test.references, hypotheses, "char")
        alignment, confusions, errors[name] = align(test.utts, test.references, hypotheses)
        atomic_write_text(out_dir / f"alignment.{name}.txt", alignment)
        scores[name] = {
            "wer": word_errors / words,
            "cer": char_errors / chars,
            "words": words,
            "chars": chars,
            "confusions": [[r, h, n] for (r, h), n in confusions.most_common(CONFUSIONS_KEPT)],
        }
    names = list(decodes)
    rows = zip(test.utts, test.references, *decodes.values())
    atomic_write_text(
        out_dir / "hypotheses.tsv",
        "\t".join(["utt", "reference", *names])
        + "\n"
        + "".join("\t".join(row) + "\n" for row in rows),
    )
    rows = zip(test.utts, test.speakers, test.references, *errors.values())
    header = ["utt", "speaker", "words", *(f"{n}_errors" for n in names)]
    atomic_write_text(
        out_dir / "utterances.tsv",
        "\t".join(header)
        + "\n"
        + "".join(
            "\t".join([utt, speaker, str(len(ref.split())), *map(str, counts)]) + "\n"
            for utt, speaker, ref, *counts in rows
        ),
    )
    return scores


def decode_run(
    model_path,
    dev: tuple[Path, Path],
    tests: dict[str, tuple[Path, Path]],
    train_feats_dir,
    lm: Path,
    settings: DecodeSettings,
    out_dir,
) -> dict:
    """Decode each test set of `tests` (name -> its data and feature dirs) with a trained model on
    `settings.device`, greedily and with the LM at the weights best on `dev`; writes each set's
    hypotheses, alignments and scores into `out_dir`/<name>. Returns each set's scores."""
    saved = torch.load(model_path, weights_only=False)
    # (a model saved before features.kaldi_dim and features.dither were settings has neither)
    tokens, features = (
        Tokens(saved["tokens"]),
        FeatureConfig(**{"kaldi_dim": None, "dither": 0.0, **saved["features"]}),
    )
    model = build_model(ModelConfig(**saved["model_config"]), features.dim, len(tokens))
    model.load_state_dict(saved["model"])
    model.to(resolve_device(settings.device)).eval()

    def outputs(data: Path, feats: Path) -> Outputs:
        return model_outputs(model, Subset(data, feats, train_feats_dir, saved["cmvn"], tokens))

    on_dev = outputs(*dev)
    search = LexiconBeamSearch(lm, tokens, settings.beam, settings.beam_threshold)
    tried = choose_weights(search, on_dev, settings)
    decoder = search.decoder(Weights(tried[0]["lm_weight"], tried[0]["word_bonus"]))
    found = {}
    for name, (data, feats) in tests.items():
        test = outputs(data, feats)
        ticker, with_lm = Ticker(f"{name} decodes with the LM", len(test.log_probs)), []
        for scores in test.log_probs:
            ticker(len(with_lm))
            with_lm.append(search.decode(decoder, scores))
        ticker(len(with_lm))
        scores = score(test, {"lm": with_lm, "greedy": test.greedy}, Path(out_dir) / name)
        scores |= {"tried_on_dev": tried, "dev_greedy_wer": wer(on_dev.references, on_dev.greedy)}
        scores["lm"] |= {key: tried[0][key] for key in ("lm_weight", "word_bonus", "dev_wer")}
        scores["oov_words"] = sum(
            w not in set(search.words) for text in test.references for w in text.split()
        )
        scores["unknown_characters"] = unknown = unknown_characters(test.references, tokens)
        if unknown:
            print(
                f"note: {name}: {unknown} reference characters are not in the model's token set; "
                "they count as "
                "errors"
            )
        atomic_write_json(Path(out_dir) / name / "scores.json", scores)
        found[name] = scores
    return found
