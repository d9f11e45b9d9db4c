"""The sentences of the built-in corpus: a probabilistic grammar of plain conversational English
(statements, questions, requests, opinions, times and digit strings) whose content words are drawn
from wonderwords' lists of English nouns, verbs and adjectives (MIT licence), each list's words
used with Zipf's law (a word's share is 1 / its rank), as words are in speech.

A vocabulary of a few thousand words keeps a language model of a few thousand training sentences
honest: rare words are often unseen in training (out of vocabulary for it) and most word triples
of a new sentence are new, so the LM helps as an LM of conversational speech does without being
able to recite the test set. Every word is spelled in lower-case a-z, which eSpeak speaks by its
rules and a character model can learn."""

import random
from functools import cached_property
from importlib import resources

PRONOUNS = "i you we they he she".split()
OBJECT_PRONOUNS = {"i": "me", "you": "you", "we": "us", "they": "them", "he": "him", "she": "her"}
NAMES = (
    "alice bob carol david emma frank grace henry isabel jack karen louis maria nathan olivia "
    "peter rachel simon tina victor wendy oscar paula quentin ruth steven ursula walter yvonne zach"
).split()
DETERMINERS = "the the the a my your our their his her this that every another some one no".split()
AUXILIARIES = (
    "will",
    "can",
    "should",
    "might",
    "could",
    "would",
    "must",
    "may",
    "did",
    "never",
    "always",
    "often",
    "usually",
    "sometimes",
    "really",
    "will not",
    "cannot",
    "did not",
    "want to",
    "have to",
    "need to",
)
PREPOSITIONS = (
    "in on at near with for from under behind after before without into about beside over".split()
)
TIMES = (
    "today",
    "tomorrow",
    "tonight",
    "yesterday",
    "this morning",
    "this evening",
    "next week",
    "last week",
    "next year",
    "on monday",
    "on tuesday",
    "on wednesday",
    "on thursday",
    "on friday",
    "on saturday",
    "on sunday",
    "in january",
    "in april",
    "in june",
    "in october",
    "at noon",
    "at midnight",
    "later",
    "soon",
    "again",
    "right now",
)
OPENERS = "i think|i guess|you know|well|actually|maybe|honestly|so|and then|i heard that".split(
    "|"
)
QUESTIONS = "what|where|why|when|how|who".split("|")
DIGITS = "zero one two three four five six seven eight nine".split()
NUMBERS = DIGITS + "ten eleven twelve fifteen twenty thirty forty fifty hundred".split()
VOWELS = "aeiou"
FORM_WORDS = (
    "did do will can should could is was please let us try to not the meet me at".split()
)  # of `_forms`


def _words(name: str) -> list[str]:
    """A wonderwords list, kept to words of 3 to 10 lower-case letters."""
    text = resources.files("wonderwords.assets").joinpath(f"{name}.txt").read_text()
    return sorted(
        {
            w
            for w in text.split()
            if w.isascii() and w.isalpha() and w.islower() and 3 <= len(w) <= 10
        }
    )


class Grammar:
    """Sentences over `vocabulary` content words (nouns, verbs and adjectives, 3 : 1 : 1) drawn by
    `seed` from the word lists, each list in a random order of frequency."""

    def __init__(self, seed: int, vocabulary: int):
        rng = random.Random(seed)
        profane = set(_words("profanitylist"))
        sizes = {
            "nounlist": vocabulary * 3 // 5,
            "verblist": vocabulary // 5,
            "adjectivelist": vocabulary // 5,
        }
        self.lists = {}
        for name, size in sizes.items():
            words = [w for w in _words(name) if w not in profane]
            self.lists[name] = rng.sample(words, min(size, len(words)))
        self.weights = {name: _zipf(len(words)) for name, words in self.lists.items()}

    def words(self) -> set[str]:
        """Every word a sentence can hold."""
        phrases = (
            PRONOUNS,
            OBJECT_PRONOUNS.values(),
            NAMES,
            DETERMINERS,
            AUXILIARIES,
            PREPOSITIONS,
            TIMES,
            OPENERS,
            QUESTIONS,
            NUMBERS,
            FORM_WORDS,
            *self.lists.values(),
        )
        return {word for words in phrases for phrase in words for word in phrase.split()} | {"an"}

    def _pick(self, rng: random.Random, name: str) -> str:
        return rng.choices(self.lists[name], cum_weights=self.weights[name])[0]

    def _noun_phrase(self, rng: random.Random) -> str:
        determiner = rng.choice(DETERMINERS)
        words = ([self._pick(rng, "adjectivelist")] if rng.random() < 0.4 else []) + [
            self._pick(rng, "nounlist")
        ]
        if determiner == "a" and words[0][0] in VOWELS:
            determiner = "an"
        return " ".join([determiner, *words])

    def _subject(self, rng: random.Random) -> str:
        kind = rng.random()
        return (
            rng.choice(PRONOUNS)
            if kind < 0.5
            else rng.choice(NAMES)
            if kind < 0.65
            else self._noun_phrase(rng)
        )

    def _object(self, rng: random.Random) -> str:
        kind = rng.random()
        if kind < 0.15:
            return OBJECT_PRONOUNS[rng.choice(PRONOUNS)]
        return rng.choice(NAMES) if kind < 0.25 else self._noun_phrase(rng)

    def _predicate(self, rng: random.Random) -> str:
        """A verb, its object, and often a place or a time."""
        parts = [self._pick(rng, "verblist"), self._object(rng)]
        if rng.random() < 0.4:
            parts.append(f"{rng.choice(PREPOSITIONS)} {self._noun_phrase(rng)}")
        if rng.random() < 0.3:
            parts.append(rng.choice(TIMES))
        return " ".join(parts)

    @cached_property
    def _forms(self):
        """Each kind of sentence, with its weight."""
        return (
            (
                6,
                lambda rng: (
                    f"{self._subject(rng)} {rng.choice(AUXILIARIES)} {self._predicate(rng)}"
                ),
            ),
            (
                2,
                lambda rng: (
                    f"{rng.choice(OPENERS)} {self._subject(rng)} {rng.choice(AUXILIARIES)} "
                    f"{self._predicate(rng)}"
                ),
            ),
            (
                2,
                lambda rng: (
                    f"{rng.choice(('did', 'do', 'will', 'can', 'should', 'could'))} "
                    f"{rng.choice(PRONOUNS)} {self._predicate(rng)}"
                ),
            ),
            (
                2,
                lambda rng: (
                    f"{rng.choice(QUESTIONS)} {rng.choice(('is', 'was'))} {self._noun_phrase(rng)}"
                ),
            ),
            (
                2,
                lambda rng: (
                    f"{rng.choice(('please', 'let us', 'try to', 'do not'))} {self._predicate(rng)}"
                ),
            ),
            (
                1,
                lambda rng: (
                    f"the {self._pick(rng, 'nounlist')} is {self._pick(rng, 'adjectivelist')}"
                ),
            ),
            (1, lambda rng: " ".join(rng.choice(DIGITS) for _ in range(rng.randint(3, 7)))),
            (1, lambda rng: f"meet me at {rng.choice(NUMBERS)} {rng.choice(TIMES)}"),
        )

    def sentence(self, rng: random.Random) -> str:
        """One sentence, in lower case."""
        weights, forms = zip(*self._forms)
        return rng.choices(forms, weights=weights)[0](rng)


def _zipf(size: int) -> list[float]:
    """Cumulative weights of Zipf's law over `size` ranks."""
    total, cumulative = 0.0, []
    for rank in range(1, size + 1):
        total += 1 / rank
        cumulative.append(total)
    return cumulative
