import json
import os

import numpy as np
import pandas as pd
import pytest
import torch
from flashlight.lib.text.decoder.kenlm import KenLM
from flashlight.lib.text.dictionary import Dictionary

from asrscale.data.tokens import Tokens
from asrscale.decoding.beam import LexiconBeamSearch, Weights
from asrscale.decoding.decode import unknown_characters
from asrscale.decoding.lm import (
    BOS,
    EOS,
    UNK,
    log10_probability,
    read_arpa,
    report,
    statistics,
    vocabulary,
    write_arpa,
)
from asrscale.decoding.outputs import load
from asrscale.decoding.scoring import Errors, align, kaldi_line
from asrscale.errors import UserError
from asrscale.models import error_counts


def test_greedy_collapses_repeats_and_drops_blanks():
    tokens = Tokens(["<blank>", " ", "a", "b"])
    path = [2, 2, 0, 2, 3, 1, 1, 3, 0, 0]
    log_probs = torch.nn.functional.one_hot(torch.tensor([path]), 4).float().log()
    assert tokens.greedy(log_probs, torch.tensor([10])) == ["aab b"]
    assert tokens.greedy(log_probs, torch.tensor([3])) == ["a"]


def test_error_counts_in_words_and_characters():
    assert error_counts(["a b c", "d"], ["a x c", ""], "word") == (2, 4)
    assert error_counts(["abc"], ["abd"], "char") == (1, 3)


def test_characters_outside_the_token_set_are_counted_and_scored_as_errors():
    tokens = Tokens.from_texts(["a cab"])
    assert unknown_characters(["a cab", "café à", "b"], tokens) == 3  # f, é, à
    assert (
        unknown_characters(["a a"], Tokens(["<blank>", "a"])) == 0
    )  # a word's end is no character
    assert error_counts(["café"], ["cab"], "char") == (2, 4)


# the word LM and the beam search (asrscale.decoding.lm, asrscale.decoding.beam)


def _emissions(tokens: Tokens, *frames: dict) -> np.ndarray:
    """Log-probabilities of hand-made frames: each names its likely characters, the rest share
    0.01."""
    rows = []
    for likely in frames:
        p = np.full(len(tokens), 0.01)
        for symbol, value in likely.items():
            p[tokens.symbols.index(symbol)] = value
        rows.append(np.log(p / p.sum()))
    return np.array(rows, dtype=np.float32)


def test_kneser_ney_arpa_is_a_distribution_after_every_context(tmp_path):
    rng = np.random.default_rng(0)
    words = "the cat sat on a mat dog ran far away".split()
    texts = [" ".join(rng.choice(words, rng.integers(1, 8))) for _ in range(200)]
    for order in (2, 3, 4):
        arpa = tmp_path / f"{order}.arpa"
        write_arpa(arpa, texts, order)
        assert sorted(vocabulary(arpa)) == sorted(words)
        dictionary = Dictionary([*words, BOS, EOS, UNK])
        lm = KenLM(str(arpa), dictionary)
        state = lm.start(False)
        for word in ("the", "cat", "sat", "far"):  # histories seen and unseen
            total = sum(10 ** lm.score(state, dictionary.get_index(w))[1] for w in [*words, UNK])
            assert total + 10 ** lm.finish(state)[1] == pytest.approx(1, abs=1e-4)
            state, _ = lm.score(state, dictionary.get_index(word))


