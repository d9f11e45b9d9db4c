"""One implementation, two worlds: an algorithm's learners as real MPI ranks and simulated in one
process carry out the same requests, so they end with the same model (the simulator keeps only
another clock). ASGD, ADPSGD and H-ADPSGD aside: their order of updates and averagings follows the
clock."""

import pytest
import torch

from asrscale.config.schema import profile_defaults
from asrscale.training.run import train
from asrscale.worlds.costmodel import CostModel, Hardware
from asrscale.worlds.simulated import SimWorld
from conftest import CALIBRATION, MPI_WORLD, mpiexec, run_config, run_paths, train_command


@pytest.mark.parametrize("algorithm", ["ssgd", "kavg", "ma"])
def test_an_algorithm_ends_with_the_same_model_on_mpi_ranks_and_simulated(corpus, tmp_path, algorithm):
    shards = corpus / "shards" / "P2"
    options = {"period": 2} if algorithm == "kavg" else {}
    mpiexec(2, *train_command(corpus, tmp_path / "mpi", shards, algorithm, options, MPI_WORLD, epochs=1))
    costs = CostModel(Hardware.from_config("here", profile_defaults()), CALIBRATION)
    run = run_config(algorithm, options=options, epochs=1, log_interval=2)  # as train_command's
    paths = run_paths(corpus, shards, tmp_path / "simulated")
    train(run, paths, SimWorld(2, costs, prefetch=run.train.prefetch, name=algorithm))
    mpi, simulated = (torch.load(tmp_path / world / "model.pt", weights_only=False)["model"]
                      for world in ("mpi", "simulated"))  # fmt: skip
    for name in mpi:
        torch.testing.assert_close(simulated[name], mpi[name], rtol=1e-5, atol=1e-6, msg=name)


def test_both_worlds_record_where_the_process_wall_time_went(corpus, tmp_path):
    """run.json's process_wall_s: building the learners, their arithmetic, exchanges, dev
    evaluation, checkpoints, batches and consensus, every phase measured, the rest the
    bookkeeping: what a simulated run costs beyond its learners' arithmetic (the simulation
    benchmark's figure)."""
    import json

    shards = corpus / "shards" / "P2"
    mpiexec(2, *train_command(corpus, tmp_path / "mpi", shards, "kavg", {"period": 2}, MPI_WORLD, epochs=1))
    costs = CostModel(Hardware.from_config("here", profile_defaults()), CALIBRATION)
    run = run_config("kavg", options={"period": 2}, epochs=1, log_interval=2)
    train(run, run_paths(corpus, shards, tmp_path / "simulated"), SimWorld(2, costs, name="kavg"))
    for world in ("mpi", "simulated"):
        wall = json.loads((tmp_path / world / "run.json").read_text())["process_wall_s"]
        measured = ("start", "arithmetic", "exchanges", "evaluation", "checkpoints", "batches", "consensus")
        assert all(wall[phase] > 0 for phase in measured), (world, wall)
        assert sum(wall[phase] for phase in (*measured, "other")) == pytest.approx(wall["total"]), world
        assert wall["other"] > 0 and wall["arithmetic"] > wall["consensus"], (world, wall)
