"""The training loop shared by every algorithm; it reads top to bottom.

Each learner is one MPI rank (or one process for a single learner). Per logging interval it
records loss, frames/s and where the time went (compute / communication / data wait / idle);
per epoch the dev loss and token error rate of the consensus model. Checkpoints come at every
epoch's end and, with `checkpoint_steps`, within epochs; each holds every rank's metrics so far,
so a run killed at any point (a preempted or timed-out job) resumes from the newest one, neither
losing nor duplicating rows, and a synchronous run ends with the model of an uninterrupted one.
"""

import math
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F

from asrscale.data.batches import Prefetcher, Subset
from asrscale.data.features import FeatureConfig
from asrscale.data.shard import read_shard
from asrscale.data.tokens import Tokens
from asrscale.decoding.decode import error_counts, greedy
from asrscale.io import atomic_torch_save, atomic_write_json, atomic_write_text
from asrscale.provenance import environment
from asrscale.training.algorithms import make_algorithm
from asrscale.training.algorithms.base import lr_scale
from asrscale.training.models import ModelConfig, build_model
from asrscale.worlds import ops
from asrscale.worlds.devices import synchronize


@dataclass(frozen=True)
class TrainConfig:
    algorithm: str = "seq"
    epochs: int = 6
    batch_size: int = 32  # per learner
    optimizer: str = "adam"  # "adam" or "sgd" (with momentum)
    lr: float = 1e-3
    momentum: float = 0.9
    lr_scaling: str = "sqrt"  # how lr grows with the global batch: "none", "linear" or "sqrt"
    warmup_steps: int = 0
    lr_decay: float = 1.0  # multiplied into lr after every epoch
    clip_grad_norm: float = 5.0  # 0 disables
    log_interval: int = 50  # steps
    checkpoint_steps: int = 0  # also checkpoint every this many steps within an epoch (0: at its end only)
    prefetch: int = 4  # batches built ahead by a thread; 0 builds them in the learner's thread
    device: str = "auto"  # "cpu", "cuda", or "auto": a GPU where CUDA has one (the world places learners)
    threads: int = 0  # torch threads per learner; 0: the machine's cores shared among its learners
    seed: int = 1
    options: dict = field(default_factory=dict)  # the algorithm's own settings

    def __post_init__(self):
        if self.checkpoint_steps % self.log_interval:  # checkpoints come at log lines
            raise ValueError(f"train.checkpoint_steps ({self.checkpoint_steps}) must be a multiple of "
                             f"train.log_interval ({self.log_interval})")  # fmt: skip


@dataclass(frozen=True)
class RunPaths:
    data: Path  # Kaldi data dirs: <data>/{train,dev}
    feats: Path  # features: <feats>/{train,dev}
    shards: Path  # shard<rank>.tsv for this learner count
    tokens: Path
    out: Path  # the run's directory


class Diverged(RuntimeError):
    pass


def ctc_loss(model, batch, reduction="mean"):
    batch = batch.to(next(model.parameters()).device)
    log_probs, lengths = model(batch.features, batch.lengths)
    losses = F.ctc_loss(
        log_probs.transpose(0, 1), batch.targets, lengths, batch.target_lengths, reduction="none", zero_infinity=True
    )
    losses = losses / batch.target_lengths.clamp(min=1)
    return (losses.mean() if reduction == "mean" else losses.sum()), log_probs, lengths


def make_optimizer(config: TrainConfig, model) -> torch.optim.Optimizer:
    if config.optimizer == "adam":
        return torch.optim.Adam(model.parameters(), lr=config.lr)
    if config.optimizer == "sgd":
        return torch.optim.SGD(model.parameters(), lr=config.lr, momentum=config.momentum)
    raise ValueError(f"train.optimizer must be 'adam' or 'sgd', not {config.optimizer!r}")


def lr_factor(config: TrainConfig, learners: int, scales_global_batch: bool) -> float:
    """Learning-rate multiplier for a global batch `learners` times the per-learner batch."""
    scale = lr_scale(config.lr_scaling, learners)  # validates the rule even where it does not apply
    return scale if scales_global_batch else 1.0


