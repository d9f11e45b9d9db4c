"""Each claim's verdict follows from the runs table and the sweeps by its written rule, in its
study's own words: each rule holds in a fabricated study made to hold it and fails in one made to
fail it."""

import pandas as pd
import pytest

from asrscale.analysis.claims import (
    CLAIMS,
    NOT_MEASURED,
    NOT_REPRODUCED,
    REPRODUCED,
    UNDER_TRAINED,
    WITHIN_BAND,
    verdicts,
)
from asrscale.analysis.measures import convergence

BAND = (0.8, 1.25)  # a modelled speedup's band in these studies: measured 0.8 to 1.25 times it


def runs(*rows, converged: bool = True, band: tuple = BAND) -> pd.DataFrame:
    """(algorithm, learners, seed, WER, time speedup[, greedy WER]) rows of the algorithms as
    configured, modelled on one profile, converged (or stopped by their budget) after 1000
    updates (SEQ reached the target in 500); greedy WER twice the WER with the LM unless given;
    the speedup to accuracy and over P=1 as the time speedup unless set after."""
    columns = ["algorithm", "learners", "seed", "wer", "time_speedup", "greedy_wer"]
    table = pd.DataFrame([row if len(row) == 6 else (*row, 2 * row[3]) for row in rows], columns=columns)
    table = table.assign(speedup_kind="modelled on x", variant="default", converged=converged, updates=1000,
                         updates_to_target=500.0, last_epoch_gain=0.01 if converged else 0.05, last_rate=1.0,
                         stopped="" if converged else "its 9 epochs done", target_dev_loss=1.0,
                         best_dev_loss=1.0 if converged else 2.0, best_dev_ter=0.3, target_epochs_ratio=1.0,
                         target_speedup=table.time_speedup, own_speedup=table.time_speedup)  # fmt: skip
    return with_band(table, band)


def with_band(table: pd.DataFrame, band: tuple = BAND) -> pd.DataFrame:
    """The speedups' bands, as gather makes them from the cost model's fit."""
    return table.assign(**{f"{s}_{edge}": table[s] * factor for s in ("time_speedup", "target_speedup", "own_speedup")
                           for edge, factor in zip(("low", "high"), band)})  # fmt: skip


NO_SWEEPS = pd.DataFrame(columns=["sweep", "algorithm", "learners", "value", "speedup_kind"])


def verdict(table: pd.DataFrame, claim: str, points: pd.DataFrame = NO_SWEEPS) -> str:
    found = verdicts(table, points)
    return found[found.claim.str.startswith(claim)].verdict.iloc[0]


def why(table: pd.DataFrame, claim: str, points: pd.DataFrame = NO_SWEEPS) -> str:
    found = verdicts(table, points)
    return found[found.claim.str.startswith(claim)].why.iloc[0]


SEQ = ("seq", 1, 1, 0.20, 1.0)


def test_every_claim_has_a_row_and_unmeasured_ones_say_why():
    table = verdicts(runs(SEQ), NO_SWEEPS)
    assert len(table) == len(CLAIMS) == 11
    assert all(v.startswith(NOT_MEASURED + ": ") and len(v) > len(NOT_MEASURED) + 5 for v in table.verdict)
    assert table.why.str.len().min() > 5


def test_the_accuracy_tolerance_is_relative_and_widened_by_the_spread_over_seeds():
    """3% of SEQ's 20% is 0.6 points: 20.5% matches, 21% does not."""
    assert verdict(runs(SEQ, ("kavg", 4, 1, 0.205, 3.9)), "KAVG with 4") == REPRODUCED
    assert verdict(runs(SEQ, ("kavg", 4, 1, 0.21, 3.9)), "KAVG with 4") == NOT_REPRODUCED
    # 25% with a spread of ±5 points over two seeds is within SEQ's 20% × 1.03 + 5 points
    spread = runs(SEQ, ("kavg", 4, 1, 0.20, 3.9), ("kavg", 4, 2, 0.30, 3.9))
    assert verdict(spread, "KAVG with 4") == REPRODUCED


