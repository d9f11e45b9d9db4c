"""`python -m benchmarks`: asrscale's benchmark suite, separate from the tests.

Every figure is a ratio against a baseline measured in the same run on the same machine, the
median of several repetitions; absolute times are kept in the JSON for information. The suite
makes its own copy of the default study's corpus with the workflow's rules (config.yaml's
corpus, features, model and batch; reused by later runs) and writes `results.json` and a table,
`results.md`. `--quick` proves that every benchmark runs, on a tiny corpus, with figures that
mean nothing.
"""

import argparse
import json
import os
import time
from pathlib import Path

from asrscale.provenance import environment
from benchmarks import (
    allreduce,
    asgd_server,
    decoding,
    end_to_end,
    features,
    fused,
    language_model,
    noise_scale,
    simulation,
    trainer,
)
from benchmarks.common import ROOT, prepare

SUITE = {
    "trainer": trainer.run,  # 1 and 2
    "simulation": simulation.run,  # 3
    "fused": fused.run,  # 3, on a GPU: 64 learners as one
    "allreduce": allreduce.run,  # 4
    "features": features.run,  # 5
    "asgd": asgd_server.run,  # 6
    "decoding": decoding.run,  # 8: the word LM's decode against greedy
    "language-model": language_model.run,  # 9: a word LM of LibriSpeech's size
    "noise-scale": noise_scale.run,  # 10: the gradient noise scale's cost
    "end-to-end": end_to_end.run,  # 7
}


def table(figures: list[dict]) -> str:
    lines = ["| benchmark | figure | value | target | met |", "|---|---|---|---|---|"]
    for f in figures:
        value = (
            f"{f['value']:.3g} {f['unit']}"
            if isinstance(f["value"], float)
            else f"{f['value']} {f['unit']}"
        )
        met = "" if f["met"] is None else "yes" if f["met"] else "**no**"
        lines.append(
            f"| {f['benchmark']} | {f['figure']} | {value.strip()} | {f['target'] or ''} | {met} |"
        )
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument(
        "--quick", action="store_true", help="a tiny corpus and one repetition: proves it runs"
    )
    parser.add_argument("--only", nargs="+", choices=list(SUITE), help="run only these benchmarks")
    parser.add_argument(
        "--work", type=Path, help="corpus and scratch (default benchmarks/work[-quick])"
    )
    parser.add_argument(
        "--out", type=Path, default=ROOT / "benchmarks", help="folder for results.json/.md"
    )
    parser.add_argument(
        "--study-benchmarks",
        type=Path,
        default=ROOT / "logs" / "benchmarks" / "espeak",
        help="end to end: the Snakemake benchmark files of a finished default study",
    )
    args = parser.parse_args(argv)
    work = args.work or ROOT / "benchmarks" / ("work-quick" if args.quick else "work")
    start = time.perf_counter()
    print(f"preparing the benchmark corpus in {work}", flush=True)
    bench = prepare(work, args.quick)
    os.chdir(bench.work)  # the corpus's tables hold paths relative to its folder
    bench.study_benchmarks = args.study_benchmarks
    seconds = {"prepare": time.perf_counter() - start}
    for name in args.only or SUITE:
        print(f"{name}:", flush=True)
        began = time.perf_counter()
        SUITE[name](bench)
        seconds[name] = time.perf_counter() - began
    missed = [f["figure"] for f in bench.figures if f["met"] is False]
    summary = {
        "quick": args.quick,
        "seconds": time.perf_counter() - start,
        "seconds_by_benchmark": seconds,
        "environment": environment(),
        "targets_missed": missed,
        "figures": bench.figures,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(summary, indent=1) + "\n")
    env = summary["environment"]
    header = (
        f"# Benchmarks{' (quick: figures mean nothing)' if args.quick else ''}\n\n{env['cpu']}, "
        f"{env['cpu_count']} cores, torch {env['packages']['torch']}, commit {env['commit']}; "
        f"{summary['seconds']:.0f} s\n\n"
    )
    (args.out / "results.md").write_text(header + table(bench.figures))
    print(table(bench.figures))
    print(f"{len(missed)} target(s) missed" if missed else "every target met")


if __name__ == "__main__":
    main()
