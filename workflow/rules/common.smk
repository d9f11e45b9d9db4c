import os
import sys

from asrscale.io import atomic_write_json, atomic_write_text
from asrscale.settings import validate
from asrscale.study import SUBSETS, Study
from asrscale.worlds.devices import uses_gpu


envvars:
    "PATH",


# Rules call `python -m asrscale` and `mpiexec`: the tools first from the environment that runs
# Snakemake (a venv needs no activation; a conda env of --sw-deployment-method conda is activated
# in front of it), the package from this repository (a conda env does not install it). A prefix
# of one's own replaces Snakemake's bash strict mode, so it is restated: with it a job fails when
# any command of a pipeline does (training's output goes through tee).
shell.prefix(f"set -euo pipefail; export PYTHONPATH={Path(workflow.basedir) / 'src'}; ")
os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"

# every key checked, every default filled in, before any job starts (the schema and the study
# resolver live in the package: src/asrscale/config.schema.yaml, src/asrscale/study.py)
validate(config)
STUDY = Study(config)
RUN = "results/{corpus}/studies/{study}/runs/{world}/{algorithm}/{variant}/P{learners}/seed{seed}"


wildcard_constraints:
    corpus=STUDY.corpus,
    study=STUDY.name,
    subset="|".join(SUBSETS),
    algorithm="[a-z_]+",
    variant="default|[a-z_.]+=[^/]+",
    learners="[0-9][0-9]*",
    world="mpi|sim-[A-Za-z0-9_-]+",
    seed="[0-9][0-9]*",
    part="[0-9][0-9]*",
    stage="[a-z-]+",


def run_of(wildcards):
    """The run a rule's wildcards name."""
    return STUDY.run_of(
        wildcards.world,
        wildcards.algorithm,
        wildcards.variant,
        wildcards.learners,
        wildcards.seed,
    )


def source_tables(wildcards):
    """The files that list a subset's utterances, and the audio files an import or extraction of
    it found bad (their watch lists): editing or fixing one imports the subset again."""
    watch_lists = [Path(f"results/{STUDY.corpus}/data/{wildcards.subset}.watch")]
    watch_lists += Path(f"results/{STUDY.corpus}/feats/{wildcards.subset}").glob(
        "part*.watch"
    )
    watched = [
        Path(path)
        for watch in watch_lists
        if watch.is_file()
        for path in watch.read_text().splitlines()
        if Path(path).is_file()
    ]
    return watched + STUDY.source_tables(wildcards.subset)


def skipped_reports():
    """Every report of utterances left out, by import (own corpora) and by feature extraction."""
    stages = ["data", "feats"] if STUDY.imported else ["feats"]
    return [
        f"results/{STUDY.corpus}/{stage}/{subset}/skipped.tsv"
        for stage in stages
        for subset in SUBSETS
    ]


def simulation_inputs(wildcards):
    """A simulated run needs the machine's calibration; an MPI run nothing more."""
    if wildcards.world == "mpi":
        return {}
    return {
        "calibration": f"results/{wildcards.corpus}/studies/{wildcards.study}/calibration.json"
    }


def write_settings(path, log, settings):
    """A stage's or a run's settings file (workflow/rules/settings.smk), and a line of log."""
    atomic_write_json(path, settings)
    atomic_write_text(log, f"wrote {path}\n")


def language_model(wildcards):
    """The ARPA file of decoding: the training transcripts' model, or your own (decode.lm)."""
    lm = config["decode"]["lm"]
    return f"results/{wildcards.corpus}/lm/words.arpa" if lm == "train" else lm
