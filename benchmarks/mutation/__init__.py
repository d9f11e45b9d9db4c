"""Mutation testing of the layer that turns runs into verdicts: `python -m benchmarks.mutation`.

A test suite that passes whatever the verdict code says guards nothing: mutmut plants one small
bug at a time (a flipped comparison, another constant, a dropped argument) in each module named in
`MODULES` and runs that module's tests against it. A mutant the tests fail on is killed; one they
pass is a survivor. The score of a module is the share killed (a time-out counts as killed, a
mutant no test reaches as a survivor), against a target of `TARGET`. A survivor is either a test
owed or an equivalent mutant (no input can tell it from the original): the equivalent ones are
explained, one line each, in this folder's `*.yaml` (mutant name: why), and the record lists every
survivor with its diff and its explanation, or none.

Each module runs in a scratch copy of the working tree (its files as git sees them, uncommitted
ones included), so that nothing here is touched. It writes `benchmarks/mutation.json` and
`benchmarks/mutation.md`. Outside CI (mutmut is the `mutation` extra: `pip install -c constraints.txt
-e '.[mutation]'`).
"""

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
MUTMUT = Path(sys.executable).with_name("mutmut")
TARGET = 0.85
#: each module mutated, with the tests that judge it
MODULES = {
    "analysis/claims.py": ["tests/test_claims.py"],
    "analysis/halves.py": ["tests/test_claims.py", "tests/test_halves.py"],
    "analysis/measures.py": ["tests/test_measures.py", "tests/test_claims.py"],
    "analysis/bootstrap.py": ["tests/test_bootstrap.py"],
    "decoding/lm.py": ["tests/test_decode.py"],
    "decoding/decode.py": ["tests/test_decode.py"],
}
KILLED = ("killed", "timeout")
SURVIVED = ("survived", "no tests")


def explanations() -> dict[str, str]:
    """Every equivalent mutant's explanation, by mutant name, from this folder's YAML files."""
    found = {}
    for path in sorted(Path(__file__).parent.glob("*.yaml")):
        found |= yaml.safe_load(path.read_text()) or {}
    return found


def scratch_copy(module: str, tests: list[str]) -> Path:
    """The working tree's files (tracked, and untracked ones not ignored) in a new folder, with
    mutmut configured there to mutate `module` alone and judge it by `tests`."""
    where = Path(tempfile.mkdtemp(prefix="asrscale-mutation-"))
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout.split("\n")  # fmt: skip
    for name in filter(None, listed):
        if (ROOT / name).is_file():
            (where / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, where / name)
    settings = {"source_paths": ["src"], "only_mutate": [f"src/asrscale/{module}"],
                "pytest_add_cli_args_test_selection": tests,
                "pytest_add_cli_args": ["-p", "no:cacheprovider", "-q", "-o", "addopts="]}  # fmt: skip
    lines = [f"{key} = {json.dumps(value)}" for key, value in settings.items()]
    with (where / "pyproject.toml").open("a") as pyproject:
        pyproject.write("\n[tool.mutmut]\n" + "\n".join(lines) + "\n")
    return where


def mutate(module: str, tests: list[str], children: int) -> dict:
    """One module's mutants, each with its status, and every survivor's diff."""
    where, began = scratch_copy(module, tests), time.perf_counter()
    try:
        subprocess.run([MUTMUT, "run", "--max-children", str(children)], cwd=where, capture_output=True, check=False)
        listed = subprocess.run([MUTMUT, "results", "--all", "true"], cwd=where, capture_output=True, text=True)
        statuses = dict(re.findall(r"^\s*(\S+): (.+?)\s*$", listed.stdout, re.MULTILINE))
        diffs = {name: subprocess.run([MUTMUT, "show", name], cwd=where, capture_output=True, text=True).stdout
                 for name, status in statuses.items() if status in SURVIVED}  # fmt: skip
    finally:
        shutil.rmtree(where, ignore_errors=True)
    if not statuses:
        raise RuntimeError(f"mutmut found no mutant of {module} (its output: {listed.stdout[-2000:]}{listed.stderr})")
    return {"module": module, "tests": tests, "seconds": time.perf_counter() - began, "statuses": statuses,
            "diffs": diffs}  # fmt: skip


def score(result: dict) -> dict:
    """A module's counts and its score: killed (time-outs too) over every mutant."""
    statuses = list(result["statuses"].values())
    counts = {status: statuses.count(status) for status in sorted(set(statuses))}
    killed = sum(counts.get(status, 0) for status in KILLED)
    return {"mutants": len(statuses), "counts": counts, "killed": killed, "score": killed / len(statuses)}


def record(results: list[dict], explained: dict[str, str], seconds: float) -> str:
    """The Markdown record: each module's score, then every survivor with its diff and why."""
    lines = ["# Mutation testing: the verdict layer", "",
             f"mutmut over each module with its tests (`python -m benchmarks.mutation`), {seconds:.0f} s; target "
             f"{100 * TARGET:.0f}% killed in each module.", "",
             "| module | tests | mutants | killed | survived | no tests | score | target met |",
             "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for result in results:
        found = score(result)
        counts = found["counts"]
        lines.append(f"| {result['module']} | {', '.join(result['tests'])} | {found['mutants']} | {found['killed']} | "
                     f"{counts.get('survived', 0)} | {counts.get('no tests', 0)} | {100 * found['score']:.1f}% | "
                     f"{'yes' if found['score'] >= TARGET else '**no**'} |")  # fmt: skip
    for result in results:
        lines += ["", f"## Survivors of {result['module']}", ""]
        for name, diff in result["diffs"].items():
            why = explained.get(name, "**not explained: a test owed**")
            lines += [f"- `{name}` ({result['statuses'][name]}): {why}",
                      "", "  ```diff", *(f"  {line}" for line in diff.strip().splitlines()[1:]), "  ```"]  # fmt: skip
        if not result["diffs"]:
            lines.append("None.")
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks.mutation", description=__doc__)
    parser.add_argument("--only", nargs="+", choices=list(MODULES), help="mutate only these modules")
    parser.add_argument("--children", type=int, default=2, help="mutants tested at once")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks", help="folder for mutation.json/.md")
    args = parser.parse_args(argv)
    if not MUTMUT.exists():
        parser.error(f"no mutmut beside this Python ({MUTMUT}): pip install -c constraints.txt -e '.[mutation]'")
    began, results = time.perf_counter(), []
    for module in args.only or MODULES:
        print(f"{module}:", flush=True)
        results.append(mutate(module, MODULES[module], args.children))
        found = score(results[-1])
        print(f"  {found['killed']} of {found['mutants']} killed ({100 * found['score']:.1f}%)", flush=True)
    seconds = time.perf_counter() - began
    summary = [{**{k: v for k, v in r.items() if k != "diffs"}, **score(r)} for r in results]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "mutation.json").write_text(json.dumps({"seconds": seconds, "modules": summary}, indent=1) + "\n")
    (args.out / "mutation.md").write_text(record(results, explanations(), seconds))
    missed = [r["module"] for r in summary if r["score"] < TARGET]
    print(f"below {100 * TARGET:.0f}%: {', '.join(missed)}" if missed else "every module at its target")