def test_the_lm_statistics_score_as_kenlm_scores_and_count_what_the_lm_has_not_seen(tmp_path):
    rng = np.random.default_rng(1)
    words = "the cat sat on a mat dog ran far away".split()
    training = [" ".join(rng.choice(words, rng.integers(1, 8))) for _ in range(100)]
    arpa = tmp_path / "3.arpa"
    write_arpa(arpa, training, 3)
    (model, header), dictionary = read_arpa(arpa), Dictionary([*words, BOS, EOS, UNK])
    lm = KenLM(str(arpa), dictionary)
    test = ["the dog sat far away", "a cat ran on the mat", "the cat sat"]
    log_sum = 0.0
    for text in test:  # every word's probability as KenLM computes it, by our backoff rule
        state, history = lm.start(False), (BOS,)
        for word in text.split():
            state, score = lm.score(state, dictionary.get_index(word))
            assert log10_probability(model, history[-2:], word) == pytest.approx(score, abs=1e-5)
            history, log_sum = (*history, word), log_sum + score
        log_sum += lm.finish(state)[1]
    found = report(arpa, training, {"test": [*test, "the zebra sat"]})["test"]
    assert found["in_training_text"] == sum(t in training for t in test) and found["words"] == 17
    assert found["oov_rate"] == pytest.approx(1 / 17)  # "zebra"
    predicted = 14 + 3  # the test's words and sentence ends, zebra's sentence left out
    # as SRILM counts: the OOV itself unscored, but kept in the history, where no n-gram holds it
    zebra = log10_probability(model, (BOS,), "the") + log10_probability(
        model, ("the", "zebra"), "sat"
    )
    zebra += log10_probability(model, ("zebra", "sat"), EOS)
    assert found["perplexity"] == pytest.approx(
        10 ** (-(log_sum + zebra) / (predicted + 3)), rel=1e-4
    )
    assert (
        found["coverage"]["2-grams"] < 1
        and found["coverage"]["3-grams"] < found["coverage"]["2-grams"]
    )
    # read keeping the test's n-grams alone (as an LM of LibriSpeech's size is): the same statistics
    assert found == {**statistics(model, header, [*test, "the zebra sat"]), "in_training_text": 0}
    assert found["vocabulary"] == len(words) and header == {"order": 3, "unigrams": len(words) + 3}
    kept, _ = read_arpa(arpa, {("the",), ("the", "cat")})
    assert set(kept) == {("the",), ("the", "cat")} and kept[("the",)] == model[("the",)]


def test_a_file_that_is_not_arpa_is_named(tmp_path):
    path = tmp_path / "lm.txt"
    path.write_text("the cat sat\n")
    with pytest.raises(UserError, match=r"lm.txt: not an ARPA language model"):
        vocabulary(path)
    write_arpa(path, ["the cat"], 1)  # an ARPA file, of unigrams, which KenLM does not take
    with pytest.raises(UserError, match=r"lm.txt: KenLM cannot read it: .*at least a bigram"):
        LexiconBeamSearch(path, Tokens.from_texts(["the cat"]), beam=4, beam_threshold=25)


def test_beam_search_with_the_lexicon_and_lm_beats_the_best_path(tmp_path):
    tokens = Tokens.from_texts(["the cat cut o"])
    write_arpa(tmp_path / "lm.arpa", ["the cat"] * 20 + ["a cut", "the cut"], 2)
    search = LexiconBeamSearch(tmp_path / "lm.arpa", tokens, beam=16, beam_threshold=25)
    # "the c?t": the best path says "cot" (not a word); the lexicon leaves cat and cut, acoustics
    # favour "cut" a little, the LM "cat" after "the" a lot
    frames = [
        {"t": 0.9},
        {"h": 0.9},
        {"e": 0.9},
        {" ": 0.9},
        {"c": 0.9},
        {"o": 0.4, "u": 0.33, "a": 0.27},
        {"t": 0.9},
    ]
    emissions = _emissions(tokens, *frames)
    best_path = torch.from_numpy(emissions)[None]
    assert tokens.greedy(best_path, torch.tensor([len(frames)])) == ["the cot"]
    assert search.decode(search.decoder(Weights(lm_weight=0, word_bonus=0)), emissions) == "the cut"
    assert search.decode(search.decoder(Weights(lm_weight=1, word_bonus=0)), emissions) == "the cat"


