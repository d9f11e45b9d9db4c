"""The arithmetic behind every speed figure (asrscale.analysis.measures), on small tables whose
answers are worked out by hand in each test: speedups three ways, efficiency, the speedup over the
same algorithm alone, bands, time to target, and which runs count."""

import numpy as np
import pandas as pd
import pytest

from asrscale.analysis.measures import (
    BEYOND_P,
    add_speedups,
    baseline,
    best_run,
    beyond_p,
    by_learners,
    convergence,
    discount_diverged,
    diverged,
    learner_hours,
    lm_grid,
    mean_spread,
    modelled_against_measured,
    target_of,
    time_to_target,
    trained,
)

COLUMNS = [
    "algorithm",
    "learners",
    "seed",
    "train_s",
    "epochs",
    "frames_per_s",
    "time_to_target_s",
    "epochs_to_target",
    "time_to_seq_best_s",
    "epochs_to_seq_best",
]


def table(*rows, kind: str = "measured", outside_share: float = 0.5) -> pd.DataFrame:
    """Runs as configured, each row in COLUMNS' order, timed one way (`kind`)."""
    found = pd.DataFrame(rows, columns=COLUMNS)
    return found.assign(
        variant="default",
        trained_as=found.algorithm,
        speedup_kind=kind,
        outside_share=outside_share,
        bound_by="arithmetic",
        transports="",
        run=[
            f"{kind}/{a}/P{p}/seed{s}"
            for a, p, s in zip(found.algorithm, found.learners, found.seed)
        ],
    )


class FixedBand:
    """A band of ×0.8 to ×1.5 on every modelled speedup (asrscale.costmodel.fitted.Band's
    interface)."""

    def of(self, speedup, outside_share, transports, gossip, bound):
        return 0.8 * speedup, 1.5 * speedup

    def rests_on(self, bound):
        return f"{bound}: ×0.8-1.5"


#: SEQ's two seeds and KAVG at 4 with three (its seed 3 has no SEQ of its own: SEQ's mean stands
#: in), KAVG alone with one
RUNS = (
    ("seq", 1, 1, 100.0, 10, 1000.0, 80.0, 8, 100.0, 10),
    ("seq", 1, 2, 120.0, 10, 1100.0, 90.0, 9, 110.0, 11),
    ("kavg", 4, 1, 30.0, 10, 3800.0, 20.0, 9, 25.0, 12),
    ("kavg", 4, 2, 36.0, 12, 4000.0, 30.0, 10, 50.0, 12),
    ("kavg", 4, 3, 33.0, 11, 4200.0, float("nan"), float("nan"), 35.0, 12),
    ("kavg", 1, 1, 90.0, 10, 1000.0, 70.0, 7, 95.0, 10),
)


def kavg_at_4(found: pd.DataFrame) -> pd.DataFrame:
    return found[(found.algorithm == "kavg") & (found.learners == 4)].set_index("seed")


def test_speedups_are_seqs_over_the_runs_seed_by_seed_with_seqs_mean_for_a_seed_it_lacks():
    """SEQ's epochs take 10 and 12 s (mean 11), KAVG at 4's 3, 3 and 3 s: time speedups 10/3, 12/3
    and 11/3, efficiency a quarter of each; throughput 3800/1000, 4000/1100, 4200/1050; to the
    target 80/20, 90/30 and none (never reached), its epochs 9/8, 10/9; to SEQ's accuracy 100/25,
    110/50, 105/35; over KAVG alone (9 s an epoch, seed 1: its mean for the others) 3 each."""
    found = kavg_at_4(add_speedups(table(*RUNS), FixedBand()))
    assert found.time_speedup.tolist() == pytest.approx([10 / 3, 4.0, 11 / 3])
    assert found.efficiency.tolist() == pytest.approx([10 / 12, 1.0, 11 / 12])
    assert found.throughput_speedup.tolist() == pytest.approx([3.8, 4000 / 1100, 4.0])
    assert found.target_speedup.tolist()[:2] == pytest.approx([4.0, 3.0]) and np.isnan(
        found.target_speedup[3]
    )
    assert found.target_epochs_ratio.tolist()[:2] == pytest.approx([9 / 8, 10 / 9])
    assert found.accuracy_speedup.tolist() == pytest.approx([4.0, 2.2, 3.0])
    assert found.accuracy_epochs_ratio.tolist() == pytest.approx([1.2, 12 / 11, 12 / 10.5])
    assert found.own_speedup.tolist() == pytest.approx([3.0, 3.0, 3.0])
    seq = add_speedups(table(*RUNS), FixedBand()).query("algorithm == 'seq'")
    assert seq.time_speedup.tolist() == [1.0, 1.0] and seq.own_speedup.tolist() == [1.0, 1.0]