def test_an_accuracy_claim_holds_only_where_the_lm_decode_and_the_greedy_decode_agree():
    """An LM that knows the test sentences flatters every acoustic model: 2.05% against SEQ's 2.0%
    with it, 11% against 7% greedily (what the memorising LM of the old built-in corpus did)."""
    seq = ("seq", 1, 1, 0.020, 1.0, 0.07)
    flattered = runs(seq, ("kavg", 4, 1, 0.0205, 3.9, 0.11))
    assert verdict(flattered, "KAVG with 4") == f"{NOT_REPRODUCED}: holds with the LM only"
    assert "KAVG P=4: WER 2.1% (greedy 11.0%)" in verdicts(flattered, NO_SWEEPS).measured.str.cat()
    greedy_only = runs(seq, ("kavg", 4, 1, 0.05, 3.9, 0.07))
    assert verdict(greedy_only, "KAVG with 4") == f"{NOT_REPRODUCED}: holds greedily only"
    assert verdict(runs(seq, ("kavg", 4, 1, 0.0205, 3.9, 0.0715)), "KAVG with 4") == REPRODUCED


def test_a_speed_half_is_reached_by_its_bands_lower_edge_missed_by_its_upper_and_undecided_between():
    """zhang13's 3.2× at 4: a modelled 4.1× is reached (band 3.28-5.1), 2.5× missed (upper edge 3.1),
    3.5× undecided (band 2.8-4.4); a measured speedup has no band."""
    assert verdict(runs(SEQ, ("asgd", 4, 1, 0.20, 4.1)), "ASGD gives") == REPRODUCED
    assert verdict(runs(SEQ, ("asgd", 4, 1, 0.20, 2.5)), "ASGD gives") == NOT_REPRODUCED
    assert verdict(runs(SEQ, ("asgd", 4, 1, 0.20, 3.5)), "ASGD gives") == WITHIN_BAND
    assert "3.2× lies within the speedup's band (2.80-4.38×)" in why(runs(SEQ, ("asgd", 4, 1, 0.20, 3.5)), "ASGD gives")
    measured = runs(SEQ, ("asgd", 4, 1, 0.20, 3.3), band=(1.0, 1.0)).assign(speedup_kind="measured")
    assert verdict(measured, "ASGD gives") == REPRODUCED
    # a failing half decides, whatever the other: too slow and too inaccurate both fail
    assert verdict(runs(SEQ, ("asgd", 4, 1, 0.40, 4.1)), "ASGD gives") == NOT_REPRODUCED


def test_h_adpsgd_is_held_to_the_40x_of_zhang19bs_abstract_with_its_own_timings_beside():
    assert verdict(runs(SEQ, ("hadpsgd", 64, 1, 0.2, 52.0)), "H-ADPSGD") == REPRODUCED  # band 41.6-65
    assert verdict(runs(SEQ, ("hadpsgd", 64, 1, 0.2, 31.0)), "H-ADPSGD") == NOT_REPRODUCED  # band up to 38.75
    measured = verdicts(runs(SEQ, ("hadpsgd", 64, 1, 0.2, 52.0)), NO_SWEEPS).measured.str.cat()
    assert "32× (one week on one V100) to 37× (192 h at batch 256)" in measured
    assert verdict(runs(SEQ, ("adpsgd", 32, 1, 0.2, 18.5)), "ADPSGD on 32") == REPRODUCED
    assert verdict(runs(SEQ, ("adpsgd", 32, 1, 0.2, 11.0)), "ADPSGD on 32") == NOT_REPRODUCED


def seeds(algorithm, learners, wers, speedup, **changes):
    """Runs of one configuration over seeds 1, 2, 3 ..."""
    return runs(*((algorithm, learners, seed, wer, speedup) for seed, wer in enumerate(wers, 1))).assign(**changes)


SEQ_3 = seeds("seq", 1, [0.20, 0.21, 0.20], 1.0)


