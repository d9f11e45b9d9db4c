"""Target 9: a word LM of LibriSpeech's size. A generated ARPA file of about 10 M n-grams (200,000
words, their bigrams and trigrams, the corpus's own words among them; `--quick`: about 100,000)
read as the workflow reads a user's LM: the statistics of the report (`asrscale lm-statistics`:
perplexity, OOV rate and coverage of dev and test, streaming the file and keeping the n-grams the
texts ask for) against reading every n-gram into a dictionary, and the beam search's KenLM and
lexicon (the decode job's start). Each in a child process of its own, for its time and peak
memory (the generated file is kept beside the corpus)."""

import itertools
import random
import string
from pathlib import Path

from asrscale.config import paths
from benchmarks.common import Bench, PreparedCorpus, Stopwatch, child, child_main, peak_rss_mb

WORDS, BIGRAMS, TRIGRAMS = 200_000, 4_000_000, 6_000_000


def _letters(number: int) -> str:
    """`number` written in letters (base 26), after a "q" that few English words start with."""
    digits = "q"
    while True:
        number, digit = divmod(number, 26)
        digits += string.ascii_lowercase[digit]
        if not number:
            return digits


def generate(path: Path, words: list[str], sizes: tuple[int, int, int], seed: int = 1) -> int:
    """An ARPA file of `sizes` unigrams, bigrams and trigrams over `words` and filler words, every
    n-gram's context and suffix listed below it, as lmplz writes them; returns its n-grams."""
    rng = random.Random(seed)
    vocabulary = list(dict.fromkeys(["<s>", "</s>", "<unk>", *words]))
    filler = (_letters(i) for i in range(10**9))  # words of letters: the lexicon keeps them
    vocabulary = list(
        dict.fromkeys([*vocabulary, *itertools.islice(filler, sizes[0] - len(vocabulary))])
    )
    followers, frequent = (
        {},
        vocabulary[:2000],
    )  # half the bigrams' first words among the first 2,000
    bigrams = set()
    while len(bigrams) < sizes[1]:
        pair = (rng.choice(frequent if rng.random() < 0.5 else vocabulary), rng.choice(vocabulary))
        if pair[1] != "<s>" and pair[0] != "</s>" and pair not in bigrams:
            bigrams.add(pair)
            followers.setdefault(pair[0], []).append(pair[1])
    trigrams, heads = set(), [pair for pair in bigrams if pair[1] in followers]
    while len(trigrams) < sizes[2]:
        first, second = rng.choice(heads)
        trigrams.add((first, second, rng.choice(followers[second])))

    def line(ngram, backoff: bool) -> str:
        return f"{-rng.uniform(0.5, 6):.6f}\t{' '.join(ngram)}" + (
            f"\t{-rng.uniform(0, 1):.6f}" if backoff else ""
        )

    with path.open("w") as arpa:
        arpa.write(
            f"\\data\\\nngram 1={len(vocabulary)}\nngram 2={len(bigrams)}\nngram "
            f"3={len(trigrams)}\n"
        )
        arpa.write("\n\\1-grams:\n" + "".join(line((w,), True) + "\n" for w in vocabulary))
        arpa.write("\n\\2-grams:\n" + "".join(line(b, True) + "\n" for b in sorted(bigrams)))
        arpa.write("\n\\3-grams:\n" + "".join(line(t, False) + "\n" for t in sorted(trigrams)))
        arpa.write("\n\\end\\\n")
    return len(vocabulary) + len(bigrams) + len(trigrams)


def measure(how: str, arpa: Path) -> dict:
    """In a child: one way of reading the ARPA file, its seconds and this process's peak memory."""
    from asrscale.data.datadir import read_table

    study = PreparedCorpus.of(Path.cwd())
    texts = {
        subset: list(read_table(study.path(paths.DATA, subset=subset) / "text").values())
        for subset in ("dev", "test")
    }
    before = peak_rss_mb()
    with Stopwatch() as watch:
        if how == "statistics":
            from asrscale.decoding.lm import report

            found = report(arpa, [], texts)
            extra = {
                "test_perplexity": found["test"]["perplexity"],
                "test_oov_rate": found["test"]["oov_rate"],
            }
        elif how == "every-ngram":
            from asrscale.decoding.lm import read_arpa

            extra = {"ngrams": len(read_arpa(arpa)[0])}
        else:
            from asrscale.decoding.beam import LexiconBeamSearch

            LexiconBeamSearch(arpa, study.tokens, 32, 25.0)
            extra = {}
    return {"seconds": watch.seconds, "peak_mb": peak_rss_mb(), "before_mb": before, **extra}


def run(bench: Bench) -> None:
    from asrscale.data.datadir import read_table

    study = PreparedCorpus.of(bench.work)
    words = sorted(
        {
            w
            for text in read_table(study.path(paths.DATA, subset="train") / "text").values()
            for w in text.split()
        }
    )
    sizes = (5_000, 40_000, 60_000) if bench.quick else (WORDS, BIGRAMS, TRIGRAMS)
    arpa = bench.work / f"lm-{sum(sizes)}.arpa"
    if not arpa.exists():
        with Stopwatch() as watch:
            ngrams = generate(arpa.with_suffix(".tmp"), words, sizes)
            arpa.with_suffix(".tmp").rename(arpa)
        print(
            f"  generated {ngrams:,} n-grams ({arpa.stat().st_size / 1e6:.0f} MB) in "
            f"{watch.seconds:.0f} s"
        )
    found = {
        how: child(bench, "language_model", how, arpa, timeout=3600)
        for how in ("statistics", "every-ngram", "decoder")
    }
    size = f"{sum(sizes) / 1e6:.1f}M n-grams"
    statistics, every = found["statistics"], found["every-ngram"]
    bench.add(
        "language model",
        f"LM statistics of dev and test, an ARPA of {size}: seconds",
        statistics["seconds"],
        "s",
        **statistics,
    )
    bench.add(
        "language model",
        f"LM statistics of dev and test, an ARPA of {size}: peak memory",
        statistics["peak_mb"],
        "MB",
    )
    bench.add(
        "language model",
        "the same holding every n-gram / streaming (peak memory)",
        every["peak_mb"] / statistics["peak_mb"],
        "x",
        **every,
    )
    bench.add(
        "language model",
        f"decoder start (KenLM and the lexicon of its words), {size}: seconds",
        found["decoder"]["seconds"],
        "s",
        **found["decoder"],
    )
    bench.add(
        "language model", f"decoder start, {size}: peak memory", found["decoder"]["peak_mb"], "MB"
    )


if __name__ == "__main__":
    child_main(measure, how=str, arpa=Path)
