"""The rules that decide a claim's half, against answers worked out by hand: each accuracy rule on
intervals at its edges (an interval decides, never its point estimate), the speed rule's Student's t
interval over seeds and its thresholds, and how several outcomes make one."""

import numpy as np
import pandas as pd
import pytest

from asrscale.analysis import halves
from asrscale.analysis.bootstrap import Interval, relative_difference
from asrscale.analysis.halves import (
    NOT_DECIDED,
    NOT_REPRODUCED,
    NOT_TESTABLE,
    REPRODUCED,
    Half,
    Rule,
    better,
    blocked,
    combine,
    compare,
    matches,
    reaches,
    speed_interval,
    together,
    unequal_epochs,
    worse,
)


def interval(low: float, high: float, estimate: float | None = None) -> Interval:
    return Interval((low + high) / 2 if estimate is None else estimate, low, high, 1000)


@pytest.mark.parametrize(
    "low, high, outcome",
    [
        (-0.02, 0.029, REPRODUCED),
        (-0.02, 0.03, NOT_DECIDED),
        (0.029, 0.05, NOT_DECIDED),
        (0.03, 0.05, NOT_REPRODUCED),
        (-0.10, -0.05, REPRODUCED),
        (0.05, 0.10, NOT_REPRODUCED),
    ],
)
def test_matching_holds_below_the_margin_and_fails_at_or_above_it(low, high, outcome):
    assert matches().outcome(interval(low, high)) == outcome
    assert matches().threshold == 0.03 and matches(0.034).threshold == 0.034


@pytest.mark.parametrize(
    "low, high, outcome",
    [
        (0.031, 0.08, REPRODUCED),
        (0.03, 0.08, NOT_DECIDED),
        (0.0, 0.031, NOT_DECIDED),
        (-0.02, 0.03, NOT_REPRODUCED),
    ],
)
def test_worse_holds_above_the_margin_and_fails_at_or_below_it(low, high, outcome):
    assert worse().outcome(interval(low, high)) == outcome


def test_an_interval_decides_not_its_point_estimate():
    """A point estimate beyond the threshold with an interval across it decides nothing, whichever
    side the rule is on; an estimate on the other side with the interval beyond decides."""
    wide = interval(
        0.01, 0.09, estimate=0.05
    )  # +5%: beyond 3% for "worse", beyond 3% for "matches"
    assert worse().outcome(wide) == NOT_DECIDED and matches().outcome(wide) == NOT_DECIDED
    skewed = interval(
        0.032, 0.09, estimate=0.02
    )  # an estimate below 3% whose whole interval is above it
    assert worse().outcome(skewed) == REPRODUCED and matches().outcome(skewed) == NOT_REPRODUCED
    assert better().outcome(interval(-0.04, 0.01, estimate=-0.03)) == NOT_DECIDED


@pytest.mark.parametrize(
    "low, high, outcome",
    [
        (-0.05, -0.001, REPRODUCED),
        (-0.05, 0.0, NOT_DECIDED),
        (0.0, 0.02, NOT_REPRODUCED),
        (-0.001, 0.02, NOT_DECIDED),
    ],
)
def test_better_is_an_interval_wholly_below_zero(low, high, outcome):
    assert better().outcome(interval(low, high)) == outcome
    assert (
        better().margin == 0.03
    )  # its power is judged against the 3% margin, though its threshold is 0


def test_the_speed_interval_is_students_t_over_the_seeds():
    """3 seeds of 3, 4 and 5: mean 4, standard deviation 1 (n − 1), t(0.975, 2) = 4.3027, so the
    half-width is 4.3027 / √3 = 2.4841."""
    assert speed_interval(pd.Series([3.0, 4.0, 5.0])) == pytest.approx(
        (4.0, 1.5159, 6.4841), abs=1e-4
    )
    two = speed_interval(pd.Series([2.0, 4.0]))  # t(0.975, 1) = 12.706, sd √2, half-width 12.706
    assert two == pytest.approx((3.0, 3.0 - 12.7062, 3.0 + 12.7062), abs=1e-3)
    mean, low, high = speed_interval(pd.Series([7.0]))
    assert mean == 7.0 and pd.isna(low) and pd.isna(high)


