"""The Kneser-Ney estimates of asrscale.decoding.lm against answers that do not come from it:
numbers derived by hand for a text of three sentences, and a reference written from the definition
(Chen & Goodman 1998, "An empirical study of smoothing techniques for language modeling", their
interpolated Kneser-Ney: one discount per order, D = n1 / (n1 + 2 n2) from that order's counts of
counts; the lower orders count distinct left contexts), read from the ARPA file lm.py writes. Two
conventions are KenLM's, not the paper's: an n-gram that starts a sentence keeps its occurrences
(nothing precedes <s>), and the unigrams are interpolated with the uniform distribution over the
words, </s> and <unk> (which so gets its probability)."""

import math
from collections import Counter
from fractions import Fraction

import numpy as np
import pytest
from flashlight.lib.text.decoder.kenlm import KenLM
from flashlight.lib.text.dictionary import Dictionary

from asrscale.decoding.lm import (
    _discount,
    check_lexicon,
    fold_arpa,
    log10_probability,
    read_arpa,
    report,
    vocabulary,
    write_arpa,
)
from asrscale.errors import UserError

BOS, EOS, UNK = "<s>", "</s>", "<unk>"


def arpa_entries(path) -> tuple[dict[int, int], dict[tuple[str, ...], tuple[float, float | None]]]:
    """An ARPA file read as the format defines it, apart from lm.py's reader: its header's count
    of each order, and each n-gram's (log10 probability, log10 backoff or None where none is
    written)."""
    header, entries, order = {}, {}, None
    lines = path.read_text().splitlines()
    assert lines[0] == "\\data\\" and lines[-1] == "\\end\\"
    for line in lines[1:-1]:
        if line.startswith("ngram "):
            n, count = line.removeprefix("ngram ").split("=")
            header[int(n)] = int(count)
        elif line.startswith("\\"):
            order = int(line.removeprefix("\\").removesuffix("-grams:"))
        elif line:
            fields = line.split("\t")
            ngram = tuple(fields[1].split())
            assert len(ngram) == order and ngram not in entries
            entries[ngram] = (float(fields[0]), float(fields[2]) if len(fields) > 2 else None)
    return header, entries


def estimated(
    tmp_path, texts: list[str], order: int
) -> dict[tuple[str, ...], tuple[float, float | None]]:
    """lm.py's model of `texts`, as its ARPA file lists it (the header checked against the body)."""
    write_arpa(tmp_path / "lm.arpa", texts, order)
    header, entries = arpa_entries(tmp_path / "lm.arpa")
    assert header == Counter(len(ngram) for ngram in entries)
    return entries


# "dogs", "the cat", "the cat": by hand, every n-gram. The counts each order is estimated from:
# trigrams occurrences: <s> the cat 2, the cat </s> 2, <s> dogs </s> 1: n1 = 1, n2 = 2, D3 = 1/5
# bigrams distinct left contexts, those starting a sentence occurrences: <s> the 2, <s> dogs 1,
#   the cat 1 (<s>), cat </s> 1 (the), dogs </s> 1 (<s>): n1 = 4, n2 = 1, D2 = 4/6 = 2/3
# unigrams distinct left contexts: the 1, cat 1, dogs 1, </s> 2 (cat, dogs), <unk> 0:
#   n1 = 3, n2 = 1, D1 = 3/5; their total 5, 4 of them seen, below them the uniform 1/5
# P(w | h) = max(c(h w) - D, 0) / c(h) + D N1+(h .) / c(h) P(w | h's suffix); backoff(h) = D N1+(h
# .) / c(h)
UNIGRAMS = {
    "the": Fraction(2, 5) / 5 + Fraction(12, 25) / 5,  # 22/125
    "cat": Fraction(22, 125),
    "dogs": Fraction(22, 125),
    EOS: Fraction(7, 5) / 5 + Fraction(12, 25) / 5,  # 47/125
    UNK: Fraction(12, 25) / 5,  # 12/125: the mass the discounts leave, spread uniformly
}
BIGRAMS = {
    (BOS, "the"): Fraction(4, 3) / 3
    + Fraction(4, 9) * UNIGRAMS["the"],  # backoff(<s>) = 2/3 * 2/3 = 4/9
    (BOS, "dogs"): Fraction(1, 3) / 3 + Fraction(4, 9) * UNIGRAMS["dogs"],
    ("the", "cat"): Fraction(1, 3) + Fraction(2, 3) * UNIGRAMS["cat"],  # backoff(the) = 2/3 * 1/1
    ("cat", EOS): Fraction(1, 3) + Fraction(2, 3) * UNIGRAMS[EOS],
    ("dogs", EOS): Fraction(1, 3) + Fraction(2, 3) * UNIGRAMS[EOS],
}
TRIGRAMS = {
    (BOS, "the", "cat"): Fraction(9, 5) / 2
    + Fraction(1, 10) * BIGRAMS[("the", "cat")],  # backoff 1/5 * 1/2
    ("the", "cat", EOS): Fraction(9, 5) / 2 + Fraction(1, 10) * BIGRAMS[("cat", EOS)],
    (BOS, "dogs", EOS): Fraction(4, 5)
    + Fraction(1, 5) * BIGRAMS[("dogs", EOS)],  # backoff 1/5 * 1/1
}
BACKOFFS = {
    (BOS,): Fraction(4, 9),
    ("the",): Fraction(2, 3),
    ("cat",): Fraction(2, 3),
    ("dogs",): Fraction(2, 3),
    (BOS, "the"): Fraction(1, 10),
    ("the", "cat"): Fraction(1, 10),
    (BOS, "dogs"): Fraction(1, 5),
}


