"""The package's arrows point down. Its layers, top to bottom; a module imports only from its own
layer and those beneath it (and reads only their data files), and no import (a function's own
included) closes a circle."""

import ast
import graphlib
import re

import asrscale.costmodel
from helpers import ROOT

PACKAGE = ROOT / "src" / "asrscale"

LAYERS = (
    ("the command line", ("asrscale.__main__", "asrscale.cli")),
    ("the analysis of runs", ("asrscale.analysis",)),
    ("the estimates: calibration, cost model, plan", ("asrscale.costmodel",)),
    ("the paths a study reads, checked", ("asrscale.inputs",)),
    ("decoding", ("asrscale.decoding",)),
    ("training: the loop, learners, algorithms, fused kernels", ("asrscale.training",)),
    ("the study's protocol: tuning, twins", ("asrscale.protocol",)),
    ("the worlds and their clock", ("asrscale.worlds",)),
    ("the models", ("asrscale.models",)),
    ("the data stages", ("asrscale.data",)),
    ("the configuration", ("asrscale.config",)),
    ("the machine and its record", ("asrscale.provenance", "asrscale.machine")),
    ("the base", ("asrscale.progress", "asrscale.jobs", "asrscale.io", "asrscale.errors")),
    ("the package", ("asrscale",)),
)


def module_of(path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_of(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def imported(path) -> set[str]:
    """The asrscale modules a file imports, wherever in it (a function's own import too), and the
    packages whose data files it reads (`resources.files("asrscale.<package>")`)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if _reads_files_of(node):
            names.add(node.args[0].value)
        elif isinstance(node, ast.ImportFrom) and node.module:
            modules = {f"{node.module}.{alias.name}" for alias in node.names}
            names |= {name for name in modules if name in MODULES} or {node.module}
        elif isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
    return {name for name in names if name.split(".")[0] == "asrscale"}


def _reads_files_of(node) -> bool:
    """Whether `node` is a call `resources.files("<a package>")`."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "files"
        and len(node.args) == 1
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    )


def layer_of(module: str) -> int:
    """The layer of the longest prefix that names `module` or a package holding it."""
    found = [
        (len(prefix), place)
        for place, (_, prefixes) in enumerate(LAYERS)
        for prefix in prefixes
        if module == prefix or module.startswith(prefix + ".")
    ]
    return max(found)[1]


def test_every_module_has_its_layer():
    stated = {prefix for _, prefixes in LAYERS for prefix in prefixes}
    assert stated <= set(MODULES), sorted(stated - set(MODULES))
    top = {name for name in MODULES if name.count(".") == 1}
    assert top <= stated, f"modules of no layer: {sorted(top - stated)}"


def test_no_module_imports_one_above_it():
    upward = [
        f"{module} ({LAYERS[layer_of(module)][0]}) imports {name} ({LAYERS[layer_of(name)][0]})"
        for module, path in MODULES.items()
        for name in sorted(imported(path))
        if layer_of(name) < layer_of(module)
    ]
    assert not upward, "\n".join(upward)


def test_no_imports_close_a_circle():
    graph = {module: imported(path) - {module} for module, path in MODULES.items()}
    graphlib.TopologicalSorter(graph).prepare()  # raises CycleError naming the circle


def test_the_estimates_modules_import_only_those_above_them_in_their_list():
    order = re.findall(r"^- `(\w+)`", asrscale.costmodel.__doc__, flags=re.MULTILINE)
    assert sorted(order) == sorted(path.stem for path in (PACKAGE / "costmodel").glob("[!_]*.py"))
    for place, module in enumerate(order):
        found = imported(PACKAGE / "costmodel" / f"{module}.py")
        inside = {name.split(".")[2] for name in found if name.startswith("asrscale.costmodel.")}
        assert inside <= set(order[:place]), (
            f"costmodel.{module} imports {sorted(inside - set(order[:place]))}"
        )
