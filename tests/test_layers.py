"""The package's arrows point down: the cost model's modules import only those listed above them
in its docstring, nothing of the analysis above it, and what lies beneath it (the configuration,
data, models, learners, worlds) reads of it only its clock."""

import ast
import re

import asrscale.costmodel
from conftest import ROOT

PACKAGE = ROOT / "src" / "asrscale"
BENEATH = ("config", "data", "decoding", "models", "training", "worlds")


def is_module(name: str) -> bool:
    path = ROOT / "src" / name.replace(".", "/")
    return path.with_suffix(".py").is_file() or path.is_dir()


def imported(path) -> set[str]:
    """The asrscale modules a file imports, wherever in it (a function's own import too)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            modules = {f"{node.module}.{alias.name}" for alias in node.names}
            names |= {name for name in modules if is_module(name)} or {node.module}
        elif isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
    return {name for name in names if name.startswith("asrscale.")}


def test_the_cost_models_modules_import_only_those_above_them_and_nothing_of_the_analysis():
    order = re.findall(r"^- `(\w+)`", asrscale.costmodel.__doc__, flags=re.MULTILINE)
    assert sorted(order) == sorted(path.stem for path in (PACKAGE / "costmodel").glob("[!_]*.py"))
    for place, module in enumerate(order):
        found = imported(PACKAGE / "costmodel" / f"{module}.py")
        inside = {name.split(".")[2] for name in found if name.startswith("asrscale.costmodel.")}
        assert inside <= set(order[:place]), (
            f"costmodel.{module} imports {sorted(inside - set(order[:place]))}"
        )
        assert not {
            name for name in found if name.startswith(("asrscale.analysis", "asrscale.cli"))
        }, module


def test_beneath_the_cost_model_only_its_clock_is_read():
    for path in (PACKAGE / name for name in BENEATH):
        for source in path.rglob("*.py") if path.is_dir() else [path.with_suffix(".py")]:
            found = {name for name in imported(source) if name.startswith("asrscale.costmodel")}
            assert found <= {"asrscale.costmodel.clock"}, source
