"""The training loop shared by every algorithm; it reads top to bottom.

Each learner is one MPI rank (or one process for a single learner). Per logging interval it
records loss, frames/s and where the time went (compute / communication / data wait / idle);
per epoch the dev loss and token error rate of the consensus model. Checkpoints come at every
epoch's end and, with `checkpoint_steps`, within epochs; each holds the rank's whole `Progress`,
so a run killed at any point (a preempted or timed-out job) resumes from the newest one, neither
losing nor duplicating rows, and a synchronous run ends with the model of an uninterrupted one.

A run that diverges stops by the rule of `divergence`, decided alike on every learner where they
meet anyway (checkpoints within an epoch, and the epoch's end): its last good checkpoint stays,
and its outputs say it diverged, so that the report shows it as such and never as a result.
"""

import copy
import functools
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from asrscale.data.batches import Prefetcher, Subset, batch_loader
from asrscale.data.features import FeatureConfig
from asrscale.data.shard import read_shard
from asrscale.data.tokens import Tokens
from asrscale.errors import ConfigError
from asrscale.io import atomic_torch_save, atomic_write_json, atomic_write_text
from asrscale.provenance import environment
from asrscale.training.algorithms import make_algorithm
from asrscale.training.checkpoints import Checkpoints
from asrscale.training.evaluation import evaluate
from asrscale.training.learner import Learner, make_optimizer
from asrscale.training.models import ModelConfig, build_model
from asrscale.training.schedule import learning_rate, lr_scale
from asrscale.worlds import ops
from asrscale.worlds.ops import unflatten

CHECKPOINT_FORMAT = 3  # a checkpoint of another format is not resumed


@dataclass(frozen=True)
class TrainConfig:
    """config.yaml's `train` section, every key (the schema holds the defaults)."""

    epochs: int
    batch_size: int  # per learner
    optimizer: str  # "adam" or "sgd" (with momentum)
    lr: float
    momentum: float
    lr_scaling: str  # how lr follows the learners an update combines: "linear", "sqrt" or "none"
    warmup_epochs: float  # from lr to the scaled rate, linearly
    lr_decay: float  # multiplied into lr after every epoch
    clip_grad_norm: float  # 0 disables
    divergence_factor: float  # a loss above this times the untrained model's dev loss: diverged
    log_interval: int  # steps
    checkpoint_steps: int  # also checkpoint every this many steps within an epoch (0: at its end only)
    prefetch: int  # batches built ahead by a thread; 0 builds them in the learner's thread
    device: str  # "cpu", "cuda", or "auto" (the world places its learners)
    threads: int  # torch threads per learner; 0: the machine's cores shared among its learners

    def __post_init__(self):
        if self.checkpoint_steps % self.log_interval:  # checkpoints come at log lines
            raise ConfigError(f"train.checkpoint_steps ({self.checkpoint_steps}) must be a multiple of "
                             f"train.log_interval ({self.log_interval})")  # fmt: skip


@dataclass(frozen=True)
class RunConfig:
    """What one run trains: its settings file, which the workflow writes (`asrscale.study`)."""

    algorithm: str
    options: dict  # the algorithm's own settings
    seed: int
    train: TrainConfig
    model: ModelConfig
    features: FeatureConfig
    cmvn: str  # features.cmvn: their normalisation, applied when they are loaded

    @classmethod
    def from_settings(cls, settings: dict) -> "RunConfig":
        return cls(settings["algorithm"], settings["options"], settings["seed"], TrainConfig(**settings["train"]),
                   ModelConfig(**settings["model"]), FeatureConfig(**settings["features"]),
                   settings["cmvn"])  # fmt: skip


@dataclass(frozen=True)
class RunPaths:
    data: Path  # Kaldi data dirs: <data>/{train,dev}
    feats: Path  # features: <feats>/{train,dev}
    shards: Path  # shard<rank>.tsv for this learner count
    tokens: Path
    out: Path  # the run's directory


