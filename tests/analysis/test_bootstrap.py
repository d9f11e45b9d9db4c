"""The intervals of a WER and of two systems' relative difference, against answers known without
them: exact cases, pairing, speakers drawn whole, seeds' spread, and the coverage of the interval
on simulated studies whose true difference is known."""

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from asrscale.analysis.bootstrap import (
    RESAMPLES,
    Interval,
    _resampled,
    _seed_freedom,
    _seed_variance,
    _t_interval,
    error_rate,
    interval_of,
    relative_difference,
    speaker_errors,
)


def scored(run: str, errors, words, greedy=None) -> pd.DataFrame:
    """One run's utterances.tsv rows: utterance i has words[i] words and errors[i] word errors."""
    return pd.DataFrame(
        {
            "run": run,
            "utt": [f"u{i:05d}" for i in range(len(errors))],
            "words": words,
            "lm_errors": errors,
            "greedy_errors": errors if greedy is None else greedy,
        }
    )


def test_a_wers_interval_is_the_sampling_error_of_its_utterances():
    """4,000 utterances of 10 words, each its own speaker, each word wrong with probability 0.2
    independently: the WER's standard error is √(0.2 × 0.8 / 40,000) = 0.2%, so its 95% interval is
    about ±0.39 points."""
    rng = np.random.default_rng(1)
    errors = rng.binomial(10, 0.2, 4000)
    found = error_rate(scored("a", errors, 10), ["a"])
    assert found.estimate == pytest.approx(errors.sum() / 40000)
    assert found.half_width == pytest.approx(1.96 * np.sqrt(0.2 * 0.8 / 40000), rel=0.1)
    assert (
        found.low < found.estimate < found.high and found.utterances == 4000 and found.seeds == (1,)
    )


def test_a_wers_interval_draws_speakers_whole_and_adds_the_seeds_spread():
    """40 speakers of 100 utterances, some speakers hard: drawn whole, the interval is as wide as
    the speakers' spread (utterance by utterance it would be several times narrower); 3 seeds that
    disagree on the total widen it, and seeds that agree leave it as one seed's."""
    rng = np.random.default_rng(5)
    hardness = np.repeat(rng.gamma(2.0, 0.1, 40), 100)
    errors = rng.binomial(10, np.clip(hardness, 0, 1))
    one = scored("a", errors, 10).assign(speaker=[f"s{i // 100:02d}" for i in range(4000)])
    by_speaker = error_rate(one, ["a"])
    by_utterance = error_rate(one.drop(columns="speaker"), ["a"])
    assert (
        by_speaker.speakers == 40
        and by_speaker.drawn == "speakers"
        and by_utterance.speakers == 4000
    )
    assert by_speaker.half_width > 3 * by_utterance.half_width
    by_voice = error_rate(
        one.assign(voice=[f"v{i // 1000}" for i in range(4000)]), ["a"]
    )  # 4 voices of 10 speakers
    assert (by_voice.speakers, by_voice.drawn, by_voice.estimate) == (
        4,
        "voices",
        by_speaker.estimate,
    )
    agreeing = pd.concat([one.assign(run=seed) for seed in ("a", "b", "c")])
    assert error_rate(agreeing, ["a", "b", "c"]).half_width == pytest.approx(
        by_speaker.half_width, rel=0.05
    )
    apart = pd.concat(
        [
            one.assign(run=seed, lm_errors=one.lm_errors * factor)
            for seed, factor in (("a", 0.8), ("b", 1.0), ("c", 1.2))
        ]
    )
    found = error_rate(apart, ["a", "b", "c"])
    assert found.estimate == pytest.approx(by_speaker.estimate) and found.seeds == (3,)
    assert found.half_width > 1.4 * by_speaker.half_width and found.parts["seeds"] > 0


def test_a_system_without_an_error_has_a_wer_of_zero_and_runs_without_scores_are_refused():
    found = error_rate(scored("a", [0, 0, 0], 5), ["a"])
    assert found == Interval(0.0, 0.0, 0.0, 3, 3, (1,), drawn="speakers")
    voiced = error_rate(scored("a", [0, 0, 0], 5).assign(voice=["v1", "v1", "v2"]), ["a"])
    assert (voiced.speakers, voiced.drawn) == (2, "voices")
    with pytest.raises(ValueError, match=r"no utterance scores of the runs \['missing'\]"):
        error_rate(scored("a", [1, 2], 5), ["missing"])