def test_alignment_marks_each_error_as_sclite_does():
    text, confusions, errors = align(
        ["u1", "u2"], ["the cat sat on", "a b"], ["the dog sat a on", "a"]
    )
    assert text.split("\n\n")[0].splitlines() == [
        "id: u1",
        "Scores: (#C #S #D #I) 3 1 0 1",
        "REF:  the CAT sat *** on",
        "HYP:  the DOG sat A   on",
        "Eval:     S       I",
    ]
    assert confusions == {("cat", "dog"): 1, ("", "a"): 1, ("b", ""): 1}
    # each utterance's word errors by kind, for the analysis's bootstrap and the Kaldi line
    assert errors == [Errors(1, 0, 1), Errors(0, 1, 0)] and [e.total for e in errors] == [2, 1]
    assert kaldi_line(sum(errors, Errors()), 6) == "%WER 50.00 [ 3 / 6, 1 ins, 1 del, 1 sub ]"


def _decode_in_other_processes(corpus, model, settings, tmp_path) -> None:
    """`asrscale log-probs` and `asrscale decode` in processes of their own, torch on 2 threads,
    the beam search over 3 processes, into tmp_path/other."""
    import subprocess
    import sys

    program = (
        "import sys, torch; torch.set_num_threads(2); from asrscale.cli import main; "
        "main(sys.argv[1:])"
    )
    (tmp_path / "decode.json").write_text(json.dumps(settings.__dict__))
    data = [corpus / "data" / name for name in ("dev", "test")]
    feats = [corpus / "feats" / name for name in ("dev", "test")]
    for command in (
        [
            "log-probs",
            "--settings",
            tmp_path / "decode.json",
            "--model",
            model,
            "--data",
            *data,
            "--feats",
            *feats,
            "--train-feats",
            corpus / "feats" / "train",
            "--out",
            tmp_path / "again",
        ],
        [
            "decode",
            "--settings",
            tmp_path / "decode.json",
            "--log-probs",
            tmp_path / "again",
            "--lm",
            tmp_path / "lm.arpa",
            "--test-sets",
            "test",
            "--processes",
            "3",
            "--out",
            tmp_path / "other",
        ],
    ):
        subprocess.run(
            [sys.executable, "-c", program, *map(str, command)], check=True, capture_output=True
        )


@pytest.mark.slow
def test_the_same_model_decoded_twice_in_one_process_or_in_two_gives_the_same_hypotheses(
    corpus, tmp_path
):
    """The decode's whole path (log-probabilities once, dev weights chosen from a grid, then test)
    twice here, in one process and over a pool of two, and once in other processes with another
    thread count (log-probabilities and search both): the same hypotheses, LM and greedy."""

    from asrscale.config.schema import profile_defaults
    from asrscale.config.sections import DecodeSettings
    from asrscale.data.datadir import read_table
    from asrscale.decoding.decode import decode_run
    from asrscale.decoding.log_probs import write_log_probs
    from asrscale.training.run import train
    from asrscale.worlds.clock import CostModel, Hardware
    from asrscale.worlds.simulated import SimWorld
    from helpers import CALIBRATION, GPU, build, run_config, run_paths

    run = run_config(epochs=2, batch_size=4)
    costs = CostModel(Hardware.from_config("test", profile_defaults(**GPU)), CALIBRATION)
    train(
        run,
        run_paths(corpus, corpus / "shards" / "P1", tmp_path / "run"),
        SimWorld(1, costs, name="seq"),
    )
    write_arpa(
        tmp_path / "lm.arpa", list(read_table(corpus / "data" / "train" / "text").values()), 3
    )
    settings = build(
        DecodeSettings, "decode", device="cpu", lm_weights=[0.5, 1.0], word_bonuses=[0.0, 1.0]
    )
    subsets = {name: (corpus / "data" / name, corpus / "feats" / name) for name in ("dev", "test")}
    model = tmp_path / "run" / "model.pt"
    write_log_probs(model, subsets, corpus / "feats" / "train", "cpu", tmp_path / "log-probs")
    for attempt, processes in (("first", 1), ("second", 2)):
        decode_run(
            tmp_path / "log-probs",
            ["test"],
            tmp_path / "lm.arpa",
            settings,
            processes,
            tmp_path / attempt,
        )
    _decode_in_other_processes(corpus, model, settings, tmp_path)
    hypotheses = [
        (tmp_path / name / "test" / "hypotheses.tsv").read_text()
        for name in ("first", "second", "other")
    ]
    assert hypotheses[0] == hypotheses[1] == hypotheses[2] and len(hypotheses[0].splitlines()) > 10
    # each utterance's word errors add up to the WERs scored, and to the speakers'
    utterances = pd.read_csv(tmp_path / "first" / "test" / "utterances.tsv", sep="\t")
    speakers = pd.read_csv(tmp_path / "first" / "test" / "speakers.tsv", sep="\t")
    scores = json.loads((tmp_path / "first" / "test" / "scores.json").read_text())
    for decode in ("lm", "greedy"):
        assert utterances[f"{decode}_errors"].sum() / utterances.words.sum() == pytest.approx(
            scores[decode]["wer"]
        )
        kinds = [f"{decode}_{kind}" for kind in ("sub", "del", "ins")]
        assert speakers[kinds].sum().tolist() == [
            scores[decode][kind] for kind in ("substitutions", "deletions", "insertions")
        ]
        assert speakers.words.sum() == scores[decode]["words"]
        assert scores[decode]["wer_line"].startswith(f"%WER {100 * scores[decode]['wer']:.2f} [ ")


