"""Mutation testing of the layer that turns runs into verdicts: `python -m benchmarks.mutation`.

A test suite that passes whatever the verdict code says guards nothing: mutmut plants one small
bug at a time (a flipped comparison, another constant, a dropped argument) in each module named in
`MODULES` and runs that module's tests against it. A mutant the tests fail on is killed; one they
pass is a survivor. The score of a module is the share killed (a time-out counts as killed, a
mutant no test reaches as a survivor), against a target of `TARGET`. A survivor is either a test
owed or an equivalent mutant (no input can tell it from the original): the equivalent ones are
explained, one line each, in this folder's `*.yaml` (mutant name: why), and the record lists every
survivor with its diff and its explanation, or none.

What it cannot see: mutmut mutates code inside functions only, so a module's constants (the margins,
SPEED_SEEDS, RESAMPLES) and the claims table (each claim's learner count and claimed speedup) are
never mutated; tests/analysis/test_claims.py and tests/analysis/test_halves.py decide each claim at
its own learner counts and each rule at its thresholds to cover them instead. An explanation is
keyed by mutmut's numbered name, which an edit of its function renumbers: re-run a module after
editing it, and check that each explanation still fits its diff in the record.

Each module runs in a scratch copy of the working tree (its files as git sees them, uncommitted ones
included), so that nothing here is touched. It writes `benchmarks/mutation.json` and
`benchmarks/mutation.md`. Outside CI (mutmut is the `mutation` extra: `pip install -c
constraints.txt -e '.[mutation]'`)."""

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

from asrscale.provenance import environment