def test_adaptive_kavg_beats_seq_over_three_seeds_at_six_times_to_accuracy():
    """cong17: 6.1× to SEQ's accuracy (time to the target dev loss), better WER than SEQ, over 3
    seeds, at 20 learners; at 16-19 it says so; the same-epochs speedup does not decide."""
    fast = with_band(seeds("kavg", 20, [0.15, 0.16, 0.15], 12.0).assign(target_speedup=8.0, target_epochs_ratio=1.4))
    assert verdict(pd.concat([SEQ_3, fast]), "adaptive KAVG") == REPRODUCED
    assert "in 1.4× SEQ's epochs" in verdicts(pd.concat([SEQ_3, fast]), NO_SWEEPS).measured.str.cat()
    slow_to_accuracy = with_band(fast.assign(target_speedup=4.0))  # 12× an epoch, but 4× to SEQ's accuracy
    assert verdict(pd.concat([SEQ_3, slow_to_accuracy]), "adaptive KAVG") == NOT_REPRODUCED
    matching = with_band(fast.assign(wer=[0.20, 0.21, 0.20], greedy_wer=[0.4, 0.42, 0.4]))  # matching is not beating
    assert verdict(pd.concat([SEQ_3, matching]), "adaptive KAVG") == NOT_REPRODUCED
    one_seed = pd.concat([SEQ_3, fast[fast.seed == 1]])
    needs = f"{NOT_MEASURED}: needs 3 seeds of KAVG at 20 and of SEQ to say better (has 1)"
    assert verdict(one_seed, "adaptive KAVG") == needs
    at_16 = with_band(fast.assign(learners=16))
    assert "(at 16 learners: no run at 20)" in verdicts(pd.concat([SEQ_3, at_16]), NO_SWEEPS).measured.str.cat()


def test_asgd_is_judged_on_its_own_overhead_and_accuracy_with_kavg_beside():
    """cong17: "even with 4 GPUs, the overhead is significant, and the accuracies achieved are poor":
    efficiency below 0.75 by its band's upper edge, and WER above SEQ's beyond the tolerance."""
    poor = runs(SEQ, ("asgd", 4, 1, 0.30, 2.0), ("kavg", 4, 1, 0.21, 3.8))  # efficiency 0.4-0.625
    assert verdict(poor, "ASGD's overhead") == REPRODUCED
    assert "(KAVG: KAVG P=4" in verdicts(poor, NO_SWEEPS).measured.str.cat()
    efficient = runs(SEQ, ("asgd", 4, 1, 0.30, 3.9))  # efficiency 0.78-1.2: no significant overhead
    assert verdict(efficient, "ASGD's overhead") == NOT_REPRODUCED
    accurate = runs(SEQ, ("asgd", 4, 1, 0.20, 2.0))
    assert verdict(accurate, "ASGD's overhead") == NOT_REPRODUCED
    assert verdict(runs(SEQ, ("asgd", 4, 1, 0.30, 2.7)), "ASGD's overhead") == WITHIN_BAND  # 0.54-0.84
    assert verdict(runs(SEQ, ("asgd", 2, 1, 0.4, 1.5)), "ASGD's overhead").startswith(NOT_MEASURED)


def ma_at(*rows, own_scale: float = 4.0) -> pd.DataFrame:
    """MA's runs: (learners, WER, speedup over MA alone); NG-SGD makes MA alone 4× slower than SEQ."""
    table = runs(*(("ma", p, 1, wer, own / own_scale) for p, wer, own in rows)).assign(
        own_speedup=[own for _, _, own in rows])  # fmt: skip
    return with_band(table)


