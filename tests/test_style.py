"""The project's own lint: ruff on the package and tests, snakefmt and Snakemake's linter on the
workflow, and no function in the package or the benchmarks longer than a screen."""

import ast
import subprocess
import sys

from conftest import BIN, ROOT


def run(*command):
    return subprocess.run(list(map(str, command)), capture_output=True, text=True, cwd=ROOT, timeout=300)


def test_ruff():
    for command in (["check"], ["format", "--check"]):
        result = run(BIN / "ruff", *command, "src", "tests", "benchmarks")
        assert result.returncode == 0, result.stdout + result.stderr


def test_snakefmt():
    result = run(BIN / "snakefmt", "--check", "Snakefile", "workflow")
    assert result.returncode == 0, result.stdout + result.stderr


def test_snakemake_lint():
    result = run(sys.executable, "-m", "snakemake", "--lint", "--configfile", "studies/quick.yaml")
    assert result.returncode == 0, result.stdout + result.stderr


def test_no_function_is_longer_than_50_lines():
    """A function reads top to bottom on one screen: a longer one is split into named parts."""
    paths = [path for folder in ("src", "benchmarks", "tests") for path in sorted((ROOT / folder).rglob("*.py"))]
    functions = [(path, node) for path in paths for node in ast.walk(ast.parse(path.read_text()))
                 if isinstance(node, ast.FunctionDef)]  # fmt: skip
    lines = {f"{path.relative_to(ROOT)}:{node.lineno} {node.name}": node.end_lineno - node.lineno + 1
             for path, node in functions}  # fmt: skip
    assert {name: n for name, n in lines.items() if n > 50} == {}