def test_kneser_ney_of_three_sentences_is_the_one_derived_by_hand(tmp_path):
    entries = estimated(tmp_path, ["dogs", "the cat", "the cat"], 3)
    assert UNIGRAMS["the"] == Fraction(22, 125) and sum(UNIGRAMS.values()) == 1
    assert BIGRAMS[(BOS, "the")] == Fraction(196, 375) and TRIGRAMS[
        ("the", "cat", EOS)
    ] == Fraction(599, 625)
    expected = {
        (w,) if isinstance(w, str) else w: p for w, p in {**UNIGRAMS, **BIGRAMS, **TRIGRAMS}.items()
    }
    assert set(entries) == {*expected, (BOS,)}
    assert entries[(BOS,)][0] == -99  # <s> is never predicted
    for ngram, probability in expected.items():
        assert entries[ngram][0] == pytest.approx(math.log10(probability), abs=1e-6), ngram
    for ngram, (_, backoff) in entries.items():
        if (
            len(ngram) < 3
            # a context's backoff weight is its share left to the order below; 1 where nothing
            # follows
        ):
            assert backoff == pytest.approx(math.log10(BACKOFFS.get(ngram, 1)), abs=1e-6), ngram
        else:
            assert backoff is None  # the top order has none


def reference_kneser_ney(
    texts: list[str], order: int
) -> dict[tuple[str, ...], tuple[Fraction, Fraction]]:
    """Interpolated Kneser-Ney from its definition, n-gram by n-gram, in exact fractions: each
    listed n-gram's (probability, backoff weight of it as a context; 1 where nothing follows it)."""
    sentences = [(BOS, *text.split(), EOS) for text in texts]
    seen = Counter(
        s[i : i + n] for s in sentences for n in range(1, order + 1) for i in range(len(s) - n + 1)
    )
    vocabulary = {g[0] for g in seen if len(g) == 1} - {BOS} | {UNK}

    def count(
        ngram,
    ):  # what order len(ngram) counts: occurrences at the top and after <s>, else left contexts
        if len(ngram) == order or ngram[0] == BOS:
            return seen[ngram]
        return len({g[0] for g in seen if g[1:] == ngram})

    listed = [g for g in seen if g != (BOS,)] + [(UNK,)]
    counted = {g: count(g) for g in listed}
    discount = {}
    for n in range(1, order + 1):
        of = Counter(c for g, c in counted.items() if len(g) == n)
        discount[n] = Fraction(of[1], of[1] + 2 * of[2])
        assert (
            Fraction(1, 10) < discount[n] < Fraction(9, 10)
        )  # a text where lm.py's guards do not act

    def followers(context):
        return [g for g in listed if len(g) == len(context) + 1 and g[:-1] == context]

    def backoff(context):  # the share of c(context) the discount takes, spread below
        after = followers(context)
        total = sum(counted[g] for g in after)
        return (
            discount[len(context) + 1] * sum(counted[g] > 0 for g in after) / total
            if after
            else Fraction(1)
        )

    def probability(ngram):
        context, total = ngram[:-1], sum(counted[g] for g in followers(ngram[:-1]))
        below = probability(ngram[1:]) if context else Fraction(1, len(vocabulary))
        return max(counted[ngram] - discount[len(ngram)], 0) / total + backoff(context) * below

    return {(BOS,): (None, backoff((BOS,))), **{g: (probability(g), backoff(g)) for g in listed}}


