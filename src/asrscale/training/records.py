"""A run's records: where each learner stands (`Progress`, checkpointed whole), its rows of
metrics, and what the leader writes when the run ends: metrics.tsv, exchanges.tsv, run.json and
the model, the model the very last, so that a run killed before it ends leaves nothing that looks
complete."""

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

from asrscale.config.sections import RunConfig
from asrscale.io import atomic_torch_save, atomic_write_json, atomic_write_text
from asrscale.progress import clock
from asrscale.provenance import environment
from asrscale.training.noise_scale import Norms, smoothed
from asrscale.training.schedule import Schedule
from asrscale.worlds.timing import CATEGORIES


@dataclass
class Progress:
    """Where a learner's run stands, checkpointed and restored whole: the epoch under way, the
    steps it has done, its frames, time and metrics rows so far, the algorithm's averagings and
    the schedule's state; the leader's also every finished epoch's rows and averagings, where the
    run resumed, and its best model so far."""

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
    worst_loss: float = (
        0.0  # the highest interval loss since the learners last checked for divergence
    )
    diverged: dict | None = None  # why and where, once the run has
    schedule: dict = field(default_factory=Schedule.start)  # the learning-rate schedule's state
    stopped: str | None = None  # why training stopped, once it has
    stopped_by: str | None = (
        None  # "schedule" (its own stop: converged) or "budget" (train.epochs ran out)
    )
    best: dict | None = None  # the leader's: the accepted epoch of lowest dev loss, with its model

    def next_epoch(self) -> None:
        self.epoch, self.done, self.frames, self.elapsed, self.rows, self.exchanges = (
            self.epoch + 1,
            0,
            0,
            0.0,
            [],
            [],
        )


class Interval:
    """The loss and frames of the steps since the last log line."""

    def __init__(self):
        self.loss, self.frames, self.steps = 0.0, 0, 0

    def add(self, loss: float, frames: int) -> None:
        self.loss, self.frames, self.steps = self.loss + loss, self.frames + frames, self.steps + 1


def interval_row(
    progress: Progress, interval: Interval, rank: int, lr: float, time_s: float, split: dict
) -> dict:
    """A learner's row of one logging interval; `split`: where its wall time went."""
    return {
        "kind": "interval",
        "epoch": progress.epoch,
        "step": progress.done,
        "rank": rank,
        "lr": lr,
        "time_s": time_s,
        "loss": interval.loss / interval.steps,
        "frames": interval.frames,
        "frames_per_s": interval.frames / split["wall_s"],
        **split,
    }


def say_interval(row: dict, steps: int, wall: str) -> None:
    """The leader's log line of an interval, with `wall`: the wall-clock time taken and left."""
    shares = " ".join(f"{c[:-2]} {100 * row[c] / row['wall_s']:.0f}%" for c in TIME_SPLIT)
    print(
        f"epoch {row['epoch']} step {row['step']}/{steps} | loss {row['loss']:.3f} | lr "
        f"{row['lr']:.2e} | {row['frames_per_s']:,.0f} frames/s | {shares} | {wall}",
        flush=True,
    )


def epoch_row(
    progress: Progress,
    steps: int,
    frames: float,
    seconds: float,
    lr: float,
    dev: tuple,
    accepted: bool,
    world: str,
) -> dict:
    """The run's row of a finished epoch: its training time (until its last learner), frames, its
    last learning rate, the consensus model's dev loss and token error rate `dev`, and whether the
    schedule kept it (a rejected epoch's model is rolled back); `world` says whose time it is."""
    dev_loss, dev_ter = dev
    timed = "modelled" if world == "simulated" else "wall clock"
    print(
        f"epoch {progress.epoch} done | dev loss {dev_loss:.3f} | dev TER {100 * dev_ter:.1f}% | "
        f"trained {clock(progress.trained_s)} ({timed})"
        + ("" if accepted else " | rejected: back to the last accepted epoch")
    )
    return {
        "kind": "epoch",
        "epoch": progress.epoch,
        "step": steps,
        "rank": 0,
        "time_s": progress.trained_s,
        "frames": int(frames),
        "frames_per_s": frames / seconds,
        "wall_s": seconds,
        "lr": lr,
        "dev_loss": dev_loss,
        "dev_ter": dev_ter,
        "accepted": int(bool(accepted)),
    }