def test_a_measured_speedup_has_no_band_and_a_modelled_one_its_runs_band():
    measured = kavg_at_4(add_speedups(table(*RUNS), FixedBand()))
    assert (measured.time_speedup_low == measured.time_speedup).all()
    assert (measured.time_speedup_high == measured.time_speedup).all()
    modelled = kavg_at_4(add_speedups(table(*RUNS, kind="modelled on v100"), FixedBand()))
    assert modelled.time_speedup_low.tolist() == pytest.approx(
        [0.8 * 10 / 3, 0.8 * 4.0, 0.8 * 11 / 3]
    )
    assert modelled.own_speedup_high.tolist() == pytest.approx([4.5, 4.5, 4.5])
    assert modelled.accuracy_speedup_high.tolist() == pytest.approx([6.0, 3.3, 4.5])


def test_each_kind_of_timing_is_against_seq_timed_the_same_way():
    """Measured KAVG against measured SEQ, modelled against modelled: never across (a modelled SEQ
    ten times slower would make the measured speedup 10× larger)."""
    slow_seq = table(*(r[:3] + (10 * r[3],) + r[4:] for r in RUNS[:2]), kind="modelled on v100")
    both = pd.concat(
        [table(*RUNS), slow_seq, table(*RUNS[2:3], kind="modelled on v100")], ignore_index=True
    )
    found = add_speedups(both, FixedBand())
    measured = found[
        (found.speedup_kind == "measured") & (found.algorithm == "kavg") & (found.learners == 4)
    ]
    assert measured.time_speedup.tolist() == pytest.approx([10 / 3, 4.0, 11 / 3])
    modelled = found[(found.speedup_kind != "measured") & (found.algorithm == "kavg")]
    assert modelled.time_speedup.tolist() == pytest.approx([100 / 3])


def test_without_seq_no_speedup_against_it_but_the_speedup_over_the_algorithm_alone():
    found = add_speedups(table(*RUNS[2:]), FixedBand())
    assert found.time_speedup.isna().all() and found.efficiency.isna().all()
    assert kavg_at_4(found).own_speedup.tolist() == pytest.approx([3.0, 3.0, 3.0])


def epochs_of(run: str, losses: list[float], step: int = 10, epoch_s: float = 5.0) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "run": run,
            "epoch": range(1, len(losses) + 1),
            "step": step,
            "dev_loss": losses,
            "time_s": [epoch_s * (e + 1) for e in range(len(losses))],
        }
    )