def measured_runs(speedups, learners=4, column="time_speedup", **changes) -> pd.DataFrame:
    """Runs measured on GPUs, one seed each speedup."""
    table = pd.DataFrame(
        {
            "seed": range(1, len(speedups) + 1),
            column: speedups,
            "learners": learners,
            "world": "mpi",
            "device": "cuda",
            "speedup_kind": "measured",
            "parameters": 2e6,
            "gpu": "V100",
            "hostname": "n1",
        }
    )
    return table.assign(
        **{f"{column}_low": table[column], f"{column}_high": table[column]}, **changes
    )


@pytest.mark.parametrize(
    "claimed, outcome",
    [
        (3.0, REPRODUCED),
        (3.06, NOT_DECIDED),
        (3.1, NOT_DECIDED),
        (3.65, NOT_REPRODUCED),
        (3.6, NOT_DECIDED),
    ],
)
def test_a_claimed_speedup_is_reached_where_the_interval_lies_at_or_above_90_percent_of_it(
    claimed, outcome
):
    """2.9, 3.0 and 3.1: mean 3.0, interval 2.7516-3.2484 (t over 3 seeds). 90% of 3.0 is 2.7 (below
    the interval: reproduced); of 3.06, 2.754 (inside it, just: a normal interval, ±0.113, or
    the seeds' spread without n − 1 would have reproduced); of 3.65, 3.285 (above it)."""
    half = reaches(measured_runs([2.9, 3.0, 3.1]), claimed)
    assert half.outcome == outcome, half.why
    assert (
        half.measured
        == "speedup 3.00× (95% interval 2.75-3.25×) over 3 seeds, 2.00 M parameters on 4 × V100 "
        "(n1)"
    )
    assert f"{0.9 * claimed:.3g}×" in half.why


def test_a_speed_half_needs_three_seeds_on_gpus_and_a_claim_within_p():
    assert halves.testable_speed(measured_runs([3.0, 3.1, 3.2]), "time_speedup", 3.2) is None
    two = halves.testable_speed(measured_runs([3.0, 3.1]), "time_speedup", 3.2)
    assert (two.outcome, two.reason) == (NOT_DECIDED, "needs 3 seeds")
    on_cpus = halves.testable_speed(
        measured_runs([3.0, 3.1, 3.2], device="cpu"), "time_speedup", 3.2
    )
    assert on_cpus.reason == "needs GPUs" and "measured on CPU ranks" in on_cpus.why
    modelled = measured_runs(
        [3.0, 3.1, 3.2], world="simulated", device="cuda", speedup_kind="modelled on v100"
    )
    assert (
        "these runs are modelled (modelled on v100: 3.10× (band 3.00-3.20×))"
        in halves.testable_speed(modelled, "time_speedup", 3.2).why
    )
    # 90% of 4.4× is 3.96×, which 4 learners can give; 90% of 4.5× is 4.05×, which they cannot
    assert halves.testable_speed(measured_runs([4.0, 4.1, 4.2]), "time_speedup", 4.4) is None
    beyond = halves.testable_speed(
        measured_runs([4.0, 4.1, 4.2], column="own_speedup"), "own_speedup", 4.5
    )
    assert (beyond.outcome, beyond.reason) == (NOT_TESTABLE, "beyond 4 learners")
    # a measured one beyond P decides nothing either (its clock is suspect), whatever the claim
    found = halves.testable_speed(measured_runs([4.6, 4.7, 4.8]), "time_speedup", 3.2)
    assert (found.outcome, found.reason, found.measured) == (
        NOT_TESTABLE,
        "beyond 4 learners",
        "measured: 4.70×",
    )
    assert found.why == (
        "4.70× measured for the same epochs is beyond what 4 learners can give: a clock that ran "
        "slow for its baseline (a busy machine) or a calibration taken on one; time them again"
    )
    # to a target, fewer epochs can make a speedup beyond P: the bound is for the same epochs alone
    to_accuracy = measured_runs([6.0, 6.1, 6.2], column="accuracy_speedup")
    assert halves.testable_speed(to_accuracy, "accuracy_speedup", 6.1) is None


