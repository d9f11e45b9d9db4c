"""The answer a report opens with (asrscale.analysis.answer): at each learner count the algorithm
that reaches the target soonest, only where the rules decide it reaches it, and why not the
others; "none reaches the target" where none does."""

import pandas as pd
import pytest
from test_claims import SEQ, runs, scores

from asrscale.analysis.answer import NONE, answer


def answered(table: pd.DataFrame, target_wer=None) -> pd.DataFrame:
    table = table.assign(train_s=100.0 / table.time_speedup, trained_as=table.algorithm)
    return answer(table, scores(table), target_wer)


def test_the_fastest_of_the_algorithms_that_match_seq_is_recommended_with_its_time():
    """At 4 learners KAVG (20%, 3.9×) and SSGD (20%, 3.5×) both match SEQ's 20%: KAVG is faster
    and recommended, with its time, speedup, band and device-hours; ASGD (30%) does not reach it;
    at 16 none does."""
    table = runs(
        SEQ,
        ("kavg", 4, 1, 0.20, 3.9),
        ("ssgd", 4, 1, 0.20, 3.5),
        ("asgd", 4, 1, 0.30, 3.8),
        ("kavg", 16, 1, 0.30, 12.0),
    )
    found = answered(table).set_index("learners")
    at_4 = found.loc[4]
    assert at_4.algorithm == "kavg"
    assert at_4.time_s == pytest.approx(100.0 / 3.9) and at_4.speedup == pytest.approx(3.9)
    assert (at_4.speedup_low, at_4.speedup_high) == pytest.approx((3.9 * 0.8, 3.9 * 1.25))
    assert at_4.device_hours == pytest.approx(4 * 100.0 / 3.9 / 3600)
    assert at_4.rests_on == "modelled on x (the cost model's band), accuracy measured"
    assert at_4.others.startswith(
        "SSGD P=4: reaches it, slower; ASGD P=4: does not reach it (WER +"
    )
    assert found.loc[16].algorithm == NONE
    assert found.loc[16].others.startswith("KAVG P=16: does not reach it (WER +5")


def test_an_algorithm_the_rules_do_not_decide_is_named_with_why_and_never_recommended():
    """One seed a system: nothing is decided, so nothing is recommended, each with its reason."""
    table = runs(SEQ, ("kavg", 4, 1, 0.20, 3.9), alike=1)
    found = answered(table).iloc[0]
    assert found.algorithm == NONE
    assert found.others.startswith("KAVG P=4: not decided: needs 3 seeds (WER ")
    assert found.target == "SEQ's test WER within 3% (relative)"


def test_a_target_wer_of_the_users_is_reached_where_the_interval_lies_below_it():
    table = runs(SEQ, ("kavg", 4, 1, 0.20, 3.9), ("asgd", 4, 1, 0.30, 3.8))
    found = answered(table, target_wer=0.25).iloc[0]
    assert found.algorithm == "kavg" and found.target.startswith("a test WER below 25.0%")
    assert "ASGD P=4: does not reach it" in found.others
    late = runs(SEQ, ("kavg", 4, 1, 0.20, 3.9)).assign(converged=False, converged_by="budget")
    still = answered(late, target_wer=0.10).iloc[0]  # 20% with no bound known: could reach 10%
    assert still.algorithm == NONE and "the interval spans the target" in still.others
