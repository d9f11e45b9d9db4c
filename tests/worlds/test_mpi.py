"""Real multi-process tests: learners are MPI ranks started by mpiexec."""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import torch

from helpers import (
    MPI_WORLD,
    ROOT,
    TIMES,
    default_launcher,
    diverged_run,
    launcher_environment,
    mpiexec,
    site_mpi,
    train_command,
)

pytestmark = pytest.mark.slow  # starts Snakemake, MPI ranks, SLURM or a browser


def test_ssgd_step_equals_seq_on_the_concatenated_batch_and_replicas_stay_identical(corpus):
    result = mpiexec(
        2,
        sys.executable,
        ROOT / "tests" / "fixtures" / "mpi_programs" / "ssgd_properties.py",
        corpus,
    )
    assert result.stdout.count("ssgd properties hold") == 2


def test_the_mpi_found_on_path_runs_the_ranks_as_a_site_mpi_would(corpus, tmp_path):
    """Without the mpich extra (on a cluster), mpi4py loads the site's MPI and the ranks start
    under its mpiexec: here the one PATH finds outside the venv (CI: Debian's Open MPI), made the
    library mpi4py loads although the extra is installed. SSGD's properties hold on its 2 ranks,
    and a run trained on them records that MPI."""
    site = site_mpi()
    if site is None:
        if os.environ.get("ASRSCALE_REQUIRE_SITE_MPI"):
            raise AssertionError("ASRSCALE_REQUIRE_SITE_MPI is set, but PATH has no other MPI")
        pytest.skip("no MPI on PATH beside the mpich extra's (apt install openmpi-bin)")
    launcher, env = site
    program = ROOT / "tests" / "fixtures" / "mpi_programs" / "ssgd_properties.py"
    result = mpiexec(2, sys.executable, program, corpus, launcher=launcher, env=env)
    assert result.stdout.count("ssgd properties hold") == 2, result.stdout + result.stderr
    mpiexec(
        2, *train_command(corpus, tmp_path, corpus / "shards" / "P2"), launcher=launcher, env=env
    )
    recorded = json.loads((tmp_path / "run.json").read_text())["environment"]["mpi"]
    assert recorded.startswith("Open MPI" if "MPI4PY_LIBMPI" in env else "MPICH"), recorded


def test_ssgd_run_on_four_ranks(corpus, tmp_path):
    mpiexec(4, *train_command(corpus, tmp_path, corpus / "shards" / "P4"))
    metrics = pd.read_csv(tmp_path / "metrics.tsv", sep="\t")
    intervals = metrics[metrics.kind == "interval"]
    assert sorted(intervals["rank"].unique()) == [0, 1, 2, 3]
    assert (intervals.communication_s > 0).all()
    epochs = metrics[metrics.kind == "epoch"]
    assert epochs.frames.iloc[0] == intervals[intervals.epoch == 1].frames.sum()
    assert json.loads((tmp_path / "run.json").read_text())["learners"] == 4


def test_a_failing_rank_ends_the_job_with_its_name(corpus, tmp_path):
    shards = tmp_path / "shards"
    shutil.copytree(corpus / "shards" / "P2", shards)
    (shards / "shard1.tsv").unlink()
    (shards / "shard1.tsv").mkdir()  # rank 1 alone fails: its shard cannot be read
    start = time.monotonic()
    result = mpiexec(2, *train_command(corpus, tmp_path / "run", shards), check=False, timeout=120)
    assert result.returncode != 0
    assert "asrscale train: ssgd: rank 1 of 2: IsADirectoryError" in result.stderr
    assert time.monotonic() - start < 60
    assert not Path(tmp_path / "run" / "model.pt").exists()


PROPERTIES = ROOT / "tests" / "fixtures" / "mpi_programs" / "algorithm_properties.py"


def check(ranks, corpus, case, *arguments, transport="auto"):
    env = {"ASRSCALE_TEST_TRANSPORT": transport}
    result = mpiexec(
        ranks, sys.executable, PROPERTIES, corpus, case, *arguments, timeout=120, env=env
    )
    assert result.stdout.count(f"{case} holds") == ranks, result.stdout + result.stderr


