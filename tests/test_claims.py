"""Each claim's verdict follows from the runs table and the sweeps by its written rule."""

import pandas as pd
import pytest

from asrscale.analysis.claims import CLAIMS, NOT_DECIDED, NOT_MEASURED, NOT_REPRODUCED, REPRODUCED, verdicts
from asrscale.analysis.measures import convergence


def runs(*rows, converged: bool = True) -> pd.DataFrame:
    """(algorithm, learners, seed, WER, time speedup[, greedy WER]) rows of the algorithms as
    configured, modelled on one profile, converged (or not) after 1000 updates (SEQ reached the
    target in 500); greedy WER twice the WER with the LM unless given."""
    columns = ["algorithm", "learners", "seed", "wer", "time_speedup", "greedy_wer"]
    table = pd.DataFrame([row if len(row) == 6 else (*row, 2 * row[3]) for row in rows], columns=columns)
    table = table.assign(speedup_kind="modelled on x", variant="default")
    return table.assign(converged=converged, updates=1000, updates_to_target=500.0, last_epoch_gain=0.01,
                        target_dev_loss=1.0, final_dev_loss=1.0 if converged else 2.0, final_dev_ter=0.3)  # fmt: skip


NO_SWEEPS = pd.DataFrame(columns=["sweep", "algorithm", "learners", "value", "speedup_kind"])


def verdict(table: pd.DataFrame, claim: str, points: pd.DataFrame = NO_SWEEPS) -> str:
    found = verdicts(table, points)
    return found[found.claim.str.startswith(claim)].verdict.iloc[0]


SEQ = ("seq", 1, 1, 0.20, 1.0)


def test_every_claim_has_a_row_and_unmeasured_ones_say_why():
    table = verdicts(runs(SEQ), NO_SWEEPS)
    assert len(table) == len(CLAIMS) == 11
    assert all(v.startswith(NOT_MEASURED + ": ") and len(v) > len(NOT_MEASURED) + 5 for v in table.verdict)


def test_accuracy_claims_use_the_tolerance_and_the_spread_over_seeds():
    assert verdict(runs(SEQ, ("kavg", 4, 1, 0.205, 3.9)), "KAVG with 4") == REPRODUCED
    assert verdict(runs(SEQ, ("kavg", 4, 1, 0.25, 3.9)), "KAVG with 4") == NOT_REPRODUCED
    # 25% with a spread of ±5 points over two seeds is within SEQ's 20% + 1 point + 5 points
    spread = runs(SEQ, ("kavg", 4, 1, 0.20, 3.9), ("kavg", 4, 2, 0.30, 3.9))
    assert verdict(spread, "KAVG with 4") == REPRODUCED


def test_an_accuracy_claim_holds_only_where_the_lm_decode_and_the_greedy_decode_agree():
    """An LM that knows the test sentences flatters every acoustic model: 2.1% against SEQ's 2.0%
    with it, 11% against 7% greedily (what the memorising LM of the old built-in corpus did)."""
    seq = ("seq", 1, 1, 0.020, 1.0, 0.07)
    flattered = runs(seq, ("kavg", 4, 1, 0.021, 3.9, 0.11))
    assert verdict(flattered, "KAVG with 4") == f"{NOT_REPRODUCED}: holds with the LM only"
    assert "KAVG P=4: WER 2.1% (greedy 11.0%)" in verdicts(flattered, NO_SWEEPS).measured.str.cat()
    assert (
        verdict(runs(seq, ("kavg", 4, 1, 0.05, 3.9, 0.07)), "KAVG with 4") == f"{NOT_REPRODUCED}: holds greedily only"
    )
    assert verdict(runs(seq, ("kavg", 4, 1, 0.021, 3.9, 0.075)), "KAVG with 4") == REPRODUCED
    worse_with_the_lm_only = runs(seq, ("asgd", 4, 1, 0.10, 2.0, 0.08), ("kavg", 4, 1, 0.02, 3.8, 0.08))
    assert verdict(worse_with_the_lm_only, "ASGD loses") == f"{NOT_REPRODUCED}: holds with the LM only"