def test_an_arpa_lm_in_capitals_gzipped_is_folded_as_the_transcripts_are(tmp_path):
    """LibriSpeech's LM: capitals, gzipped; folded by corpus.text's rule (lowercase, punctuation
    stripped), a word that folds to nothing left out with its n-grams, n-grams that fold to one
    kept once (the first listed); the folded file reads as the original did, word for word."""
    import gzip

    from asrscale.config.sections import TextNormalisation
    from asrscale.data.corpus.sources import normalise
    from asrscale.decoding.lm import check_lexicon, fold_arpa, read_arpa
    from asrscale.errors import UserError

    write_arpa(tmp_path / "plain.arpa", ["THE CAT SAT", "THE DOG'S BONE", "THE CAT --"], 2)
    with gzip.open(tmp_path / "lm.arpa.gz", "wb") as packed:
        packed.write((tmp_path / "plain.arpa").read_bytes())
    text = TextNormalisation(lowercase=True, punctuation="strip")
    found = fold_arpa(
        tmp_path / "lm.arpa.gz", tmp_path / "words.arpa", lambda w: normalise(w, text)
    )
    assert (
        found["words"] == 5 and found["left_out"] > 0 and found["merged"] == 0
    )  # "--" and its n-grams left out
    (original, _), (folded, header) = (
        read_arpa(tmp_path / "plain.arpa"),
        read_arpa(tmp_path / "words.arpa"),
    )
    assert (
        folded[("the", "cat")] == original[("THE", "CAT")]
        and ("dog's",) in folded
        and header["order"] == 2
    )
    assert not any("--" in ngram for ngram in folded)
    spelled = check_lexicon(
        tmp_path / "words.arpa", "lm.arpa.gz", str.isascii, ["the cat sat", "a dog"], 0.5
    )
    assert spelled == {"lexicon": 5, "dev_oov_rate": pytest.approx(2 / 5)}
    with pytest.raises(
        UserError, match=r"decode.lm: lm.arpa.gz: 40.0% of the dev transcripts' words"
    ):
        check_lexicon(
            tmp_path / "words.arpa", "lm.arpa.gz", str.isascii, ["the cat sat", "a dog"], 0.1
        )
    with pytest.raises(
        UserError, match=r"none of its 5 words can be spelled .* \(corpus.text.lowercase\)"
    ):
        check_lexicon(tmp_path / "words.arpa", "lm.arpa.gz", str.isupper, ["the cat"], None)
    write_arpa(tmp_path / "mixed.arpa", ["The cat", "THE CAT"], 2)
    merged = fold_arpa(
        tmp_path / "mixed.arpa", tmp_path / "mixed-folded.arpa", lambda w: normalise(w, text)
    )
    (original, _), (folded, _) = (
        read_arpa(tmp_path / "mixed.arpa"),
        read_arpa(tmp_path / "mixed-folded.arpa"),
    )
    assert (
        merged["merged"] > 0 and folded[("the", "cat")] == original[("THE", "CAT")]
    )  # "THE" is listed first


