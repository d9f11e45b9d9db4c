"""Target 7: the default study's wall time and peak memory, stage by stage, from the benchmark
files Snakemake wrote while it ran (README command 1 writes them to logs/benchmarks/<corpus>/)."""

import csv
from collections import defaultdict
from pathlib import Path

from benchmarks.common import Bench, default_config


def stage_files(root: Path, study: str) -> dict[str, list[Path]]:
    """The corpus's stages (<root>/<stage>/*.tsv) and the study's (<root>/<study>/<stage>/...,
    <root>/<study>/calibrate.tsv); other studies' folders (those with a train/ folder) are left
    out."""
    stages = defaultdict(list)
    for folder in sorted(root.iterdir()):
        if folder.is_dir() and not (folder / "train").is_dir():
            stages[folder.name] = sorted(folder.glob("*.tsv"))
    for path in sorted((root / study).rglob("*.tsv")):
        stages[path.relative_to(root / study).parts[0].removesuffix(".tsv")].append(path)
    return stages


def run(bench: Bench) -> None:
    root: Path = bench.study_benchmarks
    default = default_config()
    study = default["study"].get("name") or default["corpus"]["name"]
    if not (root / study).is_dir():
        print(
            f"  no Snakemake benchmark files of study {study} under {root}: run the default study "
            "first"
        )
        return
    for stage, files in stage_files(root, study).items():
        jobs = []
        for path in files:
            with open(path) as file:
                (row,) = csv.DictReader(file, delimiter="\t")
            jobs.append((float(row["s"]), float(row["max_rss"])))
        seconds = [s for s, _ in jobs]
        bench.add(
            "end-to-end",
            f"{stage}: {len(jobs)} job(s), job seconds in all",
            sum(seconds),
            "s",
            longest_job_s=max(seconds),
            source=str(root),
        )
        bench.add(
            "end-to-end", f"{stage}: peak memory of one job", max(rss for _, rss in jobs), "MB"
        )