def test_speedup_claims_need_ninety_percent_of_the_claimed_figure_and_no_loss():
    assert verdict(runs(SEQ, ("asgd", 4, 1, 0.20, 2.9)), "ASGD gives") == REPRODUCED
    assert verdict(runs(SEQ, ("asgd", 4, 1, 0.20, 2.8)), "ASGD gives") == NOT_REPRODUCED
    assert verdict(runs(SEQ, ("asgd", 4, 1, 0.40, 3.9)), "ASGD gives") == NOT_REPRODUCED
    assert verdict(runs(SEQ, ("hadpsgd", 64, 1, 0.2, 30.0)), "H-ADPSGD") == REPRODUCED
    assert verdict(runs(SEQ, ("adpsgd", 32, 1, 0.2, 13.2)), "ADPSGD on 32") == REPRODUCED
    assert verdict(runs(SEQ, ("adpsgd", 32, 1, 0.2, 13.0)), "ADPSGD on 32") == NOT_REPRODUCED


def test_adaptive_kavg_must_beat_seq_as_cong17s_abstract_says():
    """ "better accuracies than sequential": below SEQ's WER beyond both spreads, by both measures."""
    assert verdict(runs(SEQ, ("kavg", 16, 1, 0.15, 5.6)), "adaptive KAVG") == REPRODUCED
    assert verdict(runs(SEQ, ("kavg", 16, 1, 0.2, 5.6)), "adaptive KAVG") == NOT_REPRODUCED  # matching is not beating
    assert verdict(runs(SEQ, ("kavg", 16, 1, 0.15, 5.0)), "adaptive KAVG") == NOT_REPRODUCED  # too slow
    assert (verdict(runs(SEQ, ("kavg", 16, 1, 0.15, 5.6, 0.45)), "adaptive KAVG")
            == f"{NOT_REPRODUCED}: holds with the LM only")  # fmt: skip


def test_su15s_speedups_are_over_ma_alone_as_it_measured_them_with_limited_accuracy_loss():
    """NG-SGD makes MA alone 4× slower than SEQ: 2.3× over SEQ at 16 learners is 9.2× over MA alone."""
    ma = runs(SEQ, ("ma", 1, 1, 0.2, 0.25), ("ma", 16, 1, 0.205, 2.3, 0.405))
    ma = ma.assign(own_speedup=ma.time_speedup / 0.25)
    assert verdict(ma, "model averaging") == f"{NOT_MEASURED}: no MA run at 32 learners (su15's baseline is MA alone)"
    at_32 = pd.concat([ma, runs(("ma", 32, 1, 0.21, 4.0, 0.405)).assign(own_speedup=16.0)])
    assert verdict(at_32, "model averaging") == REPRODUCED
    assert "MA P=16: WER 20.5% (greedy 40.5%), 2.30× against SEQ, 9.20× against MA alone" in verdicts(
        at_32, NO_SWEEPS).measured.str.cat()  # fmt: skip
    assert verdict(at_32.assign(own_speedup=at_32.time_speedup), "model averaging") == NOT_REPRODUCED
    lossy = at_32.assign(wer=at_32.wer.where(at_32.learners != 32, 0.3))
    assert verdict(lossy, "model averaging") == f"{NOT_REPRODUCED}: holds greedily only"
    late = at_32.assign(converged=at_32.learners != 32)
    assert verdict(late, "model averaging").startswith(NOT_DECIDED)
    alone_missing = at_32[at_32.learners > 1]
    assert verdict(alone_missing, "model averaging").startswith(f"{NOT_MEASURED}: no MA run at 1 learner ")


def test_asgd_against_kavg_at_every_common_learner_count():
    worse = runs(SEQ, ("asgd", 4, 1, 0.4, 2.0), ("kavg", 4, 1, 0.2, 3.8), ("asgd", 16, 1, 0.6, 3.0),
                 ("kavg", 16, 1, 0.25, 12.0))  # fmt: skip
    assert verdict(worse, "ASGD loses") == REPRODUCED
    assert verdict(pd.concat([worse, runs(("asgd", 64, 1, 0.2, 50.0), ("kavg", 64, 1, 0.3, 40.0))]),
                   "ASGD loses") == NOT_REPRODUCED  # fmt: skip
    assert verdict(runs(SEQ, ("asgd", 2, 1, 0.4, 1.5), ("kavg", 2, 1, 0.2, 1.9)), "ASGD loses").startswith(NOT_MEASURED)


def sweep(algorithm: str, setting: str, *points, learners=4) -> pd.DataFrame:
    """(value, seed, final dev loss, training seconds) points of one sweep; global batch from the
    value for a batch sweep."""
    table = pd.DataFrame(points, columns=["value", "seed", "final_dev_loss", "train_s"])
    return table.assign(
        sweep=setting, algorithm=algorithm, learners=learners, speedup_kind="modelled on x", target_dev_loss=1.0,
        global_batch=table.value * learners, converged=table.final_dev_loss < 2.0, updates=1000, last_epoch_gain=0.05,
        final_dev_ter=0.3,
    )  # fmt: skip