@dataclass
class Progress:
    """Where a learner's run stands, checkpointed and restored whole: the epoch under way, the
    steps it has done, its frames, time and metrics rows so far and the algorithm's averagings;
    the leader's also every finished epoch's rows and averagings, and where the run resumed."""

    epoch: int = 1
    done: int = 0
    frames: int = 0
    elapsed: float = 0.0  # the epoch's training time so far
    trained_s: float = 0.0  # every finished epoch's
    rows: list = field(default_factory=list)
    exchanges: list = field(default_factory=list)
    history: list = field(default_factory=list)
    pairings: list = field(default_factory=list)
    resumes: list = field(default_factory=list)
    untrained_dev_loss: float = math.nan  # the reference of the divergence rule
    worst_loss: float = 0.0  # the highest interval loss since the learners last checked for divergence
    diverged: dict | None = None  # why and where, once the run has

    def next_epoch(self) -> None:
        self.epoch, self.done, self.frames, self.elapsed, self.rows, self.exchanges = self.epoch + 1, 0, 0, 0.0, [], []


class Interval:
    """The loss and frames of the steps since the last log line."""

    def __init__(self):
        self.loss, self.frames, self.steps = 0.0, 0, 0

    def add(self, loss: float, frames: int) -> None:
        self.loss, self.frames, self.steps = self.loss + loss, self.frames + frames, self.steps + 1


def train(run: RunConfig, paths: RunPaths, world: ops.World) -> None:
    """Have `world` carry out a run: each learner's loop, and the algorithm's server loop on a
    server rank. The MPI world runs this rank's program; a simulated world runs every rank's."""
    torch.set_num_threads(run.train.threads or world.threads_per_rank)
    torch.set_flush_denormal(True)  # denormals made one CPU run 3-4x slower
    tokens = Tokens.read(paths.tokens)
    # one copy of the data, shared by every learner a world runs in this process
    data = [Subset.of(paths.data, paths.feats, subset, run.cmvn, tokens) for subset in ("train", "dev")]
    checkpoints = Checkpoints(paths.out / "checkpoints")
    # a checkpoint is resumed only by the run that wrote it: the same settings (the number of
    # epochs aside: a run may be extended), the same world (for a simulated run, the same
    # hardware profile and calibration)
    settings = asdict(run)
    settings["train"] = {k: v for k, v in settings["train"].items() if k not in ("epochs", "checkpoint_steps")}
    identity = {"format": CHECKPOINT_FORMAT, "run": settings, "world": world.description()}
    loader = batch_loader()
    # a learner's batches of an epoch (`Prefetcher`): built ahead by the process's loader thread
    prefetcher = functools.partial(Prefetcher, data[0], depth=world.batches_ahead(run.train.prefetch), loader=loader)

    def program(layout: ops.Layout, serving: bool, clock):
        torch.manual_seed(run.seed)
        model = build_model(run.model, run.features.dim, len(tokens)).to(world.device)
        name = f"{run.algorithm} {'server' if serving else 'rank'} {layout.rank}"
        learner = Learner(model, make_optimizer(run.train.optimizer, run.train.momentum, model),
                          run.train.clip_grad_norm, name)  # fmt: skip
        algorithm = make_algorithm(run.algorithm, layout, run.options)
        if serving:
            return _serve(algorithm, learner, checkpoints, identity, layout, paths.out)
        return LearnerLoop(run, paths, layout, algorithm, learner, clock, data, checkpoints, identity, prefetcher).run()

    try:
        world.launch(program)
    finally:
        loader.shutdown(cancel_futures=True)


