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
