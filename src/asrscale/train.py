"""The training loop shared by every algorithm; it reads top to bottom.

Each learner is one MPI rank (or one process for a single learner). Per logging interval it
records loss, frames/s and where the time went (compute / communication / data wait / idle);
per epoch the dev loss and token error rate of the consensus model, and a checkpoint that also
holds the metrics so far, so a resumed run neither loses nor duplicates rows.
"""

import math
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F

from asrscale import ops
from asrscale.algorithms import make_algorithm
from asrscale.algorithms.base import lr_scale
from asrscale.data import Prefetcher, Subset
from asrscale.decode import error_counts, greedy
from asrscale.features import FeatureConfig
from asrscale.io import atomic_torch_save, atomic_write_json, atomic_write_text
from asrscale.models import ModelConfig, build_model
from asrscale.provenance import environment
from asrscale.shard import read_shard
from asrscale.tokens import Tokens


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
    prefetch: int = 4  # batches built ahead by a thread; 0 builds them in the learner's thread
    threads: int = 0  # torch threads per learner; 0: the machine's cores shared among its learners
    seed: int = 1
    options: dict = field(default_factory=dict)  # the algorithm's own settings


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
        self.steps = 0

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
        yield ops.Compute(time.perf_counter() - start, kind="update")


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
    """Per-epoch checkpoints written atomically by rank 0; the newest two are kept."""

    def __init__(self, folder: Path):
        self.folder = folder

    def _saved(self) -> list[Path]:
        return sorted(self.folder.glob("epoch*.pt"), key=lambda p: int(p.stem[5:]))

    def latest(self) -> Path | None:
        found = self._saved()
        return found[-1] if found else None

    def save(self, epoch: int, state: dict) -> None:
        atomic_torch_save(state, self.folder / f"epoch{epoch}.pt")
        for stale in self._saved():  # later epochs of an earlier run that was not resumed
            if int(stale.stem[5:]) > epoch:
                stale.unlink()
        for old in self._saved()[:-2]:
            old.unlink()


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

    def program(layout: ops.Layout, serving: bool, clock):
        torch.manual_seed(config.seed)
        model = build_model(model_config, feature_config.dim, len(tokens))
        algorithm = make_algorithm(config.algorithm, layout, config.options)
        name = f"{config.algorithm} {'server' if serving else 'rank'} {layout.rank}"
        learner = Learner(model, make_optimizer(config, model), config.clip_grad_norm, name)
        if serving:
            return _serve(algorithm, learner, paths.out / "server.tsv")
        data = (train_set, dev_set)
        return _learn(config, model_config, feature_config, paths, layout, algorithm, learner, data, clock, world)

    world.launch(program)


def _serve(algorithm, learner, records_path: Path):
    records = yield from algorithm.serve(learner)
    atomic_write_text(
        records_path,
        "learner\tpulled\tapplied_at\tstaleness\tapplied\n" + "".join("\t".join(map(str, r)) + "\n" for r in records),
    )


def _learn(config, model_config, feature_config, paths, layout, algorithm, learner, data, clock, world):
    leader = layout.rank == 0
    train_set, dev_set = data
    tokens = train_set.tokens
    shard = read_shard(paths.shards / f"shard{layout.rank}.tsv")
    model, optimizer = learner.model, learner.optimizer
    # a checkpoint is resumed only by the run that wrote it: same settings, same world (for a
    # simulated run, the same hardware profile and calibration)
    identity = {"train": asdict(config), "model": asdict(model_config), "features": asdict(feature_config),
                "world": world.description()}  # fmt: skip
    if leader:
        record = {
            "algorithm": config.algorithm, "learners": layout.size, "seed": config.seed, **identity,
            "parameters": sum(p.numel() for p in model.parameters()), "threads_per_learner": torch.get_num_threads(),
            "nodes": layout.nodes, "environment": environment(),
        }  # fmt: skip
        atomic_write_json(paths.out / "run.json", record)
    checkpoints, rows, exchanges, first_epoch, trained_s = Checkpoints(paths.out / "checkpoints"), [], [], 1, 0.0
    if (latest := checkpoints.latest()) is not None:
        state = torch.load(latest, weights_only=False)
        if state.get("identity") == identity:
            model.load_state_dict(state["model"])
            optimizer.load_state_dict(state["optimizer"])
            rows, exchanges, first_epoch = state["metrics"], state.get("exchanges", []), state["epoch"] + 1
            trained_s = state["trained_s"]
            if leader:
                print(f"resuming from {latest} (epoch {state['epoch']} done)", flush=True)
        elif leader:
            print(f"not resuming from {latest}: it was written with other settings; starting afresh", flush=True)
    yield from algorithm.start(learner)

    # every learner takes the same number of steps, and every utterance is used once per epoch:
    # a learner with a larger shard takes slightly larger batches
    (steps,) = yield ops.Reduce([math.ceil(len(shard) / config.batch_size)], "learners", op="min")
    steps = int(steps)
    if steps == 0:
        raise ValueError(f"shard {layout.rank} of {paths.shards} is empty")
    base_lr = config.lr * lr_factor(config, layout.size, algorithm.scales_global_batch)
    for epoch in range(first_epoch, config.epochs + 1):
        groups = train_set.batches(shard, config.batch_size, seed=config.seed * 1000 + epoch, count=steps)
        loader = Prefetcher(train_set, groups, config.prefetch if world.loads_in_background else 0)
        batches, epoch_rows = iter(loader), []
        interval_loss, interval_frames, epoch_frames = 0.0, 0, 0
        epoch_start = clock.now()
        clock.reset()
        for step in range(1, steps + 1):
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
        loader.close()
        (epoch_train_s, total_frames) = yield ops.Reduce([clock.now() - epoch_start, epoch_frames], "learners")
        epoch_train_s /= layout.size
        trained_s += epoch_train_s
        yield from algorithm.consensus(learner)
        dev_loss, dev_ter = yield from evaluate(model, dev_set, layout)
        yield from algorithm.end_epoch(learner, dev_loss)
        gathered = yield ops.Gather((epoch_rows, algorithm.exchanges), "learners")
        algorithm.exchanges = []
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
            checkpoints.save(
                epoch,
                {
                    "model": model.state_dict(),
                    "optimizer": optimizer.state_dict(),
                    "epoch": epoch,
                    "metrics": rows,
                    "exchanges": exchanges,
                    "trained_s": trained_s,
                    "identity": identity,
                },  # fmt: skip
            )
            write_metrics(paths.out / "metrics.tsv", rows)

    yield from algorithm.finish(learner)
    if leader:
        write_metrics(paths.out / "metrics.tsv", rows)
        if exchanges:
            lines = ["step\trank\tpeer"] + ["\t".join(map(str, exchange)) for exchange in sorted(set(exchanges))]
            atomic_write_text(paths.out / "exchanges.tsv", "\n".join(lines) + "\n")
        final = {"model": model.state_dict(), "model_config": asdict(model_config), "tokens": tokens.symbols,
                 "features": asdict(feature_config), "epochs": config.epochs}  # fmt: skip
        atomic_torch_save(final, paths.out / "model.pt")
