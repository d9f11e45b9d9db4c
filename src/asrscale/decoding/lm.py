"""The word n-gram language model of decoding: interpolated Kneser-Ney (Chen & Goodman 1999) with
one discount per order (their "interpolated Kneser-Ney", not the "modified" one with three discounts
per order that KenLM's lmplz and SRILM's `-kndiscount` estimate), estimated from the training
transcripts and written as an ARPA file, the form every n-gram toolkit reads and writes; or a user's
own ARPA file (`decode.lm`, plain or gzipped as openslr ships LibriSpeech's), its words folded by
the rule the transcripts were (corpus.text: LibriSpeech's LM is in capitals, its transcripts
lowercased on import) and checked against the dev transcripts before any training starts: an LM
whose words the model cannot spell, or which misses too many dev words, is an error that names it,
not a decode that scores 100% WER."""

import gzip
import io
import math
import os
import tempfile
from collections import Counter, defaultdict
from collections.abc import Callable
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
        continuations = Counter(
            {ngram: count for ngram, count in counts[n].items() if ngram[0] == BOS}
        )
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
            ngram: max(count - discount, 0) / totals[ngram[:-1]]
            + mass[ngram[:-1]] * lower[ngram[1:] if n > 1 else ()]
            for ngram, count in counts[n].items()
        }
        model.update((ngram, (math.log10(p), 0.0)) for ngram, p in probabilities.items())
        model.update(
            (context, (model[context][0], math.log10(weight)))
            for context, weight in mass.items()
            if context
        )
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
            lines.append(
                f"{logp:.6f}\t{' '.join(ngram)}" + (f"\t{backoff:.6f}" if n < order else "")
            )
    atomic_write_text(path, "\n".join([*lines, "", "\\end\\", ""]))


def open_arpa(path: Path) -> io.TextIOBase:
    """An ARPA file's lines, gzipped (.gz) or not."""
    return (
        gzip.open(path, "rt", encoding="utf-8")
        if str(path).endswith(".gz")
        else open(path, encoding="utf-8")
    )


def arpa_problem(path: Path) -> str | None:
    """Why `path` is not an ARPA language model (plain or gzipped): missing, unreadable, or its
    first line that is not blank is not `\\data\\`, as KenLM requires; None where it may be one."""
    if not path.is_file():
        return "is not a file (an ARPA language model)"
    try:
        with open_arpa(path) as lines:
            first = next((line.strip() for line in lines if line.strip()), None)
    except (OSError, UnicodeDecodeError, EOFError) as error:
        return f"cannot be read as an ARPA language model ({error})"
    if first != "\\data\\":
        found = "it is empty" if first is None else f"its first line is {first[:40]!r}"
        return (
            f"is not an ARPA language model ({found}, where an ARPA file's first line is \\data\\)"
        )
    return None


def vocabulary(path: Path) -> list[str]:
    """The words of an ARPA file (its unigrams), <s>, </s> and <unk> left out."""
    words, in_unigrams = [], False
    try:
        with open_arpa(path) as lines:
            for number, line in enumerate(lines, 1):
                line = line.strip()
                if line.startswith("\\"):
                    if in_unigrams:
                        break
                    in_unigrams = line == "\\1-grams:"
                elif in_unigrams and line:
                    fields = line.split("\t") if "\t" in line else line.split()
                    if len(fields) < 2:
                        raise UserError(
                            f"{path}, line {number}: expected 'log10-probability<TAB>word', got "
                            f"{line!r}"
                        )
                    words.append(fields[1])
    except (OSError, UnicodeDecodeError, EOFError) as error:
        raise UserError(f"{path}: cannot read it as an ARPA language model ({error})") from None
    if not words:
        raise UserError(f"{path}: not an ARPA language model (it has no '\\1-grams:' section)")
    return [w for w in words if w not in (BOS, EOS, UNK)]


def read_arpa(
    path: Path, keep: set | None = None
) -> tuple[dict[tuple[str, ...], tuple[float, float]], dict]:
    """The n-grams of an ARPA file, (log10 probability, log10 backoff; 0 where none is listed),
    streamed line by line and kept only where `keep` holds them (None: every one), so that an LM
    of LibriSpeech's size (tens of millions of n-grams) is read in the memory of the few it is asked
    about; with what the file says of itself ({"order", "unigrams"})."""
    model, order, unigrams = {}, 0, 0
    try:
        with open_arpa(path) as lines:
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
                        raise UserError(
                            f"{path}, line {number}: not an ARPA {order}-gram line: {line!r}"
                        ) from None
                    model[ngram] = (logp, backoff)
    except (OSError, UnicodeDecodeError, EOFError) as error:
        raise UserError(f"{path}: cannot read it as an ARPA language model ({error})") from None
    return model, {"order": order, "unigrams": unigrams}


SPECIAL = (BOS, EOS, UNK)


