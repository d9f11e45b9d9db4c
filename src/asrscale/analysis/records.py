"""A study's record: the small files its report and verdicts are made from, kept in the repository
(records/<study>/) so that anyone can read them again, or analyse them another way, without
training anything: `asrscale record` writes one from a study's gathered tables (the workflow's
`record` rule), `asrscale rerender` makes the report from it.

A record holds every gathered table (asrscale.config.paths.TABLES, gzipped: the test utterances'
word errors are most of it), what the word LM knows of dev and test (lm.json), the cost model's
replay of the published speedups, the utterances left out as bad input (skipped/<n>/skipped.tsv),
the report's settings (its title and the study's configuration) and what made it (commit, date)."""

import gzip
import json
import shutil
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pandas as pd

from asrscale.analysis.convergence import (
    NOISE,
    NOISE_EPOCHS,
    backtest,
    noise_of,
    smallest_factor,
)
from asrscale.analysis.findings import analyse
from asrscale.analysis.measures import assess, curves_of
from asrscale.analysis.report import make_report
from asrscale.analysis.tables import load
from asrscale.config.paths import TABLES
from asrscale.costmodel.fitted import Band
from asrscale.errors import UserError
from asrscale.io import atomic_write_json
from asrscale.provenance import git_commit

PUBLISHED = "published-speedups.tsv.gz"


def write_record(
    tables: list[Path],
    lm_statistics: Path,
    published_speedups: Path,
    skipped: list[Path],
    settings: Path,
    out: Path,
) -> None:
    """`asrscale record`: the files of a study's report (as `asrscale report` takes them) into
    `out`."""
    by_name = {Path(table).name.removesuffix(".tsv"): Path(table) for table in tables}
    if missing := sorted(set(TABLES) - set(by_name)):
        raise UserError(f"record: the tables {missing} are missing from {sorted(map(str, tables))}")
    out.mkdir(parents=True, exist_ok=True)
    for name in TABLES:
        _gzipped(by_name[name], out / f"{name}.tsv.gz")
    _gzipped(published_speedups, out / PUBLISHED)
    shutil.copyfile(lm_statistics, out / "lm.json")
    for index, folder in enumerate(skipped):
        if (Path(folder) / "skipped.tsv").is_file():
            (out / "skipped" / str(index)).mkdir(parents=True, exist_ok=True)
            shutil.copyfile(
                Path(folder) / "skipped.tsv", out / "skipped" / str(index) / "skipped.tsv"
            )
    made = {"commit": git_commit(), "date": time.strftime("%Y-%m-%d"), "from": str(by_name["runs"])}
    atomic_write_json(
        out / "record.json", {"report": json.loads(Path(settings).read_text()), "made": made}
    )


def _gzipped(source: Path, target: Path) -> None:
    """`source` gzipped into `target`, with no time in its header (the same table, the same
    bytes)."""
    with (
        open(source, "rb") as plain,
        open(target, "wb") as raw,
        gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as packed,
    ):
        shutil.copyfileobj(plain, packed)


def rerender(record: Path, out: Path, figures: Path) -> None:
    """`asrscale rerender`: a recorded study's report and verdicts, made again from its record, its
    runs assessed again by today's rules of analysis (`reassessed`)."""
    settings = _settings(record)
    with _reassessed_tables(record) as tables:
        make_report(
            tables,
            record / "lm.json",
            record / PUBLISHED,
            figures,
            settings["title"],
            out,
            _skipped(record),
            settings["config"],
        )


def record_claims(record: Path) -> pd.DataFrame:
    """A recorded study's claims decided again by today's rules, as its report shows them
    (asrscale.analysis.claims.verdicts), without drawing the report."""
    settings = _settings(record)
    with _reassessed_tables(record) as tables:
        loaded = load(tables)
    lm = json.loads((record / "lm.json").read_text())
    published = pd.read_csv(record / PUBLISHED, sep="\t")
    skipped = [folder / "skipped.tsv" for folder in _skipped(record)]
    return analyse(loaded, lm, published, skipped, settings["config"]).claims


def _settings(record: Path) -> dict:
    """The report settings a record keeps (its title and the study's configuration)."""
    if not (record / "record.json").is_file():
        raise UserError(
            f"{record} is not a study's record (no record.json; `snakemake ... record` makes one)"
        )
    return json.loads((record / "record.json").read_text())["report"]


