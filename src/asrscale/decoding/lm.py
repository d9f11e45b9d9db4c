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
