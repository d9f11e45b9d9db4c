"""Each claim's verdict follows from the runs table by its written rule."""

import pandas as pd

from asrscale.claims import CLAIMS, NOT_MEASURED, NOT_REPRODUCED, REPRODUCED, verdicts


def runs(*rows) -> pd.DataFrame:
    """(algorithm, learners, seed, WER, time speedup) rows, modelled on one profile."""
    columns = ["algorithm", "learners", "seed", "wer", "time_speedup"]
    return pd.DataFrame(rows, columns=columns).assign(speedup_kind="modelled on x")


def verdict(table: pd.DataFrame, claim: str) -> str:
    found = verdicts(table)
    return found[found.claim.str.startswith(claim)].verdict.iloc[0]


SEQ = ("seq", 1, 1, 0.20, 1.0)


def test_every_claim_has_a_row_and_unmeasured_ones_say_why():
    table = verdicts(runs(SEQ))
    assert len(table) == len(CLAIMS) == 10
    assert all(v.startswith(NOT_MEASURED + ": ") and len(v) > len(NOT_MEASURED) + 5 for v in table.verdict)


def test_accuracy_claims_use_the_tolerance_and_the_spread_over_seeds():
    assert verdict(runs(SEQ, ("kavg", 4, 1, 0.205, 3.9)), "KAVG with 4") == REPRODUCED
    assert verdict(runs(SEQ, ("kavg", 4, 1, 0.25, 3.9)), "KAVG with 4") == NOT_REPRODUCED
    # 25% with a spread of ±5 points over two seeds is within SEQ's 20% + 1 point + 5 points
    spread = runs(SEQ, ("kavg", 4, 1, 0.20, 3.9), ("kavg", 4, 2, 0.30, 3.9))
    assert verdict(spread, "KAVG with 4") == REPRODUCED


def test_speedup_claims_need_ninety_percent_of_the_claimed_figure_and_no_loss():
    assert verdict(runs(SEQ, ("asgd", 4, 1, 0.20, 2.9)), "ASGD gives") == REPRODUCED
    assert verdict(runs(SEQ, ("asgd", 4, 1, 0.20, 2.8)), "ASGD gives") == NOT_REPRODUCED
    assert verdict(runs(SEQ, ("asgd", 4, 1, 0.40, 3.9)), "ASGD gives") == NOT_REPRODUCED
    assert verdict(runs(SEQ, ("hadpsgd", 64, 1, 0.2, 30.0)), "H-ADPSGD") == REPRODUCED
    assert verdict(runs(SEQ, ("kavg", 16, 1, 0.2, 5.6)), "adaptive KAVG") == REPRODUCED
    ma = runs(SEQ, ("ma", 16, 1, 0.3, 9.0))
    assert verdict(ma, "model averaging") == f"{NOT_MEASURED}: no MA run at 32 learners"
    assert verdict(pd.concat([ma, runs(("ma", 32, 1, 0.3, 16.0))]), "model averaging") == REPRODUCED


def test_asgd_against_kavg_at_every_common_learner_count():
    worse = runs(SEQ, ("asgd", 4, 1, 0.4, 2.0), ("kavg", 4, 1, 0.2, 3.8), ("asgd", 16, 1, 0.6, 3.0),
                 ("kavg", 16, 1, 0.25, 12.0))  # fmt: skip
    assert verdict(worse, "ASGD loses") == REPRODUCED
    assert verdict(pd.concat([worse, runs(("asgd", 64, 1, 0.2, 50.0), ("kavg", 64, 1, 0.3, 40.0))]),
                   "ASGD loses") == NOT_REPRODUCED  # fmt: skip
    assert verdict(runs(SEQ, ("asgd", 2, 1, 0.4, 1.5), ("kavg", 2, 1, 0.2, 1.9)), "ASGD loses").startswith(NOT_MEASURED)
