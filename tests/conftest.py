"""The suite's fixtures; what tests share besides them is in helpers.py (imported first: it pins
the CPU's code path before torch computes)."""

import getpass
import os
import subprocess
from pathlib import Path

import pytest

from helpers import cluster_answers, write_tiny_corpus


@pytest.fixture(scope="session")
def corpus(tmp_path_factory) -> Path:
    """A tiny real corpus: eSpeak audio, Kaldi data dirs, features, tokens and shards for 1, 2 and 4
    learners."""
    return write_tiny_corpus(tmp_path_factory.mktemp("corpus"))


@pytest.fixture(scope="module")
def cluster():
    if not cluster_answers():
        if os.environ.get("ASRSCALE_REQUIRE_SLURM"):
            raise AssertionError(
                "ASRSCALE_REQUIRE_SLURM is set, but no SLURM cluster answers sinfo"
            )
        pytest.skip("needs a SLURM cluster: slurm/local-cluster.sh start")
    yield
    # a test that failed mid-run leaves its jobs behind: they would hold the cluster's cores
    subprocess.run(["scancel", "--user", getpass.getuser()], capture_output=True)