@pytest.mark.parametrize("algorithm", ["ssgd", "kavg", "adpsgd", "hadpsgd", "asgd", "ma", "bmuf"])
def test_every_algorithm_with_one_learner_is_seq(corpus, algorithm):
    # MA is SEQ once its Kaldi extras (natural gradient, capped change) are off
    options = {"natural_gradient": False, "max_param_change": 0} if algorithm == "ma" else {}
    check(
        2 if algorithm == "asgd" else 1,
        corpus,
        "matches_seq_with_one_learner",
        algorithm,
        json.dumps(options),
    )


def test_kavg_with_k1_matches_ssgd_step_for_step(corpus):
    check(2, corpus, "kavg_k1_matches_ssgd")


def test_kavg_replicas_are_identical_after_averaging(corpus):
    check(3, corpus, "kavg_averages_every_k")


# gossip and a server's messages over either transport: MPI's, or torch.distributed's point to
# point (Gloo here, NCCL between GPUs) with their envelopes by MPI
@pytest.mark.parametrize("learners, transport", [(2, "mpi"), (3, "mpi"), (4, "mpi"), (4, "torch")])
def test_adpsgd_pairwise_averaging_keeps_the_mean_and_terminates(corpus, learners, transport):
    check(learners, corpus, "adpsgd_keeps_the_mean_and_ends", transport=transport)


@pytest.mark.parametrize("transport", ["mpi", "torch"])
def test_adpsgd_gossip_is_answered_while_the_peer_computes(corpus, transport):
    """Told by an order of events on the passive learner, not by seconds: every averaging the
    active learner asks for after the passive one began a long computation is answered before
    that computation ends (algorithm_properties.py)."""
    check(2, corpus, "adpsgd_answers_while_its_peer_computes", transport=transport)


@pytest.mark.parametrize("transport", ["mpi", "torch"])
def test_asgd_server_applies_every_gradient_exactly_once_with_consistent_staleness(
    corpus, transport
):
    check(4, corpus, "asgd_applies_every_gradient_once", transport=transport)


@pytest.mark.parametrize("learners, transport", [(3, "mpi"), (4, "mpi"), (4, "torch")])
def test_hadpsgd_keeps_the_models_inside_a_node_identical(corpus, learners, transport):
    check(learners, corpus, "hadpsgd_keeps_nodes_identical", transport=transport)


@pytest.mark.parametrize("fault", ["hanging", "dying"])
def test_a_hanging_or_dying_rank_ends_the_job_in_bounded_time(corpus, fault):
    start = time.monotonic()
    result = mpiexec(
        3,
        sys.executable,
        PROPERTIES,
        corpus,
        f"a_{fault}_rank_ends_the_job",
        check=False,
        timeout=90,
    )
    assert result.returncode != 0
    assert time.monotonic() - start < 60
    if fault == "hanging":
        # whichever waiting rank notices first names itself and what it was waiting in
        # (SSGD's step: its gradient averaged while computed)
        assert re.search(
            r"ssgd: rank [02] of 3: no progress for 3 s in AveragedGradient", result.stderr
        ), result.stderr