def noise_columns(history: list[dict], noise: Norms | None, decay: float) -> dict:
    """An epoch row's gradient noise (none where the run does not measure it): the epoch's
    estimates of |G|² and tr(Σ), and the noise scale smoothed over every epoch's so far
    (asrscale.training.noise_scale; `history`, the rows before it, with `decay`)."""
    if noise is None:
        return {}
    earlier = [
        (row["gradient_sq"], row["noise_trace"])
        for row in history
        if row["kind"] == "epoch" and "gradient_sq" in row
    ]
    now = (noise.gradient_sq, noise.trace)
    return {
        "gradient_sq": now[0],
        "noise_trace": now[1],
        "noise_scale": smoothed([*earlier, now], decay),
    }


TIME_SPLIT = tuple(f"{category}_s" for category in CATEGORIES)  # a row's wall time, split
METRIC_COLUMNS = (
    "kind",
    "epoch",
    "step",
    "rank",
    "time_s",
    "loss",
    "frames",
    "frames_per_s",
    "wall_s",
    *TIME_SPLIT,
    "lr",
    "dev_loss",
    "dev_ter",
    "accepted",
    "gradient_sq",
    "noise_trace",
    "noise_scale",
)


def write_metrics(path: Path, rows: list[dict]) -> None:
    def cell(value):
        return "" if value is None else f"{value:.6g}" if isinstance(value, float) else str(value)

    lines = ["\t".join(METRIC_COLUMNS)] + [
        "\t".join(cell(r.get(c)) for c in METRIC_COLUMNS) for r in rows
    ]
    atomic_write_text(path, "\n".join(lines) + "\n")


def write_table(path: Path, header: str, rows) -> None:
    """A TSV file of `rows` (tuples) under the tab-separated `header`."""
    atomic_write_text(
        path, header + "\n" + "".join("\t".join(map(str, row)) + "\n" for row in rows)
    )


def write_outputs(
    out: Path, run: RunConfig, progress: Progress, model, facts: dict, tokens: list[str]
) -> None:
    """The leader's outputs of a finished or diverged run, `model` its best (the accepted epoch of
    lowest dev loss or TER, train.best_by); `facts`: what run.json records of the run as it ran (its
    world, learners, learning rate, device ...), besides its settings."""
    write_metrics(out / "metrics.tsv", progress.history)
    if progress.pairings:
        write_table(
            out / "exchanges.tsv", "step\trank\tpeer", sorted(set(map(tuple, progress.pairings)))
        )
    best = progress.best or {}
    record = {
        "algorithm": run.algorithm,
        "seed": run.seed,
        "options": run.options,
        "train": asdict(run.train),
        "model": asdict(run.model),
        "features": asdict(run.features),
        "cmvn": run.cmvn,
        "resumed": progress.resumes,
        "parameters": sum(p.numel() for p in model.parameters()),
        "environment": environment(),
        "untrained_dev_loss": progress.untrained_dev_loss,
        "diverged": progress.diverged,
        "stopped": progress.stopped,
        "stopped_by": progress.stopped_by,
        "best_epoch": best.get("epoch"),
        "best_dev_loss": best.get("dev_loss"),
        "best_dev_ter": best.get("dev_ter"),
        **facts,
    }
    atomic_write_json(out / "run.json", record)
    final = {
        "model": {name: tensor.cpu() for name, tensor in model.state_dict().items()},
        "model_config": asdict(run.model),
        "tokens": tokens,
        "features": asdict(run.features),
        "cmvn": run.cmvn,
        "epoch": best.get("epoch"),
    }
    atomic_torch_save(final, out / "model.pt")
