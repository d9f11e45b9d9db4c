"""Each rule's conda environment (envs/, for --sw-deployment-method conda) holds every package its
stage's code imports: the stage's function in asrscale.cli, and what every module of the package
it reaches imports when it loads, followed import by import. An import inside a function is the
package's way of keeping a stage light (the corpus and feature jobs never load torch) and is not
followed; an import guarded against ImportError is optional (triton)."""

import ast
import re
import sys
from importlib import metadata
from pathlib import Path

import yaml

from helpers import ROOT

SRC = ROOT / "src"
PACKAGES = (
    metadata.packages_distributions()
)  # an importable name -> the distributions that provide it


def rules() -> dict[str, tuple[str, str]]:
    """Each rule that runs a stage: (its stage, its env file)."""
    found = {}
    for path in (ROOT / "workflow" / "rules").glob("*.smk"):
        for block in re.split(r"\n(?=\s*rule \w+:)", path.read_text()):
            rule = re.search(r"rule (\w+):", block)
            conda = re.search(r'conda:\s+"([^"]+)"', block)
            stage = re.search(r"python -m asrscale ([a-z-]+)", block)
            if rule and stage:
                assert conda, f"rule {rule.group(1)} runs a stage but names no conda environment"
                found[rule.group(1)] = (
                    stage.group(1),
                    (path.parent / conda.group(1)).resolve().name,
                )
    return found


def loaded(statements: list[ast.stmt]) -> list[ast.stmt]:
    """The import statements a module's body runs as it loads, leaving out optional ones."""
    found = []
    for node in statements:
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.append(node)
        elif isinstance(node, ast.If):
            found += loaded(node.body) + loaded(node.orelse)
        elif isinstance(node, ast.Try) and not any(
            "ImportError" in ast.unparse(h) for h in node.handlers
        ):
            found += loaded(node.body)
    return found


def imported(nodes, module: str) -> set[str]:
    """The modules these import statements import (relative imports resolved against `module`)."""
    names = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(module.split(".")[: -node.level] + ([base] if base else []))
            names.add(base)
            names |= {f"{base}.{alias.name}" for alias in node.names}
    return names


def source_of(module: str) -> Path | None:
    path = SRC / module.replace(".", "/")
    return next((p for p in (path.with_suffix(".py"), path / "__init__.py") if p.is_file()), None)


def third_party(stage: str) -> set[str]:
    """The top-level names of the packages outside the standard library that a stage imports."""
    cli = ast.parse((SRC / "asrscale" / "cli.py").read_text())
    function = next(
        node for node in cli.body if isinstance(node, ast.FunctionDef) and node.name == stage
    )
    todo, seen, outside = imported(ast.walk(function), "asrscale.cli"), set(), set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        root = name.split(".")[0]
        if root == "asrscale":
            path = source_of(name)
            if path is not None:
                todo |= imported(loaded(ast.parse(path.read_text()).body), name)
                todo |= {".".join(name.split(".")[:-1])} - {
                    ""
                }  # its package's __init__ loads first
        elif root not in sys.stdlib_module_names:
            outside.add(root)
    return outside


def listed(env: str) -> set[str]:
    """The packages an env file names, conda's and pip's, as normalised distribution names."""

    def names(items):
        for item in items:
            if isinstance(item, dict):
                yield from names(item.get("pip", []))
            else:
                yield re.split(r"[=<>! ]", item)[0].lower().replace("_", "-")

    return set(names(yaml.safe_load((ROOT / "envs" / env).read_text())["dependencies"]))


def test_every_rule_that_runs_a_stage_has_each_package_its_code_imports_in_its_environment():
    missing = {}
    for rule, (stage, env) in sorted(rules().items()):
        packages = {
            dist.lower().replace("_", "-")
            for name in third_party(stage.replace("-", "_"))
            for dist in PACKAGES.get(name, [name])
        }
        if absent := packages - listed(env):
            missing[rule] = (env, sorted(absent))
    assert not missing, missing
    assert len(rules()) >= 14  # every stage's rule was found


def test_the_import_graph_is_followed_into_the_package():
    """Decoding reaches the beam search (flashlight) through asrscale.decoding.beam, without torch
    (a CPU's job: the model's log-probabilities are log-probs'), and the report seaborn through
    asrscale.analysis.figures; a token set is made without torch."""
    assert {"flashlight", "jiwer", "kaldiio"} <= third_party("decode")
    assert "torch" not in third_party("decode") and "torch" in third_party("log_probs")
    assert {"seaborn", "jinja2", "yaml", "scipy"} <= third_party("report")
    assert "torch" not in third_party("tokens") and "triton" not in third_party("train")


def test_what_snakemakes_report_imports_is_installed_without_the_test_extra():
    """`snakemake --report` (README) imports packages Snakemake does not require (pygments, jinja2),
    each guarded against ImportError: asrscale requires them itself, so command 1's install has
    them (the suite's own install has pygments through pytest, which hid its absence)."""
    report = Path(metadata.distribution("snakemake").locate_file("snakemake/report"))
    guarded = set()
    for path in report.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Try) and any(
                "ImportError" in ast.unparse(h) for h in node.handlers
            ):
                guarded |= {name.split(".")[0] for name in imported(ast.walk(node), "snakemake")}

    def required(distribution: str) -> set[str]:
        return {
            re.split(r"[=<>!;\[ ]", r)[0].lower()
            for r in metadata.requires(distribution)
            if "extra ==" not in r
        }

    needed = {
        dist.lower()
        for name in guarded - sys.stdlib_module_names
        for dist in PACKAGES.get(name, [name])
    }
    assert {"pygments", "jinja2"} <= needed  # found where Snakemake imports them
    assert not needed - required("asrscale") - required("snakemake") - {"snakemake"}