@pytest.mark.parametrize("order", [2, 3, 4])
def test_kneser_ney_estimates_are_those_of_a_reference_from_the_definition(tmp_path, order):
    # Zipf's words, for rare ones: else every unigram follows many words and no order has n1 and n2
    rng, words = np.random.default_rng(1), "the cat sat on a mat dog ran far away".split()
    frequencies = 1 / np.arange(1, len(words) + 1) ** 1.5
    texts = [
        " ".join(rng.choice(words, rng.integers(1, 6), p=frequencies / frequencies.sum()))
        for _ in range(30)
    ]
    entries, reference = estimated(tmp_path, texts, order), reference_kneser_ney(texts, order)
    assert set(entries) == set(reference) and len(entries) > 50
    for ngram, (probability, backoff) in reference.items():
        if probability is not None:  # <s>'s is ARPA's -99
            assert entries[ngram][0] == pytest.approx(math.log10(probability), abs=1e-6), ngram
        if len(ngram) < order:
            assert entries[ngram][1] == pytest.approx(math.log10(backoff), abs=1e-6), ngram


def test_the_discount_is_neys_from_the_counts_of_counts_kept_inside_its_bounds_on_tiny_texts():
    def discount(*counts):  # of n-grams counted so many times each
        return _discount(Counter({(f"w{i}",): c for i, c in enumerate(counts)}))

    assert discount(1, 1, 1, 2, 3, 5) == pytest.approx(3 / (3 + 2 * 1))
    assert discount(1, 2, 2, 2, 2, 2) == pytest.approx(0.1)  # 1/11
    assert discount(*[1] * 19, 2) == pytest.approx(0.9)  # 19/21
    assert (
        discount(1, 1, 3) == discount(2, 2, 3) == 0.5
    )  # no n2, or no n1: the formula means nothing


# what lm.py reads: its own and others' ARPA files, folded, and scored


def _hand_derived_arpa(tmp_path):
    """The ARPA file of the text derived by hand above, and that text."""
    texts = ["dogs", "the cat", "the cat"]
    write_arpa(tmp_path / "lm.arpa", texts, 3)
    return tmp_path / "lm.arpa", texts


def test_statistics_of_one_word_texts_are_those_derived_by_hand(tmp_path):
    arpa, training = _hand_derived_arpa(tmp_path)
    found = report(
        arpa, training, {"known": ["dogs"], "unknown": ["zebra", "zebra"], "one": ["zebra"]}
    )
    assert found["lm"] == str(arpa)
    # "dogs": P(dogs | <s>) and P(</s> | <s> dogs), each n-gram of it listed (the trigram's 1 of 1)
    dogs = float(BIGRAMS[(BOS, "dogs")] * TRIGRAMS[(BOS, "dogs", EOS)])
    assert found["known"] == {
        "order": 3,
        "vocabulary": 3,
        "sentences": 1,
        "words": 1,
        "in_training_text": 1,
        "perplexity": pytest.approx(dogs ** (-1 / 2)),
        "oov_rate": 0.0,
        "coverage": {"2-grams": 1.0, "3-grams": 1.0},
    }
    # "zebra" twice: each an OOV, left unscored; each sentence's end backs off to P(</s>), by
    # weights of 1
    assert found["unknown"] == {
        "order": 3,
        "vocabulary": 3,
        "sentences": 2,
        "words": 2,
        "in_training_text": 0,
        "perplexity": pytest.approx(float(1 / UNIGRAMS[EOS])),
        "oov_rate": 1.0,
        "coverage": {"2-grams": 0.0, "3-grams": 0.0},
    }
    # one word and one sentence end: the rates' denominators
    assert found["one"]["oov_rate"] == 1.0 and found["one"]["perplexity"] == pytest.approx(
        float(1 / UNIGRAMS[EOS])
    )