# the LM weight and word bonus chosen on dev (asrscale.decoding.decode), on hand-made frames decoded
# by the real beam search and LM, where each pair of the grid gives its own hypotheses


def _graded_search(tmp_path) -> LexiconBeamSearch:
    """A beam search whose LM knows "the cat" well and "a cut", "the cut", "a cat" once each."""
    write_arpa(tmp_path / "lm.arpa", ["the cat"] * 20 + ["a cut", "the cut", "a cat"], 2)
    return LexiconBeamSearch(
        tmp_path / "lm.arpa", Tokens.from_texts(["the cat cut o a"]), beam=16, beam_threshold=25
    )


def _graded_utterances(tokens: Tokens) -> dict[str, np.ndarray]:
    """Frames of 'the c?t' (acoustics for "cot", then "cut"; the LM says "cat"), 'a cut' (clearly; a
    heavy LM drops the rare "a"), and 'a? c?t' (the "a" half blank: a word bonus keeps it)."""
    return {
        "the c?t": _emissions(
            tokens,
            {"t": 0.9},
            {"h": 0.9},
            {"e": 0.9},
            {" ": 0.9},
            {"c": 0.9},
            {"o": 0.4, "u": 0.33, "a": 0.27},
            {"t": 0.9},
        ),
        "a cut": _emissions(tokens, {"a": 0.9}, {" ": 0.9}, {"c": 0.9}, {"u": 0.9}, {"t": 0.9}),
        "a? c?t": _emissions(
            tokens, {"a": 0.5, "<blank>": 0.5}, {"c": 0.9}, {"u": 0.5, "a": 0.45}, {"t": 0.9}
        ),
    }


def _outputs(utterances: dict[str, np.ndarray], references: list[str], greedy: list[str]):
    from asrscale.decoding.outputs import Outputs

    utts = [f"u{i}" for i in range(len(references))]
    return Outputs(
        utts,
        references,
        greedy,
        list(utterances.values()),
        [f"spk{i // 2}" for i in range(len(utts))],
    )


# dev's references "the cat", "a cut", "cat" (5 words); each pair's hypotheses as the beam search
# finds them
DEV_REFERENCES = ["the cat", "a cut", "cat"]
# the best is the grid's fourth pair of six; the second best differs from it in both
GRID = {"lm_weights": [8.0, 2.0, 0.0], "word_bonuses": [1.0, -1.0]}
BEST_FIRST = [
    {"lm_weight": 2.0, "word_bonus": -1.0, "dev_wer": 0 / 5},  # the cat | a cut | cat
    {
        "lm_weight": 8.0,
        "word_bonus": 1.0,
        "dev_wer": 1 / 5,
    },  # the cat | *** cut | cat (ties: the grid's order)
    {"lm_weight": 8.0, "word_bonus": -1.0, "dev_wer": 1 / 5},  # the cat | *** cut | cat
    {"lm_weight": 2.0, "word_bonus": 1.0, "dev_wer": 1 / 5},  # the cat | a cut | A cat
    {"lm_weight": 0.0, "word_bonus": -1.0, "dev_wer": 2 / 5},  # the CUT | a cut | CUT
    {"lm_weight": 0.0, "word_bonus": 1.0, "dev_wer": 3 / 5},  # the CUT | a cut | A CUT
]


def test_the_lm_weight_and_word_bonus_chosen_are_the_best_on_dev_of_the_grid(tmp_path, capsys):
    from asrscale.config.sections import DecodeSettings
    from asrscale.decoding.decode import choose_weights
    from helpers import build

    search = _graded_search(tmp_path)
    dev = _outputs(_graded_utterances(search.tokens), DEV_REFERENCES, ["the cot", "a cut", "a cut"])
    tried = choose_weights(search, dev, build(DecodeSettings, "decode", device="cpu", **GRID))
    # the best is neither the grid's first pair nor its last, nor is the worst
    assert tried == [{**pair, "dev_wer": pytest.approx(pair["dev_wer"])} for pair in BEST_FIRST]
    assert (
        capsys.readouterr().out.splitlines()[-1].startswith("dev decodes of the LM weights: 6/6 |")
    )


