"""One tuning protocol for every configuration a study compares (study.tuning).

Comparisons across batch sizes and optimizers are decided by how each side was tuned (Shallue et
al., "Measuring the effects of data parallelism on neural network training", JMLR 2019; Choi et
al., "On empirical comparisons of optimizers for deep learning", 2019): each side gets the same
budget here. Every configuration (an algorithm at a learner count, as it is trained; SEQ also at
each of study.tuning.seq_batch_sizes, so that the baseline is the best SEQ) trains once at each rate
of one grid, multiples of the rate it takes untuned, at the tuning seed, through the schedule every
run trains with. The lowest best dev loss chooses; a diverged run is never chosen. A choice at the
grid's edge (its lowest or highest rate) may be short of the best rate beyond it: it is said ("tuned
at the edge") and decides no claim (`asrscale.analysis.halves`). The chosen run is the
configuration's run at the tuning seed, and its other seeds train at its settings."""

import json
import math
import os
import shutil
from pathlib import Path

from asrscale.errors import UserError
from asrscale.io import atomic_write_json

TUNED_SETTINGS = ("batch_size", "lr")  # the train settings a grid varies


def point(run: Path) -> dict:
    """A grid run's settings and outcome, from its record (run.json)."""
    record = json.loads((run / "run.json").read_text())
    loss = record["best_dev_loss"]
    finite = loss is not None and math.isfinite(loss) and not record["diverged"]
    return {"run": str(run), **{key: record["train"][key] for key in TUNED_SETTINGS},
            "best_dev_loss": loss if finite else None, "diverged": record["diverged"]}  # fmt: skip


def choose(points: list[dict]) -> dict:
    """The grid's choice: the point of the lowest best dev loss, whether it is at the grid's edge
    (the lowest or highest rate of its batch size), and the grid."""
    trained = [p for p in points if p["best_dev_loss"] is not None]
    if not trained:
        runs = ", ".join(f"lr {p['lr']:g} (batch {p['batch_size']}): {p['diverged']}" for p in points)
        raise UserError(f"tuning: every run of the grid diverged ({runs}): lower study.tuning.lr_factors or train.lr")
    best = min(trained, key=lambda p: (p["best_dev_loss"], p["lr"]))
    rates = sorted(p["lr"] for p in points if p["batch_size"] == best["batch_size"])
    edge = {rates[0]: "lowest", rates[-1]: "highest"}.get(best["lr"])
    return {"chosen": {key: best[key] for key in TUNED_SETTINGS}, "run": best["run"], "at_edge": edge,
            "grid": [p | {"chosen": p is best} for p in points]}  # fmt: skip


def tune(runs: list[Path], out: Path) -> dict:
    """`asrscale tune`: a configuration's grid runs chosen among, written to `out`."""
    choice = choose([point(run) for run in runs])
    atomic_write_json(out, choice)
    said = f", the {choice['at_edge']} rate of its grid: tuned at the edge" if choice["at_edge"] else ""
    chosen = choice["chosen"]
    print(f"tuning: chose lr {chosen['lr']:g}, batch {chosen['batch_size']} ({choice['run']}){said}")
    return choice


def adopt(choice_file: Path, settings: Path, folder: Path) -> None:
    """The chosen grid run as the configuration's tuned run at the tuning seed: its outputs linked
    into `folder` (trained once), after checking that it was trained with the tuned run's settings."""
    chosen = Path(json.loads(choice_file.read_text())["run"])
    if json.loads((chosen / "settings.json").read_text()) != json.loads(settings.read_text()):
        raise UserError(f"tuning: {chosen} was not trained with the settings of {settings}: rerun its tuning")
    folder.mkdir(parents=True, exist_ok=True)
    # every record the run wrote (the model, metrics and run.json, ASGD's server.tsv, ADPSGD's
    # exchanges.tsv, ...), not its settings (the tuned run's own, checked equal) or checkpoints
    for name in sorted(path.name for path in chosen.iterdir() if path.is_file() and path.name != "settings.json"):
        target = folder / name
        target.unlink(missing_ok=True)
        try:
            os.link(chosen / name, target)
        except OSError:  # a file system without hard links
            shutil.copy2(chosen / name, target)
