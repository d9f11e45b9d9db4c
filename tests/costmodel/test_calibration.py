"""Calibration on a busy machine: rates timed while another process holds the cores disagree,
and are timed again or refused by name, never kept (asrscale.costmodel.calibration)."""

import multiprocessing
import time

import pytest
import torch

from asrscale.costmodel import calibration
from asrscale.costmodel.calibration import (
    BusyMachine,
    calibrate,
    disagreement,
    never_slower_with_more_threads,
)
from asrscale.provenance import available_cores
from helpers import corpus_subset, run_config


def test_repeats_that_agree_are_this_machines_own():
    """Repeats 10% apart; one repeat disturbed; the two fastest 1.99× apart: within 2×."""
    assert disagreement({"1": [75_000, 76_000, 80_000], "2": [92_000, 95_000, 99_000]}) is None
    assert disagreement({"1": [10.0, 100.0, 100.0], "2": [100.0, 100.0, 100.0]}) is None
    assert disagreement({"1": [100.0, 100.0, 199.0], "2": [100.0, 100.0, 100.0]}) is None


def test_repeats_apart_or_a_thread_short_of_its_core_are_a_busy_machines():
    assert disagreement({"1": [30_000.0, 30_000.0, 76_000.0], "2": [90_000.0] * 3}) == (
        "at 1 threads the forward-backward ran at 30,000 and 76,000 frames/s"
    )
    assert disagreement({"1": [75_825.0] * 3}, {"1": [0.5, 0.6, 0.66]}) == (
        "at 1 thread the process had 66% of its thread's time on a core"
    )
    assert disagreement({"1": [75_825.0] * 3}, {"1": [0.5, 0.6, 0.67]}) is None
    assert (
        disagreement({"1": [75_825.0] * 3}, {"1": [0.67, 0.5, 0.6]}) is None
    )  # the best share, wherever it is
    assert (
        disagreement({"1": [80_000.0, 30_000.0, 76_000.0]}) is None
    )  # the two fastest, in any order
    assert disagreement({"1": [170_000.0, 30_000.0, 80_000.0]}) == (
        "at 1 threads the forward-backward ran at 80,000 and 170,000 frames/s"
    )


def test_cores_held_by_others_in_every_repeat_are_a_busy_machines():
    """Two spinners on a 2-core machine held 50-67% of its cores; one repeat of a third is
    tolerated."""
    rates = {"1": [80_000.0] * 3, "2": [60_000.0] * 3}  # agreeing, and each thread's share was full
    assert disagreement(rates, {"1": [0.7] * 3}, {"1": [0.02] * 3, "2": [0.67, 0.5, 0.52]}) == (
        "at 2 threads other processes held 50% of this process's cores"
    )
    assert disagreement(rates, {"1": [0.7] * 3}, {"1": [0.34] * 3}) == (
        "at 1 threads other processes held 34% of this process's cores"
    )
    assert disagreement(rates, {"1": [0.7] * 3}, {"1": [0.333] * 3, "2": [0.9, 0.8, 0.01]}) is None


def test_the_shares_are_of_the_threads_wall_time_and_of_the_cores_less_the_process_own(monkeypatch):
    """Scripted clocks: 0.6 s of wall time at 2 threads, 0.3 s of this process's CPU time, 1.0 s of
    its 2 cores' busy time: its threads' share 0.3 / (0.6 × 2), others' (1.0 − 0.3) / (0.6 × 2)."""
    clocks = {
        "perf_counter": iter([10.0, 10.6]),
        "process_time": iter([5.0, 5.3]),
        "busy": iter([100.0, 101.0]),
    }
    monkeypatch.setattr(calibration.time, "perf_counter", lambda: next(clocks["perf_counter"]))
    monkeypatch.setattr(calibration.time, "process_time", lambda: next(clocks["process_time"]))
    monkeypatch.setattr(calibration, "_cores_busy_s", lambda: next(clocks["busy"]))
    monkeypatch.setattr(calibration, "_own_cores", lambda: [0, 1])
    timed = calibration._shared(2, lambda: {"frames_per_s": 1.0})
    assert timed == {
        "frames_per_s": 1.0,
        "cpu_share": pytest.approx(0.25),
        "held_by_others": pytest.approx(0.7 / 1.2),
    }