def test_time_to_target_is_the_first_epoch_at_or_below_it_from_seqs_converged_runs():
    """SEQ's converged seeds end at dev losses 0.40 and 0.44 (mean 0.42): the target is 5% above it,
    0.441. SEQ seed 1 reaches it in epoch 3 (15 s, 30 updates), KAVG (4 learners, 20 updates an
    epoch) in epoch 2 (10 s: 4 × 10 / 3600 device-hours, 40 updates); the diverging run's dev loss
    never reaches it. SEQ's own best (0.42) KAVG reaches in epoch 4."""
    runs = pd.DataFrame(
        {
            "run": ["s1", "s2", "k", "late"],
            "algorithm": ["seq", "seq", "kavg", "seq"],
            "variant": ["default", "default", "default", "default"],
            "learners": [1, 1, 4, 1],
            "converged": [True, True, True, False],
            "diverged": ["", "", "", ""],
            "best_dev_loss": [0.40, 0.44, 0.41, 0.30],
        }
    )
    epochs = pd.concat(
        [
            epochs_of("s1", [0.6, 0.5, 0.44, 0.40]),
            epochs_of("s2", [0.7, 0.6, 0.5, 0.44]),
            epochs_of("k", [0.5, 0.441, 0.43, 0.41], step=20),
            epochs_of("late", [0.9, 0.8]),
        ]
    )
    assert target_of(runs, None) == pytest.approx(1.05 * 0.42) and target_of(runs, 0.7) == 0.7
    found = time_to_target(runs, epochs, None).set_index("run")
    assert found.epochs_to_target.fillna(-1).to_dict() == {"s1": 3, "s2": 4, "k": 2, "late": -1}
    assert found.time_to_target_s.fillna(-1).to_dict() == {
        "s1": 15.0,
        "s2": 20.0,
        "k": 10.0,
        "late": -1,
    }
    assert found.updates_to_target.k == 40 and found.updates_to_target.s1 == 30
    assert found.device_hours_to_target.k == pytest.approx(4 * 10 / 3600)
    assert found.epochs_to_seq_best.fillna(-1).to_dict() == {"s1": 4, "s2": -1, "k": 4, "late": -1}
    assert found.time_to_seq_best_s.k == 20.0


def test_baseline_trained_and_best_run_pick_the_runs_a_figure_rests_on():
    runs = pd.DataFrame(
        {
            "algorithm": ["seq", "seq", "kavg", "ssgd", "hadpsgd", "adpsgd"],
            "trained_as": ["seq", "seq", "seq", "ssgd", "ssgd", "adpsgd"],
            "variant": ["default", "lr=1", "default", "default", "default", "default"],
            "run": ["a", "b", "a", "c", "c", "d"],
            "wer": [0.30, 0.25, 0.30, 0.28, 0.28, None],
            "learners": [1, 1, 1, 4, 4, 4],
        }
    )
    assert baseline(runs).run.tolist() == ["a"]  # SEQ as configured, not a sweep's variant
    assert trained(runs).run.tolist() == [
        "a",
        "b",
        "c",
        "d",
    ]  # KAVG alone is SEQ's run, H-ADPSGD in a node SSGD's
    assert best_run(runs).run == "b" and best_run(runs.assign(wer=None)) is None
    assert mean_spread(pd.Series([0.2, 0.3, 0.25])) == pytest.approx((0.25, 0.05))


def test_a_diverged_run_keeps_no_result_and_has_not_converged():
    runs = pd.DataFrame(
        {
            "run": ["a", "b"],
            "converged": [True, True],
            "diverged": ["", "epoch 2: not finite"],
            "wer": [0.2, 0.9],
            "train_s": [10.0, 5.0],
        }
    )
    gone = discount_diverged(
        runs.assign(
            **{
                c: 1.0
                for c in (
                    "cer",
                    "greedy_wer",
                    "greedy_cer",
                    "frames_per_s",
                    "best_dev_loss",
                    "best_dev_ter",
                    "time_to_target_s",
                    "device_hours_to_target",
                    "updates_to_target",
                    "epochs_to_target",
                    "time_to_seq_best_s",
                    "epochs_to_seq_best",
                )
            }
        )
    )
    assert (
        gone.converged.tolist() == [True, False]
        and gone.wer.tolist()[0] == 0.2
        and np.isnan(gone.wer[1])
    )
    assert np.isnan(gone.train_s[1]) and gone.train_s[0] == 10.0