@pytest.mark.parametrize(
    "outcomes, combined",
    [
        ([REPRODUCED, REPRODUCED], REPRODUCED),
        ([REPRODUCED, NOT_REPRODUCED], NOT_REPRODUCED),
        ([NOT_TESTABLE, NOT_REPRODUCED], NOT_REPRODUCED),
        ([NOT_DECIDED, NOT_REPRODUCED], NOT_REPRODUCED),
        ([REPRODUCED, NOT_TESTABLE], NOT_DECIDED),
        ([NOT_TESTABLE, NOT_TESTABLE], NOT_TESTABLE),
        ([REPRODUCED, NOT_DECIDED], NOT_DECIDED),
        ([NOT_TESTABLE], NOT_TESTABLE),
        ([REPRODUCED], REPRODUCED),
    ],
)
def test_a_claim_is_reproduced_only_where_every_half_is_and_not_where_any_half_fails(
    outcomes, combined
):
    assert combine(outcomes) == combined


def test_halves_together_say_each_half_and_the_reason_of_the_outcome_they_share():
    at_16 = Half(NOT_DECIDED, "at 16: spans", "MA P=16", "the interval spans the threshold")
    at_32 = Half(REPRODUCED, "at 32: below", "MA P=32")
    both = together([at_16, at_32])
    assert both == Half(
        NOT_DECIDED,
        "at 16: spans; at 32: below",
        "MA P=16; MA P=32",
        "the interval spans the threshold",
    )
    failed = together([at_16, Half(NOT_REPRODUCED, "at 32: above", "", "")])
    assert (failed.outcome, failed.reason, failed.measured) == (NOT_REPRODUCED, "", "MA P=16")


def test_blocked_names_each_group_that_diverged_and_a_run_still_gaining_blocks_nothing():
    converged = pd.DataFrame({"seed": [1], "converged": [True], "diverged": [""]})
    late = pd.DataFrame(
        {"seed": [2], "converged": [False], "diverged": [""], "converged_by": ["budget"]}
    )
    gone = pd.DataFrame(
        {"seed": [1, 2], "converged": [False, True], "diverged": ["epoch 2: not finite", ""]}
    )
    assert blocked(("SEQ", converged)) is None
    assert blocked(("SEQ", converged), ("KAVG P=4", late)) is None
    assert blocked(("KAVG P=4", late), ("ASGD P=4", gone)) == Half(
        NOT_DECIDED, "ASGD P=4 diverged in 1 of 2 runs: a lower rate", reason="diverged"
    )
    assert blocked(("ASGD P=4", gone), ("MA P=4", gone.iloc[:1])).why == (
        "ASGD P=4 diverged in 1 of 2 runs; MA P=4 diverged in 1 of 1 runs: a lower rate"
    )


def test_each_rule_is_its_side_threshold_margin_and_words():
    assert matches() == Rule("below", 0.03, 0.03, "matches SEQ's accuracy")
    assert worse() == Rule("above", 0.03, 0.03, "less accurate than SEQ")
    assert better() == Rule("below", 0.0, 0.03, "more accurate than SEQ")
    assert worse(0.05, "poor") == Rule("above", 0.05, 0.05, "poor") and better("x").says == "x"


