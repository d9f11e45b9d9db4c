"""One tuning protocol for every configuration a study compares (study.tuning).

Comparisons across batch sizes and optimizers are decided by how each side was tuned (Shallue et
al., "Measuring the effects of data parallelism on neural network training", JMLR 2019; Choi et
al., "On empirical comparisons of optimizers for deep learning", 2019): each side gets the same
budget here. Every configuration (an algorithm at a learner count, as it is trained; SEQ also at
each of study.tuning.seq_batch_sizes, so that the baseline is the best SEQ) trains once at each rate
of one grid, multiples of the rate it takes untuned, at the tuning seed, through the schedule every
run trains with. The lowest best dev loss chooses (or dev TER: train.best_by, the measure that
picks each run's model too); a diverged run is never chosen. A choice at the
grid's edge (its lowest or highest rate) may be short of the best rate beyond it: it is said ("tuned
at the edge") and decides no claim (`asrscale.analysis.halves`). The chosen run is the
configuration's run at the tuning seed, and its other seeds train at its settings.

With study.tuning.halving, a grid is halved once, as a bracket of Hyperband's successive halving
does (Li et al., "Hyperband: a novel bandit-based approach to hyperparameter optimization", JMLR
2018): every grid run trains to the end of one epoch (its rung), the `keep` best so far by the same
measure (and any the study also reports) go on to their last epoch, and the others stop there. A
stopped run's outputs say so, and it is never chosen: the choice is among runs trained to their end.
Each run's rung is its own training's first epochs, resumed from its checkpoint: a kept run ends
with the model it would have had unhalved."""

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path

from asrscale.config.algorithms import GRIDDED
from asrscale.errors import UserError
from asrscale.io import atomic_write_json, link_outputs

TUNED_SETTINGS = ("batch_size", "momentum", "lr")  # the train settings a grid varies


def point(run: Path) -> dict:
    """A grid run's settings and outcome, from its record (run.json), with its score at the rung
    where its grid was halved (rung.json): what the halving compared it by."""
    record = json.loads((run / "run.json").read_text())
    rung = run / "rung.json"
    at_rung = _outcome(json.loads(rung.read_text()))["score"] if rung.is_file() else None
    return {
        "run": str(run),
        **_outcome(record),
        "stopped_early": record["stopped_by"] == "halving",
        "rung_score": at_rung,
    }


def _outcome(record: dict) -> dict:
    """A run's tuned settings, its best model's dev loss and its score (the best so far by its
    train.best_by), each None where it is not finite or the run diverged, and its divergence, from
    its run.json or rung.json."""
    by, options = record["train"]["best_by"], record.get("options", {})

    def trained(value):
        return (
            value if value is not None and math.isfinite(value) and not record["diverged"] else None
        )

    return {
        **{key: record["train"][key] for key in TUNED_SETTINGS},
        **{key: options[key] for key in GRIDDED if key in options},  # BMUF's η and ζ
        "best_dev_loss": trained(record["best_dev_loss"]),
        "by": by,
        "score": trained(record[f"best_{by}"]),
        "diverged": record["diverged"],
    }


def choose(points: list[dict]) -> dict:
    """The grid's choice: the point of the lowest score (its best dev loss or TER), whether it is at
    the grid's edge (the lowest or highest rate of its batch size, momentum and gridded options),
    and the grid."""
    trained = [p for p in points if p["score"] is not None and not p.get("stopped_early")]
    if not trained:
        runs = ", ".join(
            f"lr {p['lr']:g} (batch {p['batch_size']}): {p['diverged']}" for p in points
        )
        raise UserError(
            f"tuning: every run of the grid diverged ({runs}): lower study.tuning.lr_factors or "
            "train.lr"
        )
    best = min(trained, key=lambda p: (p["score"], p["lr"]))
    tuned = [*TUNED_SETTINGS, *(key for key in GRIDDED if key in best)]
    line = [key for key in tuned if key != "lr"]  # the chosen point's rates: at its other settings
    rates = sorted(p["lr"] for p in points if all(p.get(key) == best[key] for key in line))
    edge = {rates[0]: "lowest", rates[-1]: "highest"}.get(best["lr"])
    return {
        "chosen": {key: best[key] for key in tuned},
        "run": best["run"],
        "at_edge": edge,
        "grid": [p | {"chosen": p is best} for p in points],
    }