def fold_arpa(source: Path, out: Path, fold: Callable[[str], str]) -> dict:
    """`source` (an ARPA file, gzipped or not) written to `out` with every word folded by `fold`
    (the transcripts' rule), streamed: an n-gram with a word that folds to nothing or to several
    words is left out; where words fold to one ("THE", "The"), the first n-gram listed of those
    that become one is kept (its probability; the rest are left out). Returns how many words it
    kept, and how many n-grams it left out and merged."""
    folding, order, counts = _Folding(fold), 0, Counter()
    with (
        open_arpa(source) as lines,
        tempfile.NamedTemporaryFile("w", dir=out.parent, delete=False) as body,
    ):
        try:
            for line in lines:
                line = line.strip()
                if line.startswith("\\") and line.endswith("-grams:"):
                    order = int(line[1:].split("-")[0])
                    body.write(f"\n{line}\n")
                    continue
                if not order or not line or line.startswith("\\"):
                    continue
                fields = line.split()
                mapped = folding.ngram(fields[1 : 1 + order], order)
                if mapped is None:
                    continue
                body.write("\t".join([fields[0], " ".join(mapped), *fields[1 + order :]]) + "\n")
                counts[order] += 1
        except (OSError, UnicodeDecodeError, EOFError, ValueError, IndexError) as error:
            os.unlink(body.name)
            raise UserError(
                f"{source}: cannot read it as an ARPA language model ({error})"
            ) from None
    header = "\\data\\\n" + "".join(f"ngram {n}={counts[n]}\n" for n in sorted(counts))
    with open(body.name) as written:
        atomic_write_text(out, header + written.read() + "\n\\end\\\n")
    os.unlink(body.name)
    return {"words": len(folding.owners), "left_out": folding.left_out, "merged": folding.merges}


class _Folding:
    """An ARPA file's words folded n-gram by n-gram, in the file's order, with what that left out
    and merged so far."""

    def __init__(self, fold: Callable[[str], str]):
        self.fold = fold
        # word -> folded; folded -> its first word; folded words of several words; the n-grams of
        # those kept
        self.folded, self.owners, self.collided, self.kept = {}, {}, set(), set()
        self.left_out, self.merges = 0, 0

    def ngram(self, words: list[str], order: int) -> tuple[str, ...] | None:
        """An n-gram's words folded; None where it is left out, or merged into one listed before
        it."""
        if order == 1:
            self.folded[words[0]] = _folded_word(words[0], self.fold, self.owners, self.collided)
            if self.owners.get(self.folded[words[0]], words[0]) != words[0]:
                self.merges += 1  # another word listed first is it
                return None
        mapped = tuple(self.folded.get(word) for word in words)
        if None in mapped or "" in mapped:
            self.left_out += 1
            return None
        if order > 1 and self.collided.intersection(mapped):
            # (every unigram is read before them)
            if mapped in self.kept:
                self.merges += 1
                return None
            self.kept.add(mapped)
        return mapped


def _folded_word(word: str, fold: Callable[[str], str], owners: dict, collided: set) -> str:
    """A unigram's word folded ("" where it folds to nothing or to several words); `owners`: the
    first word each folded word came from, so far; `collided`: the folded words of several."""
    if word in SPECIAL:
        return word
    found = fold(word)
    if " " in found:
        return ""
    if found in owners:
        collided.add(found)
    elif found:
        owners[found] = word
    return found


def check_lexicon(
    lm: Path,
    source: str,
    spellable: Callable[[str], bool],
    dev_texts: list[str],
    max_oov_rate: float | None,
) -> dict:
    """That the decoder has a lexicon: some of the LM's words spelled in the model's characters,
    and (`max_oov_rate`) no more than that share of the dev transcripts' words outside it."""
    words = vocabulary(lm)
    lexicon = {word for word in words if spellable(word)}
    if not lexicon:
        raise UserError(
            f"decode.lm: {source}: none of its {len(words):,} words can be spelled in the training "
            f"transcripts' characters (such as {words[0]!r}): is it in the transcripts' case "
            "(corpus.text.lowercase)?"
        )
    dev = [word for text in dev_texts for word in text.split()]
    oov = sum(word not in lexicon for word in dev) / max(len(dev), 1)
    if max_oov_rate is not None and oov > max_oov_rate:
        missing = Counter(word for word in dev if word not in lexicon).most_common(5)
        raise UserError(
            f"decode.lm: {source}: {100 * oov:.1f}% of the dev transcripts' words are not in its "
            "lexicon "
            f"(decode.max_lm_oov_rate: {max_oov_rate:g}), such as {[w for w, _ in missing]}: is it "
            "the corpus's LM, in the transcripts' case?"
        )
    return {"lexicon": len(lexicon), "dev_oov_rate": oov}


def log10_probability(model: dict, history: tuple[str, ...], word: str) -> float:
    """log10 P(word | history) by the backoff rule of an ARPA model (`history` at most order - 1);
    a word it does not list is <unk>, after the same backoff weights (as KenLM scores it)."""
    weight = 0.0
    while (*history, word) not in model:
        if not history:
            return weight + model[(UNK,)][0] if (UNK,) in model else -math.inf
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
            asked |= {
                tuple(padded[i : i + n])
                for n in range(1, len(padded) + 1)
                for i in range(len(padded) - n + 1)
            }
    (model, header), known = read_arpa(path, asked), set(training)
    return {
        "lm": str(path),
        **{
            subset: {
                **statistics(model, header, texts),
                "in_training_text": sum(t in known for t in texts),
            }
            for subset, texts in evaluated.items()
        },
    }


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
            counted[n], listed[n] = (
                counted[n] + len(ngrams),
                listed[n] + sum(ngram in model for ngram in ngrams),
            )
    vocabulary = header["unigrams"] - sum((w,) in model for w in (BOS, EOS, UNK))
    return {
        "order": order,
        "vocabulary": vocabulary,
        "sentences": len(texts),
        "words": words,
        "perplexity": 10 ** (-log_sum / max(predicted, 1)),
        "oov_rate": oov / max(words, 1),
        "coverage": {f"{n}-grams": listed[n] / max(counted[n], 1) for n in counted},
    }
