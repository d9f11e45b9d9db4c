"""CTC beam search with a lexicon and a word n-gram language model, as the studies decoded (a
lexicon and an n-gram LM in a WFST decoder): flashlight-text's lexicon decoder (the one behind
torchaudio's `ctc_decoder`), over the model's characters, with KenLM reading the ARPA file.

A hypothesis grows character by character inside a trie of the LM's words spelled in the model's
characters; a finished word adds `lm_weight` times its LM log-probability plus `word_bonus`.
Words outside the lexicon cannot be produced, as in the studies' decoders. `ParallelSearch` runs
it over a pool of processes, each with its own search, the utterances shared out among them."""

import math
import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np
from flashlight.lib.text.decoder import (
    CriterionType,
    LexiconDecoder,
    LexiconDecoderOptions,
    SmearingMode,
    Trie,
)
from flashlight.lib.text.decoder.kenlm import KenLM
from flashlight.lib.text.dictionary import Dictionary

from asrscale.data.tokens import Tokens
from asrscale.decoding.lm import BOS, EOS, UNK, vocabulary
from asrscale.decoding.outputs import load
from asrscale.errors import UserError

WORD_SEPARATOR = " "


def lexicon(arpa: Path, tokens: Tokens) -> list[str]:
    """The LM's words that the model's tokens spell: the words a decode can produce."""
    return [w for w in vocabulary(arpa) if all(c in tokens for c in w)]


@dataclass(frozen=True)
class Weights:
    lm_weight: float
    word_bonus: float


class LexiconBeamSearch:
    def __init__(self, arpa: Path, tokens: Tokens, beam: int, beam_threshold: float):
        if WORD_SEPARATOR not in tokens:
            raise ValueError(
                "the model's tokens have no word separator (a space): it cannot be decoded into "
                "words"
            )
        self.tokens, self.beam, self.beam_threshold = tokens, beam, beam_threshold
        self.words = lexicon(arpa, tokens)
        self.dictionary = Dictionary([*self.words, BOS, EOS, UNK])
        try:
            self.lm = KenLM(str(arpa), self.dictionary)
        except RuntimeError as error:  # KenLM's reasons come last, after the line of its source
            raise UserError(
                f"{arpa}: KenLM cannot read it: {str(error).splitlines()[-1]}"
            ) from None
        self.separator = tokens.encode(WORD_SEPARATOR)[0]
        self.trie = Trie(len(tokens), self.separator)
        start = self.lm.start(False)
        for index, word in enumerate(self.words):
            _, score = self.lm.score(start, index)
            self.trie.insert(tokens.encode(word), index, score)
        self.trie.smear(SmearingMode.MAX)

    def decoder(self, weights: Weights) -> LexiconDecoder:
        options = LexiconDecoderOptions(
            beam_size=self.beam,
            beam_size_token=len(self.tokens),
            beam_threshold=self.beam_threshold,
            lm_weight=weights.lm_weight,
            word_score=weights.word_bonus,
            unk_score=float("-inf"),
            sil_score=0.0,
            log_add=False,
            criterion_type=CriterionType.CTC,
        )
        unknown = self.dictionary.get_index(UNK)
        return LexiconDecoder(options, self.trie, self.lm, self.separator, 0, unknown, [], False)

    def decode(self, decoder: LexiconDecoder, log_probs: np.ndarray) -> str:
        """The best word sequence for one utterance's (frames, tokens) log-probabilities."""
        emissions = np.ascontiguousarray(log_probs, dtype=np.float32)
        frames, size = emissions.shape
        best = decoder.decode(emissions.ctypes.data, frames, size)[0]
        return " ".join(self.words[i] for i in best.words if 0 <= i < len(self.words))

    def decode_all(self, weights: Weights, log_probs: list) -> list[str]:
        """The best word sequence of each utterance (its log-probabilities, or where an archive
        holds them: asrscale.decoding.outputs.load)."""
        decoder = self.decoder(weights)
        return [self.decode(decoder, load(scores)) for scores in log_probs]


_SEARCH: LexiconBeamSearch | None = None  # the search the pool's processes were forked with


def _decode_part(weights: Weights, log_probs: list) -> list[str]:
    return _SEARCH.decode_all(weights, log_probs)


class ParallelSearch:
    """The beam search over a pool of `processes` processes, each decoding a share of the
    utterances: the same hypotheses as one search, in their order (the beam search is a function
    of an utterance's log-probabilities). The LM and lexicon are made once, before the processes
    are forked, which share their memory; one process: no pool."""

    PARTS_PER_PROCESS = 4  # shares a process takes in turn: a slow utterance holds up no other

    def __init__(
        self, arpa: Path, tokens: Tokens, beam: int, beam_threshold: float, processes: int
    ):
        global _SEARCH
        self.search = _SEARCH = LexiconBeamSearch(arpa, tokens, beam, beam_threshold)
        self.words, self.processes = self.search.words, processes
        fork = multiprocessing.get_context("fork")
        self.pool = ProcessPoolExecutor(processes, mp_context=fork) if processes > 1 else None

    def decode_all(self, weights: Weights, log_probs: list) -> list[str]:
        if not self.pool:
            return self.search.decode_all(weights, log_probs)
        size = max(1, math.ceil(len(log_probs) / (self.processes * self.PARTS_PER_PROCESS)))
        parts = [log_probs[i : i + size] for i in range(0, len(log_probs), size)]
        return [h for found in self.pool.map(partial(_decode_part, weights), parts) for h in found]

    def __enter__(self) -> "ParallelSearch":
        return self

    def __exit__(self, *exception) -> None:
        if self.pool:
            self.pool.shutdown()
