"""The project's own lint: ruff on the package and tests, snakefmt and Snakemake's linter on the
workflow. Long functions are ruff's to flag (C901, PLR0915: pyproject.toml): a function split
into named steps, never packed onto fewer lines."""

import subprocess
import sys

import pytest

from helpers import BIN, ROOT


def run(*command):
    return subprocess.run(
        list(map(str, command)), capture_output=True, text=True, cwd=ROOT, timeout=300
    )


def test_ruff():
    for command in (["check"], ["format", "--check"]):
        result = run(BIN / "ruff", *command, "src", "tests", "benchmarks")
        assert result.returncode == 0, result.stdout + result.stderr


def test_snakefmt():
    result = run(BIN / "snakefmt", "--check", "Snakefile", "workflow")
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.slow
def test_snakemake_lint():
    result = run(sys.executable, "-m", "snakemake", "--lint", "--configfile", "studies/quick.yaml")
    assert result.returncode == 0, result.stdout + result.stderr
