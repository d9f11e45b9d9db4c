import json
import os
import sys

# Rules call `python -m asrscale` and `mpiexec`: the package is found in the repository itself,
# and the tools first in the environment that runs Snakemake (a venv needs no activation; a
# conda env of --sw-deployment-method conda is activated in front of it).
os.environ["PYTHONPATH"] = os.pathsep.join(
    filter(None, [str(Path(workflow.basedir) / "src"), os.environ.get("PYTHONPATH")])
)
os.environ["PATH"] = os.pathsep.join(
    [str(Path(sys.executable).parent), os.environ["PATH"]]
)

CORPUS = config["corpus"]["name"]
SUBSETS = ["train", "dev", "test"]
ASRSCALE = "python -m asrscale"


wildcard_constraints:
    corpus=CORPUS,
    subset="|".join(SUBSETS),
    algorithm="[a-z_]+",
    learners=r"\d+",
    seed=r"\d+",
    part=r"\d+",


def as_json(section):
    """A config section as one shell word for `asrscale --<section> '<json>'`; `jobs` (how
    many parallel jobs a stage is split into) is the workflow's, not the stage's."""
    settings = {key: value for key, value in section.items() if key != "jobs"}
    return "'" + json.dumps(settings, separators=(",", ":")) + "'"


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
    settings = dict(
        config["train"], algorithm=wildcards.algorithm, seed=int(wildcards.seed)
    )
    settings["options"] = config["algorithms"].get(wildcards.algorithm, {})
    return as_json(settings)


def launcher(wildcards):
    """One learner runs as a plain process; P learners as P MPI ranks."""
    learners = int(wildcards.learners)
    return "" if learners == 1 else config["mpi"]["launcher"].format(learners=learners)