def test_a_speedup_at_exactly_90_percent_of_the_claim_reaches_it_and_each_outcome_says_why():
    exact = reaches(
        measured_runs([4.5, 4.5, 4.5], learners=8), 5.0
    )  # 90% of 5× is 4.5× to the last bit
    assert (exact.outcome, exact.why) == (REPRODUCED, "the interval reaches 4.5× (90% of 5×)")
    below = reaches(measured_runs([4.0, 4.1, 4.2], learners=8), 5.0)
    assert (below.outcome, below.why) == (NOT_REPRODUCED, "the interval is below 4.5× (90% of 5×)")
    spans = reaches(measured_runs([4.0, 4.5, 5.0], learners=8), 5.0)
    assert (spans.why, spans.reason) == ("the interval spans 4.5×", "the interval spans the claim")
    on_hosts = measured_runs([4.5, 4.5, 4.5], learners=8).assign(hostname=["n1", "n2", "n3"])
    assert reaches(on_hosts, 5.0, what="speedup over MA alone").measured == (
        "speedup over MA alone 4.50× (95% interval 4.50-4.50×) over 3 seeds, 2.00 M parameters on "
        "8 × V100 (n1)"
    )


def test_a_modelled_speedup_is_said_with_its_band_and_a_measured_one_without():
    runs = measured_runs([3.0, 3.2, 3.4]).assign(
        time_speedup_low=[2.5, 2.9, 3.1], time_speedup_high=[3.5, 3.6, 4.0]
    )
    assert halves.modelled(runs, "time_speedup") == "measured: 3.20×"
    modelled = runs.assign(speedup_kind="modelled on v100")
    assert halves.modelled(modelled, "time_speedup") == "modelled on v100: 3.20× (band 2.50-4.00×)"


def test_an_untestable_speed_half_says_why_in_full():
    beyond = halves.testable_speed(measured_runs([4.0, 4.1, 4.2]), "time_speedup", 4.5)
    assert (beyond.why, beyond.measured) == (
        "4.05× (90% of 4.5×) for the same epochs is beyond what 4 learners can give",
        "measured: 4.10×",
    )
    on_cpus = halves.testable_speed(
        measured_runs([3.0, 3.1, 3.2], device="cpu"), "time_speedup", 3.2
    )
    assert (on_cpus.why, on_cpus.measured) == (
        "a speed claim is decided by 4 GPUs measured (real ranks, wall clock, 3 seeds or more); "
        "these runs are measured on CPU ranks (measured: 3.10×), shown for information",
        "measured: 3.10×",
    )
    two = halves.testable_speed(measured_runs([3.0, 3.1]), "time_speedup", 3.2)
    assert (two.why, two.measured) == ("needs 3 seeds measured, has 2", "measured: 3.05×")


def seeded(utterances: pd.DataFrame, seeds: int = 3) -> pd.DataFrame:
    """Each run's scores as those of `seeds` seeds alike (`<run>1`, `<run>2`, ...: no seeds'
    spread)."""
    return pd.concat([utterances.assign(run=utterances.run + str(k)) for k in range(1, seeds + 1)])


def system(name: str, seeds: int = 3) -> pd.DataFrame:
    return pd.DataFrame({"run": [f"{name}{k}" for k in range(1, seeds + 1)]})


def test_an_accuracy_half_says_its_threshold_and_the_side_its_interval_lies_on():
    """SEQ's errors and a system's 10% more on every utterance: +10% to the last digit, the interval
    a point; matching fails above +3.0%, "worse" holds above it, and the reference is named."""
    errors = np.random.default_rng(5).integers(1, 9, 400).astype(float)
    utterances = seeded(
        pd.DataFrame(
            {
                "run": ["seq"] * 400 + ["kavg"] * 400,
                "utt": [f"u{i}" for i in range(400)] * 2,
                "words": 10,
                "lm_errors": np.concatenate([errors, 1.1 * errors]),
                "greedy_errors": np.concatenate([errors, 1.1 * errors]),
            }
        )
    )
    seq, kavg = system("seq"), system("kavg")
    failed = compare(utterances, kavg, seq, matches())
    assert (failed.outcome, failed.why) == (
        NOT_REPRODUCED,
        "not matches SEQ's accuracy: the interval lies above +3.0%",
    )
    assert failed.measured == (
        "WER +10.0% (95% interval +10.0% to +10.0%) relative to SEQ's with the LM, +10.0% (95% "
        "interval +10.0% to +10.0%) greedily, over 400 test utterances of 400 speakers, 3 and 3 "
        "seeds"
    )
    held = compare(utterances, kavg, seq, worse(0.05), "MA alone")
    assert (held.outcome, held.why) == (
        REPRODUCED,
        "less accurate than SEQ: the interval lies above +5.0%",
    )
    assert "relative to MA alone's with the LM" in held.measured
    assert (
        compare(utterances, seq, kavg, worse()).why
        == "not less accurate than SEQ: the interval lies below +3.0%"
    )


