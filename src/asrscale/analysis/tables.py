"""A study's gathered tables (`asrscale.analysis.gather`), loaded for its analysis: every run,
every epoch, the sweeps' points joined with their runs, and the tables of its figures."""

import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from asrscale.analysis.measures import KEYS


@dataclass(frozen=True)
class Tables:
    runs: pd.DataFrame  # one row per run reported (asrscale.analysis.gather)
    epochs: pd.DataFrame
    points: pd.DataFrame  # every sweep's points, each joined with its runs
    staleness: pd.DataFrame
    exchanges: pd.DataFrame
    confusions: pd.DataFrame
    learners: pd.DataFrame
    utterances: (
        pd.DataFrame
    )  # each trained run's (`run`) words and word errors of every test utterance
    tuning: pd.DataFrame  # every point of every tuned configuration's grid (study.tuning)


def load(files: list[Path]) -> Tables:
    """The tables of a study from its gathered files (`<name>.tsv`, or gzipped as a record keeps
    them: every one of asrscale.config.paths.TABLES)."""
    by_name = {
        Path(file).name.split(".")[0]: Path(file) for file in files
    }  # runs.tsv, or a record's runs.tsv.gz

    def read(name: str, **options) -> pd.DataFrame:
        return pd.read_csv(by_name[name], sep="\t", **options)

    runs = read("runs").sort_values(KEYS)
    sweeps = read("sweeps", dtype={"value": str})
    # each value as the configuration wrote it (a number, a boolean, a string), decoded once
    points = sweeps.assign(value=sweeps.value.map(json.loads)).merge(
        runs, on=["algorithm", "variant", "learners", "world"]
    )
    return Tables(
        runs,
        read("epochs"),
        points,
        read("staleness"),
        read("exchanges"),
        read("confusions"),
        read("learners"),
        read("utterances", dtype={"utt": str}),
        read("tuning"),
    )
