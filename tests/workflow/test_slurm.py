"""The workflow on a real SLURM cluster through a site's profile, the shipped one with the site's
settings (`site_profile`), as a user runs it: `snakemake --profile <theirs>`.
`slurm/local-cluster.sh start` makes a one-machine cluster (CI does). Skipped where no cluster
answers, unless ASRSCALE_REQUIRE_SLURM is set."""

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import torch
import yaml

from asrscale.worlds.shared_memory import segment_id
from helpers import LOCAL, ROOT, TIMES, WITHOUT_ACCOUNTING, site_profile

pytestmark = pytest.mark.slow  # starts Snakemake, MPI ranks, SLURM or a browser

# the tiny study with fewer runs, untuned: each of its jobs a SLURM job
STUDY = (ROOT / "studies" / "quick.yaml", ROOT / "tests" / "fixtures" / "on-slurm.yaml")


def profile_command(workdir, *configfiles, targets=()):
    """The cut-down tiny study (with `configfiles` over it) through the site's profile."""
    profile = site_profile(Path(workdir), **LOCAL)
    return [
        sys.executable,
        "-m",
        "snakemake",
        "--profile",
        str(profile),
        "--directory",
        str(workdir),
        "--configfile",
        *map(str, STUDY + configfiles),
        *WITHOUT_ACCOUNTING,
        "--slurm-keep-successful-logs",
        *map(str, targets),
    ]


