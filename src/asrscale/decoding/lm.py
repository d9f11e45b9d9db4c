"""The word n-gram language model of decoding: interpolated Kneser-Ney (Chen & Goodman 1999, the
estimate of KenLM's lmplz and SRILM's `-kndiscount -interpolate`), estimated from the training
transcripts and written as an ARPA file, the form every n-gram toolkit reads and writes; a user's
own ARPA file takes its place (`decode.lm`)."""

import math
from collections import Counter, defaultdict
from pathlib import Path

from asrscale.errors import UserError
from asrscale.io import atomic_write_text

BOS, EOS, UNK = "<s>", "</s>", "<unk>"
NEVER = -99.0  # ARPA's log10 probability of <s>: it starts sentences and is never predicted


def estimate(sentences: list[list[str]], order: int) -> dict[tuple[str, ...], tuple[float, float]]:
    """Every n-gram of orders 1..`order` in the sentences: (log10 probability, log10 backoff).

    The top order counts occurrences; a lower order counts the distinct words that precede an
    n-gram (its continuations), except for n-grams that start a sentence, which nothing precedes.
    Each order takes D = n1 / (n1 + 2 n2) from every count and gives that mass to the order below
    (unigrams: to a uniform distribution, which is how <unk> gets its share). A listed n-gram's
    probability is so already interpolated, and its context's backoff weight is that mass."""
    counts = [Counter() for _ in range(order + 1)]
    for words in sentences:
        padded = [BOS, *words, EOS]
        for n in range(1, order + 1):
            for i in range(len(padded) - n + 1):
                counts[n][tuple(padded[i : i + n])] += 1
    for n in range(1, order):  # continuation counts
        continuations = Counter({ngram: count for ngram, count in counts[n].items() if ngram[0] == BOS})
        for ngram in counts[n + 1]:
            continuations[ngram[1:]] += 1
        counts[n] = continuations
    predicted = sorted({w for (w,) in counts[1]} - {BOS} | {EOS, UNK})
    counts[1] = Counter({(w,): counts[1][(w,)] for w in predicted})
    model = {(BOS,): (NEVER, 0.0)}
    lower = {(): 1 / len(predicted)}  # the uniform distribution, below the unigrams
    for n in range(1, order + 1):
        discount = _discount(counts[n])
        totals, seen = defaultdict(int), Counter()
        for ngram, count in counts[n].items():
            totals[ngram[:-1]] += count
            seen[ngram[:-1]] += count > 0
        mass = {context: discount * seen[context] / totals[context] for context in totals}
        probabilities = {
            ngram: max(count - discount, 0) / totals[ngram[:-1]] + mass[ngram[:-1]] * lower[ngram[1:] if n > 1 else ()]
            for ngram, count in counts[n].items()
        }
        model.update((ngram, (math.log10(p), 0.0)) for ngram, p in probabilities.items())
        model.update((context, (model[context][0], math.log10(weight))) for context, weight in mass.items() if context)
        lower = probabilities
    return model


def _discount(counts: Counter) -> float:
    """Ney's absolute discount from the counts of counts, kept inside (0, 1) for tiny texts."""
    of = Counter(counts.values())
    if of[1] == 0 or of[2] == 0:
        return 0.5
    return min(max(of[1] / (of[1] + 2 * of[2]), 0.1), 0.9)


def write_arpa(path: Path, texts: list[str], order: int) -> None:
    """The model of `estimate` for these transcripts (one sentence each), as an ARPA file."""
    model = estimate([text.split() for text in texts], order)
    by_order = defaultdict(list)
    for ngram in sorted(model):
        by_order[len(ngram)].append(ngram)
    lines = ["\\data\\", *(f"ngram {n}={len(by_order[n])}" for n in sorted(by_order))]
    for n in sorted(by_order):
        lines += ["", f"\\{n}-grams:"]
        for ngram in by_order[n]:
            logp, backoff = model[ngram]
            lines.append(f"{logp:.6f}\t{' '.join(ngram)}" + (f"\t{backoff:.6f}" if n < order else ""))
    atomic_write_text(path, "\n".join([*lines, "", "\\end\\", ""]))


def vocabulary(path: Path) -> list[str]:
    """The words of an ARPA file (its unigrams), <s>, </s> and <unk> left out."""
    words, in_unigrams = [], False
    try:
        with open(path, encoding="utf-8") as lines:
            for number, line in enumerate(lines, 1):
                line = line.strip()
                if line.startswith("\\"):
                    if in_unigrams:
                        break
                    in_unigrams = line == "\\1-grams:"
                elif in_unigrams and line:
                    fields = line.split("\t") if "\t" in line else line.split()
                    if len(fields) < 2:
                        raise UserError(f"{path}, line {number}: expected 'log10-probability<TAB>word', got {line!r}")
                    words.append(fields[1])
    except (OSError, UnicodeDecodeError) as error:
        raise UserError(f"{path}: cannot read it as an ARPA language model ({error})") from None
    if not words:
        raise UserError(f"{path}: not an ARPA language model (it has no '\\1-grams:' section)")
    return [w for w in words if w not in (BOS, EOS, UNK)]