def test_a_paired_difference_is_exact_where_one_system_makes_twice_the_errors_on_every_utterance():
    rng = np.random.default_rng(2)
    errors = rng.integers(1, 5, 500)
    found = relative_difference(
        pd.concat([scored("a", 2 * errors, 8), scored("b", errors, 8)]), ["a"], ["b"]
    )
    assert (found.estimate, found.low, found.high) == pytest.approx((1.0, 1.0, 1.0))


def test_pairing_narrows_the_interval_of_two_systems_that_err_on_the_same_utterances():
    """Two systems with 5% fewer errors than a reference on the very utterances it gets wrong: the
    paired interval excludes no difference; drawn apart (unpaired), the same errors could not."""
    rng = np.random.default_rng(3)
    hard = rng.poisson(rng.gamma(0.5, 4.0, 2000))  # a few utterances carry most errors
    better = np.where(rng.random(2000) < 0.05, np.maximum(hard - 1, 0), hard)
    system, reference = scored("a", better, 10), scored("b", hard, 10)
    paired = relative_difference(pd.concat([system, reference]), ["a"], ["b"])
    assert paired.high < 0 and paired.estimate == pytest.approx(better.sum() / hard.sum() - 1)
    shuffled = reference.assign(lm_errors=rng.permutation(reference.lm_errors.to_numpy()))
    assert (
        relative_difference(pd.concat([system, shuffled]), ["a"], ["b"]).half_width
        > 5 * paired.half_width
    )


def test_seeds_are_pooled_per_utterance_and_only_common_utterances_compared():
    runs = pd.concat(
        [scored("s1", [2, 0, 4], 5), scored("s2", [0, 0, 2], 5), scored("ref", [1, 1, 1, 9], 5)]
    )
    assert error_rate(runs, ["s1", "s2"]).estimate == pytest.approx(
        4 / 15
    )  # (1 + 0 + 3) errors of 15 words
    found = relative_difference(runs, ["s1", "s2"], ["ref"])
    assert found.utterances == 3 and found.estimate == pytest.approx(
        4 / 3 - 1
    )  # u00003 is the reference's alone
    assert (
        found.seeds == (2, 1) and found.speakers == 3
    )  # no speaker column: each utterance its own
    assert error_rate(runs, ["s1", "ref"]).utterances == 3  # u00003 is not s1's


def test_an_interval_is_described_in_percent_signed_or_not():
    found = Interval(0.05, -0.01, 0.123, 10)
    assert (
        found.describe() == "+5.0% (95% interval -1.0% to +12.3%)"
        and found.half_width == pytest.approx(0.0665)
    )
    assert (
        Interval(0.2, 0.19, 0.215, 10).describe(signed=False)
        == "20.0% (95% interval 19.0% to 21.5%)"
    )


def test_every_resample_draws_from_every_speaker_and_the_same_tables_give_the_same_interval():
    """Every one of the RESAMPLES draws reaches every speaker (speaker 0 alone errs: some resamples
    lack it, some hold it twice), and the draws come from a fixed seed."""
    assert len(_resampled([np.ones(5)], lambda ones: ones)) == RESAMPLES == 2000
    draws = _resampled([np.array([4.0] + [0.0] * 9)], lambda errors: errors)
    assert set(np.unique(draws)) >= {0.0, 4.0, 8.0}
    varied = scored("a", np.random.default_rng(4).integers(0, 6, 300), 5)
    again = [error_rate(varied, ["a"]) for _ in range(2)]
    assert again[0] == again[1] and again[0].low < again[0].estimate < again[0].high
    # the draws of seed 0, as every recorded interval was made: another seed moves the interval
    assert (again[0].low, again[0].high) == pytest.approx((0.4914049, 0.5687539), abs=1e-6)


def test_two_systems_scored_on_different_utterances_are_refused():
    apart = pd.concat([scored("a", [1, 2], 5), scored("b", [0, 1], 5).assign(utt=["x", "y"])])
    with pytest.raises(
        ValueError, match="^the two systems were scored on no common test utterance$"
    ):
        relative_difference(apart, ["a"], ["b"])