def test_an_accuracy_half_needs_three_seeds_of_each_system():
    """With two seeds of SEQ the same 10% decides nothing: training's spread is not measured."""
    errors = np.random.default_rng(5).integers(1, 9, 400).astype(float)
    utterances = pd.DataFrame(
        {
            "run": ["seq"] * 400 + ["kavg"] * 400,
            "utt": [f"u{i}" for i in range(400)] * 2,
            "words": 10,
            "lm_errors": np.concatenate([errors, 1.1 * errors]),
            "greedy_errors": np.concatenate([errors, 1.1 * errors]),
        }
    )
    half = compare(seeded(utterances), system("kavg"), system("seq", 2), matches())
    assert (half.outcome, half.reason) == (NOT_DECIDED, "needs 3 seeds")
    assert half.why == (
        "needs 3 seeds of each system, has the system 3, SEQ 2: with fewer, training's spread is "
        "not in the interval"
    )
    assert half.measured.endswith("over 400 test utterances of 400 speakers, 3 and 2 seeds")


def small_test_set() -> pd.DataFrame:
    """80 utterances each its own speaker, two systems' errors drawn apart, 3 seeds alike."""
    errors = np.random.default_rng(6).integers(0, 6, (2, 80)).astype(float)
    return seeded(
        pd.DataFrame(
            {
                "run": ["a"] * 80 + ["b"] * 80,
                "utt": [f"u{i}" for i in range(80)] * 2,
                "words": 5,
                "lm_errors": errors.reshape(-1),
                "greedy_errors": errors.reshape(-1),
            }
        )
    )


def test_a_test_set_too_small_says_how_many_utterances_would_narrow_its_interval_to_the_margin():
    """The speakers' part shrinks as one over the root of the speakers: n × (its half-width /
    margin)²."""
    utterances = small_test_set()
    half = compare(utterances, system("a"), system("b"), matches())
    wide = relative_difference(utterances, system("a").run, system("b").run)
    assert half.reason == "the test set is too small"
    needed = (
        80 * (wide.parts["speakers"] / 0.03) ** 2
    )  # one utterance a speaker, as this test set's
    assert (
        f"about {needed:,.0f} test utterances of about {needed:,.0f} speakers would narrow it"
        in half.why
    )


def test_an_interval_wide_by_its_seeds_says_more_seeds_would_narrow_it():
    """Seeds of one system 20% apart in total on a large test set: the test set is not the cause."""
    errors = np.random.default_rng(10).integers(1, 9, 2000).astype(float)
    scores = pd.concat(
        [
            pd.DataFrame(
                {
                    "run": f"a{k}",
                    "utt": [f"u{i}" for i in range(2000)],
                    "words": 10,
                    "lm_errors": errors * f,
                    "greedy_errors": errors * f,
                }
            )
            for k, f in enumerate((0.9, 1.0, 1.1), 1)
        ]
    )
    scores = pd.concat([scores, seeded(scores[scores.run == "a2"].assign(run="b"))])
    half = compare(scores, system("a"), system("b"), matches())
    assert (half.outcome, half.reason) == (NOT_DECIDED, "too few seeds")
    assert (
        "the seeds' spread makes most of it: more seeds would narrow it to the margin" in half.why
    )