def read_arpa(path: Path, keep: set | None = None) -> tuple[dict[tuple[str, ...], tuple[float, float]], dict]:
    """The n-grams of an ARPA file, (log10 probability, log10 backoff; 0 where none is listed),
    streamed line by line and kept only where `keep` holds them (None: every one), so that an LM
    of LibriSpeech's size (tens of millions of n-grams) is read in the memory of the few it is asked
    about; with what the file says of itself ({"order", "unigrams"})."""
    model, order, unigrams = {}, 0, 0
    try:
        with open(path, encoding="utf-8") as lines:
            for number, line in enumerate(lines, 1):
                line = line.strip()
                if line.startswith("\\") and line.endswith("-grams:"):
                    order = int(line[1:].split("-")[0])
                elif order and line and not line.startswith("\\"):
                    fields = line.split()
                    ngram = tuple(fields[1 : 1 + order])
                    unigrams += order == 1
                    if keep is not None and ngram not in keep:
                        continue
                    try:
                        logp = float(fields[0])
                        backoff = float(fields[1 + order]) if len(fields) > 1 + order else 0.0
                    except (ValueError, IndexError):
                        raise UserError(f"{path}, line {number}: not an ARPA {order}-gram line: {line!r}") from None
                    model[ngram] = (logp, backoff)
    except (OSError, UnicodeDecodeError) as error:
        raise UserError(f"{path}: cannot read it as an ARPA language model ({error})") from None
    return model, {"order": order, "unigrams": unigrams}


def log10_probability(model: dict, history: tuple[str, ...], word: str) -> float:
    """log10 P(word | history) by the backoff rule of an ARPA model (`history` at most order - 1)."""
    weight = 0.0
    while (*history, word) not in model:
        if not history:
            return model[(UNK,)][0] if (UNK,) in model else -math.inf
        weight += model.get(history, (0.0, 0.0))[1]
        history = history[1:]
    return weight + model[(*history, word)][0]


def report(path: Path, training: list[str], evaluated: dict[str, list[str]]) -> dict:
    """What the language model at `path` knows of each evaluated subset's transcripts
    (`statistics`), and how many of them are sentences of the training transcripts. The file is
    read once, keeping the n-grams of the evaluated texts alone: every one the backoff rule can ask
    for is an n-gram of a text (a word, and its histories' suffixes)."""
    asked = {(UNK,)}
    for texts in evaluated.values():
        for text in texts:
            padded = [BOS, *text.split(), EOS]
            asked |= {tuple(padded[i : i + n]) for n in range(1, len(padded) + 1) for i in range(len(padded) - n + 1)}
    (model, header), known = read_arpa(path, asked), set(training)
    return {"lm": str(path), **{subset: {**statistics(model, header, texts),
                                         "in_training_text": sum(t in known for t in texts)}
                                for subset, texts in evaluated.items()}}  # fmt: skip


def statistics(model: dict, header: dict, texts: list[str]) -> dict:
    """How well an ARPA model (`read_arpa`: at least the texts' n-grams, and the file's `header`)
    knows `texts` (one sentence each), as SRILM's `ngram -ppl` counts: perplexity over the
    sentences' words and their ends, out-of-vocabulary words left out (and their rate given); and
    per order, the share of the texts' n-grams the model lists (its coverage: n-grams seen in the
    text the model was estimated from)."""
    order = header["order"]
    known = {ngram[0] for ngram in model if len(ngram) == 1} - {UNK}
    log_sum, predicted, words, oov = 0.0, 0, 0, 0
    listed, counted = Counter(), Counter()
    for text in texts:
        padded = [BOS, *text.split(), EOS]
        for i in range(1, len(padded)):
            word, words = padded[i], words + (padded[i] != EOS)
            if word not in known:
                oov += 1
                continue
            log_sum, predicted = (
                log_sum + log10_probability(model, tuple(padded[max(0, i - order + 1) : i]), word),
                predicted + 1,
            )
        for n in range(2, order + 1):
            ngrams = [tuple(padded[i : i + n]) for i in range(len(padded) - n + 1)]
            counted[n], listed[n] = counted[n] + len(ngrams), listed[n] + sum(ngram in model for ngram in ngrams)
    vocabulary = header["unigrams"] - sum((w,) in model for w in (BOS, EOS, UNK))
    return {"order": order, "vocabulary": vocabulary, "sentences": len(texts), "words": words,
            "perplexity": 10 ** (-log_sum / max(predicted, 1)), "oov_rate": oov / max(words, 1),
            "coverage": {f"{n}-grams": listed[n] / max(counted[n], 1) for n in counted}}  # fmt: skip