def test_a_quiet_machines_cores_are_its_own():
    """This process alone, its timing sleeping then spinning: no other process's time, and its own
    share of the spinning thread's wall time is near half (the core idled while it slept)."""

    def sleep_then_spin():
        time.sleep(0.3)
        end = time.process_time() + 0.3
        while time.process_time() < end:
            pass
        return {}

    before = calibration._shared(
        1, lambda: time.sleep(0.3) or {}
    )  # others' share while this one slept
    if before["held_by_others"] > 0.2:
        pytest.skip(
            f"other processes held {before['held_by_others']:.0%} of the cores: not a quiet machine"
        )
    timed = calibration._shared(1, sleep_then_spin)
    assert 0.3 <= timed["cpu_share"] <= 0.6, timed
    assert 0 <= timed["held_by_others"] <= 0.2, (
        timed
    )  # the suite runs alone: the test's own noise only


def test_more_threads_are_never_modelled_slower_than_fewer():
    """The quick trial's calibration on a 2-core machine running a test suite: 2,533 frames/s at 2
    threads against 75,825 at 1 (which made a modelled SSGD at 2 learners 19× SEQ): 2 threads are
    modelled at 1 thread's rates, and the calibration says so; 1.22× at 2 threads stays as it is."""
    slow = {
        "1": {"frames_per_s": 75_825.0, "update_s": 0.1},
        "2": {"frames_per_s": 2_533.0, "update_s": 0.3},
    }
    kept, said = never_slower_with_more_threads(slow)
    assert kept["2"] == {"frames_per_s": 75_825.0, "update_s": 0.1, "threads": 1}
    assert said == [
        "2 threads ran at 2,533 frames/s, slower than 1 at 75,825: modelled at 1's rates"
    ]
    fine = {"1": {"frames_per_s": 100.0}, "2": {"frames_per_s": 122.0}}
    assert never_slower_with_more_threads(fine) == (
        {"1": {"frames_per_s": 100.0, "threads": 1}, "2": {"frames_per_s": 122.0, "threads": 2}},
        [],
    )


def scripted_waits(monkeypatch) -> list:
    """The seconds a calibration sleeps, recorded rather than slept."""
    waits = []
    monkeypatch.setattr(calibration.time, "sleep", waits.append)
    return waits


def test_busy_rates_are_timed_again_after_each_wait_then_refused_by_name(monkeypatch, capsys):
    """A machine whose repeats stay twice apart: timed afresh after each of `WAITS_S`, each attempt
    ending at the first thread count that disagrees (1 here: 2 threads are never timed), then a
    named error that says how to keep a busy machine's rates."""
    timed, waits = [], scripted_waits(monkeypatch)
    timings = iter([75_825.0, 30_000.0, 30_000.0] * 100)  # 2.5× apart

    def time_learner(*args):
        timed.append(torch.get_num_threads())
        return {"frames_per_s": next(timings)}

    monkeypatch.setattr(calibration, "_time_learner", time_learner)
    with pytest.raises(
        BusyMachine,
        match="calibration: at 1 threads the forward-backward ran at 30,000 and 75,825 "
        "frames/s, in each of 5 attempts over 150 s of waiting: the machine is busy .* "
        "study.busy_machine: go-on",
    ):
        calibration._agreed([1, 2], lambda: None, (), on_cpu=False)
    assert timed == [1] * 15  # 3 repeats in each of 5 attempts, at 1 thread alone
    assert waits == [10, 20, 40, 80]
    out = capsys.readouterr().out
    assert out.count("the machine is busy; waiting") == 4 and "waiting 80 s" in out