def test_a_speed_half_needs_every_run_on_a_gpu_of_its_own_and_says_the_models_size():
    mixed = measured_runs([3.0, 3.1, 3.2]).assign(device=["cuda", "cuda", "cpu"])
    assert halves.testable_speed(mixed, "time_speedup", 3.2).reason == "needs GPUs"
    assert (
        halves.measured_on(measured_runs([3.0], parameters=1_005_001))
        == "1.01 M parameters on 4 × V100 (n1)"
    )


def test_a_configuration_tuned_at_its_grids_edge_decides_nothing_after_one_that_diverged():
    """A better rate may lie beyond the edge: the half is not decided, each such group named."""
    converged = pd.DataFrame(
        {
            "seed": [1, 2],
            "converged": [True, True],
            "diverged": ["", ""],
            "tuning": ["tuned at the edge (its highest rate)"] * 2,
        }
    )
    inside = converged.assign(tuning="tuned")
    assert blocked(("SEQ", inside), ("KAVG P=4", inside.assign(tuning="not tuned"))) is None
    edge = blocked(
        ("SEQ", inside),
        ("KAVG P=4", converged),
        ("ASGD P=4", converged.assign(tuning="tuned at the edge (its lowest rate)")),
    )
    assert edge == Half(
        NOT_DECIDED,
        "KAVG P=4 was tuned at the edge (its highest rate); ASGD P=4 was tuned at the "
        "edge (its lowest rate): a wider grid (study.tuning.lr_factors)",
        reason="tuned at the edge",
    )
    gone = converged.assign(diverged=["epoch 2: not finite", ""])
    assert blocked(("KAVG P=4", gone)).reason == "diverged"
    still = inside.assign(converged=False, converged_by="budget")
    assert blocked(("KAVG P=4", converged), ("SEQ", still)).reason == "tuned at the edge"


def test_newbobs_stop_compares_runs_only_where_their_epochs_hold_alike_updates():
    """SEQ at batch 8 makes 2,500 updates an epoch of 20,000 utterances, a learner of 64 at batch 8
    39: newbob's per-epoch thresholds would stop the one of fewer sooner. Within 1.25× (seeds'
    shards), or under a schedule of the same epochs for both, the half goes on."""
    seq = pd.DataFrame(
        {
            "seed": [1, 2],
            "converged": True,
            "diverged": "",
            "schedule": "newbob",
            "updates": [25_000.0, 25_000.0],
            "epochs": [10, 10],
        }
    )
    wide = seq.assign(updates=[624.0, 702.0], epochs=[16, 18])
    unequal = blocked(("SEQ", seq), ("H-ADPSGD P=64", wide))
    assert unequal == Half(
        NOT_DECIDED,
        "newbob decides at each epoch's end, and these runs' epochs hold unequal "
        "updates a learner (SEQ 2,500, H-ADPSGD P=64 39): its thresholds stop the runs of fewer "
        "sooner; train.schedule: exponential, the same epochs for every run",
        reason="newbob's epochs unequal",
    )
    assert (
        blocked(
            ("SEQ", seq.assign(schedule="exponential")),
            ("H-ADPSGD P=64", wide.assign(schedule="exponential")),
        )
        is None
    )
    assert (
        blocked(("SEQ", seq), ("KAVG P=4", seq.assign(updates=[2_000.0 * 10] * 2))) is None
    )  # exactly 1.25×
    assert blocked(("SEQ", seq), ("KAVG P=4", seq.assign(updates=[1_999.0 * 10] * 2))).reason == (
        "newbob's epochs unequal"
    )
    assert unequal_epochs(("SEQ", seq)) == ""


