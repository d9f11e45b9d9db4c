import json
import os
import random
import subprocess
import sys

import numpy as np
import pytest
import soundfile
import yaml

from asrscale.data.corpus.espeak import variant_names
from asrscale.data.corpus.grammar import Grammar
from asrscale.data.corpus.synthetic import plan
from asrscale.data.datadir import read_data_dir
from asrscale.errors import UserError
from helpers import ROOT, tiny_corpus_config


def test_grammar_is_deterministic_varied_and_within_its_vocabulary():
    first = [Grammar(1, 3000).sentence(random.Random(3)) for _ in range(5)]
    assert first == [Grammar(1, 3000).sentence(random.Random(3)) for _ in range(5)]
    grammar, rng = Grammar(1, 3000), random.Random(1)
    sentences = [grammar.sentence(rng) for _ in range(2000)]
    words = [w for s in sentences for w in s.split()]
    assert set(words) <= grammar.words() and all(
        w.isascii() and w.isalpha() and w.islower() for w in words
    )
    assert sum(len(content) for content in grammar.lists.values()) == 3000
    assert (
        len(set(sentences)) > 1980 and len(set(words)) > 1000
    )  # few repeats, a vocabulary used widely
    assert Grammar(2, 3000).lists != grammar.lists  # another seed draws other words


def test_no_dev_or_test_sentence_is_a_training_sentence():
    """The LM is estimated from the training transcripts: it must not know an evaluation
    sentence."""
    utterances = plan(
        tiny_corpus_config(utterances={"train": 2000, "dev": 300, "test": 300}, vocabulary=50)
    )
    texts = {s: [u.text for u in utterances if u.subset == s] for s in ("train", "dev", "test")}
    assert len(set(texts["train"])) < len(
        texts["train"]
    )  # so few words that training repeats itself
    assert not set(texts["train"]) & (set(texts["dev"]) | set(texts["test"]))


def test_plan_holds_out_voices_for_dev_and_test():
    utterances = plan(tiny_corpus_config(utterances={"train": 400, "dev": 100, "test": 100}))
    variants = {
        s: {u.voice.split("+")[1] for u in utterances if u.subset == s}
        for s in ("train", "dev", "test")
    }
    assert not variants["train"] & variants["dev"]
    assert not variants["train"] & variants["test"]
    assert not variants["dev"] & variants["test"]
    assert len({u.utt for u in utterances}) == 600
    assert plan(tiny_corpus_config()) == plan(tiny_corpus_config())
    assert plan(tiny_corpus_config()) != plan(tiny_corpus_config(seed=8))


def test_the_default_test_set_speaks_every_one_of_its_30_held_out_voices():
    """The accuracy intervals draw the test set's voices (asrscale.analysis.bootstrap): the default
    study's 1,000 test utterances are 40 speakers, each held-out variant spoken in turn, so all 30
    are heard (drawn at random, 40 speakers would leave about 8 of 30 out); dev's 12 speakers
    speak its 8; training draws from the other 65 of eSpeak's 103."""
    config = yaml.safe_load((ROOT / "config.yaml").read_text())["corpus"]["builtin"]
    held_out = config["held_out_variants"]
    utterances = plan(
        tiny_corpus_config(
            utterances=config["utterances"],
            utterances_per_speaker=config["utterances_per_speaker"],
            held_out_variants=held_out,
        )
    )
    voices = {
        s: {u.voice.split("+")[1] for u in utterances if u.subset == s}
        for s in ("train", "dev", "test")
    }
    assert held_out["test"] >= 30 and len(voices["test"]) == held_out["test"]
    assert len(voices["dev"]) == held_out["dev"]
    assert len(variant_names()) == 103 and not voices["train"] & (voices["test"] | voices["dev"])


def test_holding_out_every_voice_is_refused_by_name():
    with pytest.raises(UserError, match=r"held_out_variants: 95 for test and 8 for dev leave none"):
        plan(tiny_corpus_config(held_out_variants={"dev": 8, "test": 95}))


def synthesise_in_fresh_process(config, part, parts, out):
    settings = out.parent / f"{out.name}.settings.json"
    settings.write_text(json.dumps(config.__dict__, default=list))
    command = [
        sys.executable,
        "-m",
        "asrscale",
        "synth",
        "--settings",
        str(settings),
        "--part",
        str(part),
        "--parts",
        str(parts),
        "--out",
        str(out),
    ]
    subprocess.run(command, check=True, env=dict(os.environ, PYTHONPATH=str(ROOT / "src")))
    return {subset: read_data_dir(out / subset) for subset in ("train", "dev", "test")}


@pytest.mark.slow
def test_synthesis_is_real_audio_reproducible_part_by_part(tmp_path):
    config = tiny_corpus_config(
        utterances={"train": 6, "dev": 2, "test": 2}, utterances_per_speaker=2
    )
    halves = [synthesise_in_fresh_process(config, p, 2, tmp_path / f"half{p}") for p in (0, 1)]
    again = synthesise_in_fresh_process(config, 1, 2, tmp_path / "again")
    planned = {u.utt: u for u in plan(config)}
    for subset in ("train", "dev", "test"):
        assert sorted(halves[0][subset].text | halves[1][subset].text) == sorted(
            u for u, p in planned.items() if p.subset == subset
        )
        for utt, path in halves[1][subset].wav.items():
            audio, rate = soundfile.read(path)
            assert rate == 16000 and np.abs(audio).max() > 0.1
            assert 0.5 < halves[1][subset].utt2dur[utt] < 6
            assert abs(len(audio) / rate - halves[1][subset].utt2dur[utt]) < 1e-3
            assert halves[1][subset].text[utt] == planned[utt].text
            assert np.array_equal(audio, soundfile.read(again[subset].wav[utt])[0])