def test_su15s_speedups_and_its_accuracy_loss_are_both_against_ma_alone():
    """su15 compared MA with its own one-GPU run on both counts: a speedup of 12× and 22× over MA
    alone (bands from 9.6× and 17.6×) with WER 15.0% and 15.1% against MA alone's 14.7% (within
    su15's own 3.4%): reproduced, even though SEQ (WER 20%) is far worse than MA."""
    good = pd.concat([runs(SEQ), ma_at((1, 0.147, 1.0), (16, 0.150, 12.0), (32, 0.151, 22.0))])
    assert verdict(good, "model averaging") == REPRODUCED
    assert "MA P=16: WER 15.0% (greedy 30.0%), 12.00× (band 9.60-15.00×) against MA alone" in verdicts(
        good, NO_SWEEPS).measured.str.cat()  # fmt: skip
    # the same loss against SEQ would pass too, but su15's own loss against MA alone fails at 15.5%
    lossy = pd.concat([runs(SEQ), ma_at((1, 0.147, 1.0), (16, 0.150, 12.0), (32, 0.155, 22.0))])
    assert verdict(lossy, "model averaging") == NOT_REPRODUCED
    slow = pd.concat([runs(SEQ), ma_at((1, 0.147, 1.0), (16, 0.150, 7.0), (32, 0.151, 22.0))])
    assert verdict(slow, "model averaging") == NOT_REPRODUCED
    alone_missing = pd.concat([runs(SEQ), ma_at((16, 0.150, 12.0), (32, 0.151, 22.0))])
    assert verdict(alone_missing, "model averaging").startswith(f"{NOT_MEASURED}: no MA run at 1 learner ")


def test_an_accuracy_claim_is_not_decided_on_a_run_stopped_by_its_budget():
    late = pd.concat([runs(SEQ), runs(("kavg", 4, 1, 0.9, 3.9), converged=False)])
    assert verdict(late, "KAVG with 4") == UNDER_TRAINED
    said = why(late, "KAVG with 4")
    assert "KAVG P=4 stopped by its budget after 1000 updates a learner (its 9 epochs done" in said
    assert "SEQ reached the target dev loss 1 in 500 updates" in said
    seq_late = runs(SEQ, ("kavg", 4, 1, 0.2, 3.9)).assign(converged=[False, True], stopped=["its 9 epochs done", ""])
    assert verdict(seq_late, "KAVG with 4") == UNDER_TRAINED and "SEQ P=1 stopped by its budget" in why(
        seq_late, "KAVG with 4")  # fmt: skip
    # a speed half that fails decides even where accuracy cannot be
    slow_and_late = pd.concat([runs(SEQ), runs(("asgd", 4, 1, 0.9, 2.0), converged=False)])
    assert verdict(slow_and_late, "ASGD gives") == NOT_REPRODUCED


def sweep(algorithm: str, setting: str, *points, learners=4) -> pd.DataFrame:
    """(value, seed, best dev loss, training seconds) points of one sweep, one epoch each; global
    batch from the value for a batch sweep."""
    table = pd.DataFrame(points, columns=["value", "seed", "best_dev_loss", "train_s"])
    return table.assign(
        sweep=setting, algorithm=algorithm, learners=learners, speedup_kind="modelled on x", target_dev_loss=1.0,
        global_batch=table.value * learners, converged=table.best_dev_loss < 2.0, updates=1000, last_epoch_gain=0.01,
        last_rate=1.0, stopped="", best_dev_ter=0.3, epochs=1,
    )  # fmt: skip


def test_an_optimal_period_is_an_inner_value_better_than_both_ends_beyond_the_spread():
    points = sweep("ma", "frames_per_job", (1, 1, 1.5, 9), (2, 1, 1.2, 9), (4, 1, 1.4, 9))
    assert verdict(runs(SEQ), "there is an optimal", points) == REPRODUCED
    seeds_ = pd.concat([points, sweep("ma", "frames_per_job", (2, 2, 1.6, 9))])  # 1.2 and 1.6: spread ±0.2
    assert verdict(runs(SEQ), "there is an optimal", seeds_) == NOT_REPRODUCED
    ends = sweep("ma", "frames_per_job", (1, 1, 1.1, 9), (2, 1, 1.2, 9), (4, 1, 1.4, 9))
    assert verdict(runs(SEQ), "there is an optimal", ends) == NOT_REPRODUCED
    assert verdict(runs(SEQ), "there is an optimal", points.iloc[:2]).startswith(NOT_MEASURED)


