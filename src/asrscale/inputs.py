"""The paths a study reads, checked before any job starts. A configuration resolves without
reading a file (`asrscale.config.study`), so that a study made on another machine can be planned
here; the workflow and `asrscale check` then check every path it names, each by its reader: a
source of your own corpus for its format's files, decode.lm for an ARPA file."""

from pathlib import Path

from asrscale.config.study import Study
from asrscale.data.corpus.formats import source_problem
from asrscale.decoding.lm import arpa_problem
from asrscale.errors import ConfigError


def path_problems(study: Study) -> list[str]:
    """Every path the study reads that is not what its key says, each as "<key>: <path> <why>":
    a source that is not of its format (a folder without its format's files, an empty file) and
    an LM that is not an ARPA file."""
    problems = [
        f"{key}.path: {source['path']} {problem}"
        for key, source in study.sources_by_key()
        if (problem := source_problem(source))
    ]
    lm = study.config["decode"]["lm"]
    if lm != "train" and (problem := arpa_problem(Path(lm))):
        problems.append(f"decode.lm: {lm} {problem}, nor 'train'")
    return problems


def checked_study(config: dict) -> Study:
    """The study `config` resolves to, its paths checked: one error names every wrong one."""
    study = Study(config)
    if problems := path_problems(study):
        listed = "; ".join(problems)
        count = "" if len(problems) == 1 else f"{len(problems)} paths: "
        raise ConfigError(f"config: {count}{listed}")
    return study