def test_a_speakers_utterances_are_drawn_together():
    """One system errs most on two of four speakers' utterances (10 each), the other on the other
    two: drawn utterance by utterance the 40 would look like independent trials; drawn by speaker,
    the interval is as wide as four speakers make it."""
    errors = np.repeat([3, 3, 1, 1], 10)
    system = scored("a", errors, 10).assign(speaker=np.repeat(["s1", "s2", "s3", "s4"], 10))
    reference = system.assign(run="b", lm_errors=errors[::-1])
    by_speaker = relative_difference(pd.concat([system, reference]), ["a"], ["b"])
    alone = relative_difference(
        pd.concat([system, reference]).drop(columns="speaker"), ["a"], ["b"]
    )
    assert (
        by_speaker.speakers == 4
        and alone.speakers == 40
        and by_speaker.half_width > 2 * alone.half_width
    )
    assert (
        by_speaker.rests_on()
        == "40 test utterances of 4 speakers, 1 and 1 seeds (training's spread not in the "
        "interval: one seed)"
    )


def test_the_seeds_spread_widens_the_interval_and_a_shared_test_set_does_not_count_it_twice():
    """Three seeds of each system whose totals differ by a factor alone (every speaker alike):
    the seeds' part is their spread; where seeds differ speaker by speaker but not in total, it is
    none (that disagreement is the speaker bootstrap's)."""
    base = np.random.default_rng(8).integers(2, 9, 50).astype(float)
    speakers = [f"s{i}" for i in range(50)]

    def system(name, factors):
        return pd.concat(
            [
                scored(f"{name}{k}", base * f, 10).assign(speaker=speakers)
                for k, f in enumerate(factors)
            ]
        )

    spread = relative_difference(
        pd.concat([system("a", [0.9, 1.0, 1.1]), system("b", [1, 1, 1])]),
        ["a0", "a1", "a2"],
        ["b0", "b1", "b2"],
    )
    assert spread.parts["speakers"] == 0 and spread.parts["seeds"] > 0.1  # log(1.1)·t(2)/√3 ≈ 0.24
    assert spread.low < -0.1 and spread.high > 0.1 and spread.seeds == (3, 3)
    shuffled = np.random.default_rng(9).permuted(np.tile(base, (3, 1)), axis=1)
    same_total = pd.concat(
        [scored(f"a{k}", row, 10).assign(speaker=speakers) for k, row in enumerate(shuffled)]
    )
    found = relative_difference(
        pd.concat([same_total, system("b", [1, 1, 1])]), ["a0", "a1", "a2"], ["b0", "b1", "b2"]
    )
    assert found.parts["seeds"] == 0 and found.parts["speakers"] > 0


def simulated_study(rng, speakers: int, seed_sd: float, seeds: int = 3, words: int = 250):
    """Two systems' errors (a: 22% WER, b: 20%; speakers × seeds each) on a test set of `speakers`
    speakers (`words` words each, a difficulty of mean 1 and a tilt of system a's of 10% (log)
    either way), each run of `seeds` with a training factor of `seed_sd` (log) on every speaker,
    errors Poisson. Over speakers and seeds the true difference is 0.22 / 0.2 × e^(0.1² / 2) − 1."""
    difficulty, tilt = rng.gamma(4.0, 0.25, speakers), np.exp(rng.normal(0, 0.1, speakers))
    training = np.exp(rng.normal(0, seed_sd, (2, 1, seeds)))
    mean = (
        words * difficulty[:, None] * np.array([0.22 * tilt, 0.20 * np.ones(speakers)])[:, :, None]
    )
    return rng.poisson(mean * training).astype(float)


@pytest.mark.slow
def test_the_interval_covers_the_true_difference_95_percent_of_the_time_over_speakers_and_seeds():
    """600 simulated studies in each of three regimes: seeds' spread dominant (30 speakers, 6%),
    both (60, 3%), speakers' alone (200, none). Counted once each, the two parts cover 93-97% of
    the time together; the speaker bootstrap alone (the seeds' part left out) would not."""
    truth, rng, covered, narrow = (
        0.22 / 0.2 * np.exp(0.1**2 / 2) - 1,
        np.random.default_rng(7),
        {},
        [],
    )
    for speakers, seed_sd in ((30, 0.06), (60, 0.03), (200, 0.0)):
        hits = []
        for _ in range(600):
            ours, theirs = simulated_study(rng, speakers, seed_sd)
            found = interval_of(ours, theirs, speakers)
            hits.append(found.low <= truth <= found.high)
            if seed_sd == 0.06:
                speakers_only = found.estimate + np.array([-1, 1]) * found.parts["speakers"]
                narrow.append(speakers_only[0] <= truth <= speakers_only[1])
        covered[speakers] = np.mean(hits)
    assert 0.93 <= np.mean(list(covered.values())) <= 0.97, covered
    assert all(0.91 <= share <= 0.98 for share in covered.values()), covered
    assert np.mean(narrow) < 0.85


