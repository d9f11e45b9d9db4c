"""CTC beam search with a lexicon and a word n-gram language model, as the studies decoded (a
lexicon and an n-gram LM in a WFST decoder): flashlight-text's lexicon decoder (the one behind
torchaudio's `ctc_decoder`), over the model's characters, with KenLM reading the ARPA file.

A hypothesis grows character by character inside a trie of the LM's words spelled in the model's
characters; a finished word adds `lm_weight` times its LM log-probability plus `word_bonus`.
Words outside the lexicon cannot be produced, as in the studies' decoders."""

from dataclasses import dataclass
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
from asrscale.errors import UserError

WORD_SEPARATOR = " "


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
        self.words = [w for w in vocabulary(arpa) if all(c in tokens for c in w)]
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