def test_learner_hours_by_learners_and_the_simulators_validation():
    both = pd.concat(
        [table(*RUNS[:3]), table(*RUNS[:3], kind="modelled on v100")], ignore_index=True
    ).assign(
        wer=[0.2, 0.22, 0.25] * 2,
        greedy_wer=0.5,
        time_speedup=[1.0, 1.0, 3.0] * 2,
        target_speedup=2.0,
        device_hours_to_target=0.1,
        best_dev_loss=0.5,
        world=["mpi"] * 3 + ["simulated"] * 3,
    )
    hours = learner_hours(both)
    assert hours.to_dict() == pytest.approx(
        {"measured": (100 + 120 + 4 * 30) / 3600, "modelled on v100": (100 + 120 + 4 * 30) / 3600}
    )
    grouped = by_learners(both)
    assert (
        grouped.loc[("seq", 1)].wer == pytest.approx(0.21)
        and grouped.loc[("kavg", 4)].speedup == 3.0
    )
    pairs = modelled_against_measured(both.assign(train_s=[100.0, 120.0, 30.0, 150.0, 120.0, 15.0]))
    assert pairs.time_ratio.tolist() == pytest.approx(
        [0.5, 1.5, 1.0]
    )  # sorted by algorithm: kavg, seq 1, seq 2


class RecordingBand:
    """A band that records what each modelled run asked it, and answers ×0.9 to ×1.2."""

    def __init__(self):
        self.asked = []

    def of(self, speedup, outside_share, transports, gossip, bound):
        self.asked.append((outside_share, transports, gossip, bound))
        return 0.9 * speedup, 1.2 * speedup

    def rests_on(self, bound):
        return f"rests on {bound}"


def test_a_modelled_runs_band_is_asked_of_its_share_outside_arithmetic_its_links_gossip_and_bound():
    runs = table(*RUNS[:3], kind="modelled on v100", outside_share=0.25).assign(
        transports=["", "nccl", "nccl,tcp"],
        trained_as=["seq", "seq", "adpsgd"],
        bound_by=["arithmetic", "arithmetic", "links between nodes"],
    )
    band = RecordingBand()
    found = add_speedups(runs, band)
    assert band.asked == [
        (0.25, set(), False, "arithmetic"),
        (0.25, {"nccl"}, False, "arithmetic"),
        (0.25, {"nccl", "tcp"}, True, "links between nodes"),
    ]
    assert found.band_rests_on.tolist() == ["rests on arithmetic"] * 2 + [
        "rests on links between nodes"
    ]
    measured = add_speedups(table(*RUNS[:3]), band)
    assert (
        measured.band_rests_on.tolist() == [""] * 3
        and (measured.time_speedup_low == measured.time_speedup).all()
    )


def test_efficiency_is_each_runs_speedup_over_its_learners_seqs_seeds_by_their_mean():
    """SEQ's three seeds take 10, 11 and 15 s an epoch (mean 12, median 11); KAVG at 2 learners
    (seed 4, which SEQ lacks) 6 s and at 4 (seed 1) 2.5 s: speedups 2 and 4, efficiencies 1 each."""
    rows = [
        ("seq", 1, s, 100.0 * t, 10, 1000.0, 80.0, 8, 100.0, 10)
        for s, t in ((1, 1.0), (2, 1.1), (3, 1.5))
    ]
    rows += [
        ("kavg", 2, 4, 60.0, 10, 2000.0, 40.0, 8, 50.0, 10),
        ("kavg", 4, 1, 25.0, 10, 4000.0, 20.0, 8, 25.0, 10),
    ]
    found = add_speedups(table(*rows), FixedBand()).set_index(["algorithm", "learners"])
    assert (
        found.time_speedup[("kavg", 2)] == pytest.approx(2.0)
        and found.time_speedup[("kavg", 4)] == 4.0
    )
    assert (
        found.efficiency[("kavg", 2)] == pytest.approx(1.0) and found.efficiency[("kavg", 4)] == 1.0
    )
    assert by_learners(
        table(*rows).assign(
            wer=[0.1, 0.2, 0.6, 0.3, 0.3],
            greedy_wer=0.5,
            time_speedup=1.0,
            target_speedup=1.0,
            device_hours_to_target=0.1,
        )
    ).loc[("seq", 1)].wer == (pytest.approx(0.3))  # the mean of SEQ's seeds, not their median (0.2)


