"""The paired bootstrap over test utterances, against answers known without it."""

import numpy as np
import pandas as pd
import pytest

from asrscale.analysis.bootstrap import error_rate, pooled, relative_difference


def scored(run: str, errors, words, greedy=None) -> pd.DataFrame:
    """One run's utterances.tsv rows: utterance i has words[i] words and errors[i] word errors."""
    return pd.DataFrame({"run": run, "utt": [f"u{i:05d}" for i in range(len(errors))], "words": words,
                         "lm_errors": errors, "greedy_errors": errors if greedy is None else greedy})  # fmt: skip


def test_a_wers_interval_is_the_sampling_error_of_its_utterances():
    """4,000 utterances of 10 words, each word wrong with probability 0.2 independently: the WER's
    standard error is √(0.2 × 0.8 / 40,000) = 0.2%, so its 95% interval is about ±0.39 points."""
    rng = np.random.default_rng(1)
    errors = rng.binomial(10, 0.2, 4000)
    found = error_rate(pooled(scored("a", errors, 10), pd.Series(["a"])))
    assert found.estimate == pytest.approx(errors.sum() / 40000)
    assert found.half_width == pytest.approx(1.96 * np.sqrt(0.2 * 0.8 / 40000), rel=0.1)
    assert found.low < found.estimate < found.high and found.utterances == 4000


def test_a_paired_difference_is_exact_where_one_system_makes_twice_the_errors_on_every_utterance():
    rng = np.random.default_rng(2)
    errors = rng.integers(1, 5, 500)
    system, reference = (pooled(scored(run, e, 8), pd.Series([run])) for run, e in (("a", 2 * errors), ("b", errors)))
    found = relative_difference(system, reference)
    assert (found.estimate, found.low, found.high) == pytest.approx((1.0, 1.0, 1.0))


def test_pairing_narrows_the_interval_of_two_systems_that_err_on_the_same_utterances():
    """Two systems with 5% fewer errors than a reference on the very utterances it gets wrong: the
    paired interval excludes no difference; drawn apart (unpaired), the same errors could not."""
    rng = np.random.default_rng(3)
    hard = rng.poisson(rng.gamma(0.5, 4.0, 2000))  # a few utterances carry most errors
    better = np.where(rng.random(2000) < 0.05, np.maximum(hard - 1, 0), hard)
    system, reference = pooled(scored("a", better, 10), pd.Series(["a"])), pooled(scored("b", hard, 10),
                                                                                   pd.Series(["b"]))  # fmt: skip
    paired = relative_difference(system, reference)
    assert paired.high < 0 and paired.estimate == pytest.approx(better.sum() / hard.sum() - 1)
    shuffled = reference.assign(lm_errors=rng.permutation(reference.lm_errors.to_numpy()))
    assert relative_difference(system, shuffled).half_width > 5 * paired.half_width


def test_seeds_are_pooled_per_utterance_and_only_common_utterances_compared():
    runs = pd.concat([scored("s1", [2, 0, 4], 5), scored("s2", [0, 0, 2], 5), scored("ref", [1, 1, 1, 9], 5)])
    system = pooled(runs, pd.Series(["s1", "s2"]))
    assert system.lm_errors.tolist() == [1.0, 0.0, 3.0] and system.words.tolist() == [5, 5, 5]
    found = relative_difference(system, pooled(runs, pd.Series(["ref"])))
    assert found.utterances == 3 and found.estimate == pytest.approx(4 / 3 - 1)  # u00003 is the reference's alone
    with pytest.raises(ValueError, match="no utterance scores of the runs"):
        pooled(runs, pd.Series(["missing"]))