def test_the_backoff_rule_of_an_arpa_model(tmp_path):
    model = {
        (UNK,): (-2.0, 0.0),
        ("a",): (-0.5, -0.25),
        ("b",): (-0.7, -0.1),
        ("a", "b"): (-0.2, 0.0),
    }
    assert log10_probability(model, ("a",), "b") == -0.2
    assert log10_probability(model, ("b",), "a") == -0.1 + -0.5  # b's backoff weight, then P(a)
    assert log10_probability(model, ("c", "a"), "a") == -0.25 + -0.5  # c unlisted: a weight of 1
    assert log10_probability(model, ("a",), "z") == -0.25 + -2.0  # an unknown word is <unk>
    assert log10_probability({k: v for k, v in model.items() if k != (UNK,)}, (), "z") == -math.inf
    read, header = read_arpa(_hand_derived_arpa(tmp_path)[0])
    assert read[("the", "cat", EOS)] == (
        pytest.approx(math.log10(TRIGRAMS[("the", "cat", EOS)]), abs=1e-6),
        0.0,
    )
    assert header == {"order": 3, "unigrams": 6}
    # an unknown word after "<s> the", as KenLM scores it: both histories' backoff weights, then
    # P(<unk>)
    dictionary = Dictionary(["cat", "dogs", "the", BOS, EOS, UNK])
    kenlm = KenLM(str(tmp_path / "lm.arpa"), dictionary)
    state, _ = kenlm.score(kenlm.start(False), dictionary.get_index("the"))
    unknown = kenlm.score(state, dictionary.get_index(UNK))[1]
    assert log10_probability(read, (BOS, "the"), "zebra") == pytest.approx(unknown, abs=1e-5)
    assert unknown == pytest.approx(
        math.log10(BACKOFFS[(BOS, "the")] * BACKOFFS[("the",)] * UNIGRAMS[UNK]), abs=1e-5
    )


def test_unreadable_or_malformed_arpa_files_are_named_with_the_line(tmp_path):
    broken = tmp_path / "lm.arpa.gz"
    broken.write_text("not gzip")
    for read in (vocabulary, read_arpa):
        with pytest.raises(
            UserError, match=r"^\S+lm.arpa.gz: cannot read it as an ARPA language model \(.+\)$"
        ):
            read(broken)
    (tmp_path / "lm.arpa").write_text("\\data\\\nngram 1=2\n\n\\1-grams:\n-1.0\tthe\n-1.5\n")
    with pytest.raises(
        UserError, match=r"lm.arpa, line 6: expected 'log10-probability<TAB>word', got '-1.5'$"
    ):
        vocabulary(tmp_path / "lm.arpa")
    (tmp_path / "lm.arpa").write_text(
        "\\data\\\n\n\\1-grams:\n-1.0\tthe\n\n\\2-grams:\n-1.0\tthe the\nx\tthe a\n"
    )
    with pytest.raises(UserError, match=r"lm.arpa, line 8: not an ARPA 2-gram line: 'x\\tthe a'$"):
        read_arpa(tmp_path / "lm.arpa")


def test_arpa_words_are_split_by_tabs_where_the_file_has_them_else_by_spaces(tmp_path):
    # (a word with a no-break space, which str.split() would split, is one word between tabs)
    (tmp_path / "tabs.arpa").write_text(
        "\\data\\\n\n\\1-grams:\n-1.0\tno\xa0break\t-0.5\n-1.0\t<s>\n\n\\end\\\n"
    )
    (tmp_path / "spaces.arpa").write_text(
        "\\data\\\n\n\\1-grams:\n-1.0 the -0.5\n-1.0  cat\n\n\\2-grams:\n"
    )
    assert vocabulary(tmp_path / "tabs.arpa") == ["no\xa0break"]
    assert vocabulary(tmp_path / "spaces.arpa") == ["the", "cat"]