def test_a_dev_loss_exactly_at_the_target_reaches_it():
    runs = pd.DataFrame(
        {
            "run": ["s"],
            "algorithm": ["seq"],
            "variant": ["default"],
            "learners": [1],
            "converged": [True],
            "diverged": [""],
            "best_dev_loss": [0.5],
        }
    )
    found = time_to_target(runs, epochs_of("s", [0.7, 0.6, 0.5]), 0.6).set_index("run")
    assert (
        found.epochs_to_target.s == 2 and found.epochs_to_seq_best.s == 3
    )  # SEQ reaches its own best, exactly
    assert found.updates_to_target.s == 20


def test_trained_keeps_a_run_reported_only_under_another_name_once_and_its_own_row_first_or_not():
    """KAVG alone listed before SEQ's own row of the same run is still SEQ's run; H-ADPSGD in one
    node whose SSGD run the study does not list stands for it, once however many names carry it."""
    runs = pd.DataFrame(
        {
            "algorithm": ["kavg", "seq", "hadpsgd", "hadpsgd"],
            "trained_as": ["seq", "seq", "ssgd", "ssgd"],
            "run": ["a", "a", "e", "e"],
        }
    )
    assert trained(runs).index.tolist() == [1, 2]


def test_best_run_looks_only_at_the_wer_not_at_gaps_in_other_columns():
    runs = pd.DataFrame(
        {
            "algorithm": ["seq", "kavg"],
            "trained_as": ["seq", "kavg"],
            "run": ["a", "b"],
            "wer": [0.3, 0.2],
            "time_to_target_s": [10.0, float("nan")],
        }
    )
    assert best_run(runs).run == "b"


def test_a_run_recorded_as_diverged_is_read_from_its_cell_and_a_table_without_the_column_has_none():
    """An empty cell read back from runs.tsv is NaN: not diverged; a table with no such column
    (older runs) has no diverged run, row for row on its own index."""
    recorded = pd.DataFrame({"diverged": ["", float("nan"), "epoch 3: not finite"]})
    assert diverged(recorded).tolist() == [False, False, True]
    without = diverged(pd.DataFrame({"run": ["a", "b"]}, index=[5, 7]))
    assert without.tolist() == [False, False] and without.index.tolist() == [5, 7]


def test_without_seq_every_speedup_against_it_is_a_missing_number():
    found = add_speedups(table(*RUNS[2:]), FixedBand())
    for column in (
        "time_speedup",
        "throughput_speedup",
        "target_speedup",
        "target_epochs_ratio",
        "accuracy_speedup",
        "accuracy_epochs_ratio",
        "efficiency",
    ):
        assert found[column].dtype == float and found[column].isna().all(), column


def test_speedups_keep_the_rows_in_the_order_of_the_study_whatever_the_timing():
    kind = "modelled on v100"
    both = pd.concat(
        [table(*RUNS[2:3], kind=kind), table(*RUNS), table(*RUNS[:2], kind=kind)], ignore_index=True
    )
    assert add_speedups(both, FixedBand()).index.tolist() == both.index.tolist()


def test_by_learners_has_every_column_a_summary_reads():
    summary = by_learners(
        table(*RUNS).assign(
            wer=0.2,
            greedy_wer=0.5,
            time_speedup=1.0,
            target_speedup=2.0,
            device_hours_to_target=0.1,
        )
    )
    assert summary.columns.tolist() == ["wer", "greedy_wer", "speedup", "to_target", "hours"]
    assert summary.loc[("kavg", 4)].tolist() == pytest.approx([0.2, 0.5, 1.0, 2.0, 0.1])


def test_the_simulators_validation_compares_time_an_epoch():
    """Measured SEQ trains 10 epochs in 100 s, modelled 5 in 100 s: 10 s and 20 s an epoch, ratio
    2."""
    both = table(RUNS[0], RUNS[0][:4] + (5,) + RUNS[0][5:]).assign(
        world=["mpi", "simulated"], best_dev_loss=0.5
    )
    pairs = modelled_against_measured(both)
    assert pairs.epoch_s_measured.tolist() == [10.0] and pairs.time_ratio.tolist() == [2.0]