def late(seeds: int = 3, bound: float = 0.06, converged: int = 0, why: str = "unfinished"):
    """A system's runs, `converged` of its `seeds` converged, the others bounded at `bound`."""
    done = [True] * converged + [False] * (seeds - converged)
    return system("x", seeds).assign(
        converged=done,
        converged_by=["plateau" if d else why for d in done],
        gain_bound=[0.0 if d else bound for d in done],
    )


def test_a_systems_bound_is_the_mean_of_its_seeds_a_converged_seed_zero_and_unknown_unbounded():
    assert halves.bound_of(late(3, 0.06)) == pytest.approx(0.06)
    assert halves.bound_of(late(3, 0.06, converged=1)) == pytest.approx(0.04)
    assert halves.bound_of(late(3, 0.06, converged=3)) == 0.0
    assert halves.bound_of(late(3, 0.06).drop(columns="gain_bound")) == 1.0
    assert halves.bound_of(late(3, 5.0)) == 1.0
    assert halves.bound_of(system("a")) == 0.0  # a table without convergence: as decided


def test_the_interval_moves_each_end_by_its_sides_bound_towards_a_flip():
    """d's interval +20% to +40%: the system 10% better at most moves the low end to
    1.2 × 0.9 − 1 = +8%, the reference 20% better the high end to 1.4 / 0.8 − 1 = +75%."""
    moved = halves.shifted(interval(0.20, 0.40), 0.10, 0.20)
    assert (moved.low, moved.high) == pytest.approx((0.08, 0.75))
    assert halves.shifted(interval(0.2, 0.4), 0.0, 1.0).high == np.inf


@pytest.mark.parametrize(
    "rule, low, high, gains, outcome, words",
    [
        # ASGD +37% to +58% behind a converged SEQ, bounded at 6%: still worse beyond the margin
        (worse(), 0.37, 0.58, (0.06, 0.0), REPRODUCED, "lies above +3.0%"),
        # bounded at 40%: it could reach −18%, which spans the margin
        (worse(), 0.37, 0.58, (0.40, 0.0), NOT_DECIDED, "could reach -17.8% to +58.0%"),
        # a converged reference: more training of the system only lowers its WER
        (matches(), -0.05, 0.02, (0.30, 0.0), REPRODUCED, "more training of A could only"),
        # the reference unconverged could still gain: +2% / (1 − 0.02) = +4.1%
        (matches(), -0.05, 0.02, (0.0, 0.02), NOT_DECIDED, "could reach -5.0% to +4.1%"),
        # not matching by far: the reference's bound cannot help the system
        (matches(), 0.20, 0.30, (0.05, 0.5), NOT_REPRODUCED, "lies above +3.0%"),
        # worse beyond the margin against an unconverged reference: its gains only widen the gap
        (worse(), 0.37, 0.58, (0.0, 0.30), REPRODUCED, "more training of B could only"),
        # not worse, the reference unconverged: 1.02 / 0.7 − 1 = +45.7% could flip it
        (worse(), -0.10, 0.02, (0.0, 0.30), NOT_DECIDED, "could reach -10.0% to +45.7%"),
    ],
)
def test_an_unconverged_side_is_decided_on_the_interval_its_bound_leaves(
    monkeypatch, rule, low, high, gains, outcome, words
):
    """Every outcome of `settle`: decided as measured, decided because the end that decides does
    not move (the unconverged side could only strengthen it), not decided: under-trained."""
    found = Interval(
        (low + high) / 2, low, high, 800, 40, (3, 3), {"speakers": 0.01, "seeds": 0.01}
    )
    monkeypatch.setattr(halves, "relative_difference", lambda *args: found)
    system_a, system_b = (
        late(3, gains[0], converged=3 * (not gains[0])),
        late(3, gains[1], converged=3 * (not gains[1])),
    )
    half = compare(pd.DataFrame(), system_a, system_b, rule, "B", "A")
    assert half.outcome == outcome
    assert words in half.why
    if outcome == NOT_DECIDED:
        assert half.reason == "under-trained"
    unconverged = [name for name, gain in zip("AB", gains) if gain]
    for name in unconverged:
        assert f"{name} has not converged in 3 of 3 seeds" in half.why