class Learner:
    """One learner's model and optimizer. `backward` and `update` are the two halves of a step;
    they report the compute time they spent to the world."""

    def __init__(self, model, optimizer, clip_grad_norm: float, name: str):
        self.model, self.optimizer, self.clip_grad_norm, self.name = model, optimizer, clip_grad_norm, name
        self.parameters = list(model.parameters())
        self.state = list(model.state_dict().values())
        self.device = self.parameters[0].device
        self.steps = 0

    def seconds_since(self, start: float) -> float:
        """Compute time since `start` (perf_counter), once the device has finished what was asked."""
        synchronize(self.device)
        return time.perf_counter() - start

    @property
    def gradients(self) -> list[torch.Tensor]:
        return [p.grad for p in self.parameters]

    def backward(self, batch):
        start = time.perf_counter()
        self.optimizer.zero_grad(set_to_none=False)
        loss, _, _ = ctc_loss(self.model, batch)
        loss.backward()
        value = loss.item()
        if not math.isfinite(value):
            raise Diverged(f"{self.name}: loss {value} at step {self.steps + 1}")
        yield ops.Compute(time.perf_counter() - start, batch.frames)
        return value

    def update(self, lr: float):
        start = time.perf_counter()
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        if self.clip_grad_norm:
            torch.nn.utils.clip_grad_norm_(self.parameters, self.clip_grad_norm)
        self.optimizer.step()
        self.steps += 1
        yield ops.Compute(self.seconds_since(start), kind="update")


def evaluate(model, subset: Subset, layout: ops.Layout, batch_size: int = 64):
    """Dev loss and token (character) error rate, the utterances split over the learners."""
    model.eval()
    loss_sum, utts, errors, length = 0.0, 0, 0, 0
    with torch.no_grad():
        for group in subset.batches(sorted(subset.frames)[layout.rank :: layout.size], batch_size, seed=None):
            batch = subset.collate(group)
            loss, log_probs, lengths = ctc_loss(model, batch, reduction="sum")
            hypotheses = greedy(log_probs, lengths, subset.tokens)
            e, n = error_counts([subset.text[u] for u in group], hypotheses, unit="char")
            loss_sum, utts, errors, length = loss_sum + loss.item(), utts + len(group), errors + e, length + n
    model.train()
    loss_sum, utts, errors, length = yield ops.Reduce([loss_sum, utts, errors, length], "learners")
    return loss_sum / utts, errors / length


class Checkpoints:
    """A run's checkpoints, a folder per global step: every rank's state (`rank<r>.pt`, a
    server's `server<r>.pt`) and a `complete` mark that learner 0 writes once all are on disk,
    so that a folder a killed job left half-written is never resumed. Only the newest complete
    folder is kept."""

    def __init__(self, folder: Path):
        self.folder = folder

    def _at(self, step: int) -> Path:
        return self.folder / f"step{step:09d}"

    def latest(self) -> Path | None:
        complete = sorted(mark.parent for mark in self.folder.glob("step*/complete"))
        return complete[-1] if complete else None

    def save(self, step: int, name: str, state: dict) -> None:
        atomic_torch_save(state, self._at(step) / f"{name}.pt")

    def complete(self, step: int) -> None:
        atomic_write_text(self._at(step) / "complete", "")
        for other in self.folder.glob("step*"):  # older ones, and newer ones of a run not resumed
            if other != self._at(step):
                shutil.rmtree(other)

    def finish(self) -> None:
        """A finished run keeps learner 0's state (and its servers'): for 64 learners that is a
        64th of the disk; a run extended by more epochs resumes every learner from it."""
        if (latest := self.latest()) is not None:
            for state in latest.glob("rank*.pt"):
                if state.name != "rank0.pt":
                    state.unlink()

    def resumable(self, identity: dict, name: str) -> dict | None:
        """`name`'s state in the newest complete checkpoint, if it was written with these settings
        (learner 0's, where a finished run kept only that)."""
        if (latest := self.latest()) is None:
            return None
        path = latest / f"{name}.pt"
        if not path.exists() and name.startswith("rank"):
            path = latest / "rank0.pt"
        state = torch.load(path, weights_only=False, map_location="cpu")
        return state if state["identity"] == identity else None


METRIC_COLUMNS = (
    "kind", "epoch", "step", "rank", "time_s", "loss", "frames", "frames_per_s", "wall_s",
    "compute_s", "communication_s", "data_wait_s", "idle_s", "lr", "dev_loss", "dev_ter",
)  # fmt: skip


def write_metrics(path: Path, rows: list[dict]) -> None:
    def cell(value):
        return "" if value is None else f"{value:.6g}" if isinstance(value, float) else str(value)

    lines = ["\t".join(METRIC_COLUMNS)] + ["\t".join(cell(r.get(c)) for c in METRIC_COLUMNS) for r in rows]
    atomic_write_text(path, "\n".join(lines) + "\n")