def tune(runs: list[Path], out: Path) -> dict:
    """`asrscale tune`: a configuration's grid runs chosen among, written to `out`."""
    choice = choose([point(run) for run in runs])
    atomic_write_json(out, choice)
    said = (
        f", the {choice['at_edge']} rate of its grid: tuned at the edge"
        if choice["at_edge"]
        else ""
    )
    chosen, grid = choice["chosen"], choice["grid"]
    options = "".join(
        f", {key} {chosen[key]:g}"
        for key in GRIDDED
        if key in chosen and len({point.get(key) for point in grid}) > 1
    )
    print(
        f"tuning: chose lr {chosen['lr']:g}, batch {chosen['batch_size']}, momentum "
        f"{chosen['momentum']:g}{options} ({choice['run']}){said}"
    )
    return choice


def adopt(choice_file: Path, settings: Path, folder: Path) -> None:
    """The chosen grid run as the configuration's tuned run at the tuning seed: its outputs linked
    into `folder` (trained once), after checking that it was trained with the tuned run's
    settings."""
    chosen = Path(json.loads(choice_file.read_text())["run"])
    if json.loads((chosen / "settings.json").read_text()) != json.loads(settings.read_text()):
        raise UserError(
            f"tuning: {chosen} was not trained with the settings of {settings}: rerun its tuning"
        )
    # every record the run wrote (the model, metrics and run.json, ASGD's server.tsv, ADPSGD's
    # exchanges.tsv, ...), not its settings (the tuned run's own, checked equal) or checkpoints
    link_outputs(chosen, folder)


@dataclass(frozen=True)
class Halving:
    """A grid run's part in its grid's halving: it trains to the end of epoch `epoch`, and there
    either waits for the grid's decision (`rung`: it writes rung.json and keeps its checkpoint), or,
    stopped by the decision, ends (its outputs say so)."""

    epoch: int
    rung: bool

    @classmethod
    def at_rung(cls, settings: Path) -> "Halving":
        """A grid run's first part: to the rung of the halving's settings (the halving stage's)."""
        from asrscale.config.sections import HalvingStage, read_settings_of

        return cls(read_settings_of(HalvingStage, settings).epoch, rung=True)

    @classmethod
    def decided(cls, decision: Path, out: Path) -> "Halving | None":
        """What the grid's decision (`asrscale halve`) says of the run in `out`: None where it goes
        on to its end."""
        decided = json.loads(decision.read_text())
        folder = os.path.normpath(out)
        if folder in map(os.path.normpath, decided["kept"]):
            return None
        if folder in map(os.path.normpath, decided["stopped"]):
            return cls(decided["epoch"], rung=False)
        raise UserError(
            f"{decision} decides nothing of {out}: it is another grid's; rerun this grid's halving"
        )

    def stop(self, progress) -> None:
        """The run stopped by its grid's decision (`records.Progress`)."""
        progress.stopped = (
            f"stopped after epoch {self.epoch} by successive halving (study.tuning.halving)"
        )
        progress.stopped_by = "halving"


def write_rung(out: Path, run, progress, epoch: int) -> None:
    """A grid run at its rung (`rung.json`): its settings, and its best dev loss and TER and
    divergence so far."""
    best = progress.best or {}
    atomic_write_json(
        out / "rung.json",
        {
            "run": str(out),
            "epoch": epoch,
            "train": {key: getattr(run.train, key) for key in (*TUNED_SETTINGS, "best_by")},
            "options": {key: run.options[key] for key in GRIDDED if key in run.options},
            "best_dev_loss": best.get("dev_loss"),
            "best_dev_ter": best.get("dev_ter"),
            "diverged": progress.diverged,
            "stopped": progress.stopped,
        },
    )


def halve(settings: Path, rungs: list[Path], out: Path) -> dict:
    """`asrscale halve`: a grid's decision at its rung: the `keep` (study.tuning.halving) of lowest
    score so far (dev loss or TER, train.best_by) go on (a diverged one last); the others stop.
    Written to `out`. (A grid run the study also reports has no rung: it trains to its end.)"""
    from asrscale.config.sections import HalvingStage, read_settings_of

    halving = read_settings_of(HalvingStage, settings)
    points = [
        {"run": found["run"], **_outcome(found)}
        for found in map(json.loads, map(Path.read_text, rungs))
    ]
    points.sort(key=lambda p: (math.inf if p["score"] is None else p["score"], p["lr"]))
    kept = [p["run"] for p in points[: halving.keep]]
    decision = {
        "epoch": halving.epoch,
        "keep": halving.keep,
        "kept": kept,
        "stopped": [p["run"] for p in points[halving.keep :]],
        "rungs": points,
    }
    atomic_write_json(out, decision)
    print(
        f"halving after epoch {halving.epoch}: {len(kept)} of {len(points)} go on; stopped: "
        f"{', '.join(decision['stopped']) or 'none'}"
    )
    return decision