def test_the_interval_of_a_table_is_that_of_its_speakers_errors():
    """relative_difference reads utterances.tsv's rows into speakers × seeds and no more."""
    ours, theirs = simulated_study(np.random.default_rng(11), 20, 0.03)
    names = [f"s{i:02d}" for i in range(20)]  # in the order speaker_errors sorts them
    rows = [
        pd.DataFrame(
            {
                "run": f"{system}{k}",
                "utt": names,
                "speaker": names,
                "words": 250,
                "lm_errors": errors[:, k],
                "greedy_errors": 0.0,
            }
        )
        for system, errors in (("a", ours), ("b", theirs))
        for k in range(3)
    ]
    found = relative_difference(pd.concat(rows), ["a0", "a1", "a2"], ["b0", "b1", "b2"])
    assert found == interval_of(ours, theirs, 20)


def test_only_a_single_seed_is_noted_as_leaving_trainings_spread_out():
    """The note "one seed" is written where a system has fewer than 2 seeds, and not for 2 or 3."""
    assert (
        Interval(0.1, 0.0, 0.2, 10, 2, (2, 3)).rests_on()
        == "10 test utterances of 2 speakers, 2 and 3 seeds"
    )
    assert (
        Interval(0.1, 0.0, 0.2, 10, 2, (1, 2))
        .rests_on()
        .endswith("1 and 2 seeds (training's spread not in the interval: one seed)")
    )


def test_an_utterance_without_a_speaker_is_its_own_and_the_runs_keep_their_order():
    """Kaldi's convention: an empty speaker is the utterance's own (two such utterances are two
    speakers, not one speaker "" nor none); the columns are the runs in the order given."""
    rows = pd.concat(
        [
            scored(run, errors, 5).assign(speaker=["s1", "s1", "", ""])
            for run, errors in (("a", [1, 2, 3, 4]), ("b", [0, 1, 0, 2]))
        ]
    )
    table, common = speaker_errors(rows, ["b", "a"], "lm_errors")
    assert table.columns.tolist() == ["b", "a"] and common == 4
    assert table.index.tolist() == ["s1", "u00002", "u00003"] and table.a.tolist() == [3, 3, 4]


def test_the_seed_variance_is_the_spread_of_the_seeds_totals_less_the_speaker_by_seed_residual():
    """By hand: speakers × seeds [[1, 6], [3, 4]] has seed totals 4 and 10 (variance 18) and a
    residual of ±1 in every cell (variance 4 on 1 × 1 degree of freedom): (18 − 2 × 4) / 2 seeds
    = 5. One speaker has no residual: [[1, 3]] gives var(1, 3) / 2 = 1. Two seeds count; one
    does not (no spread to measure)."""
    assert _seed_variance(np.array([[1.0, 6.0], [3.0, 4.0]])) == pytest.approx(5.0)
    assert _seed_variance(np.array([[1.0, 3.0]])) == pytest.approx(1.0)
    assert _seed_variance(np.array([[4.0], [7.0]])) == 0.0


def test_the_seeds_degrees_of_freedom_are_welch_satterthwaites_over_both_systems_on_the_log_scale():
    """Speakers alike (no speaker spread): system a's two seeds give a seed variance 4 on a total
    of 20 (log scale 4 / 20² = 0.01, 1 degree of freedom), b's three 16 / 3 on 40 (1 / 300, 2):
    the interval is t with (0.01 + 1/300)² / (0.01² / 1 + (1/300)² / 2) ≈ 1.68 degrees of freedom
    over a log variance of 0.01 + 1/300, about the ratio 0.5."""
    ours, theirs = np.array([[9.0, 11.0]] * 2), np.array([[18.0, 20.0, 22.0]] * 2)
    assert (_seed_variance(ours), _seed_variance(theirs)) == pytest.approx((4.0, 16 / 3))
    found, (a, b) = interval_of(ours, theirs, 2), (4 / 20**2, 16 / 3 / 40**2)
    df = (a + b) ** 2 / (a**2 / 1 + b**2 / 2)
    assert (
        _seed_freedom(ours, theirs, (ours.mean(1), theirs.mean(1)))
        == pytest.approx(df)
        == pytest.approx(1.6842105)
    )
    half = stats.t.ppf(0.975, df) * np.sqrt(a + b)
    assert (found.estimate, found.low, found.high) == pytest.approx(
        (-0.5, 0.5 * np.exp(-half) - 1, 0.5 * np.exp(half) - 1)
    )
    assert (
        found.parts["seeds"] == pytest.approx(0.5 * (np.exp(half) - 1))
        and found.parts["speakers"] < 1e-12
    )


