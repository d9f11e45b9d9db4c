"""The training loop shared by every algorithm; it reads top to bottom.

Each learner is one MPI rank (or one process for a single learner). Per logging interval it
records loss, frames/s and where the time went (compute / communication / data wait / idle);
per epoch the dev loss and token error rate of the consensus model (and its gradient noise,
asrscale.training.noise_scale), from which the learning-rate schedule (asrscale.training.schedule)
decides alike on every learner: the next epoch's rate, whether the epoch is kept (a rejected one
sends every learner back to the last accepted epoch's model), and whether training stops (at
train.epochs at most). The run's model is its best: the accepted epoch's consensus model of lowest
dev loss, which Kaldi's, ESPnet's and icefall's recipes decode too, or of lowest dev TER
(train.best_by). Checkpoints come at every epoch's end and, with
`checkpoint_steps`, within epochs; each holds the rank's whole `Progress`, so a run killed at any
point (a preempted or timed-out job) resumes from the newest one, neither losing nor duplicating
rows, and a synchronous run ends with the model of an uninterrupted one.

A run that diverges stops by the rule of `divergence`, decided alike on every learner where they
meet anyway (checkpoints within an epoch, and the epoch's end): its last good checkpoint stays,
and its outputs say it diverged, so that the report shows it as such and never as a result.
"""

import copy
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from asrscale.config.algorithms import algorithm_spec
from asrscale.config.sections import RunConfig
from asrscale.data.batches import Prefetcher, Subset
from asrscale.data.shard import read_shard
from asrscale.progress import clock
from asrscale.protocol.tuning import Halving, write_rung
from asrscale.training import records
from asrscale.training.algorithms.base import Algorithm
from asrscale.training.checkpoints import Checkpoints
from asrscale.training.evaluation import evaluate, gradient_noise
from asrscale.training.learner import Learner
from asrscale.training.records import Interval, Progress
from asrscale.training.schedule import Schedule, learning_rate, lr_scale
from asrscale.worlds import ops
from asrscale.worlds.ops import unflatten
from asrscale.worlds.timing import WallTimes


@dataclass(frozen=True)
class RunContext:
    """What every learner of a run in this process shares."""

    run: RunConfig
    out: Path  # the run's folder
    shards: Path  # shard<rank>.tsv for this learner count
    train_set: Subset
    dev_set: Subset
    checkpoints: Checkpoints
    prefetcher: Callable[
        [list[list[str]]], Prefetcher
    ]  # a learner's batches of an epoch, built ahead
    world: dict  # the world's description (run.json)
    wall: WallTimes  # where this process's wall time goes, by phase (run.json)
    evaluation_part: Callable[[ops.Layout], tuple[int, int] | None]  # ops.World.evaluation_part
    halving: Halving | None = None  # a halved grid's run: its part (to its rung, or on from it)


@dataclass(frozen=True)
class LearnerContext:
    """One learner: the run it takes part in, its place in the world, its algorithm and model, and
    its clock (the wall clock, or a simulated learner's modelled one)."""

    shared: RunContext
    layout: ops.Layout
    algorithm: Algorithm
    learner: Learner
    clock: object