def _saved_model(path, tokens: Tokens) -> None:
    """An untrained model, saved as training saves one, before features.kaldi_dim and dither were
    settings (its outputs are not used: the decode's are the hand-made frames)."""
    from dataclasses import asdict

    from asrscale.models import build_model
    from helpers import feature_config, model_config

    features = {
        k: v for k, v in asdict(feature_config()).items() if k not in ("kaldi_dim", "dither")
    }
    config = model_config(layers=1, units=8)
    model = build_model(config, feature_config().dim, len(tokens))
    torch.save(
        {
            "tokens": tokens.symbols,
            "features": features,
            "model_config": asdict(config),
            "model": model.state_dict(),
            "cmvn": "speaker",
        },
        path,
    )


def _written_log_probs(tmp_path, monkeypatch) -> dict:
    """The graded utterances as the log-probabilities job writes them, from a model saved
    before features.kaldi_dim and dither were settings: each subset's outputs by name."""
    from asrscale.decoding import log_probs
    from asrscale.decoding.outputs import read_outputs

    search = _graded_search(tmp_path)
    frames, tokens = _graded_utterances(search.tokens), search.tokens
    outputs = {  # by data dir: what the model would give
        "dev": _outputs(frames, DEV_REFERENCES, ["the cot", "a cut", "a cut"]),
        "test": _outputs(frames, ["the cat", "a cut", "a cat"], ["the cot", "a cut", "a cut"]),
        "other": _outputs({"a cut": frames["a cut"]}, ["a dog"], ["a cut"]),
    }
    _saved_model(tmp_path / "model.pt", tokens)

    def model_outputs(model, subset):
        data, feats, train_feats, cmvn, subset_tokens = subset
        assert not model.training and next(model.parameters()).device == torch.device("meta")
        assert feats == f"{data}-feats" and train_feats == "train-feats" and cmvn == "speaker"
        assert subset_tokens.symbols == tokens.symbols
        return outputs[data]

    monkeypatch.setattr(log_probs, "Subset", lambda *arguments: arguments)
    monkeypatch.setattr(
        log_probs, "resolve_device", {"cpu": torch.device("meta")}.get
    )  # (where the model must go)
    monkeypatch.setattr(log_probs, "model_outputs", model_outputs)
    subsets = {name: (name, f"{name}-feats") for name in ("dev", "test", "other")}
    log_probs.write_log_probs(tmp_path / "model.pt", subsets, "train-feats", "cpu", tmp_path / "lp")
    read = read_outputs(tmp_path / "lp", "test")  # each utterance's frames, bit for bit
    assert read.references == outputs["test"].references and read.speakers[2] == "spk1"
    assert all(
        np.array_equal(load(spec), frames)
        for spec, frames in zip(read.log_probs, outputs["test"].log_probs)
    )
    return outputs