def convergence_of(curves: dict, schedule: str = "cosine", **columns) -> pd.DataFrame:
    """Runs under `schedule` whose epochs had these (dev losses, rates) (10 updates each, a peak
    rate of 1 unless `columns` say otherwise), judged with a dev TER bound of 0.5."""
    runs = pd.DataFrame(
        {
            "run": list(curves),
            "schedule": schedule,
            "stopped_by": "budget",
            "peak_lr": 1.0,
            "best_dev_ter": 0.2,
        }
    ).assign(**columns)
    epochs = pd.concat(
        [epochs_of(run, losses).assign(lr=rates) for run, (losses, rates) in curves.items()]
    )
    return convergence(runs, epochs, plateau_max_dev_ter=0.5).set_index("run")


HALVING = [1.0, 0.5, 0.25, 0.125, 0.0625]


def test_a_runs_recent_gain_updates_last_rate_and_bound_worked_by_hand():
    """One epoch: no gain to judge (infinite). 1.0, 0.9, ..., 0.6 at rates halving to 1/16: its
    best-so-far gained (0.9 − 0.6) / 0.9 over its last 3 epochs, 1/9 an epoch; per unit of the
    rate spent in them (1/4 + 1/8 + 1/16) 0.762; the halving continued for ever spends 1/16 more:
    bounded at 3 × 0.762 × 1/16 + 2 × 0.34% (the dev loss's noise). Unfinished: 1/16 of its peak
    rate is above 2%."""
    found = convergence_of(
        {"one": ([1.0], [1.0]), "five": ([1.0, 0.9, 0.8, 0.7, 0.6], HALVING)}, peak_lr=[1.0, 2.0]
    )
    assert found.recent_gain.one == float("inf")
    assert found.recent_gain.five == pytest.approx(0.3 / 0.9 / 3)
    assert found.updates.tolist() == [10, 50]
    assert found.last_rate.five == pytest.approx(0.0625 / 2)
    per_rate = 0.3 / 0.9 / (0.25 + 0.125 + 0.0625)
    assert found.gain_bound.five == pytest.approx(3 * per_rate * 0.0625 + 2 * 0.0034)
    assert found.converged_by.five == "unfinished" and not found.converged.five


def test_a_run_converges_where_its_schedule_finished_and_its_curve_is_flat_and_it_transcribes():
    """Finished at exactly 2% of the peak and flat: converged, its bound 0. Stopped at 4%: still
    to anneal. Finished but gaining 1% an epoch (above 0.23%, two epochs' noise of the dev loss
    over 3): its budget ran out while it gained. Flat and finished at a best dev TER of exactly
    the bound: does not transcribe. newbob converges by its own stop, else by nothing."""
    flat = [1.0, 0.5, 0.5, 0.5, 0.5]
    falling = [1.0, 0.5, 0.495, 0.49, 0.485]
    found = convergence_of(
        {
            "flat": (flat, [1, 0.5, 0.2, 0.05, 0.02]),
            "annealing": (flat, [1, 0.5, 0.2, 0.08, 0.04]),
            "falling": (falling, [1, 0.5, 0.2, 0.05, 0.02]),
            "mute": (flat, [1, 0.5, 0.2, 0.05, 0.02]),
        },
        best_dev_ter=[0.2, 0.2, 0.2, 0.5],
    )
    assert found.converged_by.to_dict() == {
        "flat": "plateau",
        "annealing": "unfinished",
        "falling": "budget",
        "mute": "untrained",
    }
    assert found.converged.tolist() == [True, False, False, False]
    assert found.gain_bound.flat == 0.0 and found.gain_bound.falling > 2 * 0.0034
    newbob = convergence_of(
        {"stopped": (flat, HALVING), "late": (flat, HALVING)},
        schedule="newbob",
        stopped_by=["schedule", "budget"],
    )
    assert newbob.converged_by.tolist() == ["schedule", "budget"]
    assert newbob.converged.tolist() == [True, False]