def test_an_optimal_period_is_an_inner_value_better_than_both_ends_beyond_the_spread():
    points = sweep("ma", "frames_per_job", (1, 1, 1.5, 9), (2, 1, 1.2, 9), (4, 1, 1.4, 9))
    assert verdict(runs(SEQ), "there is an optimal", points) == REPRODUCED
    seeds = pd.concat([points, sweep("ma", "frames_per_job", (2, 2, 1.6, 9))])  # 1.2 and 1.6: spread ±0.2
    assert verdict(runs(SEQ), "there is an optimal", seeds) == NOT_REPRODUCED
    ends = sweep("ma", "frames_per_job", (1, 1, 1.1, 9), (2, 1, 1.2, 9), (4, 1, 1.4, 9))
    assert verdict(runs(SEQ), "there is an optimal", ends) == NOT_REPRODUCED
    assert verdict(runs(SEQ), "there is an optimal", points.iloc[:2]).startswith(NOT_MEASURED)


def test_overlap_and_natural_gradient_compare_the_two_settings_of_their_sweeps():
    overlap = sweep("ma", "train.prefetch", (4, 1, 1.0, 100.0), (0, 1, 1.0, 130.0))
    assert verdict(runs(SEQ), "overlapping", overlap) == REPRODUCED
    assert verdict(runs(SEQ), "overlapping", overlap.iloc[:1]).startswith(NOT_MEASURED)
    natural = sweep("ma", "natural_gradient", (True, 1, 1.3, 9), (False, 1, 1.2, 9))
    assert verdict(runs(SEQ), "NG-SGD", natural) == NOT_REPRODUCED


def test_larger_batch_needs_adpsgd_to_converge_at_three_times_the_batch_ssgd_converges_at():
    ssgd = sweep("ssgd", "train.batch_size", (8, 1, 0.9, 9), (32, 1, 1.3, 9), (96, 1, 2.0, 9), learners=16)
    adpsgd = sweep("adpsgd", "train.batch_size", (8, 1, 0.9, 9), (32, 1, 0.95, 9), (96, 1, 1.5, 9), learners=16)
    assert verdict(runs(SEQ), "ADPSGD converges", pd.concat([ssgd, adpsgd])) == REPRODUCED  # 512 >= 3 x 128
    at_4 = pd.concat([ssgd, adpsgd.assign(learners=4, global_batch=adpsgd.value * 4)])
    assert "needs the sweeps at 16 learners or more" in verdict(runs(SEQ), "ADPSGD converges", at_4)
    adpsgd.loc[1, "final_dev_loss"] = 1.1
    assert verdict(runs(SEQ), "ADPSGD converges", pd.concat([ssgd, adpsgd])) == NOT_REPRODUCED
    ssgd.final_dev_loss = 0.5  # converges at every batch swept: the sweep says nothing
    assert verdict(runs(SEQ), "ADPSGD converges", pd.concat([ssgd, adpsgd])).startswith(NOT_MEASURED)


def test_an_accuracy_claim_is_decided_only_on_converged_runs():
    late = pd.concat([runs(SEQ), runs(("kavg", 4, 1, 0.9, 3.9), converged=False)])
    found = verdict(late, "KAVG with 4")
    late_run = "KAVG P=4 (1000 updates per learner, dev loss 2, its last epoch 1.0% below the best before, dev TER 30%)"
    assert found.startswith(NOT_DECIDED) and late_run in found
    assert "which SEQ reached in 500 updates" in found
    unsettled = runs(SEQ, ("kavg", 4, 1, 0.2, 3.9))  # SEQ still learning
    unsettled = unsettled.assign(last_epoch_gain=0.05, converged=unsettled.algorithm != "seq")
    assert "SEQ did not converge (in its last epoch its dev loss fell 5.0%, dev TER 30%)" in verdict(
        unsettled, "KAVG with 4"
    )
    # ASGD that does not converge where KAVG does is less accurate; KAVG that does not: undecided
    asgd_late = pd.concat([runs(SEQ, ("kavg", 4, 1, 0.2, 3.8)), runs(("asgd", 4, 1, 0.6, 2.0), converged=False)])
    assert verdict(asgd_late, "ASGD loses") == REPRODUCED
    kavg_late = pd.concat([runs(SEQ, ("asgd", 4, 1, 0.6, 2.0)), runs(("kavg", 4, 1, 0.2, 3.8), converged=False)])
    assert verdict(kavg_late, "ASGD loses").startswith(NOT_DECIDED)
    natural = sweep("ma", "natural_gradient", (True, 1, 2.1, 9), (False, 1, 2.3, 9))  # NG-SGD's did not converge
    assert verdict(runs(SEQ), "NG-SGD", natural).startswith(NOT_DECIDED)