def profile_run(workdir, *configfiles, targets=()):
    result = subprocess.run(
        profile_command(workdir, *configfiles, targets=targets),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    if result.returncode != 0:
        raise AssertionError(
            f"snakemake --profile failed:\n{result.stdout[-4000:]}\n{result.stderr[-6000:]}"
        )


@pytest.fixture(scope="module")
def study(cluster, tmp_path_factory):
    """The cut-down tiny study, every job a SLURM job; the report rendered here. Before it, the
    same command's dry run, whose printed commands are kept in dry-run.txt."""
    workdir = tmp_path_factory.mktemp("slurm")
    dry = subprocess.run(
        [*profile_command(workdir), "-n"], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert dry.returncode == 0, dry.stderr[-4000:]
    (workdir / "dry-run.txt").write_text(dry.stdout)
    profile_run(workdir)
    return workdir


def test_the_tiny_study_runs_on_slurm_to_its_report(study):
    report = (study / "reports" / "tiny.html").read_text()
    assert report.count("<img") >= 5 and "SEQ (the baseline)" in report
    # every stage went through SLURM, the report did not
    (log,) = (study / ".snakemake" / "log").glob("*.snakemake.log")
    submitted = set(
        re.findall(
            r"submitted with SLURM jobid \d+ \(log: \S+/slurm_logs/rule_(\w+)/", log.read_text()
        )
    )
    assert {"synthesise", "features", "calibrate", "train", "log_probs", "decode"} <= submitted
    assert "report" not in submitted
    run = (
        study
        / "results"
        / "tiny"
        / "studies"
        / "tiny"
        / "runs"
        / "mpi"
        / "ssgd"
        / "default"
        / "P2"
        / "seed1"
    )
    record = json.loads((run / "run.json").read_text())
    assert record["world"] == {"kind": "mpi", "ranks": 2, "nodes": 1, "transport": "mpi"}
    assert record["threads_per_learner"] == 1


def test_a_dry_run_through_the_profile_prints_the_srun_each_training_job_ran(study):
    """docs/slurm.md: a dry run through the profile shows the srun a job will run (the profile's
    `cores` caps threads alike in both). Each multi-rank training job's srun lines, as its job on
    the cluster printed them, are those of the dry run before it, shapes and paths alike."""
    srun = re.compile(
        r"^Shell command: .*?\{ (srun --mpi=none .*? asrscale train .*?) +; \}", re.MULTILINE
    )
    planned = sorted(srun.findall((study / "dry-run.txt").read_text()))
    logs = sorted((study / ".snakemake" / "slurm_logs" / "rule_train").glob("tiny_tiny_*/*.log"))
    ran = sorted(line for log in logs for line in set(srun.findall(log.read_text())))
    assert planned and planned == ran, (planned, ran)
    assert all(
        " && srun --mpi=pmi2 --ntasks=2 --ntasks-per-node=2 --cpus-per-task=1 python -m asrscale "
        "train " in line
        for line in ran
    )


def slurm_job(study_name: str) -> str | None:
    """The id of the study's training job in SLURM's queue."""
    queue = subprocess.run(
        ["squeue", "-h", "-o", "%i %k"], capture_output=True, text=True
    ).stdout.split("\n")
    found = [
        line.split()[0] for line in queue if f"rule_train_wildcards_tiny_{study_name}_" in line
    ]
    return found[0] if found else None


def wait_for(condition, what: str, snakemake: subprocess.Popen | None = None, timeout: float = 300):
    """The condition's result once true; an error where `snakemake` ended or time ran out first."""
    deadline = time.monotonic() + timeout
    while not (result := condition()):
        if snakemake is not None and snakemake.poll() is not None:
            raise AssertionError(
                f"snakemake ended before {what}:\n{snakemake.stdout.read()[-6000:]}"
            )
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.05)
    return result


def test_a_training_job_preempted_and_cancelled_resumes_to_the_uninterrupted_model(study):
    """Preemption: SLURM requeues the job, which starts again. Cancellation (or a time limit):
    the job fails and the profile's retries submit it again. Either way the run resumes from its
    last checkpoint and ends with an uninterrupted run's model and metrics, no row lost or twice."""
    runs = {}  # each study's run, a path in the working directory
    for name in ("preempted", "uninterrupted"):
        settings = {
            "study": {
                "name": name,
                "runs": [{"algorithm": "ssgd", "learners": [2], "world": "mpi"}],
                "sweeps": [],
            },
            "train": {"epochs": 8, "checkpoint_steps": 5},
        }
        (study / f"{name}.yaml").write_text(yaml.safe_dump(settings))
        runs[name] = Path("results/tiny/studies") / name / "runs/mpi/ssgd/default/P2/seed1"
    run = study / runs["preempted"]
    command = profile_command(
        study, study / "preempted.yaml", targets=[runs["preempted"] / "model.pt"]
    )
    output = {"stdout": subprocess.PIPE, "stderr": subprocess.STDOUT, "text": True}
    snakemake = subprocess.Popen(command, cwd=ROOT, **output)
    try:
        log = requeue_then_cancel(study, run, snakemake)
    finally:
        snakemake.kill()  # nothing left running where a wait gave up (a no-op where it has ended)
    profile_run(study, study / "uninterrupted.yaml", targets=[runs["uninterrupted"] / "model.pt"])

    resumed = json.loads((run / "run.json").read_text())["resumed"]
    # every attempt's output is kept (Snakemake empties the job's log for each attempt)
    attempts = log.with_suffix(".attempts.log").read_text()
    assert len(re.findall(r"^== attempt ", attempts, re.MULTILINE)) == len(resumed) + 1, attempts
    assert attempts.count("resuming from") == len(resumed), attempts
    assert len(resumed) == 2, (
        resumed,
        attempts,
    )  # once after the requeue, once after the cancellation
    # where SLURM started the requeued job again (rather than the profile's retry submitting a new
    # one, which the executor plugin does when it takes the requeue for a failure: timing), its
    # first step removed the shared memory of the ranks it killed (asrscale.worlds.shared_memory)
    jobs = re.findall(r"^== attempt .*, SLURM job (\d+)$", attempts, re.MULTILINE)
    cleared = re.search(
        rf"^removed /dev/shm/mpich_shm_\w+ on .* SLURM job {jobs[0]} left$", attempts, re.MULTILINE
    )
    assert bool(cleared) == (jobs[0] == jobs[1]), attempts
    models = [
        torch.load(study / r / "model.pt", weights_only=False)["model"] for r in runs.values()
    ]
    assert all(torch.equal(models[0][name], models[1][name]) for name in models[0])
    metrics = [pd.read_csv(study / r / "metrics.tsv", sep="\t") for r in runs.values()]
    assert not metrics[0].duplicated(["kind", "epoch", "step", "rank"]).any()
    assert metrics[0].drop(columns=TIMES).equals(metrics[1].drop(columns=TIMES))


RANKS = """
import time
from mpi4py import MPI

world = MPI.COMM_WORLD
print("rank", world.Get_rank(), "of", world.Get_size(), flush=True)
world.Barrier()
time.sleep(8)
world.Barrier()
print("done", flush=True)
"""


def test_a_requeued_job_clears_what_its_killed_ranks_left_and_its_ranks_start_again(
    cluster, tmp_path
):
    """A training job's launch without the workflow around it (its plugin may take a requeue for a
    failure and submit a new job): one task clears the shared memory the job's killed ranks left,
    then 2 ranks start. Requeued while they run, the same job starts again and its ranks finish;
    without the clearing they fail in MPI_Init or hang (docs/slurm.md)."""
    program, log, script = tmp_path / "ranks.py", tmp_path / "job.log", tmp_path / "job.sh"
    program.write_text(RANKS)
    script.write_text(
        f"#!/bin/bash\n#SBATCH --ntasks=2 --requeue --time=3 --output={log} --open-mode=append\n"
        'echo "== attempt ${SLURM_RESTART_COUNT:-0}"\n'
        f"srun --mpi=none --ntasks=1 --ntasks-per-node=1 {sys.executable} -m asrscale "
        "clear-shared-memory"
        f" && srun --mpi=pmi2 --ntasks=2 {sys.executable} {program}\n"
    )
    submitted = subprocess.run(
        ["sbatch", "--parsable", str(script)], cwd=ROOT, capture_output=True, text=True
    )
    job = submitted.stdout.strip().split(";")[0]
    lines = lambda: log.read_text().splitlines() if log.exists() else []  # noqa: E731
    wait_for(
        lambda: sum(line.startswith("rank ") for line in lines()) == 2,
        "the ranks to start",
        timeout=60,
    )
    subprocess.run(["scontrol", "requeue", job], check=True)
    wait_for(lambda: start_now(job), "the requeued job to pend", timeout=60)
    try:
        wait_for(
            lambda: lines().count("done") == 2, "the requeued job's ranks to finish", timeout=150
        )
    except AssertionError as error:  # what the job printed and where SLURM holds it, to tell why
        state = subprocess.run(["squeue", "-h", "-j", job, "-o", "%T %r"], capture_output=True)
        raise AssertionError(f"{error}; squeue: {state.stdout!r}; log:\n{lines()}") from None
    text = log.read_text()
    assert "== attempt 1" in text, text
    # the killed ranks' step (1: the clearing is step 0), MPICH's segment of its node 0
    assert f"removed /dev/shm/mpich_shm_{segment_id(job, 1)}_0 on " in text, text


def requeue_then_cancel(study: Path, run: Path, snakemake: subprocess.Popen) -> Path:
    """Requeue the run's job once it has checkpointed, then cancel it once it has resumed and
    checkpointed again; wait for the workflow's end. Returns the job's log."""
    wait_for(
        lambda: list(run.glob("checkpoints/step*/complete")), "the first checkpoint", snakemake
    )
    job = wait_for(lambda: slurm_job("preempted"), "the job in the queue", snakemake)
    subprocess.run(["scontrol", "requeue", job], check=True)
    # SLURM holds a requeued job back for a while; let it start now
    wait_for(lambda: start_now(job), "the requeued job to pend", snakemake)
    log = study / "logs" / "tiny" / "preempted" / "train" / "mpi" / "ssgd" / "default-P2-seed1.log"
    wait_for(lambda: resumed_and_checkpointed(run, log), "a checkpoint after resuming", snakemake)
    assert not (run / "model.pt").exists()
    subprocess.run(
        ["scancel", wait_for(lambda: slurm_job("preempted"), "the resumed job", snakemake)],
        check=True,
    )
    printed, _ = snakemake.communicate(timeout=1800)
    assert snakemake.returncode == 0, printed[-6000:]
    return log


def start_now(job: str) -> bool:
    """Whether SLURM took the requeued job's start time to be now: once it is pending again (an
    update while it still completes is overridden by the requeue's delay)."""
    state = subprocess.run(
        ["squeue", "-h", "-j", job, "-o", "%T"], capture_output=True, text=True
    ).stdout.strip()
    update = ["scontrol", "update", f"jobid={job}", "StartTime=now"]
    return state == "PENDING" and subprocess.run(update, capture_output=True).returncode == 0


def resumed_and_checkpointed(run, log) -> bool:
    """The job that started again has resumed and written a checkpoint of its own since."""
    text = log.read_text() if log.exists() else ""
    if "resuming from" not in text:
        return False
    resumed_at = int(text.split("checkpoints/step")[1][:9])
    return any(
        int(mark.parent.name[4:]) > resumed_at for mark in run.glob("checkpoints/step*/complete")
    )