def test_rosc17s_saving_is_decided_by_its_size_not_its_sign():
    """54.9% less time: a saving of 50% reproduces it, one of 2% (a saving all the same) does not."""
    assert verdict(runs(SEQ), "MPI ranks with data loading", sweep("ma", "train.prefetch", (4, 1, 1.0, 50.0),
                                                                    (0, 1, 1.0, 100.0))) == REPRODUCED  # fmt: skip
    small = sweep("ma", "train.prefetch", (4, 1, 1.0, 98.0), (0, 1, 1.0, 100.0))
    assert verdict(runs(SEQ), "MPI ranks with data loading", small) == NOT_REPRODUCED
    assert "2.0% against the claimed 54.9%" in why(runs(SEQ), "MPI ranks with data loading", small)
    assert verdict(runs(SEQ), "MPI ranks", small.iloc[:1]).startswith(NOT_MEASURED)


def test_natural_gradient_compares_the_two_settings_of_its_sweep():
    natural = sweep("ma", "natural_gradient", (True, 1, 1.3, 9), (False, 1, 1.2, 9))
    assert verdict(runs(SEQ), "NG-SGD", natural) == NOT_REPRODUCED
    better = sweep("ma", "natural_gradient", (True, 1, 1.1, 9), (False, 1, 1.5, 9))
    assert verdict(runs(SEQ), "NG-SGD", better) == REPRODUCED
    late = sweep("ma", "natural_gradient", (True, 1, 2.1, 9), (False, 1, 2.3, 9))  # NG-SGD's did not converge
    assert verdict(runs(SEQ), "NG-SGD", late) == UNDER_TRAINED


def test_larger_batch_needs_adpsgd_to_converge_at_three_times_the_batch_ssgd_converges_at():
    ssgd = sweep("ssgd", "train.batch_size", (8, 1, 0.9, 9), (32, 1, 1.3, 9), (96, 1, 2.0, 9), learners=16)
    adpsgd = sweep("adpsgd", "train.batch_size", (8, 1, 0.9, 9), (32, 1, 0.95, 9), (96, 1, 1.5, 9), learners=16)
    assert verdict(runs(SEQ), "ADPSGD converges", pd.concat([ssgd, adpsgd])) == REPRODUCED  # 512 >= 3 x 128
    at_4 = pd.concat([ssgd, adpsgd.assign(learners=4, global_batch=adpsgd.value * 4)])
    assert "needs the sweeps at 16 learners or more" in verdict(runs(SEQ), "ADPSGD converges", at_4)
    adpsgd.loc[1, "best_dev_loss"] = 1.1
    assert verdict(runs(SEQ), "ADPSGD converges", pd.concat([ssgd, adpsgd])) == NOT_REPRODUCED
    ssgd.best_dev_loss = 0.5  # converges at every batch swept: the sweep says nothing
    assert verdict(runs(SEQ), "ADPSGD converges", pd.concat([ssgd, adpsgd])).startswith(NOT_MEASURED)


def test_a_diverged_run_is_described_as_diverged_and_decides_nothing():
    table = runs(SEQ, ("kavg", 4, 1, 0.2, 3.9), ("asgd", 4, 1, float("nan"), float("nan")))
    table["diverged"] = ["", "", "epoch 1, step 4: loss above 4 x the untrained model's dev loss"]
    table.loc[2, "converged"] = False
    found = verdicts(table, NO_SWEEPS).set_index("claim")
    measured = found.measured[found.index.str.startswith("ASGD gives")].iloc[0]
    assert "ASGD P=4: diverged" in measured and "nan" not in measured
    assert found.verdict[found.index.str.startswith("ASGD gives")].iloc[0] != REPRODUCED


