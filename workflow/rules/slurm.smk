# Sizing jobs on SLURM (--profile slurm): config slurm: holds the site's settings, and
# ASRSCALE_SLURM_<KEY> in the environment wins over it (Study.slurm). Whether jobs go to SLURM is
# known only once jobs are made, so resources that depend on it are functions.


SLURM = STUDY.slurm(os.environ)


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
    """A run's processes: its learners and any server ranks on real ranks; one when simulated."""
    return STUDY.ranks(run_of(wildcards))


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
    """A GPU per rank of a run on real ranks; one for a simulated run, whose learners all train
    on its process's GPU."""
    if not SLURM["gpu_gres"]:
        return None
    return f"{SLURM['gpu_gres']}:{ranks_per_node(wildcards)}"


ONE_GPU = f"{SLURM['gpu_gres']}:1" if SLURM["gpu_gres"] else None


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


def train_cores(wildcards):
    """A training job's threads (Study.train_threads): on SLURM a job's own, here the machine's
    for runs on ranks, a share of its GPU's for simulated runs there, one core on the CPU.
    """
    # torch is asked only here, once there are runs to place: reading the study loads none
    from asrscale.worlds.devices import uses_gpu

    if on_slurm():
        return job_cores()
    return STUDY.train_threads(
        wildcards.world, workflow.cores, uses_gpu(STUDY.train_device)
    )
