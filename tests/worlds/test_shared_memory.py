"""The MPI shared memory a killed attempt of a SLURM job left, found by MPICH's own name for it and
removed unless a process still maps it (the requeue itself: tests/workflow/test_slurm.py)."""

import mmap
import os
import subprocess
import sys

from asrscale.worlds.shared_memory import clear, fnv1a, segment_id, stale_segments


def test_a_job_steps_segment_is_named_as_mpich_names_it():
    assert fnv1a("") == 0x811C9DC5 and fnv1a("a") == 0xE40C292C  # FNV-1a's published test vectors
    # the segment that SLURM job 506's ranks (step 0 under `srun --mpi=pmi2`, the PyPI MPICH 4)
    # left in /dev/shm when scancel killed them on the test cluster
    assert segment_id("506", 0) == "29b42fbc"


def test_only_the_jobs_segments_that_no_process_maps_are_removed(tmp_path):
    job, other = "885", "886"
    stale = [
        tmp_path / f"mpich_shm_{segment_id(job, 1)}_0",
        tmp_path / f"mpich_vci_{segment_id(job, 0)}_1",
    ]
    live = tmp_path / f"mpich_shm_{segment_id(job, 3)}_0"  # a step of the job still running
    kept = [live, tmp_path / f"mpich_shm_{segment_id(other, 1)}_0", tmp_path / "mpich_notes.txt"]
    for path in stale + kept:
        path.write_bytes(bytes(4096))
    with open(live, "r+b") as file, mmap.mmap(file.fileno(), 4096):
        assert stale_segments(job, tmp_path) == sorted(stale)
        assert clear(job, tmp_path) == sorted(stale)
    assert sorted(tmp_path.iterdir()) == sorted(kept)
    assert clear(job, tmp_path) == [live]  # unmapped now: what a killed step leaves


def test_outside_a_slurm_job_the_command_asks_for_one():
    environment = {name: value for name, value in os.environ.items() if name != "SLURM_JOB_ID"}
    command = [sys.executable, "-m", "asrscale", "clear-shared-memory"]
    result = subprocess.run(command, capture_output=True, text=True, env=environment)
    assert result.returncode == 1 and "SLURM_JOB_ID is unset and --job not given" in result.stderr