ROOT = Path(__file__).resolve().parents[2]
MUTMUT = Path(sys.executable).with_name("mutmut")
TARGET = 0.85
#: a test of 40 s that decodes a model twice in two processes (its determinism), which every
#: mutant of decoding would run again while others check the same code in a second
SLOW_DECODE = (
    "tests/decoding/test_decode.py::"
    "test_the_same_model_decoded_twice_in_one_process_or_in_two_gives_the_same_hypotheses"
)
#: each module mutated, with the tests that judge it
MODULES = {
    "analysis/claims.py": ["tests/analysis/test_claims.py"],
    "analysis/halves.py": ["tests/analysis/test_claims.py", "tests/analysis/test_halves.py"],
    "analysis/measures.py": ["tests/analysis/test_measures.py", "tests/analysis/test_claims.py"],
    "analysis/bootstrap.py": ["tests/analysis/test_bootstrap.py"],
    "decoding/lm.py": [
        "tests/decoding/test_lm.py",
        "tests/decoding/test_decode.py",
        f"--deselect={SLOW_DECODE}",
    ],
    "decoding/decode.py": ["tests/decoding/test_decode.py", f"--deselect={SLOW_DECODE}"],
    # the fair race's tuning protocol: the grid's choice, its edge, the chosen run adopted, halving
    "protocol/tuning.py": ["tests/protocol/test_tuning.py"],
    # its grids: which runs each configuration's grid trains, which halving decides
    "config/grids.py": [
        "tests/protocol/test_tuning.py",
        "tests/config/test_study.py",
        "tests/costmodel/test_plan.py",
    ],
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
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\n")
    for name in filter(None, listed):
        if (ROOT / name).is_file():
            (where / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, where / name)
    # mutmut runs the tests in its own copy of src/ and tests/: what they read goes too (the
    # configuration; the study files and the workflow's rules, which the study resolver's tests
    # read)
    settings = {
        "source_paths": ["src"],
        "only_mutate": [f"src/asrscale/{module}"],
        "also_copy": ["config.yaml", "studies", "Snakefile", "workflow"],
        "pytest_add_cli_args_test_selection": tests,
        "pytest_add_cli_args": ["-p", "no:cacheprovider", "-q", "-o", "addopts="],
    }
    lines = [f"{key} = {json.dumps(value)}" for key, value in settings.items()]
    with (where / "pyproject.toml").open("a") as pyproject:
        pyproject.write("\n[tool.mutmut]\n" + "\n".join(lines) + "\n")
    return where


def mutate(module: str, tests: list[str], children: int) -> dict:
    """One module's mutants, each with its status, and every survivor's diff."""
    where, began = scratch_copy(module, tests), time.perf_counter()
    try:
        subprocess.run(
            [MUTMUT, "run", "--max-children", str(children)],
            cwd=where,
            capture_output=True,
            check=False,
        )
        return collect(where, module, tests, time.perf_counter() - began)
    finally:
        shutil.rmtree(where, ignore_errors=True)


def collect(where: Path, module: str, tests: list[str], seconds: float) -> dict:
    """What mutmut found in its folder `where`: each mutant's status, every survivor's diff."""
    listed = subprocess.run(
        [MUTMUT, "results", "--all", "true"], cwd=where, capture_output=True, text=True
    )
    statuses = dict(re.findall(r"^\s*(\S+): (.+?)\s*$", listed.stdout, re.MULTILINE))
    if not statuses:
        raise RuntimeError(
            f"mutmut found no mutant of {module} (its output: "
            f"{listed.stdout[-2000:]}{listed.stderr})"
        )
    diffs = {
        name: subprocess.run(
            [MUTMUT, "show", name], cwd=where, capture_output=True, text=True
        ).stdout
        for name, status in statuses.items()
        if status in SURVIVED
    }
    return {
        "module": module,
        "tests": tests,
        "commit": environment()["commit"],
        "seconds": seconds,
        "statuses": statuses,
        "diffs": diffs,
    }


def score(result: dict) -> dict:
    """A module's counts and its score: killed (time-outs too) over every mutant."""
    statuses = list(result["statuses"].values())
    counts = {status: statuses.count(status) for status in sorted(set(statuses))}
    killed = sum(counts.get(status, 0) for status in KILLED)
    return {
        "mutants": len(statuses),
        "counts": counts,
        "killed": killed,
        "score": killed / len(statuses),
    }


def record(results: list[dict], explained: dict[str, str]) -> str:
    """The Markdown record: each module's score, then every survivor with its diff and why."""
    lines = [
        "# Mutation testing: the verdict layer",
        "",
        "mutmut over each module with its tests (`python -m benchmarks.mutation`); target "
        f"{100 * TARGET:.0f}% "
        "killed in each module. Each module's row is of its latest run.",
        "",
        "| module | tests | mutants | killed | survived | no tests | score | target met | run | "
        "seconds |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for result in results:
        found = score(result)
        counts = found["counts"]
        tests = ", ".join(test for test in result["tests"] if not test.startswith("-"))
        lines.append(
            f"| {result['module']} | {tests} | {found['mutants']} | {found['killed']} | "
            f"{counts.get('survived', 0)} | {counts.get('no tests', 0)} | "
            f"{100 * found['score']:.1f}% | "
            f"{'yes' if found['score'] >= TARGET else '**no**'} | {result['commit']} | "
            f"{result['seconds']:.0f} |"
        )
    for result in results:
        lines += ["", f"## Survivors of {result['module']}", ""]
        for name, diff in result["diffs"].items():
            why = explained.get(name, "**not explained: a test owed**")
            lines += [
                f"- `{name}` ({result['statuses'][name]}): {why}",
                "",
                "  ```diff",
                *(f"  {line}" for line in diff.strip().splitlines()[1:]),
                "  ```",
            ]
        if not result["diffs"]:
            lines.append("None.")
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks.mutation", description=__doc__)
    parser.add_argument(
        "--only", nargs="+", choices=list(MODULES), help="mutate only these modules"
    )
    parser.add_argument("--children", type=int, default=2, help="mutants tested at once")
    parser.add_argument(
        "--out", type=Path, default=ROOT / "benchmarks", help="folder for mutation.json/.md"
    )
    args = parser.parse_args(argv)
    if not MUTMUT.exists():
        parser.error(
            f"no mutmut beside this Python ({MUTMUT}): pip install -c constraints.txt -e "
            "'.[mutation]'"
        )
    began, results = time.perf_counter(), []
    for module in args.only or MODULES:
        print(f"{module}:", flush=True)
        results.append(mutate(module, MODULES[module], args.children))
        found = score(results[-1])
        print(
            f"  {found['killed']} of {found['mutants']} killed ({100 * found['score']:.1f}%)",
            flush=True,
        )
    kept = args.out / "mutation.json"
    earlier = json.loads(kept.read_text())["modules"] if kept.exists() else []
    ran = {result["module"] for result in results}
    results = [
        result for result in earlier if result["module"] not in ran and result["module"] in MODULES
    ] + results
    results.sort(key=lambda result: list(MODULES).index(result["module"]))
    args.out.mkdir(parents=True, exist_ok=True)
    kept.write_text(json.dumps({"modules": results}, indent=1, ensure_ascii=False) + "\n")
    (args.out / "mutation.md").write_text(record(results, explanations()))
    print(f"{time.perf_counter() - began:.0f} s")
    missed = [result["module"] for result in results if score(result)["score"] < TARGET]
    print(
        f"below {100 * TARGET:.0f}%: {', '.join(missed)}"
        if missed
        else "every module at its target"
    )
