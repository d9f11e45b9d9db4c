import json
import os
import sys


envvars:
    "PATH",


# Rules call `python -m asrscale` and `mpiexec`: the package is found in the repository itself,
# and the tools first in the environment that runs Snakemake (a venv needs no activation; a
# conda env of --sw-deployment-method conda is activated in front of it).
SOURCE = Path(workflow.basedir) / "src"
shell.prefix(f"export PYTHONPATH={SOURCE}; ")
os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
sys.path.insert(0, str(SOURCE))

# the algorithm classes are the single source of how many ranks each one starts
from asrscale.algorithms import algorithm_class

CORPUS = config["corpus"]["name"]
STUDY = config["study"].get("name") or CORPUS
SUBSETS = ["train", "dev", "test"]


wildcard_constraints:
    corpus=CORPUS,
    study=STUDY,
    subset="|".join(SUBSETS),
    algorithm="[a-z_]+",
    learners="[0-9][0-9]*",
    seed="[0-9][0-9]*",
    part="[0-9][0-9]*",


def as_json(section):
    """A config section as one shell word for `asrscale --<section> '<json>'`; `jobs` (how
    many parallel jobs a stage is split into) is the workflow's, not the stage's."""
    settings = {key: value for key, value in section.items() if key != "jobs"}
    return f"'{json.dumps(settings, separators=(',', ':'))}'"


for index, entry in enumerate(config["study"]["runs"]):
    if entry["algorithm"] == "seq" and entry["learners"] != [1]:
        raise ValueError(
            f"config: study.runs[{index}]: seq is one learner, so learners must be [1], not {entry['learners']}"
        )


def study_runs():
    """Every (algorithm, learners, seed) the study asks for."""
    return [
        (entry["algorithm"], learners, seed)
        for entry in config["study"]["runs"]
        for learners in entry["learners"]
        for seed in config["study"]["seeds"]
    ]


def run_dir(algorithm, learners, seed):
    return f"results/{CORPUS}/runs/{algorithm}/P{learners}/seed{seed}"


def train_settings(wildcards):
    """config's train section, with the algorithm's own `train` overrides and its options."""
    options = dict(config["algorithms"].get(wildcards.algorithm, {}))
    settings = dict(config["train"], **options.pop("train", {}))
    settings.update(
        algorithm=wildcards.algorithm, seed=int(wildcards.seed), options=options
    )
    return as_json(settings)


def launcher(wildcards):
    """One rank runs as a plain process; P learners (plus any server ranks) as MPI ranks."""
    ranks = int(wildcards.learners) + algorithm_class(wildcards.algorithm).servers
    return "" if ranks == 1 else config["mpi"]["launcher"].format(ranks=ranks)