def train(config: TrainConfig, model_config: ModelConfig, feature_config: FeatureConfig, paths: RunPaths, world):
    """Have `world` carry out a run: each learner's loop, and the algorithm's server loop on a
    server rank. The MPI world runs this rank's program; a simulated world runs every rank's."""
    torch.set_num_threads(config.threads or world.threads_per_rank)
    torch.set_flush_denormal(True)  # denormals made one CPU run 3-4x slower
    tokens = Tokens.read(paths.tokens)
    # one copy of the data, shared by every learner a world runs in this process
    train_set, dev_set = (Subset.of(paths.data, paths.feats, s, feature_config.cmvn, tokens) for s in ("train", "dev"))

    device = world.device
    checkpoints = Checkpoints(paths.out / "checkpoints")

    def program(layout: ops.Layout, serving: bool, clock):
        torch.manual_seed(config.seed)
        model = build_model(model_config, feature_config.dim, len(tokens)).to(device)
        algorithm = make_algorithm(config.algorithm, layout, config.options)
        name = f"{config.algorithm} {'server' if serving else 'rank'} {layout.rank}"
        learner = Learner(model, make_optimizer(config, model), config.clip_grad_norm, name)
        # a checkpoint is resumed only by the run that wrote it: same settings (the number of
        # epochs aside: a run may be extended), same world (for a simulated run, the same
        # hardware profile and calibration)
        settings = {k: v for k, v in asdict(config).items() if k not in ("epochs", "checkpoint_steps")}
        identity = {"train": settings, "model": asdict(model_config), "features": asdict(feature_config),
                    "world": world.description()}  # fmt: skip
        if serving:
            return _serve(algorithm, learner, checkpoints, identity, layout, paths.out)
        data = (train_set, dev_set)
        return _learn(config, model_config, feature_config, paths, layout, algorithm, learner, data, clock, world,
                      checkpoints, identity)  # fmt: skip

    world.launch(program)


def _serve(algorithm, learner, checkpoints: Checkpoints, identity: dict, layout, out: Path):
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