def test_a_diverged_run_is_described_as_diverged_and_decides_nothing():
    table = runs(SEQ, ("kavg", 4, 1, 0.2, 3.9), ("asgd", 4, 1, float("nan"), float("nan")))
    table["diverged"] = ["", "", "epoch 1, step 4: loss above 4 x the untrained model's dev loss"]
    table.loc[2, "converged"] = False
    found = verdicts(table, NO_SWEEPS).set_index("claim")
    measured = found.measured[found.index.str.startswith("ASGD gives")].iloc[0]
    assert "ASGD P=4: diverged" in measured and "nan" not in measured
    assert found.verdict[found.index.str.startswith("ASGD gives")].iloc[0].startswith(NOT_DECIDED)


def test_seq_standing_for_other_algorithms_is_one_run_in_its_convergence():
    """SEQ's run reported as SSGD and KAVG at one learner too: its epochs count once (its last
    epoch's gain was read as 0 between copies of one row, every SEQ "converged"), and the updates
    to the target are each run's own (they were looked up by row labels that every run repeats)."""
    rows = [("seq", "seq"), ("ssgd", "seq"), ("kavg", "seq"), ("kavg2", "kavg")]
    table = pd.DataFrame([{"algorithm": a, "trained_as": t, "run": f"runs/{t}", "target_dev_loss": 0.8,
                           "time_to_target_s": 2.0, "final_dev_ter": 0.2} for a, t in rows])  # fmt: skip
    losses = {"seq": [1.2, 0.75], "kavg": [0.7, 0.6]}  # KAVG reaches the target (0.8) in epoch 1, SEQ in epoch 2
    epochs = pd.concat([pd.DataFrame({"run": f"runs/{t}", "algorithm": a, "epoch": [1, 2], "step": [100, 100],
                                      "dev_loss": losses[t]}) for a, t in rows])  # fmt: skip
    table = convergence(table, epochs, plateau=0.02, plateau_max_dev_ter=0.5)
    seq = table[table.trained_as == "seq"]
    assert (seq.updates == 200).all() and (seq.last_epoch_gain == (1.2 - 0.75) / 1.2).all()
    assert (seq.updates_to_target == 200).all() and not seq.converged.any()  # still improving by 38%
    kavg = table[table.trained_as == "kavg"]
    assert (kavg.updates_to_target == 100).all() and kavg.converged.all()  # reached the target
    assert (kavg.converged_by == "target").all() and (seq.converged_by == "").all()


def test_a_run_converges_where_its_dev_loss_stops_falling_while_it_transcribes():
    """Every run, not SEQ's alone, converges on a plateau: its last epoch less than 2% below the best
    before it (a bump between does not count as progress); a model at CTC's blank-only plateau (dev
    TER near 1) has a flat dev loss too, and has not converged."""
    losses = {"seq": [0.40, 0.30, 0.296], "kavg": [0.50, 0.45, 0.48, 0.446], "blank": [2.90, 2.89, 2.88],
              "adpsgd": [0.60, 0.50, 0.45]}  # fmt: skip
    ter = {"seq": 0.1, "kavg": 0.2, "blank": 0.98, "adpsgd": 0.3}
    table = pd.DataFrame([{"algorithm": run, "trained_as": "seq" if run == "seq" else "kavg", "run": run,
                           "target_dev_loss": 0.31, "time_to_target_s": float("nan"), "final_dev_ter": ter[run]}
                          for run in losses])  # fmt: skip
    epochs = pd.concat([pd.DataFrame({"run": run, "epoch": range(1, len(loss) + 1), "step": 10, "dev_loss": loss})
                        for run, loss in losses.items()])  # fmt: skip
    table = convergence(table, epochs, plateau=0.02, plateau_max_dev_ter=0.5).set_index("run")
    assert table.converged.to_dict() == {"seq": True, "kavg": True, "blank": False, "adpsgd": False}
    assert table.last_epoch_gain.kavg == pytest.approx((0.45 - 0.446) / 0.45)  # against the best before, not 0.48
    assert table.converged_by.to_dict() == {"seq": "plateau", "kavg": "plateau", "blank": "", "adpsgd": ""}