def convergence_of(losses: dict, rates: dict | None = None, ter: dict | None = None, target: float = 0.31):
    """The convergence of runs whose epochs had these dev losses (and last learning rates, a share
    of a peak of 1; dev TERs of their best models), each trained as KAVG but "seq"."""
    table = pd.DataFrame([{"algorithm": run, "trained_as": "seq" if run == "seq" else "kavg", "run": run,
                           "target_dev_loss": target, "time_to_target_s": float("nan"), "peak_lr": 1.0,
                           "best_dev_ter": (ter or {}).get(run, 0.2)} for run in losses])  # fmt: skip
    epochs = pd.concat([pd.DataFrame({"run": run, "epoch": range(1, len(loss) + 1), "step": 10, "dev_loss": loss,
                                      "lr": (rates or {}).get(run, 1.0)}) for run, loss in losses.items()])  # fmt: skip
    return convergence(table, epochs, plateau=0.02, plateau_max_dev_ter=0.5).set_index("run")


def test_a_run_converges_where_its_dev_loss_stops_falling_while_its_rate_could_still_move_it():
    """Every run, not SEQ's alone, converges on a plateau: its last epoch less than 2% below the best
    before it (a bump between does not count as progress), at a rate at least a tenth of its
    peak; a model at CTC's blank-only plateau (dev TER near 1) has a flat dev loss too, and has
    not converged, nor has one whose rate had decayed to 1.7% of its peak (×0.6 an epoch for 9
    epochs: SSGD at 4 learners levelled off at 1.375 against SEQ's 0.804 that way)."""
    losses = {"seq": [0.40, 0.30, 0.296], "kavg": [0.50, 0.45, 0.48, 0.446], "blank": [2.90, 2.89, 2.88],
              "adpsgd": [0.60, 0.50, 0.45], "decayed": [1.5, 1.38, 1.375]}  # fmt: skip
    table = convergence_of(losses, rates={"decayed": 0.6**8}, ter={"blank": 0.98})
    assert table.converged.to_dict() == {"seq": True, "kavg": True, "blank": False, "adpsgd": False, "decayed": False}
    assert table.last_epoch_gain.kavg == pytest.approx((0.45 - 0.446) / 0.45)  # against the best before, not 0.48
    assert table.converged_by.to_dict() == {"seq": "plateau", "kavg": "plateau", "blank": "budget",
                                            "adpsgd": "budget", "decayed": "budget"}  # fmt: skip
    assert table.last_rate.decayed == pytest.approx(0.0168, rel=1e-2)
    at_a_tenth = convergence_of({"decayed": [1.5, 1.38, 1.375]}, rates={"decayed": 0.1})
    assert at_a_tenth.converged.decayed  # a tenth of the peak still moves it: its plateau counts


def test_seq_standing_for_other_algorithms_is_one_run_in_its_convergence():
    """SEQ's run reported as SSGD and KAVG at one learner too: its epochs count once (its last
    epoch's gain was read as 0 between copies of one row, every SEQ "converged"), and the updates
    to the target are each run's own (they were looked up by row labels that every run repeats)."""
    rows = [("seq", "seq"), ("ssgd", "seq"), ("kavg", "seq"), ("kavg2", "kavg")]
    table = pd.DataFrame([{"algorithm": a, "trained_as": t, "run": f"runs/{t}", "target_dev_loss": 0.8,
                           "time_to_target_s": 2.0, "best_dev_ter": 0.2, "peak_lr": 1.0} for a, t in rows])  # fmt: skip
    losses = {"seq": [1.2, 0.75], "kavg": [0.7, 0.6]}  # KAVG reaches the target (0.8) in epoch 1, SEQ in epoch 2
    epochs = pd.concat([pd.DataFrame({"run": f"runs/{t}", "algorithm": a, "epoch": [1, 2], "step": [100, 100],
                                      "dev_loss": losses[t], "lr": 1.0}) for a, t in rows])  # fmt: skip
    table = convergence(table, epochs, plateau=0.02, plateau_max_dev_ter=0.5)
    seq = table[table.trained_as == "seq"]
    assert (seq.updates == 200).all() and (seq.last_epoch_gain == (1.2 - 0.75) / 1.2).all()
    assert (seq.updates_to_target == 200).all() and not seq.converged.any()  # still improving by 38%
    kavg = table[table.trained_as == "kavg"]
    assert (kavg.updates_to_target == 100).all() and kavg.converged.all()  # reached the target
    assert (kavg.converged_by == "target").all() and (seq.converged_by == "budget").all()
