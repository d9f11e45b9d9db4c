"""Running a run: its world (a simulated cluster on a modelled clock, or this rank's MPI world),
what its learners share (the data, the checkpoints, the loader thread), and each rank's program:
a learner's loop (`asrscale.training.loop`), or a server's."""

import functools
import sys
from dataclasses import dataclass
from pathlib import Path

import torch

from asrscale.config.algorithms import algorithm_spec
from asrscale.config.sections import MPIWorldSettings, RunConfig, SimulatedWorldSettings, world_of
from asrscale.data.batches import Prefetcher, Subset, batch_loader
from asrscale.data.tokens import Tokens
from asrscale.errors import UserError
from asrscale.io import read_settings
from asrscale.models import build_model
from asrscale.protocol.tuning import Halving
from asrscale.training import checkpoints, records
from asrscale.training.algorithms import make_algorithm
from asrscale.training.checkpoints import Checkpoints
from asrscale.training.learner import Learner, make_optimizer
from asrscale.training.loop import LearnerContext, LearnerLoop, RunContext
from asrscale.worlds import ops


@dataclass(frozen=True)
class RunPaths:
    train_data: Path  # Kaldi data dirs
    dev_data: Path
    train_feats: Path  # their features
    dev_feats: Path
    shards: Path  # shard<rank>.tsv for this learner count
    tokens: Path
    out: Path  # the run's folder


def run_settings_file(
    settings: dict,
    paths: RunPaths,
    calibration: Path | None,
    cores: int | None,
    halving: Halving | None = None,
) -> None:
    """`asrscale train`: the run a settings file describes, in the world it names (a halved grid's
    run: its part, `halving`). An error on one rank ends every rank, so that none is left waiting
    for it."""
    run = RunConfig.from_settings(settings)
    world = make_world(world_of(settings), run, calibration, cores)
    try:
        train(run, paths, world, halving)
    except BaseException as error:
        said = error if isinstance(error, UserError) else f"{type(error).__name__}: {error}"
        print(f"asrscale train: {world.label}: {said}", file=sys.stderr, flush=True)
        world.abort(1)
        if isinstance(error, UserError):
            sys.exit(1)
        raise


def make_world(
    settings: MPIWorldSettings | SimulatedWorldSettings,
    run: RunConfig,
    calibration: Path | None,
    cores: int | None = None,
) -> ops.World:
    """The world a run's settings name: its simulated cluster (computing with `cores` threads), or
    this rank's MPI world."""
    servers, device = algorithm_spec(run.algorithm).servers, run.train.device
    if isinstance(settings, MPIWorldSettings):
        from asrscale.worlds.mpi import MPIWorld

        return MPIWorld(
            servers=servers,
            node_size=settings.node_size,
            timeout_s=settings.timeout_s,
            name=run.algorithm,
            transport=settings.transport,
            device=device,
        )
    from asrscale.training.fused.learners import fusers
    from asrscale.worlds.clock import CostModel, Hardware
    from asrscale.worlds.devices import resolve_device
    from asrscale.worlds.simulated import SimWorld

    if calibration is None:
        raise ValueError("a simulated run needs this machine's calibration: --calibration")
    profile = dict(settings.hardware)
    costs = CostModel(
        Hardware.from_config(profile.pop("name"), profile),
        read_settings(calibration),
        seed=run.seed,
    )
    fused = fusers(resolve_device(device), settings.fuse_learners)
    return SimWorld(
        settings.learners,
        costs,
        servers,
        settings.node_size,
        run.train.prefetch,
        run.algorithm,
        device,
        fused,
        cores,
    )


def train(
    run: RunConfig, paths: RunPaths, world: ops.World, halving: Halving | None = None
) -> None:
    """Have `world` carry out a run: each learner's loop, and the algorithm's server loop on a
    server rank. The MPI world runs this rank's program; a simulated world runs every rank's."""
    torch.set_num_threads(run.train.threads or world.threads_per_rank)
    torch.set_flush_denormal(True)  # denormals made one CPU run 3-4x slower
    tokens = Tokens.read(paths.tokens)
    # one copy of the data, shared by every learner a world runs in this process
    train_set = Subset(paths.train_data, paths.train_feats, paths.train_feats, run.cmvn, tokens)
    dev_set = Subset(paths.dev_data, paths.dev_feats, paths.train_feats, run.cmvn, tokens)
    saved = Checkpoints(
        paths.out / "checkpoints",
        checkpoints.identity(run, world.description()),
        together=world.all_ranks_here,
        clock=world,  # a simulated world's modelled clock, saved with its ranks
    )
    loader = batch_loader()
    # a learner's batches of an epoch (`Prefetcher`): built ahead by the process's loader thread
    prefetcher = functools.partial(
        Prefetcher, train_set, depth=world.batches_ahead(run.train.prefetch), loader=loader
    )
    shared = RunContext(
        run,
        paths.out,
        paths.shards,
        train_set,
        dev_set,
        saved,
        prefetcher,
        world.description(),
        world.wall,
        world.evaluation_part,
        halving,
    )

    def program(layout: ops.Layout, serving: bool, clock):
        with world.wall.measure("start"):
            torch.manual_seed(run.seed)
            model = build_model(run.model, run.features.dim, len(tokens)).to(world.device)
            name = f"{run.algorithm} {'server' if serving else 'rank'} {layout.rank}"
            learner = Learner(
                model,
                make_optimizer(run.train.optimizer, run.train.momentum, model),
                run.train.clip_grad_norm,
                name,
            )
            algorithm = make_algorithm(run.algorithm, layout, run.options)
            if serving:
                return _serve(algorithm, learner, saved, layout, paths.out)
            return LearnerLoop(LearnerContext(shared, layout, algorithm, learner, clock)).run()

    try:
        world.launch(program)
    finally:
        loader.shutdown(cancel_futures=True)


def _serve(algorithm, learner: Learner, saved: Checkpoints, layout: ops.Layout, out: Path):
    """A server rank's program: back to its checkpointed state, then the algorithm's serving,
    then its record of every gradient it was sent."""
    name = f"server{layout.rank}"
    saved.restore(name, learner, algorithm)

    def checkpoint(step: int) -> None:
        saved.save(step, name, learner, algorithm, with_model=True)

    yield from algorithm.serve(learner, checkpoint, lambda: saved.roll_back(name, learner))
    records.write_table(
        out / "server.tsv", "learner\tpulled\tapplied_at\tstaleness\tapplied", algorithm.records
    )