def test_an_epoch_recorded_twice_counts_once_as_it_was_first_recorded():
    """A run resumed after its epoch 2 was written writes it again: the first record (0.99, short
    of a target of 0.95) stands, not the second (0.6)."""
    epochs = pd.concat([epochs_of("r", [1.0, 0.99]), epochs_of("r", [1.0, 0.6]).iloc[1:]]).assign(
        lr=1.0
    )
    runs = pd.DataFrame(
        {
            "run": ["r"],
            "algorithm": "seq",
            "variant": "default",
            "learners": 1,
            "schedule": "newbob",
            "stopped_by": "budget",
            "peak_lr": 1.0,
            "best_dev_ter": 0.2,
            "converged": True,
            "diverged": "",
            "best_dev_loss": 0.99,
        }
    )
    assert convergence(runs, epochs, 0.5).updates.tolist() == [20]
    found = time_to_target(runs, epochs, 0.95)
    assert found.updates_to_target.isna().all() and found.target_dev_loss.tolist() == [0.95]


def test_convergence_reads_the_epochs_by_their_columns_whatever_their_index_is_named():
    """Epochs indexed by a column they also hold (their time) are judged as any: the index is
    dropped, not put back as a column that would clash with its own (1.0 then 0.9: 20 updates, too
    few epochs for a recent gain)."""
    epochs = epochs_of("r", [1.0, 0.9]).assign(lr=1.0).set_index("time_s", drop=False)
    runs = pd.DataFrame(
        {
            "run": ["r"],
            "schedule": "exponential",
            "stopped_by": "budget",
            "peak_lr": 1.0,
            "best_dev_ter": 0.2,
        }
    )
    found = convergence(runs, epochs, plateau_max_dev_ter=0.5)
    assert found.updates.tolist() == [20] and found.recent_gain.tolist() == [float("inf")]


def test_a_diverged_run_has_nan_results_even_in_a_column_of_python_objects():
    """A result column held as objects (a table built from Python values) gets NaN, a float that
    every mean skips, for a diverged run: not None."""
    runs = pd.DataFrame(
        {
            "run": ["a", "b"],
            "converged": [True, True],
            "diverged": ["", "epoch 2: not finite"],
            "wer": pd.Series([0.2, 0.9], dtype=object),
        }
    )
    gone = discount_diverged(
        runs.assign(
            **{
                c: 1.0
                for c in (
                    "cer",
                    "greedy_wer",
                    "greedy_cer",
                    "train_s",
                    "frames_per_s",
                    "best_dev_loss",
                    "best_dev_ter",
                    "time_to_target_s",
                    "device_hours_to_target",
                    "updates_to_target",
                    "epochs_to_target",
                    "time_to_seq_best_s",
                    "epochs_to_seq_best",
                )
            }
        )
    )
    kept, lost = gone.wer.tolist()
    assert kept == 0.2 and isinstance(lost, float) and np.isnan(lost)


def test_a_same_epochs_speedup_is_beyond_p_only_above_p_by_more_than_beyond_p():
    """At 4 learners with BEYOND_P 5%: 4× (all P can give) and 4 × 1.05 = 4.2× exactly are within;
    4.21× is beyond; so are 9× and more, far beyond."""
    assert BEYOND_P == 0.05
    assert not beyond_p(4.0, 4) and not beyond_p(4.19, 4) and not beyond_p(4 * (1 + BEYOND_P), 4)
    assert beyond_p(4.21, 4) and beyond_p(9.0, 4)
    assert beyond_p(2.0, 1) and not beyond_p(1.05, 1)


def test_a_runs_lm_weight_and_word_bonus_at_their_grids_edge_are_named():
    """As tuning's rates: a choice at the lowest or highest value of its grid may be short of a
    better one beyond it; a grid of one value has no edge."""
    table = pd.DataFrame({"lm_weight": [1.0, 4.0, 0.5], "word_bonus": [-2.0, -6.0, 0.0]})
    found = lm_grid(table, [0.5, 1.0, 4.0], [-6.0, -2.0, 0.0, 2.0])
    assert found.tolist() == [
        "inside",
        "at the edge (its highest LM weight, its lowest word bonus)",
        "at the edge (its lowest LM weight)",
    ]
    assert lm_grid(table.iloc[:1], [1.0], [-2.0]).tolist() == ["one value"]
