"""How large the workflow's jobs are, for its rules (workflow/rules/slurm.smk): answered from the
resolved configuration, apart from the Study, which resolves it and lays out its paths."""


def train_threads(config: dict, world: str, cores: int, gpu: bool) -> int:
    """A training job's threads on a machine of `cores` (`gpu`: where its learners compute on one):
    a run on MPI ranks is timed by the clock and owns the machine; a simulated run is timed by its
    cost model: on a GPU it shares it with study.runs_per_gpu runs, each with its share of the
    cores, and on the CPU it computes with one core (or train.threads) beside other runs, since
    torch's LSTM gains little from a second thread (docs/internals.md)."""
    if world == "mpi":
        return cores
    if gpu:
        return max(1, cores // config["study"]["runs_per_gpu"])
    return min(config["train"]["threads"] or 1, cores)


def ranks_per_node(config: dict) -> int:
    """On SLURM: the MPI ranks a node takes, a GPU each."""
    return config["slurm"]["ranks_per_node"]


def on_gpus(config: dict) -> bool:
    """Whether the study's learners train on GPUs where there are any (train.device): on SLURM its
    training, calibration and decoding jobs then ask for them."""
    return config["train"]["device"] != "cpu"


#: the rules whose jobs ask for a GPU where the study trains on GPUs (workflow/rules/)
GPU_RULES = ("train", "train_rung", "calibrate", "log_probs")


def partition_warning(set_resources: dict, default_partition: str | None) -> str | None:
    """Which GPU jobs would miss the GPU partition: a SLURM profile's `set-resources` (rule ->
    resources) name a partition for some GPU rules (the most named is the GPU partition) and leave
    others on another, or on the default one (`default_partition`, the CPU stages'); None where
    all agree, or where none is named."""
    named = {
        rule: partition
        for rule in GPU_RULES
        if (partition := (set_resources.get(rule) or {}).get("slurm_partition"))
    }
    if not named:
        return None
    gpu = max(set(named.values()), key=list(named.values()).count)
    left = [rule for rule in GPU_RULES if named.get(rule, default_partition) != gpu]
    if not left:
        return None
    elsewhere = sorted({repr(named.get(rule) or default_partition or "") for rule in left})
    elsewhere = [name if name != "''" else "the default" for name in elsewhere]
    return (
        f"GPU jobs of {', '.join(left)} go to {' and '.join(elsewhere)} partition, the other GPU "
        f"jobs to {gpu!r}: set slurm_partition for every GPU rule under set-resources "
        "(slurm/config.yaml names it once, &gpu)"
    )