def test_without_any_seed_spread_the_seeds_degrees_of_freedom_are_infinite():
    """One seed each, or a system whose seeds cannot disagree (it makes no error: its log-scale
    variance is 0 / 0): no seed variance is estimated, so none is read as t (infinite freedom)."""
    one, errors = np.array([[3.0], [5.0]]), np.array([[2.0, 4.0], [1.0, 3.0]])
    assert _seed_freedom(one, one, (one.mean(1), one.mean(1))) == np.inf
    with np.errstate(divide="ignore", invalid="ignore"):
        assert _seed_freedom(np.zeros((2, 2)), one, (np.zeros(2), one.mean(1))) == np.inf
    assert _seed_freedom(errors, one, (errors.mean(1), one.mean(1))) == pytest.approx(1.0)


def test_the_speakers_part_is_t_with_speakers_minus_one_freedom_over_the_log_ratios_variance():
    """Two speakers, one seed each: the interval is exp(log r ± t(0.975, 1) × s) − 1 where s² is the
    (n − 1) variance of the log ratio over the speaker resamples; one speaker has no speaker spread
    at all: exactly 0 (the variance of 2,000 equal draws of log(5/3), computed, is about 1e-32)."""
    ours, theirs = np.array([[12.0], [9.0]]), np.array([[10.0], [10.0]])
    drawn = np.log(_resampled([ours[:, 0], theirs[:, 0]], np.divide))
    half = stats.t.ppf(0.975, 1) * drawn.std(ddof=1)
    found = interval_of(ours, theirs, 2)
    assert (found.estimate, found.low, found.high) == pytest.approx(
        (0.05, 1.05 * np.exp(-half) - 1, 1.05 * np.exp(half) - 1)
    )
    assert found.parts == pytest.approx({"speakers": 1.05 * (np.exp(half) - 1), "seeds": 0.0})
    alone = interval_of(np.array([[5.0]]), np.array([[3.0]]), 1)
    assert alone.parts == {
        "speakers": 0.0,
        "seeds": 0.0,
    } and alone.low == alone.high == pytest.approx(2 / 3)


def test_the_interval_is_students_t_on_the_log_of_the_ratio():
    """A log variance of 1 on 1 degree of freedom spans exp(± t(0.975, 1)) = exp(± 12.71) about the
    ratio; no variance at all (plain zeros) leaves the ratio alone."""
    t1 = stats.t.ppf(0.975, 1)
    found = _t_interval(
        2.0, {"speakers": 1.0, "seeds": 0.0}, {"speakers": 1, "seeds": np.inf}, 9, 2, (1, 1)
    )
    assert t1 == pytest.approx(12.7062047) and (found.estimate, found.speakers, found.seeds) == (
        1.0,
        2,
        (1, 1),
    )
    assert (found.low, found.high) == pytest.approx((2 * np.exp(-t1) - 1, 2 * np.exp(t1) - 1))
    assert found.parts == pytest.approx({"speakers": 2 * (np.exp(t1) - 1), "seeds": 0.0})
    still = _t_interval(
        1.25, {"speakers": 0.0, "seeds": 0.0}, {"speakers": 0, "seeds": np.inf}, 1, 1, (1, 1)
    )
    assert (still.estimate, still.low, still.high) == pytest.approx((0.25, 0.25, 0.25))


def test_two_systems_without_a_single_error_have_an_undefined_difference_not_an_exception():
    """0 / 0 errors: the relative difference and both ends of its interval are NaN."""
    found = interval_of(np.zeros((3, 2)), np.zeros((3, 2)), 3)
    assert np.isnan([found.estimate, found.low, found.high]).all() and found.seeds == (2, 2)