class LearnerLoop:
    """One learner's program: resume (or start), then epochs of steps, each epoch ended by the
    consensus model's dev evaluation and a checkpoint; the leader writes the run's outputs."""

    def __init__(self, run: RunConfig, paths: RunPaths, layout: ops.Layout, algorithm, learner: Learner, clock,
                 data: list[Subset], checkpoints: Checkpoints, identity: dict,
                 prefetcher: Callable[[list[list[str]]], Prefetcher]):  # fmt: skip
        self.run_config, self.paths, self.layout, self.algorithm, self.learner = run, paths, layout, algorithm, learner
        self.clock, (self.train_set, self.dev_set), self.checkpoints = clock, data, checkpoints
        self.identity, self.prefetcher, self.leader = identity, prefetcher, layout.rank == 0
        scale = lr_scale(run.train.lr_scaling, layout.size)  # checked even where it does not apply
        self.scale = scale if algorithm.combines_learners else 1.0
        self.shard = read_shard(paths.shards / f"shard{layout.rank}.tsv")
        self.evaluated = None  # the consensus model, where it is not the learner's own

    def run(self):
        progress = yield from self.resume_or_start()
        # every learner takes the same number of steps, and every utterance is used once per epoch:
        # a learner with a larger shard takes slightly larger batches
        (steps,) = yield ops.Reduce([math.ceil(len(self.shard) / self.run_config.train.batch_size)], "learners", "min")
        steps = int(steps)
        if steps == 0:
            raise ValueError(f"shard {self.layout.rank} of {self.paths.shards} is empty")
        (frames,) = yield ops.Reduce([sum(self.train_set.frames[u] for u in self.shard)], "learners")
        yield from self.algorithm.plan(frames / (self.layout.size * steps))
        while progress.epoch <= self.run_config.train.epochs and not progress.diverged:
            epoch_start, lr = yield from self.train_epoch(progress, steps)
            if not progress.diverged:
                yield from self.end_epoch(progress, steps, epoch_start, lr)
        if progress.diverged:
            yield from self.algorithm.finish(self.learner)
            if self.leader:
                self.write_diverged(progress)
            return
        final = self.consensus_model((yield from self.algorithm.consensus(self.learner)))
        yield from self.algorithm.finish(self.learner)
        if self.leader:
            self.write_outputs(progress, final)
            self.checkpoints.finish()

    def resume_or_start(self):
        """The newest checkpoint's progress (a resumed learner goes on from its own state), or a
        start from learner 0's model."""
        state = self.checkpoints.resumable(self.identity, f"rank{self.layout.rank}")
        if state is None:
            if self.leader and self.checkpoints.latest() is not None:
                print(f"not resuming from {self.checkpoints.latest()}: other settings wrote it; starting afresh")
            yield from self.algorithm.start(self.learner)
            progress = Progress()
            progress.untrained_dev_loss, _ = yield from evaluate(self.learner.model, self.dev_set, self.layout)
            if self.leader:
                self.untrained = copy.deepcopy(self.learner.model).cpu()
            return progress
        replica = None if "model" in state else self.checkpoints.resumable(self.identity, "rank0")
        _restore(state, self.learner, self.algorithm, replica)
        progress = Progress(**state["progress"])
        self.algorithm.exchanges = progress.exchanges
        if self.leader:
            progress.resumes.append({"epoch": progress.epoch, "step": progress.done,
                                     "at": time.strftime("%Y-%m-%dT%H:%M:%S%z")})  # fmt: skip
            print(f"resuming from {self.checkpoints.latest()} (epoch {progress.epoch}, {progress.done} steps done)")
        return progress

    def train_epoch(self, progress: Progress, steps: int):
        """The epoch's remaining steps; returns when the epoch started on the clock and its last
        learning rate."""
        train, epoch = self.run_config.train, progress.epoch
        # each learner its own order (so that synchronous learners do not take batches of one
        # length together, which would hide stragglers of length); learner 0 takes SEQ's
        seed = self.run_config.seed * 1000 + epoch + 1_000_000 * self.layout.rank
        groups = self.train_set.batches(self.shard, train.batch_size, seed=seed, count=steps)
        loader = self.prefetcher(groups[progress.done :])
        batches, interval = iter(loader), Interval()
        epoch_start = self.clock.now() - progress.elapsed
        self.clock.reset()
        for step in range(progress.done + 1, steps + 1):
            wait_start = time.perf_counter()
            batch = next(batches)
            yield ops.DataWait(time.perf_counter() - wait_start, batch.frames)
            lr = learning_rate(train.lr, self.scale, train.warmup_epochs, train.lr_decay, (epoch - 1) * steps + step,
                               steps)  # fmt: skip
            interval.add((yield from self.algorithm.step(self.learner, batch, lr)), batch.frames)
            progress.done, progress.frames = step, progress.frames + batch.frames
            if step % train.log_interval == 0 or step == steps:
                progress.rows.append(self.log_line(progress, interval, steps, lr, epoch_start))
                loss = progress.rows[-1]["loss"]
                progress.worst_loss = max(progress.worst_loss, loss if math.isfinite(loss) else math.inf)
                interval = Interval()
                self.clock.reset()
                if train.checkpoint_steps and step % train.checkpoint_steps == 0 and step < steps:
                    if (yield from self.check_divergence(progress)):
                        yield from self.collect_rows(progress)
                        break
                    progress.elapsed = self.clock.now() - epoch_start
                    yield from self.checkpoint(progress, steps)  # its time is the next interval's idle time
        loader.close()
        yield from self.algorithm.epoch_done(self.learner)
        return epoch_start, lr

    def log_line(self, progress: Progress, interval: Interval, steps: int, lr: float, epoch_start: float) -> dict:
        split = self.clock.snapshot()
        row = {
            "kind": "interval", "epoch": progress.epoch, "step": progress.done, "rank": self.layout.rank, "lr": lr,
            "time_s": progress.trained_s + self.clock.now() - epoch_start, "loss": interval.loss / interval.steps,
            "frames": interval.frames, "frames_per_s": interval.frames / split["wall_s"], **split,
        }  # fmt: skip
        if self.leader:
            shares = " ".join(f"{c[:-2]} {100 * split[c] / split['wall_s']:.0f}%" for c in list(split)[1:])
            print(f"epoch {progress.epoch} step {progress.done}/{steps} | loss {row['loss']:.3f} | lr {lr:.2e} | "
                  f"{row['frames_per_s']:,.0f} frames/s | {shares}", flush=True)  # fmt: skip
        return row

    def end_epoch(self, progress: Progress, steps: int, epoch_start: float, lr: float):
        """The epoch's training time (the learners' mean), the consensus model's dev loss, every
        rank's rows to the leader, and the checkpoint of the epoch's end."""
        (seconds, frames) = yield ops.Reduce([self.clock.now() - epoch_start, progress.frames], "learners")
        seconds /= self.layout.size
        progress.trained_s += seconds
        weights = yield from self.algorithm.consensus(self.learner)
        dev_loss, dev_ter = yield from evaluate(self.consensus_model(weights), self.dev_set, self.layout)
        yield from self.algorithm.end_epoch(self.learner, dev_loss)
        diverged = yield from self.check_divergence(progress, dev_loss)
        yield from self.collect_rows(progress)
        if self.leader:
            progress.history.append({
                "kind": "epoch", "epoch": progress.epoch, "step": steps, "rank": 0, "time_s": progress.trained_s,
                "frames": int(frames), "frames_per_s": frames / seconds, "wall_s": seconds, "lr": lr,
                "dev_loss": dev_loss, "dev_ter": dev_ter,
            })  # fmt: skip
            print(f"epoch {progress.epoch} done | dev loss {dev_loss:.3f} | dev TER {100 * dev_ter:.1f}% | "
                  f"{progress.trained_s:.0f} s")  # fmt: skip
        if diverged:
            return
        progress.next_epoch()
        self.algorithm.exchanges = progress.exchanges
        yield from self.checkpoint(progress, steps)

    def collect_rows(self, progress: Progress):
        """Every learner's rows and exchanges of the epoch so far into the leader's history."""
        gathered = yield ops.Gather((progress.rows, self.algorithm.exchanges), "learners")
        if self.leader:
            progress.history += [row for rows, _ in gathered for row in rows]
            progress.pairings += [exchange for _, exchanges in gathered for exchange in exchanges]

    def check_divergence(self, progress: Progress, dev_loss: float | None = None):
        """The divergence rule, decided alike by every learner: the run has diverged when a
        learner's mean loss over a logging interval since the last check, or the dev loss, is not
        finite or is above train.divergence_factor times the untrained model's dev loss (a
        non-finite loss also leaves that step's gradient out: asrscale.training.learner).
        Returns whether it has, recording why in `progress.diverged`."""
        (worst,) = yield ops.Reduce([progress.worst_loss], "learners", "max")
        progress.worst_loss = 0.0
        factor, reference = self.run_config.train.divergence_factor, progress.untrained_dev_loss
        for what, value in (("a learner's training loss", worst), ("the dev loss", dev_loss)):
            if value is not None and not value <= factor * reference:  # NaN is not below
                limit = f"train.divergence_factor ({factor:g}) times the untrained model's dev loss ({reference:.3f})"
                reason = f"reached {value:.4g}, above {limit}" if math.isfinite(value) else "was not finite"
                progress.diverged = {"reason": f"{what} {reason}", "epoch": progress.epoch, "step": progress.done}
                return True
        return False

    def write_diverged(self, progress: Progress) -> None:
        """The outputs of a diverged run: its metrics up to where it stopped, and the model of
        its last good checkpoint (learner 0's, kept with every rank's state), or the untrained
        model where it diverged before the first."""
        latest = self.checkpoints.latest()
        model = self.untrained if latest is None else copy.deepcopy(self.learner.model).cpu()
        if latest is not None:
            model.load_state_dict(torch.load(latest / "rank0.pt", weights_only=False, map_location="cpu")["model"])
        progress.diverged["model"] = "untrained" if latest is None else f"learner 0's at {latest}"
        self.write_outputs(progress, model)
        where = f"epoch {progress.diverged['epoch']}, step {progress.diverged['step']}"
        print(f"diverged at {where}: {progress.diverged['reason']}; the model is {progress.diverged['model']}, and "
              "the report shows the run as diverged", flush=True)  # fmt: skip

    def consensus_model(self, weights: list):
        """A model holding the consensus `weights` (the learner's own where they are its own)."""
        if weights is self.learner.state:
            return self.learner.model
        if self.evaluated is None:
            self.evaluated = copy.deepcopy(self.learner.model)
            for module in self.evaluated.modules():  # a copy's LSTM weights are not cuDNN's one chunk
                if isinstance(module, torch.nn.RNNBase):
                    module.flatten_parameters()
        unflatten(ops.flatten(weights), list(self.evaluated.state_dict().values()))
        return self.evaluated

    def checkpoint(self, progress: Progress, steps: int):
        """Every rank saves its part (a replica only its progress); then learner 0 marks the
        checkpoint complete."""
        step = (progress.epoch - 1) * steps + progress.done
        progress.exchanges = self.algorithm.exchanges
        state = _state(self.identity, self.learner, self.algorithm, self.leader or not self.algorithm.replicated,
                       progress=asdict(progress))  # fmt: skip
        self.checkpoints.save(step, f"rank{self.layout.rank}", state)
        yield from self.algorithm.checkpoint(self.learner, step)
        yield ops.Barrier("learners")
        if self.leader:
            self.checkpoints.complete(step)

    def write_outputs(self, progress: Progress, model) -> None:
        """The leader's outputs, written last and the model (the learners' consensus) the very
        last: a run killed before it ends leaves nothing that looks complete."""
        out, run = self.paths.out, self.run_config
        write_metrics(out / "metrics.tsv", progress.history)
        if progress.pairings:
            lines = ["step\trank\tpeer"] + ["\t".join(map(str, pairing)) for pairing in sorted(set(progress.pairings))]
            atomic_write_text(out / "exchanges.tsv", "\n".join(lines) + "\n")
        record = {
            "algorithm": run.algorithm, "learners": self.layout.size, "seed": run.seed, "options": run.options,
            "train": asdict(run.train), "model": asdict(run.model), "features": asdict(run.features), "cmvn": run.cmvn,
            "world": self.identity["world"], "resumed": progress.resumes,
            "learning_rate": {"lr": run.train.lr, "scale": self.scale, "rule": run.train.lr_scaling,
                              "warmup_epochs": run.train.warmup_epochs, "decay": run.train.lr_decay},
            "parameters": sum(p.numel() for p in model.parameters()), "threads_per_learner": torch.get_num_threads(),
            "nodes": self.layout.nodes, "device": str(self.learner.device), "environment": environment(),
            "untrained_dev_loss": progress.untrained_dev_loss, "diverged": progress.diverged,
        }  # fmt: skip
        atomic_write_json(out / "run.json", record)
        final = {"model": {name: tensor.cpu() for name, tensor in model.state_dict().items()},
                 "model_config": asdict(run.model), "tokens": self.train_set.tokens.symbols,
                 "features": asdict(run.features), "cmvn": run.cmvn, "epochs": run.train.epochs}  # fmt: skip
        atomic_torch_save(final, out / "model.pt")


