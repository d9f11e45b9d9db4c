"""The paired bootstrap over test utterances, against answers known without it."""

import numpy as np
import pandas as pd
import pytest

from asrscale.analysis.bootstrap import (
    RESAMPLES,
    Interval,
    _interval,
    _resampled,
    error_rate,
    pooled,
    relative_difference,
)


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


def test_an_interval_is_described_in_percent_signed_or_not():
    found = Interval(0.05, -0.01, 0.123, 10)
    assert found.describe() == "+5.0% (95% interval -1.0% to +12.3%)" and found.half_width == pytest.approx(0.0665)
    assert Interval(0.2, 0.19, 0.215, 10).describe(signed=False) == "20.0% (95% interval 19.0% to 21.5%)"


def test_the_interval_is_the_2_5th_and_97_5th_percentiles_of_resamples_drawn_from_every_utterance():
    """Of resamples 0.000, 0.001, ..., 1.000 the 95% interval is 0.025 to 0.975; every one of the
    RESAMPLES draws reaches every utterance (utterance 0 alone errs: some resamples lack it, some
    hold it twice), and the same tables give the same interval."""
    found = _interval(0.5, np.arange(1001) / 1000, 7)
    assert (found.low, found.high, found.utterances) == pytest.approx((0.025, 0.975, 7))
    assert len(_resampled([np.ones(5)], lambda ones: ones)) == RESAMPLES == 2000
    first_alone = pooled(scored("a", [4] + [0] * 9, 4), pd.Series(["a"]))
    draws = _resampled([first_alone.lm_errors.to_numpy(float)], lambda errors: errors)
    assert set(np.unique(draws)) >= {0.0, 4.0, 8.0}
    varied = scored("a", np.random.default_rng(4).integers(0, 6, 300), 5)
    again = [error_rate(pooled(varied, pd.Series(["a"]))) for _ in range(2)]
    assert again[0] == again[1] and again[0].low < again[0].high
    # the draws of seed 0, as every recorded interval was made: another seed moves the interval
    assert (again[0].low, again[0].high) == pytest.approx((0.488, 0.5653333), abs=1e-6)


def test_two_systems_scored_on_different_utterances_are_refused():
    system, reference = (pooled(scored(run, e, 5), pd.Series([run])) for run, e in (("a", [1, 2]), ("b", [0, 1])))
    with pytest.raises(ValueError, match="^the two systems were scored on no common test utterance$"):
        relative_difference(system, reference.set_axis(["x", "y"]))