class LearnerLoop:
    """One learner's program: resume (or start), then epochs of steps, each epoch ended by the
    consensus model's dev evaluation and a checkpoint; the leader writes the run's outputs."""

    def __init__(self, context: LearnerContext):
        shared = context.shared
        self.run_config, self.checkpoints = shared.run, shared.checkpoints
        self.train_set, self.dev_set, self.shared = shared.train_set, shared.dev_set, shared
        self.layout, self.algorithm, self.learner, self.clock = (
            context.layout,
            context.algorithm,
            context.learner,
            context.clock,
        )
        self.leader, self.wall = self.layout.rank == 0, shared.wall
        self.part = shared.evaluation_part(
            self.layout
        )  # of the dev set that this learner evaluates
        scale = lr_scale(
            self.run_config.train.lr_scaling, self.layout.size
        )  # checked even where it does not apply
        self.scale = scale if self.algorithm.combines_learners else 1.0
        self.shard = read_shard(shared.shards, self.layout.rank, self.layout.size)
        train = self.run_config.train
        self.schedule = Schedule(train)
        self.evaluated = None  # the consensus model, where it is not the learner's own
        self.began = time.monotonic()  # this attempt's start, for the log's wall times

    def run(self):
        progress = yield from self.resume_or_start()
        # every learner takes the same number of steps, and every utterance is used once per epoch:
        # a learner with a larger shard takes slightly larger batches
        (steps,) = yield ops.Reduce(
            [math.ceil(len(self.shard) / self.run_config.train.batch_size)], "learners", "min"
        )
        steps = int(steps)
        if steps == 0:
            raise ValueError(f"shard {self.layout.rank} of {self.shared.shards} is empty")
        (frames,) = yield ops.Reduce(
            [sum(self.train_set.frames[u] for u in self.shard)], "learners"
        )
        yield from self.algorithm.plan(frames / (self.layout.size * steps))
        epochs, halving = self.run_config.train.epochs, self.shared.halving
        until = min(epochs, halving.epoch) if halving else epochs
        while progress.epoch <= until and progress.stopped is None and not progress.diverged:
            epoch_start, lr = yield from self.train_epoch(progress, steps)
            if not progress.diverged:
                yield from self.end_epoch(progress, steps, epoch_start, lr)
        yield from self.algorithm.finish(self.learner)
        if not self.leader:
            return
        ended = progress.stopped is not None or progress.diverged or progress.epoch > epochs
        if halving and halving.rung:
            write_rung(self.shared.out, self.run_config, progress, until)
            if not ended:  # on from its checkpoint if its grid's decision keeps it
                return
        if progress.diverged:
            self.write_diverged(progress)
            return
        if not ended:  # only a run that its grid's halving stopped at the rung ends early
            halving.stop(progress)
        elif progress.stopped is None:
            progress.stopped, progress.stopped_by = f"its {epochs} epochs done", "budget"
        self.write_outputs(progress, self.best_model(progress))
        with self.wall.measure("checkpoints"):
            self.checkpoints.finish()

    def resume_or_start(self):
        """The newest checkpoint's progress (a resumed learner goes on from its own state), or a
        start from learner 0's model (the leader keeps it as it is: a run that diverges before
        its first epoch ends has no other)."""
        self.untrained = copy.deepcopy(self.learner.model).cpu() if self.leader else None
        state = self.checkpoints.restore(f"rank{self.layout.rank}", self.learner, self.algorithm)
        if state is None:
            if self.leader and self.checkpoints.latest() is not None:
                print(
                    f"not resuming from {self.checkpoints.latest()}: other settings wrote it; "
                    "starting afresh"
                )
            yield from self.algorithm.start(self.learner)
            progress = Progress()
            progress.untrained_dev_loss, _ = yield from evaluate(
                self.learner.model, self.dev_set, self.part, self.wall
            )
            return progress
        progress = Progress(**state)
        self.algorithm.exchanges = progress.exchanges
        if self.leader:
            progress.resumes.append(
                {
                    "epoch": progress.epoch,
                    "step": progress.done,
                    "at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                }
            )
            print(
                f"resuming from {self.checkpoints.latest()} (epoch {progress.epoch}, "
                f"{progress.done} steps done)"
            )
        return progress

    def train_epoch(self, progress: Progress, steps: int):
        """The epoch's remaining steps; returns when the epoch started on the clock and its last
        learning rate."""
        train, epoch = self.run_config.train, progress.epoch
        seed = self.run_config.seed * 1000 + epoch  # learner 0's order is SEQ's (Subset.batches)
        groups = self.train_set.batches(
            self.shard,
            train.batch_size,
            seed,
            steps,
            learner=self.layout.rank,
            order=train.batch_order,
        )
        loader = self.shared.prefetcher(groups[progress.done :])
        self.epoch_began = time.monotonic(), progress.done  # for the log's time left
        batches, interval = iter(loader), Interval()
        epoch_start = self.clock.now() - progress.elapsed
        self.clock.reset()
        for step in range(progress.done + 1, steps + 1):
            wait_start = time.perf_counter()
            with self.wall.measure("batches"):
                batch = next(batches)
            yield ops.DataWait(time.perf_counter() - wait_start, batch.frames)
            lr = learning_rate(
                train.lr * self.algorithm.rate_factor,
                self.scale,
                train.warmup_epochs,
                progress.schedule["factor"],
                (epoch - 1) * steps + step,
                steps,
            )
            interval.add((yield from self.algorithm.step(self.learner, batch, lr)), batch.frames)
            progress.done, progress.frames = step, progress.frames + batch.frames
            if step % train.log_interval == 0 or step == steps:
                self.log_interval(progress, interval, steps, lr, epoch_start)
                interval = Interval()
                if train.checkpoint_steps and step % train.checkpoint_steps == 0 and step < steps:
                    if (yield from self.check_divergence(progress)):
                        yield from self.collect_rows(progress)
                        break
                    progress.elapsed = self.clock.now() - epoch_start
                    yield from self.checkpoint(
                        progress, steps
                    )  # its time is the next interval's idle time
        loader.close()
        yield from self.algorithm.epoch_done(self.learner)
        return epoch_start, lr

    def log_interval(
        self, progress: Progress, interval: Interval, steps: int, lr: float, epoch_start: float
    ) -> None:
        """The interval's row (the leader also prints it); the worst loss since the last check."""
        time_s = progress.trained_s + self.clock.now() - epoch_start
        row = records.interval_row(
            progress, interval, self.layout.rank, lr, time_s, self.clock.snapshot()
        )
        if self.leader:
            records.say_interval(row, steps, self.wall_progress(progress, steps))
        progress.rows.append(row)
        progress.worst_loss = max(
            progress.worst_loss, row["loss"] if math.isfinite(row["loss"]) else math.inf
        )
        self.clock.reset()

    def wall_progress(self, progress: Progress, steps: int) -> str:
        """The wall-clock time this attempt has taken, and what is left of the epoch and (at most,
        every epoch it may take) of the run, at this epoch's rate so far."""
        now = time.monotonic()
        began, done_before = self.epoch_began
        per_step = (now - began) / max(progress.done - done_before, 1)
        epoch_left = per_step * (steps - progress.done)
        run_left = epoch_left + per_step * steps * (self.run_config.train.epochs - progress.epoch)
        return (
            f"wall {clock(now - self.began)}, epoch left {clock(epoch_left)}, run left at most "
            f"{clock(run_left)}"
        )

    def end_epoch(self, progress: Progress, steps: int, epoch_start: float, lr: float):
        """The epoch's training time (until its last learner ends it: the others wait for it at the
        epoch's end), the consensus model's dev loss and gradient noise, the schedule's decision
        (the best model kept; a rejected epoch rolled back), every rank's rows to the leader, and
        the checkpoint of the epoch's end."""
        (seconds,) = yield ops.Reduce([self.clock.now() - epoch_start], "learners", "max")
        (frames,) = yield ops.Reduce([progress.frames], "learners")
        progress.trained_s += seconds
        weights = yield from self.algorithm.consensus(self.learner)
        model = None
        if self.part is not None:  # a learner that evaluates nothing needs no consensus model
            with self.wall.measure("consensus"):
                model = self.consensus_model(weights)
        dev_loss, dev_ter = yield from evaluate(model, self.dev_set, self.part, self.wall)
        noise = yield from self.measure_noise(model, progress.epoch)
        yield from self.algorithm.end_epoch(self.learner, dev_loss)
        diverged = yield from self.check_divergence(progress, dev_loss)
        yield from self.collect_rows(progress)
        decision = self.schedule.after_epoch(progress.schedule, dev_loss) if not diverged else None
        if self.leader:
            accepted = None if decision is None else decision.accepted
            row = records.epoch_row(
                progress,
                steps,
                frames,
                seconds,
                lr,
                (dev_loss, dev_ter),
                accepted,
                self.shared.world["kind"],
            )
            decay = self.run_config.train.noise_scale["smoothing"]
            progress.history.append(row | records.noise_columns(progress.history, noise, decay))
            self.keep_best(progress, accepted, {"dev_loss": dev_loss, "dev_ter": dev_ter}, model)
        if diverged:
            return
        if not decision.accepted:
            yield from self.roll_back()
        if decision.stop:
            progress.stopped, progress.stopped_by = decision.stop, "schedule"
        progress.next_epoch()
        self.algorithm.exchanges = progress.exchanges
        last = progress.stopped is not None or progress.epoch > self.run_config.train.epochs
        yield from self.checkpoint(progress, steps, epoch_end=True, last=last)

    def measure_noise(self, model, epoch: int):
        """The gradient noise of the epoch's consensus `model` (train.noise_scale; the same draw on
        a resumed run), or None where its share is 0."""
        settings = self.run_config.train.noise_scale
        if not settings["share"]:
            return None
        seed, loader = f"{self.run_config.seed}/{epoch}", self.shared.prefetcher
        return (
            yield from gradient_noise(
                model, self.train_set, self.part, self.wall, settings, seed, loader
            )
        )

    def keep_best(self, progress: Progress, accepted: bool | None, measured: dict, model) -> None:
        """The leader keeps the epoch's model where the schedule accepted it and it is the best so
        far by train.best_by."""
        by = self.run_config.train.best_by
        if accepted and measured[by] < (progress.best or {}).get(by, math.inf):
            progress.best = {
                "epoch": progress.epoch,
                **measured,
                "model": {k: t.detach().cpu().clone() for k, t in model.state_dict().items()},
            }

    def roll_back(self):
        """Every learner (and server) back to the model and optimizer of the last accepted epoch's
        end, its checkpoint; counters and the run's records go on."""
        with self.wall.measure("checkpoints"):
            self.checkpoints.roll_back(f"rank{self.layout.rank}", self.learner)
        yield from self.algorithm.roll_back(self.learner)

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
                limit = (
                    f"train.divergence_factor ({factor:g}) times the untrained model's dev "
                    f"loss ({reference:.3f})"
                )
                reason = (
                    f"reached {value:.4g}, above {limit}"
                    if math.isfinite(value)
                    else "was not finite"
                )
                progress.diverged = {
                    "reason": f"{what} {reason}",
                    "epoch": progress.epoch,
                    "step": progress.done,
                }
                return True
        return False

    def best_model(self, progress: Progress):
        """A copy of the model holding the run's best weights (progress.best)."""
        model = copy.deepcopy(self.learner.model).cpu()
        model.load_state_dict(progress.best["model"])
        return model

    def write_diverged(self, progress: Progress) -> None:
        """The outputs of a diverged run: its metrics up to where it stopped, and its best model
        so far, or the untrained model where it diverged before its first epoch ended."""
        best = progress.best
        model = self.untrained if best is None else self.best_model(progress)
        progress.diverged["model"] = (
            "untrained" if best is None else f"its best, epoch {best['epoch']}"
        )
        self.write_outputs(progress, model)
        where = f"epoch {progress.diverged['epoch']}, step {progress.diverged['step']}"
        print(
            f"diverged at {where}: {progress.diverged['reason']}; the model is "
            f"{progress.diverged['model']}, and "
            "the report shows the run as diverged",
            flush=True,
        )

    def consensus_model(self, weights: list):
        """A model holding the consensus `weights` (the learner's own where they are its own)."""
        if weights is self.learner.state:
            return self.learner.model
        if self.evaluated is None:
            self.evaluated = copy.deepcopy(self.learner.model)
            for (
                module
            ) in self.evaluated.modules():  # a copy's LSTM weights are not cuDNN's one chunk
                if isinstance(module, torch.nn.RNNBase):
                    module.flatten_parameters()
        unflatten(ops.flatten(weights), list(self.evaluated.state_dict().values()))
        return self.evaluated

    def checkpoint(
        self, progress: Progress, steps: int, epoch_end: bool = False, last: bool = False
    ):
        """Every rank saves its part (a replica only its progress); then learner 0 marks the
        checkpoint complete (`epoch_end`: an epoch's end, which a rejected epoch goes back to).
        The run's `last` holds only what a finished run keeps (Checkpoints.finish): learner 0's
        state and its servers', from which more epochs resume every learner."""
        step = (progress.epoch - 1) * steps + progress.done
        progress.exchanges = self.algorithm.exchanges
        with_model = self.leader or not self.algorithm.replicated
        if self.leader or not last:
            with self.wall.measure("checkpoints"):
                self.checkpoints.save(
                    step,
                    f"rank{self.layout.rank}",
                    self.learner,
                    self.algorithm,
                    with_model,
                    asdict(progress),
                )
        yield from self.algorithm.checkpoint(self.learner, step)
        yield ops.Barrier("learners")
        if self.leader:
            with self.wall.measure("checkpoints"):
                self.checkpoints.complete(step, epoch_end)

    def write_outputs(self, progress: Progress, model) -> None:
        """The leader's outputs (asrscale.training.records), the model (the best consensus) the
        very last."""
        run = self.run_config
        facts = {
            "learners": self.layout.size,
            "world": self.shared.world,
            "nodes": self.layout.nodes,
            "global_batch": algorithm_spec(run.algorithm).global_batch(
                self.layout.size, run.train.batch_size
            ),
            # what the run's train settings (recorded beside) make of train.lr at its P
            "learning_rate": {
                "scale": self.scale,
                "factor": self.algorithm.rate_factor,
                "peak": run.train.lr * self.algorithm.rate_factor * self.scale,
            },
            "threads_per_learner": torch.get_num_threads(),
            "device": str(self.learner.device),
            "process_wall_s": self.wall.summary(),
            # learner 0's exchanges on real ranks: their bytes over their time (waits for peers
            # included)
            "exchanges": {
                "bytes": self.wall.exchanged_bytes,
                "seconds": self.wall.seconds["exchanges"],
            },
        }
        records.write_outputs(
            self.shared.out, run, progress, model, facts, self.train_set.tokens.symbols
        )
