import inspect
import json
import os
import shlex
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
from asrscale.training.algorithms import algorithm_class
from asrscale.training.loop import TrainConfig

CORPUS = config["corpus"]["name"]
STUDY = config["study"].get("name") or CORPUS
SUBSETS = ["train", "dev", "test"]


wildcard_constraints:
    corpus=CORPUS,
    study=STUDY,
    subset="|".join(SUBSETS),
    algorithm="[a-z_]+",
    variant="default|[a-z_.]+=[^/]+",
    learners="[0-9][0-9]*",
    world="mpi|sim-[A-Za-z0-9_-]+",
    seed="[0-9][0-9]*",
    part="[0-9][0-9]*",


def as_json(section):
    """A config section as one shell word for `asrscale --<section> '<json>'`; `jobs` (how
    many parallel jobs a stage is split into) is the workflow's, not the stage's."""
    if isinstance(section, dict):
        section = {key: value for key, value in section.items() if key != "jobs"}
    return shlex.quote(json.dumps(section, separators=(",", ":")))


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


def seeds(entry):
    """An entry's seeds (of study.runs or study.sweeps): its own, else study.seeds."""
    return entry.get("seeds", config["study"]["seeds"])


for index, entry in enumerate(config["study"]["runs"]):
    if learner_counts(entry) != [1] and entry["algorithm"] == "seq":
        raise ValueError(
            f"config: study.runs[{index}]: seq is one learner, so learners must be [1], not {entry['learners']}"
        )

# A variant is an algorithm's configuration with one setting changed, named "<setting>=<value>"
# (an option of algorithms.<name>, or train.<key>); "default" is the configuration as written.
TRAIN_KEYS = set(TrainConfig.__dataclass_fields__) - {"algorithm", "seed", "options"}


def setting_in_effect(algorithm, setting):
    """The value `setting` takes in `algorithm`'s runs as configured."""
    options = config["algorithms"].get(algorithm, {})
    if setting.startswith("train."):
        key = setting.removeprefix("train.")
        return options.get("train", {}).get(key, config["train"].get(key))
    if setting in options:
        return options[setting]
    return inspect.signature(algorithm_class(algorithm)).parameters[setting].default


def variant_name(algorithm, setting, value):
    if value == setting_in_effect(algorithm, setting):
        return "default"
    return f"{setting}={json.dumps(value)}"


def variant_override(variant):
    """The algorithms.<name> settings a variant changes: {option: value} or {train: {key: value}}."""
    if variant == "default":
        return {}
    setting, value = variant.split("=", 1)
    if setting.startswith("train."):
        return {"train": {setting.removeprefix("train."): json.loads(value)}}
    return {setting: json.loads(value)}


for index, sweep in enumerate(config["study"]["sweeps"]):
    key = f"config: study.sweeps[{index}]"
    if sweep["algorithm"] == "seq" and sweep["learners"] != 1:
        raise ValueError(f"{key}.learners: seq is one learner, not {sweep['learners']}")
    options = set(inspect.signature(algorithm_class(sweep["algorithm"])).parameters) - {
        "layout"
    }
    settings = sorted(options) + sorted(f"train.{k}" for k in TRAIN_KEYS)
    if sweep["vary"] not in settings:
        raise ValueError(
            f"{key}.vary: {sweep['algorithm']} has no setting {sweep['vary']!r}; one of {settings}"
        )


def points_of(sweep):
    """A sweep's points: the setting varied, the algorithm, learners, value, variant and world
    (sweeps run in study.world)."""
    return [
        {
            "sweep": sweep["vary"],
            "algorithm": sweep["algorithm"],
            "learners": sweep["learners"],
            "value": value,
            "variant": variant_name(sweep["algorithm"], sweep["vary"], value),
            "world": config["study"]["world"],
        }
        for value in sweep["values"]
    ]


def sweep_points():
    return [point for sweep in config["study"]["sweeps"] for point in points_of(sweep)]


def study_runs():
    """Every (world, algorithm, variant, learners, seed) the study asks for."""
    runs = [
        (
            world_folder(entry.get("world", config["study"]["world"])),
            entry["algorithm"],
            "default",
            learners,
            seed,
        )
        for entry in config["study"]["runs"]
        for learners in learner_counts(entry)
        for seed in seeds(entry)
    ]
    runs += [
        (world_folder(p["world"]), p["algorithm"], p["variant"], p["learners"], seed)
        for sweep in config["study"]["sweeps"]
        for p in points_of(sweep)
        for seed in seeds(sweep)
    ]
    return list(dict.fromkeys(runs))