def _learn(config, model_config, feature_config, paths, layout, algorithm, learner, data, clock, world, checkpoints,
           identity):  # fmt: skip
    leader = layout.rank == 0
    train_set, dev_set = data
    tokens = train_set.tokens
    shard = read_shard(paths.shards / f"shard{layout.rank}.tsv")
    model = learner.model
    # leader's: every finished epoch's rows, ADPSGD's pairings, where the run was resumed;
    # every rank's: its rows of the epoch under way
    rows, exchanges, resumes = [], [], []
    first, done, epoch_rows, epoch_frames, epoch_elapsed, trained_s = 1, 0, [], 0, 0.0, 0.0
    if (state := checkpoints.resumable(identity, f"rank{layout.rank}")) is not None:
        replica = None if "model" in state else checkpoints.resumable(identity, "rank0")
        _restore(state, learner, algorithm, replica)
        first, done, epoch_rows, algorithm.exchanges = state["epoch"], state["done"], state["rows"], state["exchanges"]
        epoch_frames, epoch_elapsed, trained_s = state["frames"], state["elapsed"], state["trained_s"]
        if leader:
            rows, exchanges, resumes = state["all_rows"], state["all_exchanges"], state["resumes"]
            resumes.append({"epoch": first, "step": done, "at": time.strftime("%Y-%m-%dT%H:%M:%S%z")})
            print(f"resuming from {checkpoints.latest()} (epoch {first}, step {done} done)", flush=True)
    else:
        if leader and checkpoints.latest() is not None:
            print(f"not resuming from {checkpoints.latest()}: it was written with other settings; starting afresh")
        yield from algorithm.start(learner)  # (a resumed learner goes on from its own state)

    # every learner takes the same number of steps, and every utterance is used once per epoch:
    # a learner with a larger shard takes slightly larger batches
    (steps,) = yield ops.Reduce([math.ceil(len(shard) / config.batch_size)], "learners", op="min")
    steps = int(steps)
    if steps == 0:
        raise ValueError(f"shard {layout.rank} of {paths.shards} is empty")
    if done == steps:  # the checkpoint of an epoch's end
        first, done = first + 1, 0

    def checkpoint(epoch, done):
        """Every rank saves its part (a replica only its progress); then learner 0 marks the
        checkpoint complete."""
        step = (epoch - 1) * steps + done
        with_model = leader or not algorithm.replicated
        progress = {"epoch": epoch, "done": done, "rows": epoch_rows, "exchanges": algorithm.exchanges,
                    "frames": epoch_frames, "elapsed": clock.now() - epoch_start, "trained_s": trained_s}  # fmt: skip
        if leader:
            progress.update(all_rows=rows, all_exchanges=exchanges, resumes=resumes)
        checkpoints.save(step, f"rank{layout.rank}", _state(identity, learner, algorithm, with_model, **progress))
        yield from algorithm.checkpoint(learner, step)
        yield ops.Barrier("learners")
        if leader:
            checkpoints.complete(step)

    base_lr = config.lr * lr_factor(config, layout.size, algorithm.scales_global_batch)
    for epoch in range(first, config.epochs + 1):
        groups = train_set.batches(shard, config.batch_size, seed=config.seed * 1000 + epoch, count=steps)
        loader = Prefetcher(train_set, groups[done:], config.prefetch if world.loads_in_background else 0)
        batches = iter(loader)
        interval_loss, interval_frames = 0.0, 0
        epoch_start = clock.now() - epoch_elapsed
        clock.reset()
        for step in range(done + 1, steps + 1):
            wait_start = time.perf_counter()
            batch = next(batches)
            yield ops.DataWait(time.perf_counter() - wait_start, batch.frames)
            global_step = (epoch - 1) * steps + step
            warmup = min(1.0, global_step / config.warmup_steps) if config.warmup_steps else 1.0
            lr = base_lr * warmup * config.lr_decay ** (epoch - 1)
            interval_loss += yield from algorithm.step(learner, batch, lr)
            interval_frames += batch.frames
            epoch_frames += batch.frames
            if step % config.log_interval == 0 or step == steps:
                split = clock.snapshot()
                count = (step - 1) % config.log_interval + 1
                row = {
                    "kind": "interval", "epoch": epoch, "step": step, "rank": layout.rank, "lr": lr,
                    "time_s": trained_s + clock.now() - epoch_start, "loss": interval_loss / count,
                    "frames": interval_frames, "frames_per_s": interval_frames / split["wall_s"], **split,
                }  # fmt: skip
                epoch_rows.append(row)
                if leader:
                    shares = " ".join(f"{c[:-2]} {100 * split[c] / split['wall_s']:.0f}%" for c in list(split)[1:])
                    print(
                        f"epoch {epoch} step {step}/{steps} | loss {row['loss']:.3f} | lr {lr:.2e} | "
                        f"{row['frames_per_s']:,.0f} frames/s | {shares}",
                        flush=True,
                    )
                interval_loss, interval_frames = 0.0, 0
                clock.reset()
                if config.checkpoint_steps and step % config.checkpoint_steps == 0 and step < steps:
                    yield from checkpoint(epoch, step)  # its time is the next interval's idle time
        loader.close()
        (epoch_train_s, total_frames) = yield ops.Reduce([clock.now() - epoch_start, epoch_frames], "learners")
        epoch_train_s /= layout.size
        trained_s += epoch_train_s
        yield from algorithm.consensus(learner)
        dev_loss, dev_ter = yield from evaluate(model, dev_set, layout)
        yield from algorithm.end_epoch(learner, dev_loss)
        gathered = yield ops.Gather((epoch_rows, algorithm.exchanges), "learners")
        epoch_rows, algorithm.exchanges, done, epoch_frames, epoch_elapsed = [], [], 0, 0, 0.0
        if leader:
            rows += [row for rank_rows, _ in gathered for row in rank_rows]
            exchanges += [exchange for _, rank_exchanges in gathered for exchange in rank_exchanges]
            rows.append(
                {
                    "kind": "epoch",
                    "epoch": epoch,
                    "step": steps,
                    "rank": 0,
                    "time_s": trained_s,
                    "frames": int(total_frames),
                    "frames_per_s": total_frames / epoch_train_s,
                    "wall_s": epoch_train_s,
                    "lr": lr,
                    "dev_loss": dev_loss,
                    "dev_ter": dev_ter,
                }  # fmt: skip
            )
            print(f"epoch {epoch} done | dev loss {dev_loss:.3f} | dev TER {100 * dev_ter:.1f}% | {trained_s:.0f} s")
        epoch_start = clock.now()
        yield from checkpoint(epoch, steps)

    yield from algorithm.finish(learner)
    if leader:
        # the outputs last, the model the very last: a run killed before it is not complete
        write_metrics(paths.out / "metrics.tsv", rows)
        if exchanges:
            lines = ["step\trank\tpeer"] + ["\t".join(map(str, exchange)) for exchange in sorted(set(exchanges))]
            atomic_write_text(paths.out / "exchanges.tsv", "\n".join(lines) + "\n")
        record = {
            "algorithm": config.algorithm, "learners": layout.size, "seed": config.seed, **identity,
            "epochs": config.epochs, "checkpoint_steps": config.checkpoint_steps, "resumed": resumes,
            "parameters": sum(p.numel() for p in model.parameters()), "threads_per_learner": torch.get_num_threads(),
            "nodes": layout.nodes, "device": str(next(model.parameters()).device), "environment": environment(),
        }  # fmt: skip
        atomic_write_json(paths.out / "run.json", record)
        weights = {name: tensor.cpu() for name, tensor in model.state_dict().items()}
        final = {"model": weights, "model_config": asdict(model_config), "tokens": tokens.symbols,
                 "features": asdict(feature_config), "epochs": config.epochs}  # fmt: skip
        atomic_torch_save(final, paths.out / "model.pt")
        checkpoints.finish()