def test_the_decode_uses_on_test_the_pair_best_on_dev_and_records_it(tmp_path, monkeypatch, capsys):
    from asrscale.config.sections import DecodeSettings
    from asrscale.decoding import decode
    from helpers import build

    _written_log_probs(tmp_path, monkeypatch)
    settings = build(DecodeSettings, "decode", device="cpu", beam=16, beam_threshold=25, **GRID)
    tests = ["test", "other"]
    found = decode.decode_run(
        tmp_path / "lp", tests, tmp_path / "lm.arpa", settings, 2, tmp_path / "out"
    )
    for name in tests:
        assert found[name] == json.loads((tmp_path / "out" / name / "scores.json").read_text())
        assert found[name]["tried_on_dev"] == [
            {**p, "dev_wer": pytest.approx(p["dev_wer"])} for p in BEST_FIRST
        ]
        assert {key: found[name]["lm"][key] for key in BEST_FIRST[0]} == BEST_FIRST[0]
        assert found[name]["dev_greedy_wer"] == pytest.approx(3 / 5)  # CUT (for "cot") | | A CUT
    hypotheses = pd.read_csv(tmp_path / "out" / "test" / "hypotheses.tsv", sep="\t")
    # only the pair best on dev decodes these as "a cut" and "cat": the second best says "cut", the
    # fourth "a cat" (as would the pair of the best's weight and the second's bonus)
    assert hypotheses.to_dict("list") == {
        "utt": ["u0", "u1", "u2"],
        "reference": ["the cat", "a cut", "a cat"],
        "lm": ["the cat", "a cut", "cat"],
        "greedy": ["the cot", "a cut", "a cut"],
    }
    assert found["test"]["lm"]["wer"] == pytest.approx(1 / 6) and found["test"]["greedy"][
        "wer"
    ] == pytest.approx(2 / 6)
    assert found["test"]["oov_words"] == 0 and found["test"]["unknown_characters"] == 0
    assert (
        found["other"]["oov_words"] == 1 and found["other"]["unknown_characters"] == 2
    )  # dog: d, g
    said = capsys.readouterr().out.splitlines()
    assert (
        "note: other: 2 reference characters are not in the model's token set; they count as errors"
        in said
    )
    assert [line.split(" |")[0] for line in said if "decodes with the LM:" in line] == [
        "test decodes with the LM: 3/3",
        "other decodes with the LM: 1/1",
    ]


def test_scores_count_each_decodes_errors_and_write_its_alignment_hypotheses_and_utterances(
    tmp_path,
):
    from asrscale.decoding.decode import CONFUSIONS_KEPT, score

    many = " ".join(f"w{i}" for i in range(CONFUSIONS_KEPT + 1))  # one more confusion than are kept
    test = _outputs({}, ["the cat sat", "a dog", many], [])
    decodes = {
        "lm": ["the cat sat", "a cat", many],
        "greedy": ["the hat sat on", "dog", many.replace("w", "x")],
    }
    scores = score(test, decodes, tmp_path)
    words, chars = (
        3 + 2 + CONFUSIONS_KEPT + 1,
        len("the cat sat") + len("a dog") + len(many),
    )  # spaces too
    assert scores["utterances"] == 3
    assert scores["lm"] == {
        "wer": 1 / words,
        "cer": 3 / chars,
        "words": words,
        "chars": chars,
        "substitutions": 1,
        "deletions": 0,
        "insertions": 0,
        "wer_line": f"%WER {100 / words:.2f} [ 1 / {words}, 0 ins, 0 del, 1 sub ]",
        "confusions": [["dog", "cat", 1]],
    }
    greedy = scores["greedy"]
    assert greedy["wer"] == (2 + 1 + CONFUSIONS_KEPT + 1) / words and greedy["words"] == words
    # the hat, an inserted "on", a deleted "a", every w a substitution
    assert (greedy["substitutions"], greedy["deletions"], greedy["insertions"]) == (
        1 + CONFUSIONS_KEPT + 1,
        1,
        1,
    )
    assert len(greedy["confusions"]) == CONFUSIONS_KEPT and greedy["confusions"][0] == [
        "cat",
        "hat",
        1,
    ]
    assert (
        (tmp_path / "alignment.lm.txt")
        .read_text()
        .startswith("id: u0\nScores: (#C #S #D #I) 3 0 0 0\n")
    )
    assert "HYP:  *** dog" in (tmp_path / "alignment.greedy.txt").read_text()
    assert (tmp_path / "hypotheses.tsv").read_text().splitlines()[:3] == [
        "utt\treference\tlm\tgreedy",
        "u0\tthe cat sat\tthe cat sat\tthe hat sat on",
        "u1\ta dog\ta cat\tdog",
    ]
    assert (tmp_path / "utterances.tsv").read_text() == (
        f"utt\tspeaker\twords\tlm_errors\tgreedy_errors\nu0\tspk0\t3\t0\t2\nu1\tspk0\t2\t1\t1\n"
        f"u2\tspk1\t{CONFUSIONS_KEPT + 1}\t0\t21\n"
    )
    assert (tmp_path / "speakers.tsv").read_text().splitlines() == [
        "speaker\tutterances\twords\tlm_sub\tlm_del\tlm_ins\tlm_wer_percent\tgreedy_sub\t"
        "greedy_del\tgreedy_ins\tgreedy_wer_percent",
        "spk0\t2\t5\t1\t0\t0\t20.00\t1\t1\t1\t60.00",
        "spk1\t1\t21\t0\t0\t0\t0.00\t21\t0\t0\t100.00",
    ]


