import json
import os

# Rules call `python -m asrscale`: the package is found from the repository itself, in a venv,
# a conda env (--sw-deployment-method conda) or on a cluster node alike.
os.environ["PYTHONPATH"] = os.pathsep.join(
    filter(None, [str(Path(workflow.basedir) / "src"), os.environ.get("PYTHONPATH")])
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


def as_json(value):
    """A config section as one shell word for `asrscale --<section> '<json>'`."""
    return "'" + json.dumps(value, separators=(",", ":")) + "'"


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
    settings = dict(config["train"], algorithm=wildcards.algorithm, seed=int(wildcards.seed))
    settings["options"] = config["algorithms"].get(wildcards.algorithm, {})
    return as_json(settings)


def launcher(wildcards):
    """One learner runs as a plain process; P learners as P MPI ranks."""
    learners = int(wildcards.learners)
    return "" if learners == 1 else config["mpi"]["launcher"].format(learners=learners)