def test_an_ssgd_job_killed_mid_run_resumes_to_the_model_of_an_uninterrupted_run(corpus, tmp_path):

    often = dict(epochs=4, checkpoint_steps=2)
    mpiexec(2, *train_command(corpus, tmp_path / "whole", corpus / "shards" / "P2", **often))
    killed = tmp_path / "killed"
    command = train_command(corpus, killed, corpus / "shards" / "P2", **often)
    launcher = default_launcher()
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "PYTHONPATH": str(ROOT / "src"),
        **launcher_environment(launcher),
    }
    job = subprocess.Popen(
        [launcher, "-n", "2", *map(str, command)],
        env=env,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 120
    while (
        not list(killed.glob("checkpoints/step00000000[4-9]/complete"))
        and time.monotonic() < deadline
    ):
        time.sleep(0.02)
    os.killpg(job.pid, signal.SIGKILL)  # as a preempted job's end: no clean-up of its own
    job.wait()
    assert not (killed / "model.pt").exists() and not (killed / "metrics.tsv").exists()
    mpiexec(2, *command)
    whole, resumed = (
        torch.load(d / "model.pt", weights_only=False)["model"]
        for d in (tmp_path / "whole", killed)
    )
    assert all(torch.equal(whole[name], resumed[name]) for name in whole)
    metrics = [
        pd.read_csv(d / "metrics.tsv", sep="\t").drop(columns=TIMES)
        for d in (tmp_path / "whole", killed)
    ]
    assert metrics[0].equals(metrics[1])
    assert json.loads((killed / "run.json").read_text())["resumed"]


@pytest.mark.parametrize("algorithm, node_size", [("ssgd", None), ("kavg", None), ("hadpsgd", 2)])
def test_torch_distributed_gives_mpis_model_and_is_recorded(corpus, tmp_path, algorithm, node_size):
    """The path NCCL takes between GPUs (torch.distributed set up from the MPI ranks), here with
    Gloo between CPUs: the same run as through MPI (H-ADPSGD: one node of two, its allreduce), and
    the run records what its exchanges went by, and how many bytes."""
    models = {}
    for transport in ("mpi", "torch"):
        out = tmp_path / transport
        world = dict(MPI_WORLD, transport=transport, node_size=node_size)
        mpiexec(
            2,
            *train_command(corpus, out, corpus / "shards" / "P2", algorithm, world=world, epochs=1),
        )
        models[transport] = torch.load(out / "model.pt", weights_only=False)["model"]
        record = json.loads((out / "run.json").read_text())
        assert record["world"]["transport"] == {"mpi": "mpi", "torch": "gloo"}[transport]
        assert record["exchanges"]["bytes"] > 0 and record["exchanges"]["seconds"] > 0
    assert all(torch.equal(models["mpi"][name], models["torch"][name]) for name in models["mpi"])


@pytest.mark.parametrize("algorithm, ranks", [("adpsgd", 4), ("asgd", 3)])
def test_a_job_that_explodes_stops_on_every_rank_and_ends_cleanly(
    corpus, tmp_path, algorithm, ranks
):
    """Real ranks stop together where they meet (a checkpoint within the epoch), the gossip
    responders and the server too: the job ends with exit 0 and the run is marked diverged."""

    shards = corpus / "shards" / f"P{ranks - (algorithm == 'asgd')}"
    command = train_command(
        corpus, tmp_path, shards, algorithm, lr=1e4, batch_size=4, checkpoint_steps=4
    )
    result = mpiexec(ranks, *command, timeout=180)
    diverged, metrics, _, _ = diverged_run(tmp_path)
    assert (diverged["epoch"], diverged["step"]) == (
        1,
        4,
    ) and "diverged at epoch 1, step 4" in result.stdout
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("algorithm, ranks", [("asgd", 3), ("kavg", 2)])
def test_a_rejected_epoch_rolls_back_every_rank_and_the_server(corpus, tmp_path, algorithm, ranks):
    """newbob on real ranks, made to reject the second epoch: every learner (and ASGD's server)
    goes back to the first epoch's checkpoint; the job ends cleanly, its model its best."""
    shards = corpus / "shards" / f"P{ranks - (algorithm == 'asgd')}"
    command = train_command(corpus, tmp_path, shards, algorithm, epochs=3, schedule="newbob")
    result = mpiexec(
        ranks,
        sys.executable,
        ROOT / "tests" / "fixtures" / "mpi_programs" / "rejected_epoch.py",
        *command[4:],
        timeout=300,
    )
    assert (
        "Traceback" not in result.stderr
        and "rejected: back to the last accepted epoch" in result.stdout
    )
    record = json.loads((tmp_path / "run.json").read_text())
    epochs = pd.read_csv(tmp_path / "metrics.tsv", sep="\t").query("kind == 'epoch'")
    assert epochs.accepted.tolist() == [1, 0, 1] and epochs.lr.iloc[2] == pytest.approx(
        epochs.lr.iloc[1] / 2
    )
    assert record["best_dev_loss"] == pytest.approx(
        epochs[epochs.accepted == 1].dev_loss.min(), rel=1e-5
    )
    assert torch.load(tmp_path / "model.pt", weights_only=False)["epoch"] == record["best_epoch"]
