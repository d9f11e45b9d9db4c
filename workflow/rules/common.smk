import functools
import json
import logging
import math
import os
import sys
from dataclasses import replace

from asrscale import jobs, machine
from asrscale.config import paths
from asrscale.config.files import named_in_files
from asrscale.config.study import TUNED
from asrscale.data.corpus.formats import listings
from asrscale.errors import ConfigError
from asrscale.inputs import checked_study
from asrscale.io import atomic_write_json, atomic_write_text
from snakemake.logging import LogEvent, logger


envvars:
    "PATH",


# The rules read the configuration only through the study it resolves to (src/asrscale/config/):
# every key checked and every default filled in, once, before any job starts; a wrong key named
# with the file and line that set it. Every path is a template of asrscale.config.paths, its
# fields the rules' wildcards.
def study_of(config):
    files = ["config.yaml", *workflow.overwrite_configfiles]
    try:
        return checked_study(config)
    except ConfigError as error:
        raise named_in_files(error, files) from None


STUDY = study_of(config)

# Rules call `python -m asrscale` and `mpiexec`: the tools first from the environment that runs
# Snakemake (a venv needs no activation; a conda env of --sw-deployment-method conda is activated
# in front of it), the package from this repository (a conda env does not install it). The venv
# holds an mpiexec only with the mpich extra, whose library mpi4py's wheel then loads first: its
# mpiexec must start the ranks. Without the extra (a cluster's install), mpiexec and the library
# mpi4py loads are both the site's, as `module load` set PATH and LD_LIBRARY_PATH (docs/slurm.md).
# A prefix of one's own replaces Snakemake's bash strict mode, so it is restated: with it a job
# fails when any command of a pipeline does (training's output goes through tee). Two settings reach every job
# in its environment, so that changing them reruns nothing: the CPU's code path
# (study.cpu_arithmetic, src/asrscale/machine.py; MPI ranks inherit it) and whether a
# calibration keeps a busy machine's rates (study.busy_machine).
shell.prefix(
    f"set -euo pipefail; export PYTHONPATH={Path(workflow.basedir) / 'src'}; "
    f"export {machine.ARITHMETIC}={STUDY.machine['cpu_arithmetic']}; "
    f"export {machine.BUSY_MACHINE}={STUDY.machine['busy_machine']}; "
)
os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"


wildcard_constraints:
    corpus=STUDY.corpus,
    study=STUDY.name,
    subset="|".join(STUDY.subsets),
    test_set="|".join(STUDY.test_sets),
    algorithm="[a-z_]+",
    variant="default|tuned|[a-z_.]+=[^/]+",
    learners="[0-9][0-9]*",
    cluster="mpi|sim-[A-Za-z0-9_-]+",
    seed="[0-9][0-9]*",
    part="[0-9][0-9]*",
    stage="[a-z-]+",


def fill(template, **fields):
    """A path template (asrscale.config.paths) with some fields filled, the rest left as wildcards."""
    for name, value in fields.items():
        template = template.replace(f"{{{name}}}", str(value))
    return template


def run_of(wildcards):
    """The run a rule's wildcards name."""
    return STUDY.run_of(
        wildcards.cluster,
        wildcards.algorithm,
        wildcards.variant,
        wildcards.learners,
        wildcards.seed,
    )


def watched(wildcards):
    """The files that list a subset's utterances, and the audio files an import or extraction of
    it found bad (their watch lists): editing or fixing one imports the subset again."""
    watch_lists = [Path(STUDY.at(paths.DATA_WATCH, subset=wildcards.subset))]
    parts = Path(STUDY.at(paths.FEATURE_PART, subset=wildcards.subset, part=0)).parent
    watch_lists += parts.glob("part*.watch")
    bad_audio = [
        Path(path)
        for watch in watch_lists
        if watch.is_file()
        for path in watch.read_text().splitlines()
        if Path(path).is_file()
    ]
    return bad_audio + listings(STUDY.sources(wildcards.subset))


def skipped_reports():
    """The folders whose skipped.tsv lists the utterances left out: by import (your own corpus)
    and by feature extraction."""
    stages = [paths.DATA, paths.FEATURES] if STUDY.imported else [paths.FEATURES]
    return expand(stages, corpus=STUDY.corpus, subset=STUDY.subsets)


def own_lm_file(wildcards):
    """Your own LM's file (decode.lm), imported again when it changes; none where it is estimated."""
    return [STUDY.own_language_model] if STUDY.own_language_model else []


def simulation_inputs(wildcards):
    """A simulated run needs the machine's calibration; an MPI run nothing more."""
    if run_of(wildcards).world == "mpi":
        return {}
    return {
        "calibration": paths.CALIBRATION.format(
            corpus=wildcards.corpus, study=wildcards.study
        )
    }


def tuning_choice(wildcards):
    """A tuned run's settings need its configuration's choice (study.tuning); others nothing."""
    if wildcards.variant != TUNED:
        return {}
    return {
        "choice": STUDY.tuning_file(replace(run_of(wildcards), seed=STUDY.tuning_seed))
    }


def configuration_of(wildcards):
    """The tuned configuration (its run at the tuning seed) a tuning's or halving's wildcards name."""
    return STUDY.run_of(
        wildcards.cluster,
        wildcards.algorithm,
        TUNED,
        wildcards.learners,
        STUDY.tuning_seed,
    )


def grid_records(wildcards):
    """A configuration's grid runs, as trained (study.tuning), which its tuning chooses among."""
    return [
        f"{STUDY.folder(run)}/run.json"
        for run in STUDY.grid(configuration_of(wildcards))
    ]


def simulated_arguments(wildcards, input, threads):
    """A simulated run's calibration and cores; a run on MPI ranks none."""
    if "calibration" not in input.keys():
        return ""
    return f"--calibration {input.calibration} --cores {threads}"


def run_folder(wildcards, output):
    """A training job's run folder (`asrscale train --out`): its first output's."""
    return Path(output[0]).parent


def halving_decision(wildcards):
    """A halved grid's run goes on from its rung as its grid's decision says (study.tuning.halving);
    other runs need nothing more."""
    tuned = STUDY.halved_grid(run_of(wildcards))
    return {"decision": STUDY.halving_file(tuned)} if tuned else {}


def halving_rungs(wildcards):
    """A configuration's halved grid runs at their rung, which its halving decides among."""
    halved = STUDY.halved_runs(configuration_of(wildcards))
    return [f"{STUDY.folder(run)}/rung.json" for run in halved]


def write_settings(path, log, settings):
    """A stage's or a run's settings file (workflow/rules/settings.smk), and a line of log."""
    atomic_write_json(path, settings)
    atomic_write_text(log, f"wrote {path}\n")


def say_wall_time(calibration, wall_time, paths):
    """The study's wall time at the speed its calibration timed (study.wall_time), in Snakemake's
    own output and in each of `paths` (workflow/rules/train.smk)."""
    said = machine.said_of(json.loads(Path(calibration).read_text()), wall_time)
    print(f"\n{said}\n", flush=True)
    for path in paths:
        atomic_write_text(path, f"{said}\n")


def write_run_settings(wildcards, input, path, log):
    """A run's settings file: a tuned run's with the train settings its grid chose."""
    choice = input.choice if "choice" in input.keys() else None
    chosen = json.loads(Path(choice).read_text())["chosen"] if choice else None
    write_settings(path, log, STUDY.run_settings(run_of(wildcards), chosen))
