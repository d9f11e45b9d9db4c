"""One implementation, two worlds: an algorithm's learners as real MPI ranks and simulated in one
process carry out the same requests, so they end with the same model (the simulator keeps only
another clock). ASGD, ADPSGD and H-ADPSGD aside: their order of updates and averagings follows the
clock."""

import json
import time

import pandas as pd
import pytest
import torch

from asrscale.config.schema import profile_defaults
from asrscale.training.run import train
from asrscale.worlds.clock import CostModel, Hardware
from asrscale.worlds.simulated import SimWorld
from asrscale.worlds.timing import TimeSplit, WallTimes
from helpers import CALIBRATION, MPI_WORLD, mpiexec, run_config, run_paths, train_command


@pytest.mark.parametrize(
    "algorithm, options",
    [
        ("ssgd", {}),
        ("kavg", {"period": 2}),
        ("bmuf", {"period": 2}),
        # a job of one frame: MA averages after every step (its default period is longer than the
        # epoch), by one allreduce and through learner 0 (rosc17's master)
        ("ma", {"frames_per_job": 1}),
        ("ma", {"frames_per_job": 1, "reduce": "master"}),
    ],
)
@pytest.mark.slow
def test_an_algorithm_ends_with_the_same_model_on_mpi_ranks_and_simulated(
    corpus, tmp_path, algorithm, options
):
    shards = corpus / "shards" / "P2"
    mpiexec(
        2, *train_command(corpus, tmp_path / "mpi", shards, algorithm, options, MPI_WORLD, epochs=1)
    )
    costs = CostModel(Hardware.from_config("here", profile_defaults()), CALIBRATION)
    run = run_config(algorithm, options=options, epochs=1, log_interval=2)  # as train_command's
    paths = run_paths(corpus, shards, tmp_path / "simulated")
    train(run, paths, SimWorld(2, costs, prefetch=run.train.prefetch, name=algorithm))
    mpi, simulated = (
        torch.load(tmp_path / world / "model.pt", weights_only=False)["model"]
        for world in ("mpi", "simulated")
    )
    assert mpi.keys() == simulated.keys()
    for name in mpi:
        torch.testing.assert_close(simulated[name], mpi[name], rtol=1e-5, atol=1e-6, msg=name)
    # both trained, alike: the same steps, and averagings where the algorithm averages
    logs = {
        world: pd.read_csv(tmp_path / world / "metrics.tsv", sep="\t")
        for world in ("mpi", "simulated")
    }
    steps = {world: log[log.kind == "epoch"].step.tolist() for world, log in logs.items()}
    assert steps["mpi"] == steps["simulated"] and steps["mpi"][-1] > 0, steps
    # the ranks exchanged a model's size or more a step (MA at its default period, only its end's
    # consensus: 2 models in 6 steps), so the averaging the worlds agree on took place
    record = json.loads((tmp_path / "mpi" / "run.json").read_text())
    assert record["exchanges"]["bytes"] >= 4 * record["parameters"] * steps["mpi"][-1], record[
        "exchanges"
    ]


@pytest.mark.slow
def test_both_worlds_record_where_the_process_wall_time_went(corpus, tmp_path):
    """run.json's process_wall_s: building the learners, their arithmetic, exchanges, dev
    evaluation, checkpoints, batches and consensus, every phase measured, the rest the
    bookkeeping: what a simulated run costs beyond its learners' arithmetic (the simulation
    benchmark's figure)."""
    shards, began = corpus / "shards" / "P2", time.perf_counter()
    mpiexec(
        2,
        *train_command(
            corpus, tmp_path / "mpi", shards, "kavg", {"period": 2}, MPI_WORLD, epochs=1
        ),
    )
    outside, began = {"mpi": time.perf_counter() - began}, time.perf_counter()
    costs = CostModel(Hardware.from_config("here", profile_defaults()), CALIBRATION)
    run = run_config("kavg", options={"period": 2}, epochs=1, log_interval=2)
    train(run, run_paths(corpus, shards, tmp_path / "simulated"), SimWorld(2, costs, name="kavg"))
    outside["simulated"] = time.perf_counter() - began
    for world in ("mpi", "simulated"):
        wall = json.loads((tmp_path / world / "run.json").read_text())["process_wall_s"]
        measured = (
            "start",
            "arithmetic",
            "exchanges",
            "evaluation",
            "checkpoints",
            "batches",
            "consensus",
        )
        assert all(wall[phase] > 0 for phase in measured), (world, wall)
        # the process's total is its own, within what the test saw it take (its shares' values on
        # known times: test_every_share_of_the_wall_time_is_its_phases_and_the_rest_the_remainder)
        assert wall["total"] <= outside[world], (world, wall, outside[world])
        assert wall["other"] > 0 and wall["arithmetic"] > wall["consensus"], (world, wall)


def scripted_clock(times: list[float]):
    """A clock that reads `times` in turn."""
    readings = iter(times)
    return lambda: next(readings)


def test_every_share_of_a_learners_time_is_its_categorys_and_idle_the_remainder():
    # made at 0; compute from 1 to 3, communication from 3.5 to 4.5, 0.25 s of data wait added;
    # read at 10: the 6.75 s left are idle (barriers, logging, checkpoints)
    split = TimeSplit(now=scripted_clock([0.0, 1.0, 3.0, 3.5, 4.5, 10.0]))
    with split.measure("compute"):
        pass
    with split.measure("communication"):
        pass
    split.add("data_wait", 0.25)
    assert split.snapshot() == {
        "wall_s": 10.0,
        "compute_s": 2.0,
        "communication_s": 1.0,
        "staging_s": 0.0,
        "data_wait_s": 0.25,
        "idle_s": 6.75,
    }
    # shares that overlap past the wall time (a simulated learner's modelled ones) leave no idle
    split = TimeSplit(now=scripted_clock([0.0, 5.0]))
    split.add("compute", 4.0)
    split.add("communication", 3.0)
    assert split.snapshot()["idle_s"] == 0.0


def test_every_share_of_the_wall_time_is_its_phases_and_the_rest_the_remainder():
    wall = WallTimes()
    wall.now = scripted_clock([0.0, 1.0, 2.5, 3.0, 7.0, 7.5, 8.0, 12.0])
    wall.reset()  # at 0; arithmetic 1 to 2.5 and 7.5 to 8, exchanges 3 to 7, read at 12
    for phase in ("arithmetic", "exchanges", "arithmetic"):
        with wall.measure(phase):
            pass
    phases = dict.fromkeys(WallTimes.PHASES, 0.0) | {"arithmetic": 2.0, "exchanges": 4.0}
    assert wall.summary() == {**phases, "other": 6.0, "total": 12.0}