def run_dir(world, algorithm, variant, learners, seed):
    """Where a run is trained; an algorithm that is SEQ with one learner reports SEQ's run (with
    the same train settings: an option of the algorithm changes nothing there)."""
    if learners == 1 and algorithm_class(algorithm).alone_is_seq:
        algorithm = "seq"
        variant = variant if variant.startswith("train.") else "default"
    return f"results/{CORPUS}/studies/{STUDY}/runs/{world}/{algorithm}/{variant}/P{learners}/seed{seed}"


def train_settings(wildcards):
    """config's train section, with the algorithm's own `train` overrides and its options, and
    the run's variant over both."""
    options = dict(config["algorithms"].get(wildcards.algorithm, {}))
    change = variant_override(wildcards.variant)
    train = dict(options.pop("train", {}), **change.pop("train", {}))
    options.update(change)
    settings = dict(config["train"], **train)
    settings.update(
        algorithm=wildcards.algorithm, seed=int(wildcards.seed), options=options
    )
    return as_json(settings)


# On SLURM (--profile slurm) each job asks for what it needs; config slurm: holds the site's
# settings, and ASRSCALE_SLURM_<KEY> in the environment wins over it.
def slurm_settings():
    settings = dict(config["slurm"])
    for key, value in settings.items():
        variable = f"ASRSCALE_SLURM_{key.upper()}"
        if variable in os.environ:
            try:
                settings[key] = type(value)(os.environ[variable])
            except ValueError:
                raise ValueError(
                    f"{variable}={os.environ[variable]!r}: slurm.{key} takes an integer"
                ) from None
    return settings


SLURM = slurm_settings()


def on_slurm():
    """Whether jobs go to SLURM. Known only once jobs are made, so resources ask it then."""
    plugin = workflow.executor_plugin
    return plugin is not None and plugin.name.startswith("slurm")


# every job's site settings; a job that needs more says so
JOB_RESOURCES = {
    "slurm_account": SLURM["account"],
    "slurm_partition": SLURM["partition"],
    "constraint": SLURM["constraint"] or None,
    "runtime": SLURM["runtime_min"],
    "mem_mb": SLURM["mem_mb"],
}


def ranks(wildcards):
    """A run's MPI ranks: its learners and any server ranks; a simulated run is one process."""
    if wildcards.world != "mpi":
        return 1
    return int(wildcards.learners) + algorithm_class(wildcards.algorithm).servers


def nodes(wildcards):
    return -(-ranks(wildcards) // SLURM["learners_per_node"])


def ranks_per_node(wildcards):
    return -(-ranks(wildcards) // nodes(wildcards))


def launcher(wildcards):
    """How a run with several ranks starts them: mpiexec here, srun inside a SLURM allocation
    (also the `mpi` resource, which makes it an MPI job there); None for one process."""
    if ranks(wildcards) == 1:
        return None
    if on_slurm():
        return SLURM["launcher"].format(
            ranks=ranks(wildcards),
            per_node=ranks_per_node(wildcards),
            cpus=SLURM["cpus_per_learner"],
        )
    return config["mpi"]["launcher"].format(ranks=ranks(wildcards))


def tasks_per_node(wildcards):
    """The allocation's shape for the SLURM plugin: ranks per node (or, one rank a node, `tasks`)."""
    per_node = ranks_per_node(wildcards)
    return per_node if per_node > 1 and ranks(wildcards) > 1 else None


def tasks(wildcards):
    return (
        ranks(wildcards)
        if ranks(wildcards) > 1 and tasks_per_node(wildcards) is None
        else None
    )


def gpus(wildcards):
    """A GPU per rank of a run on real ranks; one for a simulated run, whose learners all train
    on its process's GPU."""
    if not SLURM["gpu_gres"]:
        return None
    return f"{SLURM['gpu_gres']}:{ranks_per_node(wildcards)}"


TRAIN_RESOURCES = dict(
    JOB_RESOURCES,
    mpi=launcher,
    nodes=nodes,
    tasks_per_node=tasks_per_node,
    tasks=tasks,
    gres=gpus,
    tasks_per_gpu=0,  # the plugin's --ntasks-per-gpu would clash with --ntasks-per-node
    cpus_per_task=SLURM["cpus_per_learner"],
    mem_mb=lambda wildcards: ranks_per_node(wildcards) * SLURM["mem_mb_per_learner"],
    runtime=SLURM["train_runtime_min"],
)


def job_cores():
    """The cores of a job that wants a machine to itself: all of them here, a learner's on SLURM."""
    return SLURM["cpus_per_learner"] if on_slurm() else workflow.cores


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
