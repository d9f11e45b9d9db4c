# Sizing jobs on SLURM (--profile slurm): a site's settings (account, partitions by kind of job,
# runtimes, memory, a learner's cores) are the SLURM profile's (default-resources, set-resources,
# set-threads: slurm/config.yaml, docs/slurm.md), so the rules set none of them and a user's
# profile wins. The rules compute only what depends on the run: nodes, tasks, GPUs and a training
# job's time limit, which the plan of the run (asrscale plan) gives. Whether
# jobs go to SLURM is known only once jobs are made, so what depends on it is a function.


def on_slurm():
    """Whether jobs go to SLURM. Known only once jobs are made, so resources ask it then."""
    plugin = workflow.executor_plugin
    return plugin is not None and plugin.name.startswith("slurm")


def ranks(wildcards):
    """A run's processes: its learners and any server ranks on real ranks; one when simulated."""
    return STUDY.ranks(run_of(wildcards))


def nodes(wildcards):
    return -(-ranks(wildcards) // jobs.ranks_per_node(STUDY.config))


def ranks_per_node(wildcards):
    return -(-ranks(wildcards) // nodes(wildcards))


def mpi_program(wildcards):
    """The executor plugin's `mpi` resource, which makes a job of several ranks an MPI job (a job of
    one process is none: the plugin refuses an MPI job of one task); what starts the ranks is the
    `launcher` resource."""
    return None if ranks(wildcards) == 1 else "srun"


def default_launcher(wildcards):
    """What starts a run's ranks where no profile says (its `launcher` resource): srun in a SLURM
    allocation, mpiexec here (the MPI's that mpi4py loads: common.smk). The shipped SLURM profile says it (set-resources: train: launcher:
    srun --mpi=pmi2), so that a dry run through it shows the srun a cluster will run."""
    return "srun --mpi=pmi2" if on_slurm() else "mpiexec"


def launch_line(wildcards, threads, resources):
    """The command a training job's ranks start under: the `launcher` resource with srun's shape
    of the allocation, or mpiexec's ranks; nothing for one process. Under srun, one task a node
    first removes the MPI shared memory a killed attempt of the job left, which the ranks of a
    requeued job would take for their own (asrscale.worlds.shared_memory)."""
    if ranks(wildcards) == 1:
        return ""
    program = resources.launcher
    if program.split()[0] == "srun":
        return (
            f"srun --mpi=none --ntasks={nodes(wildcards)} --ntasks-per-node=1"
            f" python -m asrscale clear-shared-memory && {program} --ntasks={ranks(wildcards)}"
            f" --ntasks-per-node={ranks_per_node(wildcards)} --cpus-per-task={threads}"
        )
    return f"{program} -n {ranks(wildcards)}"


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
    return f"gpu:{ranks_per_node(wildcards)}" if jobs.on_gpus(STUDY.config) else None


# calibration and decoding, where training has GPUs
ONE_GPU = "gpu:1" if jobs.on_gpus(STUDY.config) else None


UNPRICED_RUNTIME = 1440  # minutes: a day, where a run cannot be priced


@functools.cache
def planned_seconds():
    """Each run on real ranks priced on the study's profile (asrscale plan): the upper edge of
    its band's time for every epoch it may take, by (algorithm, variant, learners); empty where
    the study cannot be priced (a profile without measured compute, a corpus of unknown size).
    """
    from asrscale.costmodel.plan import price_on
    from asrscale.errors import ConfigError

    if not any(run.world == "mpi" for run in STUDY.runs()):
        return {}
    try:
        table = price_on(STUDY, STUDY.hardware)
    except ConfigError:
        return {}
    return {
        (row.algorithm, row.variant, row.learners): row.epoch_s_high * row.epochs
        for row in table.itertuples()
    }


def train_runtime(wildcards, attempt):
    """A training job's time limit (minutes), grown with each attempt: its planned time with half
    again as margin and a quarter hour to start, or a day where it cannot be priced; a profile's
    set-resources: train: runtime overrides it."""
    run = STUDY.trained_as(run_of(wildcards))
    seconds = planned_seconds().get((run.algorithm, run.variant, run.learners))
    minutes = (
        UNPRICED_RUNTIME if seconds is None else math.ceil(1.5 * seconds / 60) + 15
    )
    return minutes * attempt


TRAIN_RESOURCES = dict(
    runtime=train_runtime,
    mpi=mpi_program,
    launcher=default_launcher,
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
    """A training job's threads (asrscale.jobs.train_threads): here the machine's for runs on ranks, a
    share of its GPU's for simulated runs there, one core on the CPU; on SLURM the profile's
    (set-threads: a rank's cores), one where it sets none."""
    # torch is asked only here, once there are runs to place: reading the study loads none
    from asrscale.worlds.devices import uses_gpu

    if on_slurm():
        return job_cores()
    return jobs.train_threads(
        STUDY.config,
        run_of(wildcards).world,
        workflow.cores,
        uses_gpu(STUDY.device),
    )


# A profile that gives some GPU rules a partition and leaves others on the default one sends
# those to nodes without GPUs: said once, by the process that submits the jobs.
def plain(resources) -> dict:
    """A profile's resources as names and values (Snakemake keeps them as Resource objects)."""
    return {
        name: getattr(value, "raw", value)
        for name, value in dict(resources or {}).items()
    }


if jobs.on_gpus(STUDY.config) and not workflow.remote_exec:
    PARTITION_WARNING = jobs.partition_warning(
        {
            name: plain(resources)
            for name, resources in workflow.resource_settings.overwrite_resources.items()
        },
        plain(workflow.resource_settings.default_resources).get("slurm_partition"),
    )
    if PARTITION_WARNING:
        logger.warning(f"Warning: your SLURM profile: {PARTITION_WARNING}")


def sbatch_options(threads, resources) -> str:
    """A job's sbatch options as the SLURM executor plugin renders them (its own code, less the
    job's name, log and comment)."""
    from types import SimpleNamespace

    from snakemake_executor_plugin_slurm.submit_string import get_submit_command
    from snakemake_executor_plugin_slurm.utils import set_gres_string

    job = SimpleNamespace(resources=resources, threads=threads)
    partition = resources.get("slurm_partition")
    account = resources.get("slurm_account")
    settings = {
        "run_uuid": "",
        "slurm_logfile": "",
        "comment_str": "",
        "account": f"-A {account}" if account else "",
        "partition": f"-p {partition}" if partition else "",
        "workdir": "",
    }
    call = get_submit_command(job, settings) + set_gres_string(job)
    return " ".join(call.split("--export=ALL --comment '' ", 1)[-1].split())


class SbatchShown(logging.Filter):
    """A dry run through a SLURM profile (its jobs' slurm_ resources: a dry run has no executor to
    ask) shows each job's sbatch options before its command, as a no-op (`: sbatch ...;`): the
    options of each job's information, put in its command's line. A logging filter, so that the
    options are no setting of the job's (changing the profile reruns nothing)."""

    job = None  # the threads and resources of the job whose command comes next

    def filter(self, record):
        event = getattr(record, "event", None)
        if event == LogEvent.JOB_INFO:
            resources = record.resources
            slurm = any(name.startswith("slurm_") for name in resources.keys())
            self.job = (
                (record.threads, resources) if workflow.dryrun and slurm else None
            )
        elif event == LogEvent.SHELLCMD and self.job and record.shellcmd:
            record.msg = f"Shell command: : sbatch {sbatch_options(*self.job)}; {record.shellcmd}"
            self.job = None
        return True


logger.addFilter(SbatchShown())