def test_the_forward_passes_run_with_deterministic_kernels_and_leave_the_settings_as_they_were(
    monkeypatch,
):
    from asrscale.decoding.log_probs import deterministic

    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    monkeypatch.setattr(torch.backends.cudnn, "benchmark", True)
    assert not torch.are_deterministic_algorithms_enabled()
    with deterministic():
        assert torch.are_deterministic_algorithms_enabled() and not torch.backends.cudnn.benchmark
        assert (
            os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8"
        )  # cuBLAS's condition for determinism
    assert not torch.are_deterministic_algorithms_enabled() and torch.backends.cudnn.benchmark


class _Batch:
    def __init__(self, features, lengths):
        self.features, self.lengths = features, lengths

    def to(self, device):
        assert device == torch.device("cpu")
        return self


class _Subset:
    """A subset of three utterances whose features are the model's log-probabilities (as
    asrscale.data.batches.Subset gives them, but batched in reverse order and padded)."""

    tokens = Tokens(["<blank>", " ", "a", "b"])
    text = {"u1": "a", "u2": "b a", "u3": "b"}
    utt2spk = {"u1": "s1", "u2": "s1"}  # u3 has none: its own speaker
    paths = {"u1": [2, 2, 0], "u2": [3, 1, 2, 2, 0], "u3": [0, 3]}
    frames = {utt: len(path) for utt, path in paths.items()}

    def batches(self, utts, size, seed):
        assert seed is None and sorted(utts) == sorted(self.frames)
        return [utts[::-1][i : i + size] for i in range(0, len(utts), size)]

    def collate(self, group):
        longest = max(len(self.paths[utt]) for utt in group)
        padded = [self.paths[utt] + [0] * (longest - len(self.paths[utt])) for utt in group]
        one_hot = torch.nn.functional.one_hot(torch.tensor(padded), len(self.tokens)).float()
        return _Batch(
            (one_hot * 0.9 + 0.025).log(), torch.tensor([len(self.paths[utt]) for utt in group])
        )


def test_model_outputs_are_each_utterances_log_probabilities_and_best_path_sorted_by_utterance(
    capsys,
):
    from asrscale.decoding.log_probs import model_outputs

    class Model(torch.nn.Module):  # its outputs: its input features, as log-probabilities
        def __init__(self):
            super().__init__()
            self.unused = torch.nn.Parameter(torch.zeros(1))

        def forward(self, features, lengths):
            assert not torch.is_grad_enabled() and torch.are_deterministic_algorithms_enabled()
            return features.double(), lengths

    subset = _Subset()
    found = model_outputs(Model(), subset, batch_size=2)
    assert found.utts == ["u1", "u2", "u3"] and found.references == ["a", "b a", "b"]
    assert found.greedy == ["a", "b a", "b"] and found.speakers == ["s1", "s1", "u3"]
    assert [scores.shape for scores in found.log_probs] == [(3, 4), (5, 4), (2, 4)]
    assert all(scores.dtype == np.float32 for scores in found.log_probs)
    assert np.allclose(np.exp(found.log_probs[1]).argmax(1), subset.paths["u2"])
    assert capsys.readouterr().out.splitlines()[-1].startswith("forward passes: 3/3 |")