def test_an_unconverged_system_says_its_seeds_why_and_bound():
    runs = late(3, 0.062, converged=1).assign(converged_by=["plateau", "unfinished", "budget"])
    assert halves.unconverged("ASGD P=4", runs, 0.0413) == (
        "ASGD P=4 has not converged in 2 of 3 seeds (its budget ran out while it still gained, its "
        "schedule stopped above 2% of its peak rate); what it could still gain is bounded at 4.1%"
    )


def test_an_accuracy_half_decided_one_way_with_the_lm_and_another_greedily_says_both():
    """With the LM the system makes 10% more errors on every utterance; greedily the same as SEQ."""
    errors = np.random.default_rng(7).integers(1, 9, 300).astype(float)
    utterances = seeded(
        pd.DataFrame(
            {
                "run": ["seq"] * 300 + ["kavg"] * 300,
                "utt": [f"u{i}" for i in range(300)] * 2,
                "words": 10,
                "lm_errors": np.concatenate([errors, 1.1 * errors]),
                "greedy_errors": np.concatenate([errors, errors]),
            }
        )
    )
    half = compare(utterances, system("kavg"), system("seq"), matches())
    assert half.why == (
        "not matches SEQ's accuracy: the interval lies above +3.0%; greedily reproduced (+0.0% "
        "(95% interval +0.0% to +0.0%))"
    )


def test_a_half_width_at_the_margin_is_not_too_small_and_one_beyond_it_says_its_width_in_full():
    utterances, a, b = small_test_set(), system("a"), system("b")
    wide = relative_difference(utterances, a.run, b.run)
    at_margin = compare(
        utterances, a, b, Rule("below", 0.03, wide.parts["speakers"], "matches SEQ's accuracy")
    )
    assert (at_margin.outcome, at_margin.reason) == (
        NOT_DECIDED,
        "the interval spans the threshold",
    )
    assert at_margin.why == "the interval spans +3.0%"
    beyond, needed = compare(utterances, a, b, matches()), 80 * (wide.parts["speakers"] / 0.03) ** 2
    assert beyond.why == (
        f"the interval spans +3.0%; its half-width {100 * wide.half_width:.1f}% is wider than the "
        f"margin 3%: about {needed:,.0f} test utterances of about {needed:,.0f} speakers would "
        "narrow it to the margin"
    )


def test_a_claim_at_exactly_p_for_the_same_epochs_is_within_reach():
    """90% of 10× is 9×: 9 learners can give it (a claim beyond P is one above it, not at it)."""
    assert (
        halves.testable_speed(measured_runs([8.0, 8.1, 8.2], learners=9), "time_speedup", 10.0)
        is None
    )


def test_why_an_interval_is_wide_is_said_only_beyond_the_margin_and_a_decided_half_has_no_reason(
    monkeypatch,
):
    """Binary-exact intervals: a half-width of exactly the margin (0.25), the speakers' part within
    it, spans the threshold and says no more; a decided half's reason is the empty string."""
    exact = Interval(0.125, -0.125, 0.375, 800, 40, (3, 3), {"speakers": 0.125, "seeds": 0.2})
    monkeypatch.setattr(
        halves, "relative_difference", lambda utterances, runs, reference, measure: exact
    )
    rule = Rule("below", 0.25, 0.25, "matches SEQ's accuracy")
    at_margin = compare(pd.DataFrame(), system("a"), system("b"), rule)
    assert (at_margin.outcome, at_margin.reason, at_margin.why) == (
        NOT_DECIDED,
        "the interval spans the threshold",
        "the interval spans +25.0%",
    )
    decided = compare(
        pd.DataFrame(), system("a"), system("b"), Rule("below", 0.5, 0.25, "matches SEQ's accuracy")
    )
    assert (decided.outcome, decided.reason) == (REPRODUCED, "")
