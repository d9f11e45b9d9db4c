"""The built-in corpus: read speech synthesised by eSpeak NG, with noise, many voices.

A speaker is one voice setting: an English accent, a voice variant (eSpeak's timbres), a
speaking rate and a pitch. Variants are held out whole for dev and test, so that test measures
generalisation to voices never heard in training, each held-out variant spoken in turn, so that a
test set of as many speakers holds them all (of eSpeak NG's 103 by default 30 for test and 8 for
dev: the voices an accuracy interval draws, docs/corpora.md). The plan (texts, voices, noise)
follows from the seed alone; synthesis is split into `jobs` parts, each spoken by a fresh process,
so the audio follows from the seed and the number of jobs (eSpeak's carried-over state means
another split changes samples slightly, never texts or speakers).
"""

import random
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import soundfile
from scipy.signal import lfilter

from asrscale.config.sections import SyntheticConfig
from asrscale.data.audio import resample
from asrscale.data.corpus.espeak import Espeak, variant_names
from asrscale.data.corpus.grammar import Grammar
from asrscale.data.corpus.speakers import speaker_id
from asrscale.data.datadir import DataDir
from asrscale.errors import UserError

ACCENTS = (
    "en",
    "en-us",
    "en-gb-scotland",
    "en-gb-x-rp",
    "en-029",
    "en-gb-x-gbclan",
    "en-gb-x-gbcwmd",
    "en-us-nyc",
)
SUBSETS = ("train", "dev", "test")


@dataclass(frozen=True)
class Utterance:
    utt: str
    subset: str
    speaker: str
    voice: str
    rate: int
    pitch: int
    text: str
    snr_db: float
    seed: int


def plan(config: SyntheticConfig) -> list[Utterance]:
    """Every utterance of the corpus, cheaply and deterministically, before any audio is made. No
    dev or test sentence is a training sentence: the word LM, estimated from the training
    transcripts, must not know an evaluation sentence by heart."""
    rng, grammar = random.Random(config.seed), Grammar(config.seed, config.vocabulary)
    training: set[str] = set()
    pools = _voices(config, rng)
    utterances = []
    for subset in SUBSETS:
        for index in range(config.utterances[subset]):
            if index % config.utterances_per_speaker == 0:
                variant, accent = _voice(pools[subset], subset, index, config, rng)
                rate, pitch = rng.randint(*config.rate_wpm), rng.randint(*config.pitch)
                speaker = speaker_id(
                    subset, variant, accent, rate, pitch, index // config.utterances_per_speaker
                )
            utterances.append(
                Utterance(
                    utt=f"{speaker}-{index:06d}",
                    subset=subset,
                    speaker=speaker,
                    voice=f"{accent}+{variant}",
                    rate=rate,
                    pitch=pitch,
                    text=_sentence(grammar, rng, subset, training),
                    snr_db=rng.uniform(*config.snr_db),
                    seed=rng.getrandbits(32),
                )
            )
    return utterances


def _voices(config: SyntheticConfig, rng: random.Random) -> dict[str, list[str]]:
    """eSpeak's voice variants in an order drawn from the seed, the first held out for test, the
    next for dev (corpus.builtin.held_out_variants), the rest for training."""
    variants = variant_names()
    rng.shuffle(variants)
    n_dev, n_test = config.held_out_variants["dev"], config.held_out_variants["test"]
    if n_dev + n_test >= len(variants):
        raise UserError(
            f"corpus.builtin.held_out_variants: {n_test} for test and {n_dev} for dev leave none "
            f"of eSpeak NG's {len(variants)} voice variants for training"
        )
    return {
        "test": variants[:n_test],
        "dev": variants[n_test : n_test + n_dev],
        "train": variants[n_test + n_dev :],
    }


def _voice(
    pool: list[str], subset: str, index: int, config: SyntheticConfig, rng: random.Random
) -> tuple[str, str]:
    """The voice variant and accent of the speaker whose first utterance is `index`: a training
    speaker's variant drawn at random, a held-out one's in turn through its pool, so that a dev or
    test set of as many speakers as held-out variants holds every one (the interval draws its
    voices: asrscale.analysis.bootstrap)."""
    if subset == "train":
        return rng.choice(pool), rng.choice(ACCENTS)
    return pool[index // config.utterances_per_speaker % len(pool)], rng.choice(ACCENTS)


def _sentence(
    grammar: Grammar, rng: random.Random, subset: str, training: set[str], tries: int = 1000
) -> str:
    """A sentence of `subset`: a training one is remembered, a dev or test one is never one of those
    (the training subset is planned first)."""
    for _ in range(tries):
        text = grammar.sentence(rng)
        if subset == "train":
            training.add(text)
            return text
        if text not in training:
            return text
    raise UserError(
        f"corpus.builtin: no {subset} sentence outside the training ones in {tries} tries; "
        "raise corpus.builtin.vocabulary"
    )


def add_noise(speech: np.ndarray, snr_db: float, rng: np.random.Generator) -> np.ndarray:
    """Speech plus a random mix of white and low-frequency (brown-like) noise at `snr_db`."""
    white = rng.standard_normal(len(speech))
    brown = lfilter([1.0], [1.0, -0.98], rng.standard_normal(len(speech)))
    noise = rng.uniform(0, 1) * white / white.std() + rng.uniform(0, 1) * brown / (
        brown.std() + 1e-9
    )
    speech_power, noise_power = np.mean(speech**2) + 1e-12, np.mean(noise**2) + 1e-12
    return speech + noise * np.sqrt(speech_power / noise_power / 10 ** (snr_db / 10))


def synthesise_part(
    config: SyntheticConfig, part: int, parts: int, out: Path
) -> dict[str, DataDir]:
    """Synthesise every `parts`-th utterance starting at `part`; audio under `out`, one DataDir per
    subset.

    Reproducible when called once in a fresh process (as the workflow's jobs do)."""
    espeak = Espeak()
    data = {subset: DataDir() for subset in SUBSETS}
    for u in plan(config)[part::parts]:
        rng = np.random.default_rng(u.seed)
        samples = espeak.speak(u.text, u.voice, u.rate, u.pitch, u.seed).astype(np.float64) / 32768
        samples = resample(samples, config.sample_rate, espeak.sample_rate)
        lead, trail = (
            np.zeros(int(rng.uniform(0.02, 0.15) * config.sample_rate)) for _ in range(2)
        )
        audio = add_noise(np.concatenate([lead, samples, trail]), u.snr_db, rng)
        audio *= rng.uniform(0.3, 0.9) / (np.abs(audio).max() + 1e-9)
        path = out / u.subset / f"{u.utt}.wav"
        path.parent.mkdir(parents=True, exist_ok=True)
        soundfile.write(path, audio.astype(np.float32), config.sample_rate, subtype="PCM_16")
        data[u.subset].add(u.utt, str(path), u.text, u.speaker, len(audio) / config.sample_rate)
    return data
