"""Decoding a run's test sets from their log-probabilities (asrscale.decoding.log_probs), greedy
CTC and a beam search with the word LM (its weight and word bonus chosen on the dev set, never on
test), and scoring both (jiwer) with their alignments, each error's kind and each speaker's.

A run's "WER" is the LM decode's, as the studies scored (a lexicon and an n-gram LM); greedy WER
is kept beside it, the model's accuracy without any LM. The beam search runs on CPUs alone, over a
pool of processes (asrscale.decoding.beam.ParallelSearch): the same hypotheses with any number of
them, as the log-probabilities are the same bits in every run of the model."""

from pathlib import Path

from asrscale.config.sections import DecodeSettings
from asrscale.data.tokens import Tokens
from asrscale.decoding.beam import ParallelSearch, Weights
from asrscale.decoding.outputs import Outputs, read_outputs
from asrscale.decoding.scoring import (
    Errors,
    align,
    by_speaker,
    character_errors,
    kaldi_line,
    word_errors,
)
from asrscale.io import atomic_write_json, atomic_write_text
from asrscale.progress import Ticker

CONFUSIONS_KEPT = 20


def unknown_characters(references: list[str], tokens: Tokens) -> int:
    """Reference characters outside the model's token set (e.g. a test corpus with another alphabet
    than the training text): no hypothesis can hold them, so each counts as an error."""
    return sum(c not in tokens for text in references for c in text.replace(" ", ""))


def wer(references: list[str], hypotheses: list[str]) -> float:
    errors, words = word_errors(references, hypotheses)
    return errors / words


def choose_weights(search, dev: Outputs, settings: DecodeSettings) -> list[dict]:
    """Dev WER of every LM weight and word bonus of the grid, best first (ties: the order given);
    `search` decodes every utterance at a pair of weights (`decode_all`)."""
    tried = []
    ticker = Ticker(
        "dev decodes of the LM weights", len(settings.lm_weights) * len(settings.word_bonuses)
    )
    for lm_weight in settings.lm_weights:
        for word_bonus in settings.word_bonuses:
            ticker(len(tried))
            hypotheses = search.decode_all(Weights(lm_weight, word_bonus), dev.log_probs)
            tried.append(
                {
                    "lm_weight": lm_weight,
                    "word_bonus": word_bonus,
                    "dev_wer": wer(dev.references, hypotheses),
                }
            )
    ticker(len(tried))
    return sorted(tried, key=lambda t: t["dev_wer"])


def _scored(references: list[str], hypotheses: list[str], errors: list[Errors], confusions) -> dict:
    """One decode's scores: WER and CER, each kind of word error, Kaldi's line, its confusions."""
    total, words = sum(errors, Errors()), sum(len(reference.split()) for reference in references)
    char_errors, chars = character_errors(references, hypotheses)
    return {
        "wer": total.total / words,
        "cer": char_errors / chars,
        "words": words,
        "chars": chars,
        "substitutions": total.substitutions,
        "deletions": total.deletions,
        "insertions": total.insertions,
        "wer_line": kaldi_line(total, words),
        "confusions": [[r, h, n] for (r, h), n in confusions.most_common(CONFUSIONS_KEPT)],
    }


def score(test: Outputs, decodes: dict[str, list[str]], out_dir: Path) -> dict:
    """Each decode's (`decodes`: its hypotheses by name) scores (`_scored`), with its alignments,
    every hypothesis (hypotheses.tsv), each utterance's word errors (utterances.tsv, with its
    speaker: what the analysis's intervals resample) and each speaker's (speakers.tsv) written to
    `out_dir`."""
    scores, errors = {"utterances": len(test.utts)}, {}
    for name, hypotheses in decodes.items():
        alignment, confusions, errors[name] = align(test.utts, test.references, hypotheses)
        atomic_write_text(out_dir / f"alignment.{name}.txt", alignment)
        scores[name] = _scored(test.references, hypotheses, errors[name], confusions)
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
            "\t".join([utt, speaker, str(len(ref.split())), *(str(e.total) for e in found)]) + "\n"
            for utt, speaker, ref, *found in rows
        ),
    )
    atomic_write_text(out_dir / "speakers.tsv", by_speaker(test.speakers, test.references, errors))
    return scores


def _decode_test(search, name: str, test: Outputs, weights: Weights) -> list[str]:
    ticker = Ticker(f"{name} decodes with the LM", len(test.log_probs))
    ticker(0)
    hypotheses = search.decode_all(weights, test.log_probs)
    ticker(len(hypotheses))
    return hypotheses


def _test_scores(search, name, test: Outputs, tried, dev: Outputs, tokens, out_dir) -> dict:
    """A test set's scores (`score`), with the dev grid's, its out-of-vocabulary words and its
    reference characters the model cannot write."""
    weights = Weights(tried[0]["lm_weight"], tried[0]["word_bonus"])
    with_lm = _decode_test(search, name, test, weights)
    scores = score(test, {"lm": with_lm, "greedy": test.greedy}, Path(out_dir) / name)
    scores |= {"tried_on_dev": tried, "dev_greedy_wer": wer(dev.references, dev.greedy)}
    scores["lm"] |= {key: tried[0][key] for key in ("lm_weight", "word_bonus", "dev_wer")}
    words = set(search.words)
    scores["oov_words"] = sum(w not in words for text in test.references for w in text.split())
    scores["unknown_characters"] = unknown = unknown_characters(test.references, tokens)
    if unknown:
        print(
            f"note: {name}: {unknown} reference characters are not in the model's token set; "
            "they count as errors"
        )
    for decode in ("lm", "greedy"):
        print(f"{name} {decode}: {scores[decode]['wer_line']}")
    return scores


def decode_run(
    log_probs_dir: Path,
    tests: list[str],
    lm: Path,
    settings: DecodeSettings,
    processes: int,
    out_dir: Path,
) -> dict:
    """Decode each test set of `tests` (by name) from its log-probabilities in `log_probs_dir`
    (asrscale.decoding.log_probs, with dev's), greedily and with the LM at the weights best on dev,
    the beam search over `processes` processes; writes each set's hypotheses, alignments and scores
    into `out_dir`/<name>. Returns each set's scores."""
    tokens = Tokens.read(Path(log_probs_dir) / "tokens.txt")
    dev = read_outputs(log_probs_dir, "dev")
    found = {}
    with ParallelSearch(lm, tokens, settings.beam, settings.beam_threshold, processes) as search:
        tried = choose_weights(search, dev, settings)
        for name in tests:
            test = read_outputs(log_probs_dir, name)
            found[name] = _test_scores(search, name, test, tried, dev, tokens, out_dir)
            atomic_write_json(Path(out_dir) / name / "scores.json", found[name])
    return found