def busy_then_quiet(monkeypatch, busy_attempts: int):
    """Every repeat's timing as `_shared` gives it: other processes hold 70% of the cores for the
    first `busy_attempts` attempts' repeats (a burst of another process), 5% after."""
    held = iter([0.7] * 3 * busy_attempts + [0.05] * 1000)
    monkeypatch.setattr(
        calibration,
        "_shared",
        lambda threads, timing: {
            "frames_per_s": 8e4 * threads,
            "backward_s_per_batch": 0.0,
            "cpu_share": 1.0,
            "held_by_others": next(held),
        },
    )


def test_a_burst_of_another_process_is_waited_out(monkeypatch, capsys):
    """Scripted clocks: another process holds the cores for the first two attempts; the third,
    after waiting 10 and 20 s, times a quiet machine, whose rates are kept."""
    waits = scripted_waits(monkeypatch)
    busy_then_quiet(monkeypatch, busy_attempts=2)
    repeats, busy = calibration._agreed([1, 2], lambda: None, (), on_cpu=True)
    assert busy is None and waits == [10, 20]
    assert [r["held_by_others"] for r in repeats["1"] + repeats["2"]] == [0.05] * 6
    out = capsys.readouterr().out
    assert "held 70% of this process's cores: the machine is busy; waiting 10 s" in out
    assert "waiting 20 s, then timing again (attempt 3 of 5)" in out


@pytest.mark.parametrize("when_busy", ["refuse", "go-on"])
def test_a_machine_busy_through_every_wait_is_refused_or_kept_as_the_study_says(
    monkeypatch, capsys, when_busy
):
    """Busy through all 5 attempts: refused by default; with study.busy_machine go-on the last
    attempt's rates kept, timed at every thread count, with why the machine was busy."""
    waits = scripted_waits(monkeypatch)
    busy_then_quiet(monkeypatch, busy_attempts=100)
    go_on = when_busy == "go-on"
    if not go_on:
        with pytest.raises(BusyMachine, match="held 70% of this process's cores, in each of 5"):
            calibration._agreed([1, 2], lambda: None, (), on_cpu=True, go_on=go_on)
        return
    repeats, busy = calibration._agreed([1, 2], lambda: None, (), on_cpu=True, go_on=go_on)
    assert busy == "at 1 threads other processes held 70% of this process's cores"
    assert sorted(repeats) == ["1", "2"] and waits == [10, 20, 40, 80]
    assert "its rates kept as timed (study.busy_machine: go-on)" in capsys.readouterr().out


def test_other_processes_on_the_cores_make_a_cpu_calibration_busy_and_not_a_gpus(monkeypatch):
    """Rates that agree, while others held half the cores in every repeat: refused on the CPU, where
    the learner's threads share those cores; kept on a GPU, whose rates are the device's."""
    monkeypatch.setattr(calibration, "WAITS_S", ())
    monkeypatch.setattr(
        calibration,
        "_shared",
        lambda threads, timing: {"frames_per_s": 8e4, "cpu_share": 1.0, "held_by_others": 0.5},
    )
    with pytest.raises(
        BusyMachine, match="at 1 threads other processes held 50% of this process's cores"
    ):
        calibration._agreed([1, 2], lambda: None, (), on_cpu=True)
    repeats, busy = calibration._agreed([2], lambda: None, (), on_cpu=False)
    assert busy is None and repeats["2"][0]["held_by_others"] == 0.5


@pytest.mark.slow
def test_a_calibration_keeps_each_thread_counts_fastest_repeat_and_records_them_all(
    corpus, monkeypatch
):
    """The fastest of the repeats is the least disturbed (as timeit reads its repeats): it is the
    rate kept, and every repeat, share and their spread are recorded beside it."""

    scripted = iter([50_000.0, 80_000.0, 70_000.0, 90_000.0, 60_000.0, 85_000.0] * 2)
    monkeypatch.setattr(calibration, "available_cores", lambda: 2)
    monkeypatch.setattr(
        calibration,
        "_shared",
        lambda threads, timing: {
            "frames_per_s": next(scripted),
            "backward_s_per_batch": 0.0,
            "cpu_share": 0.9,
            "held_by_others": 0.1,
        },
    )
    quick = run_config("asgd", epochs=1, batch_size=4)
    train_set = corpus_subset(corpus)
    found = calibrate(quick.train, quick.model, quick.features, train_set, batches=3)
    assert (
        found["by_threads"]["1"]["frames_per_s"] == 80_000.0
        and found["by_threads"]["2"]["frames_per_s"] == 90_000.0
    )
    assert found["repeats"] == {
        "1": [50_000.0, 80_000.0, 70_000.0],
        "2": [90_000.0, 60_000.0, 85_000.0],
    }
    assert found["spread"] == {"1": 1.6, "2": 1.5}
    assert (
        found["cpu_share"] == {"1": [0.9] * 3, "2": [0.9] * 3}
        and found["held_by_others"]["2"] == [0.1] * 3
    )
    assert found["busy"] is None and found["machine_rate"] > 0