def _serve(algorithm, learner: Learner, checkpoints: Checkpoints, identity: dict, layout: ops.Layout, out: Path):
    name = f"server{layout.rank}"
    if (state := checkpoints.resumable(identity, name)) is not None:
        _restore(state, learner, algorithm)

    def checkpoint(step: int) -> None:
        checkpoints.save(step, name, _state(identity, learner, algorithm, with_model=True))

    yield from algorithm.serve(learner, checkpoint)
    atomic_write_text(
        out / "server.tsv",
        "learner\tpulled\tapplied_at\tstaleness\tapplied\n"
        + "".join("\t".join(map(str, r)) + "\n" for r in algorithm.records),
    )


def _state(identity: dict, learner: Learner, algorithm, with_model: bool, **progress) -> dict:
    """A rank's part of a checkpoint."""
    state = {"identity": identity, "algorithm": algorithm.state_dict(), "learner_steps": learner.steps,
             "rng": torch.get_rng_state(), **progress}  # fmt: skip
    if with_model:
        state.update(model=learner.model.state_dict(), optimizer=learner.optimizer.state_dict())
    return state


def _restore(state: dict, learner: Learner, algorithm, replica: dict | None = None) -> None:
    """Back to a rank's checkpointed state; `replica`: learner 0's, whose model it shares."""
    held = state if "model" in state else replica
    learner.model.load_state_dict(held["model"])
    learner.optimizer.load_state_dict(held["optimizer"])
    algorithm.load_state_dict(state["algorithm"])
    learner.steps = state["learner_steps"]
    torch.set_rng_state(state["rng"])


METRIC_COLUMNS = (
    "kind", "epoch", "step", "rank", "time_s", "loss", "frames", "frames_per_s", "wall_s",
    "compute_s", "communication_s", "data_wait_s", "idle_s", "lr", "dev_loss", "dev_ter",
)  # fmt: skip


def write_metrics(path: Path, rows: list[dict]) -> None:
    def cell(value):
        return "" if value is None else f"{value:.6g}" if isinstance(value, float) else str(value)

    lines = ["\t".join(METRIC_COLUMNS)] + ["\t".join(cell(r.get(c)) for c in METRIC_COLUMNS) for r in rows]
    atomic_write_text(path, "\n".join(lines) + "\n")