def _skipped(record: Path) -> list[Path]:
    return sorted(
        (path.parent for path in (record / "skipped").glob("*/skipped.tsv")),
        key=lambda f: int(f.name),
    )


@contextmanager
def _reassessed_tables(record: Path):
    """The record's table files, its runs assessed again (`reassessed`), while in the context."""
    with tempfile.TemporaryDirectory() as folder:
        runs = Path(folder) / "runs.tsv"
        reassessed(record, _settings(record)["config"]).to_csv(runs, sep="\t", index=False)
        yield [runs if name == "runs" else record / f"{name}.tsv.gz" for name in TABLES]


def record_made(record: Path) -> dict:
    """What made a record: its commit, date and source."""
    return json.loads((record / "record.json").read_text())["made"]


def record_config(record: Path) -> dict:
    """The study's configuration its record was made with."""
    return json.loads((record / "record.json").read_text())["report"]["config"]


def reassessed(record: Path, config: dict) -> pd.DataFrame:
    """A record's runs assessed again (asrscale.analysis.measures.assess: convergence, targets,
    speedups) by the study's report settings and today's rules, from its epochs: a rule of analysis
    changed since the study ran applies to it."""
    rule = {key: config["report"][key] for key in ("target_dev_loss", "plateau_max_dev_ter")}
    rule |= {key: config["decode"][key] for key in ("lm_weights", "word_bonuses")}
    return assess(_runs(record, config), _epochs(record), rule, Band.fitted())


def _runs(record: Path, config: dict) -> pd.DataFrame:
    """A record's runs table. Runs recorded before the table said which measure chose their model
    (`best_by`) take the study's train.best_by."""
    text = {"transports": str, "diverged": str}  # mostly empty: text, not missing numbers
    runs = pd.read_csv(record / "runs.tsv.gz", sep="\t", dtype=text).fillna(dict.fromkeys(text, ""))
    if "best_by" not in runs:
        runs = runs.assign(best_by=config["train"].get("best_by") or "dev_loss")
    return runs


def _epochs(record: Path) -> pd.DataFrame:
    return pd.read_csv(record / "epochs.tsv.gz", sep="\t")


def recorded_curves(records: list[Path]) -> pd.DataFrame:
    """Every run's curve (asrscale.analysis.convergence.Curve) in `records`, each once (a run a
    study took from another, or shares with it, is the same curve), with its study, algorithm,
    learners and seed."""
    rows, seen = [], set()
    for record in records:
        runs = _runs(record, record_config(record)).drop_duplicates("run").set_index("run")
        for run, curve in curves_of(runs.reset_index(), _epochs(record)).items():
            key = (curve.measure, curve.values.round(6).tobytes(), curve.rates.round(6).tobytes())
            if key in seen:
                continue
            seen.add(key)
            found = runs.loc[run]
            rows.append(
                {
                    "study": record.name,
                    "algorithm": found.algorithm,
                    "learners": int(found.learners),
                    "seed": int(found.seed),
                    "curve": curve,
                }
            )
    return pd.DataFrame(rows)


def seq_tails(records: list[Path], measure: str) -> list[np.ndarray]:
    """`measure` at every epoch of SEQ's runs of `NOISE_EPOCHS` epochs or more in `records` (each
    run once), whose tails are flat: what one epoch's noise is measured on."""
    found = {}
    for record in records:
        epochs = _epochs(record).drop_duplicates(["run", "epoch"]).sort_values(["run", "epoch"])
        for _, mine in epochs[epochs.algorithm == "seq"].groupby("run"):
            if len(mine) >= NOISE_EPOCHS:
                values = mine[measure].to_numpy(float)
                found[values.round(6).tobytes()] = values
    return list(found.values())


def backtest_records(records: list[Path]) -> dict:
    """The convergence rule's constants measured again on `records`: each measure's noise on the
    flat tails of SEQ's long runs, and the bound's back-test at the constant in use and the
    smallest that passes it (asrscale.analysis.convergence)."""
    curves = list(recorded_curves(records).curve)
    return {
        "curves": len(curves),
        "noise": {measure: noise_of(seq_tails(records, measure)) for measure in NOISE},
        "in_use": backtest(curves),
        "smallest": smallest_factor(curves),
    }
