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
    world="mpi|sim-[A-Za-z0-9_-]+",
    seed="[0-9][0-9]*",
    part="[0-9][0-9]*",


def as_json(section):
    """A config section as one shell word for `asrscale --<section> '<json>'`; `jobs` (how
    many parallel jobs a stage is split into) is the workflow's, not the stage's."""
    if isinstance(section, dict):
        section = {key: value for key, value in section.items() if key != "jobs"}
    return f"'{json.dumps(section, separators=(',', ':'))}'"


# Your own corpus (corpus.subsets) or the built-in one. A source that is not there is named by
# its config key before any job starts.
IMPORTED = "subsets" in config["corpus"]
for subset, sources in config["corpus"].get("subsets", {}).items():
    for index, source in enumerate(sources):
        key = f"config: corpus.subsets.{subset}[{index}]"
        if not Path(source["path"]).exists():
            raise ValueError(f"{key}.path: {source['path']} does not exist")
        if config["features"]["kind"] == "kaldi" and source["format"] != "kaldi":
            raise ValueError(
                f"{key}: features.kind 'kaldi' takes features from Kaldi data dirs, not {source['format']}"
            )
if config["features"]["kind"] == "kaldi" and not IMPORTED:
    raise ValueError(
        "config: features.kind 'kaldi' needs Kaldi data dirs under corpus.subsets"
    )


def source_tables(wildcards):
    """The files that list a subset's utterances, and the audio files an import or extraction of
    it found bad (their watch lists): editing or fixing one imports the subset again."""
    watch_lists = [Path(f"results/{CORPUS}/data/{wildcards.subset}.watch")]
    watch_lists += Path(f"results/{CORPUS}/feats/{wildcards.subset}").glob(
        "part*.watch"
    )
    tables = [
        Path(path)
        for watch in watch_lists
        if watch.is_file()
        for path in watch.read_text().splitlines()
        if Path(path).is_file()
    ]
    for source in config["corpus"]["subsets"][wildcards.subset]:
        path = Path(source["path"])
        if source["format"] == "kaldi":
            names = ["wav.scp", "text", "utt2spk", "segments", "feats.scp"]
            tables += [path / name for name in names if (path / name).is_file()]
        elif source["format"] == "librispeech":
            tables += sorted(path.rglob("*.trans.txt"))
        else:
            tables.append(path)
    return tables


def skipped_reports():
    """Every report of utterances left out, by import (own corpora) and by feature extraction."""
    stages = ["data", "feats"] if IMPORTED else ["feats"]
    return [
        f"results/{CORPUS}/{stage}/{subset}/skipped.tsv"
        for stage in stages
        for subset in SUBSETS
    ]


def import_settings(wildcards):
    corpus = config["corpus"]
    features = {
        key: value for key, value in config["features"].items() if key != "jobs"
    }
    return as_json(
        {"features": features, "text": corpus["text"], "bad_input": corpus["bad_input"]}
    )


HARDWARE = config["study"]["hardware"]
if HARDWARE not in config["hardware"]:
    raise ValueError(
        f"config: study.hardware is {HARDWARE!r}, but hardware: defines only {sorted(config['hardware'])}"
    )


def world_folder(world):
    """A run's world names its results folder: "mpi", or "sim-<profile>" when simulated."""
    return "mpi" if world == "mpi" else f"sim-{HARDWARE}"


def learner_counts(entry):
    """An entry's learner counts: its own, else study.learners (SEQ: always one)."""
    if entry["algorithm"] == "seq":
        return entry.get("learners", [1])
    return entry.get("learners", config["study"]["learners"])


for index, entry in enumerate(config["study"]["runs"]):
    if learner_counts(entry) != [1] and entry["algorithm"] == "seq":
        raise ValueError(
            f"config: study.runs[{index}]: seq is one learner, so learners must be [1], not {entry['learners']}"
        )


def study_runs():
    """Every (world, algorithm, learners, seed) the study asks for."""
    return [
        (
            world_folder(entry.get("world", config["study"]["world"])),
            entry["algorithm"],
            learners,
            seed,
        )
        for entry in config["study"]["runs"]
        for learners in learner_counts(entry)
        for seed in config["study"]["seeds"]
    ]


def run_dir(world, algorithm, learners, seed):
    """Where a run is trained; an algorithm that is SEQ with one learner reports SEQ's run."""
    if learners == 1 and algorithm_class(algorithm).alone_is_seq:
        algorithm = "seq"
    return f"results/{CORPUS}/studies/{STUDY}/runs/{world}/{algorithm}/P{learners}/seed{seed}"


def train_settings(wildcards):
    """config's train section, with the algorithm's own `train` overrides and its options."""
    options = dict(config["algorithms"].get(wildcards.algorithm, {}))
    settings = dict(config["train"], **options.pop("train", {}))
    settings.update(
        algorithm=wildcards.algorithm, seed=int(wildcards.seed), options=options
    )
    return as_json(settings)


def launcher(wildcards):
    """A simulated run, or one rank, is a plain process; P learners (plus any server ranks)
    are MPI ranks."""
    ranks = int(wildcards.learners) + algorithm_class(wildcards.algorithm).servers
    if wildcards.world != "mpi" or ranks == 1:
        return ""
    return config["mpi"]["launcher"].format(ranks=ranks)


def simulation_inputs(wildcards):
    """A simulated run needs the machine's calibration; an MPI run nothing more."""
    if wildcards.world == "mpi":
        return {}
    return {
        "calibration": f"results/{wildcards.corpus}/studies/{wildcards.study}/calibration.json"
    }


def world_arguments(wildcards, input):
    """`asrscale train` simulates when given a hardware profile and the machine's calibration."""
    if wildcards.world == "mpi":
        return ""
    profile = dict(config["hardware"][HARDWARE], name=HARDWARE)
    profile.pop("description", None)
    return f"--hardware {as_json(profile)} --learners {wildcards.learners} --calibration {input.calibration}"
