# Sizing jobs on SLURM (--profile slurm): a site's settings (account, partitions by kind of job,
# runtimes, memory, a learner's cores) are the SLURM profile's (default-resources, set-resources,
# set-threads: slurm/config.yaml, docs/slurm.md), so the rules set none of them and a user's
# profile wins. The rules compute only what depends on the run: nodes, tasks and GPUs. Whether
# jobs go to SLURM is known only once jobs are made, so what depends on it is a function.


def on_slurm():
    """Whether jobs go to SLURM. Known only once jobs are made, so resources ask it then."""
    plugin = workflow.executor_plugin
    return plugin is not None and plugin.name.startswith("slurm")


def ranks(wildcards):
    """A run's processes: its learners and any server ranks on real ranks; one when simulated."""
    return STUDY.ranks(run_of(wildcards))


def nodes(wildcards):
    return -(-ranks(wildcards) // STUDY.ranks_per_node)


def ranks_per_node(wildcards):
    return -(-ranks(wildcards) // nodes(wildcards))


def launcher(wildcards, threads):
    """How a run with several ranks starts them: mpiexec here, srun inside a SLURM allocation
    (also the `mpi` resource, which makes it an MPI job there), each rank with the job's
    `threads` cores; None for one process."""
    if ranks(wildcards) == 1:
        return None
    if on_slurm():
        per_node = ranks_per_node(wildcards)
        return STUDY.slurm_launcher(ranks(wildcards), per_node, threads)
    return STUDY.mpi_launcher(ranks(wildcards))


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
    """A GPU per rank of a run on real ranks, per node; one for a simulated run, whose learners
    all train on its process's GPU (none where the study trains on the CPU)."""
    return f"gpu:{ranks_per_node(wildcards)}" if STUDY.on_gpus else None


# calibration and decoding, where training has GPUs
ONE_GPU = "gpu:1" if STUDY.on_gpus else None


TRAIN_RESOURCES = dict(
    mpi=lambda wildcards, threads: launcher(wildcards, threads),
    nodes=nodes,
    tasks_per_node=tasks_per_node,
    tasks=tasks,
    gres=gpus,
    tasks_per_gpu=0,  # the plugin's --ntasks-per-gpu would clash with --ntasks-per-node
)


def job_cores():
    """The cores of a job that wants a machine to itself: all of them here; on SLURM the profile's
    (set-threads), one where it sets none."""
    return 1 if on_slurm() else workflow.cores


def train_cores(wildcards):
    """A training job's threads (Study.train_threads): here the machine's for runs on ranks, a
    share of its GPU's for simulated runs there, one core on the CPU; on SLURM the profile's
    (set-threads: a rank's cores), one where it sets none."""
    # torch is asked only here, once there are runs to place: reading the study loads none
    from asrscale.worlds.devices import uses_gpu

    if on_slurm():
        return job_cores()
    return STUDY.train_threads(
        wildcards.world, workflow.cores, uses_gpu(STUDY.train_device)
    )