def test_a_busy_calibration_kept_marks_the_times_that_rest_on_it(corpus, monkeypatch):
    """study.busy_machine go-on: the rates kept with why the machine was busy, which a shared
    profile's runs say beside their modelled times (the report's `compute_basis`); a dedicated
    profile's clock takes no time of this machine, so nothing of its runs rests on it."""
    from asrscale.analysis.gather import compute_basis
    from asrscale.config.schema import profile_defaults
    from asrscale.worlds.clock import CostModel, Hardware
    from helpers import GPU

    monkeypatch.setattr(calibration, "WAITS_S", ())
    monkeypatch.setattr(calibration, "machine_rate", lambda: 20_000.0)
    busy_then_quiet(monkeypatch, busy_attempts=100)
    quick = run_config("asgd", epochs=1, batch_size=4)
    train_set = corpus_subset(corpus)
    with pytest.raises(BusyMachine):
        calibrate(quick.train, quick.model, quick.features, train_set, batches=3)
    found = calibrate(
        quick.train, quick.model, quick.features, train_set, batches=3, when_busy="go-on"
    )
    assert found["busy"] == "at 1 threads other processes held 70% of this process's cores"
    shared = CostModel(Hardware.from_config("here", profile_defaults()), found).description()
    assert "calibrated on a busy machine: at 1 threads other processes held 70%" in (
        compute_basis(shared)
    )
    dedicated = CostModel(Hardware.from_config("gpu", profile_defaults(**GPU)), found)
    assert "busy" not in compute_basis(dedicated.description())


def spin(seconds: float, spinning) -> None:
    """Hold a core for `seconds`, saying so (`spinning`) once it does."""
    end = time.monotonic() + seconds
    spinning.set()
    while time.monotonic() < end:
        pass


@pytest.mark.slow
def test_a_calibration_on_a_loaded_machine_says_it_was_busy(corpus, monkeypatch):
    """A process spins on every core while it times: the spinners hold about cores / (cores + 1) of
    the cores, over the 1 - 1 / BUSY_FACTOR a calibration admits, so it stops with BusyMachine, by
    name (after one attempt here: the waits and attempts again are the tests above's). A quiet
    calibration first: on a machine already busy the test cannot tell its load from the other's."""

    quick = run_config("asgd", epochs=1, batch_size=4)  # test_simulated's calibration
    train_set = corpus_subset(corpus)
    try:
        quiet = calibrate(quick.train, quick.model, quick.features, train_set, batches=3)
    except (
        BusyMachine
    ) as busy:  # the suite runs alone in CI: only a machine shared with other work gets here
        pytest.skip(f"the machine was busy before this test loaded it: {busy}")
    monkeypatch.setattr(calibration, "WAITS_S", ())
    context = multiprocessing.get_context("spawn")
    spinning = [context.Event() for _ in range(available_cores())]
    spinners = [context.Process(target=spin, args=(120.0, event)) for event in spinning]
    try:
        for process in spinners:
            process.start()
        assert all(event.wait(60) for event in spinning)  # every core held before the timing starts
        with pytest.raises(
            BusyMachine, match=r"at 1 threads other processes held \d+% of this process's cores"
        ):
            calibrate(quick.train, quick.model, quick.features, train_set, batches=3)
    finally:
        for process in spinners:
            process.terminate()
    assert quiet["by_threads"]["1"]["frames_per_s"] > 0