def _folded_by_hand(entries: dict, fold) -> tuple[dict, int, int]:
    """An ARPA file's n-grams (in its order) with their words folded, as fold_arpa's docstring
    says: those with a word that folds to nothing or to several left out, the first of those that
    fold to one kept; with how many were left out and merged."""
    kept, left_out, merged = {}, 0, 0
    for ngram, entry in entries.items():
        words = tuple(word if word in (BOS, EOS, UNK) else fold(word) for word in ngram)
        if any(not word or " " in word for word in words):
            left_out += 1
        elif words in kept:
            merged += 1
        else:
            kept[words] = entry
    return kept, left_out, merged


def test_an_arpa_file_folded_keeps_the_first_of_the_n_grams_that_fold_to_one(tmp_path):
    def fold(word):  # "--" to nothing, WELL-KNOWN to two words
        return word.lower().replace("--", "").replace("-", " ")

    texts = ["THE CAT SAT", "The cat --", "a WELL-KNOWN CAT", "the cat sat", "THE dog"]
    write_arpa(tmp_path / "lm.arpa", texts, 3)
    found = fold_arpa(tmp_path / "lm.arpa", tmp_path / "folded.arpa", fold)
    header, entries = arpa_entries(tmp_path / "folded.arpa")
    expected, left_out, merged = _folded_by_hand(arpa_entries(tmp_path / "lm.arpa")[1], fold)
    assert entries == expected and list(entries) == list(expected)  # in the file's order
    assert header == Counter(len(ngram) for ngram in entries)
    assert found == {"words": 5, "left_out": left_out, "merged": merged}  # a, cat, dog, sat, the
    assert left_out > 0 and merged > 0  # both happen
    assert {w for (w, *_) in entries} == {"a", "cat", "dog", "sat", "the", BOS, EOS, UNK}


def test_an_arpa_file_that_cannot_be_read_to_its_end_is_named_and_leaves_no_file(tmp_path):
    (tmp_path / "lm").mkdir()
    (tmp_path / "lm" / "lm.arpa").write_bytes(b"\\data\\\n\n\\1-grams:\n-1.0\tthe\n-1.0\t\xff\n")
    with pytest.raises(
        UserError, match=r"lm.arpa: cannot read it as an ARPA language model \(.*utf-8.*\)$"
    ):
        fold_arpa(tmp_path / "lm" / "lm.arpa", tmp_path / "lm" / "folded.arpa", str.lower)
    assert [p.name for p in (tmp_path / "lm").iterdir()] == ["lm.arpa"]


def test_the_lexicon_check_names_the_lm_and_what_it_misses(tmp_path):
    write_arpa(tmp_path / "lm.arpa", ["the cat sat", "a dog"], 2)
    dev = [
        "zebra yak gnu",
        "emu owl zebra",
        "yak zebra the",
        "ox",
    ]  # 10 words, 9 missed, 6 of them distinct
    with pytest.raises(UserError) as raised:
        check_lexicon(tmp_path / "lm.arpa", "lm.arpa", str.isascii, dev, 0.5)
    assert str(raised.value) == (
        "decode.lm: lm.arpa: 90.0% of the dev transcripts' words are not in its lexicon "
        "(decode.max_lm_oov_rate: "
        "0.5), such as ['zebra', 'yak', 'gnu', 'emu', 'owl']: is it the corpus's LM, in the "
        "transcripts' case?"
    )
    assert check_lexicon(tmp_path / "lm.arpa", "lm.arpa", str.isascii, dev, 0.9) == {
        "lexicon": 5,
        "dev_oov_rate": pytest.approx(0.9),
    }
    assert (
        check_lexicon(tmp_path / "lm.arpa", "lm.arpa", str.isascii, ["ox"], None)["dev_oov_rate"]
        == 1.0
    )
    with pytest.raises(UserError) as raised:
        check_lexicon(tmp_path / "lm.arpa", "lm.arpa", str.isupper, dev, None)
    assert str(raised.value) == (
        "decode.lm: lm.arpa: none of its 5 words can be spelled in the training transcripts' "
        "characters (such as 'a'): is it in the transcripts' case (corpus.text.lowercase)?"
    )