def test_the_interval_is_computed_in_double_precision_whatever_the_tables_number_type():
    """Errors held as 32-bit floats give the interval of the same errors in 64-bit: means over 3
    seeds (5 / 3, 2 / 3) round differently in 32 bits, so each system's table is made 64-bit
    first."""
    per_seed = {"a": [[1, 2, 0], [2, 2, 1], [0, 1, 1]], "b": [[2, 1, 1], [1, 2, 3], [1, 0, 2]]}
    rows = pd.concat(
        [
            scored(f"{system}{k}", errors, 10)
            for system, seeds in per_seed.items()
            for k, errors in enumerate(seeds)
        ]
    )
    runs = (["a0", "a1", "a2"], ["b0", "b1", "b2"])
    wide = relative_difference(rows, *runs)
    assert relative_difference(rows.astype({"lm_errors": np.float32}), *runs) == wide


def voiced_study(rng, voices: int = 12, per_voice: int = 13, seeds: int = 3, words: int = 250):
    """`simulated_study`'s two systems, where the speakers are settings of `voices` voices (the
    built-in corpus's): system a's tilt (15%, log) is the voice's, shared by its speakers, each
    speaker with a difficulty of its own; seeds' spread 2%. Errors are speakers × seeds."""
    tilt = np.repeat(np.exp(rng.normal(0, 0.15, voices)), per_voice)
    difficulty = rng.gamma(4.0, 0.25, voices * per_voice)
    training = np.exp(rng.normal(0, 0.02, (2, 1, seeds)))
    mean = (
        words
        * difficulty[:, None]
        * np.array([0.22 * tilt, 0.20 * np.ones(voices * per_voice)])[:, :, None]
    )
    return rng.poisson(mean * training).astype(float)


def test_where_speakers_share_a_voice_only_the_interval_over_voices_covers():
    """12 voices of 13 speakers each, the systems' difference varying by voice: drawn by voice
    (each voice's errors summed), 400 simulated studies' intervals cover the true difference
    91-98% of the time (94.5% here); drawn by speaker, the 156 would pass for independent voices
    and cover far less (70%)."""
    truth, rng, by_voice, by_speaker = (
        0.22 / 0.2 * np.exp(0.15**2 / 2) - 1,
        np.random.default_rng(12),
        [],
        [],
    )
    for _ in range(400):
        ours, theirs = voiced_study(rng)
        voices = [errors.reshape(12, 13, -1).sum(1) for errors in (ours, theirs)]
        for hits, (a, b) in ((by_voice, voices), (by_speaker, (ours, theirs))):
            found = interval_of(a, b, len(ours))
            hits.append(found.low <= truth <= found.high)
    assert 0.91 <= np.mean(by_voice) <= 0.98 and np.mean(by_speaker) < 0.8, (
        np.mean(by_voice),
        np.mean(by_speaker),
    )


def test_a_table_naming_voices_is_drawn_by_voice_and_says_so():
    """Where utterances.tsv's rows carry a voice, its speakers' errors are summed per voice, and
    the interval says how many voices it rests on."""
    ours, theirs = voiced_study(np.random.default_rng(13), voices=4, per_voice=3)
    speakers = [f"s{i:02d}" for i in range(12)]  # in the order speaker_errors sorts them
    rows = pd.concat(
        [
            pd.DataFrame(
                {
                    "run": f"{system}{k}",
                    "utt": speakers,
                    "speaker": speakers,
                    "words": 250,
                    "voice": np.repeat(["v0", "v1", "v2", "v3"], 3),
                    "lm_errors": errors[:, k],
                    "greedy_errors": 0.0,
                }
            )
            for system, errors in (("a", ours), ("b", theirs))
            for k in range(3)
        ]
    )
    found = relative_difference(rows, ["a0", "a1", "a2"], ["b0", "b1", "b2"])
    by_voice = [errors.reshape(4, 3, -1).sum(1) for errors in (ours, theirs)]
    assert found == replace(interval_of(*by_voice, 12), drawn="voices") and found.speakers == 4
    assert found.rests_on() == "12 test utterances of 4 voices, 3 and 3 seeds"
    assert (
        relative_difference(
            rows.drop(columns="voice"), ["a0", "a1", "a2"], ["b0", "b1", "b2"]
        ).speakers
        == 12
    )
