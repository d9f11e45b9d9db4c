"""Time to accuracy predicted for a study from a pilot (docs/studies.md, "Time to accuracy,
predicted"): goodput as Pollux computes it (Qiao et al., OSDI 2021), the time an epoch on the
user's profile (asrscale.costmodel.plan) times the epochs each algorithm needs to reach the
accuracy SEQ reaches.

The epochs come from McCandlish et al.'s steps model ("An empirical model of large-batch
training", 2018): to a given loss, S(B) = S_min (1 + B_noise / B) updates of batch B, or E(B) =
E_min (1 + B / B_noise) epochs, so a global batch B needs (1 + B/B_noise) / (1 + b0/B_noise) times
the epochs of SEQ at its batch b0 (`epochs_factor`). B_noise is the corpus's simple noise scale as
a pilot measured it (a short SEQ run: `Pilot`, asrscale.training.noise_scale). Beyond its global
batch, an algorithm may need more epochs than SSGD at the same batch (its own penalty): taken from
the recorded studies' SSGD controls (`own_penalties`), as the epochs it took to each level of dev
TER that its control reached, over the control's; an algorithm that ended further than `MARGIN`
from its control is not predicted to reach the target, and one with no record is taken as SSGD at
its global batch. Each is said as an assumption beside the prediction.
"""

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from asrscale.analysis.measures import baseline, trained
from asrscale.config.algorithms import ALGORITHMS, label
from asrscale.errors import UserError

#: the measure of accuracy the target is of: dev TER, the measure the laptop studies choose by
MEASURE = "dev_ter"
#: the target: within this share of SEQ's best dev TER (relative)
MARGIN = 0.05
#: the noise scale's band: its range over the pilot's last epochs
SPREAD_EPOCHS = 3


def epochs_factor(batch: float, seq_batch: float, noise: float) -> float:
    """The epochs a global batch of `batch` needs to reach a loss, over those SEQ's batch
    `seq_batch` needs, where the corpus's noise scale is `noise` (the module's steps model)."""
    return (1 + batch / noise) / (1 + seq_batch / noise)


def steps(batch: float, noise: float, fewest: float) -> float:
    """The updates of batch `batch` to a loss that takes `fewest` at an unbounded batch."""
    return fewest * (1 + noise / batch)


@dataclass(frozen=True)
class Pilot:
    """A pilot's SEQ run as `read_pilot` found it: its corpus and model size, its batch and rate,
    the noise scale at its last epoch with its range over the last `SPREAD_EPOCHS`, the epochs it
    trained, and the first epoch whose dev TER came within `MARGIN` of its best."""

    source: str
    corpus: str
    parameters: int
    batch: int
    lr: float
    optimizer: str
    noise: float
    noise_low: float
    noise_high: float
    epochs: int
    epochs_to_target: int

    def said(self) -> str:
        return (
            f"the pilot {self.source} (SEQ on corpus {self.corpus}, batch {self.batch}, "
            f"{self.optimizer} at {self.lr:g}, {self.epochs} epochs): a noise scale of "
            f"{self.noise:,.0f} utterances at its last epoch ({self.noise_low:,.0f}-"
            f"{self.noise_high:,.0f} over its last {SPREAD_EPOCHS}); its dev TER within "
            f"{100 * MARGIN:g}% of its best from epoch {self.epochs_to_target}"
        )


def read_pilot(folder: Path) -> Pilot:
    """The pilot in `folder`: a study's results folder (results/<corpus>/studies/<name>, its
    gathered tables) or its record (records/<name>)."""
    folder = Path(folder)
    record = (folder / "record.json").is_file()
    settings = folder / ("record.json" if record else "settings/report.json")
    suffix = ".tsv.gz" if record else ".tsv"
    if not settings.is_file() or not (folder / f"runs{suffix}").is_file():
        raise UserError(
            f"--pilot {folder}: neither a study's gathered results (runs.tsv, settings/"
            "report.json) nor a record (record.json): run studies/pilot.yaml over your study first"
        )
    config = json.loads(settings.read_text())
    config = (config["report"] if record else config)["config"]
    runs = trained(pd.read_csv(folder / f"runs{suffix}", sep="\t"))
    seq = baseline(runs)
    if seq.empty:
        raise UserError(f"--pilot {folder}: no SEQ run in its runs table")
    run = seq.iloc[0]
    epochs = pd.read_csv(folder / f"epochs{suffix}", sep="\t")
    curve = _epoch_rows(epochs[epochs.run == run.run])
    if "noise_scale" not in curve or curve.noise_scale.isna().all():
        raise UserError(
            f"--pilot {folder}: its SEQ run measured no gradient noise scale (a run before the "
            "measurement, or with train.noise_scale.share 0)"
        )
    last = curve.noise_scale.dropna().iloc[-SPREAD_EPOCHS:]
    measure = curve[MEASURE].to_numpy(float)
    return Pilot(
        source=str(folder),
        corpus=config["corpus"]["name"],
        parameters=int(run.parameters),
        batch=int(run.global_batch),
        lr=float(run.lr),
        optimizer=str(run.optimizer),
        noise=float(last.iloc[-1]),
        noise_low=float(last.min()),
        noise_high=float(last.max()),
        epochs=len(curve),
        epochs_to_target=first_within(measure, measure.min()),
    )


def _epoch_rows(epochs: pd.DataFrame) -> pd.DataFrame:
    """A run's rows of each epoch's end, once each, in order."""
    if "kind" in epochs:
        epochs = epochs[epochs.kind == "epoch"]
    return epochs.drop_duplicates("epoch").sort_values("epoch")


def first_within(curve: np.ndarray, best: float, margin: float = MARGIN) -> int | None:
    """The first epoch (from 1) whose value lies within `margin` of `best`; None where none does."""
    reached = np.flatnonzero(curve <= (1 + margin) * best)
    return int(reached[0]) + 1 if len(reached) else None


def epochs_to(curve: np.ndarray, level: float) -> float:
    """The epochs a curve takes to first reach `level`, between its epochs by straight lines (an
    epoch's end is its count: the first is 1); NaN where it never does."""
    reached = np.flatnonzero(curve <= level)
    if not len(reached):
        return math.nan
    at = int(reached[0])
    if at == 0:
        return 1.0
    before, after = curve[at - 1], curve[at]
    return at + (before - level) / (before - after)


# ---- the recorded studies: each algorithm's own penalty, and the model's validation ----


def standing_records(records: Path) -> list[Path]:
    """The records that no later record supersedes (records/index.yaml); none outside a checkout."""
    if not (records / "index.yaml").is_file():
        return []
    index = yaml.safe_load((records / "index.yaml").read_text())["records"]
    return [records / name for name, entry in index.items() if not entry.get("superseded_by")]


def configurations(record: Path) -> pd.DataFrame:
    """A record's configurations (an algorithm at a learner count, as configured): each one's
    global batch, budget of epochs, and mean dev TER over its seeds at each epoch (`curve`)."""
    config = json.loads((record / "record.json").read_text())["report"]["config"]
    runs = trained(pd.read_csv(record / "runs.tsv.gz", sep="\t"))
    runs = runs[runs.variant == "default"]
    epochs = _epoch_rows_of_runs(pd.read_csv(record / "epochs.tsv.gz", sep="\t"), runs.run)
    rows = []
    for (algorithm, learners), mine in runs.groupby(["algorithm", "learners"]):
        by_epoch = epochs[epochs.run.isin(mine.run)].groupby("epoch")[MEASURE].mean()
        rows.append(
            {
                "record": record.name,
                "corpus": config["corpus"]["name"],
                "algorithm": algorithm,
                "learners": learners,
                "global_batch": int(mine.global_batch.iloc[0]),
                "budget": int(mine.epochs.max()),
                "seeds": len(mine),
                "curve": by_epoch.sort_index().to_numpy(float),
            }
        )
    return pd.DataFrame(rows)


def _epoch_rows_of_runs(epochs: pd.DataFrame, runs: pd.Series) -> pd.DataFrame:
    if "kind" in epochs:
        epochs = epochs[epochs.kind == "epoch"]
    return epochs[epochs.run.isin(runs)].drop_duplicates(["run", "epoch"])


def recorded(records: list[Path]) -> pd.DataFrame:
    """Every configuration of the records (`configurations`), with SEQ's curve of its record."""
    found = pd.concat([configurations(record) for record in records], ignore_index=True)
    seq = {
        row.record: row.curve for row in found[found.algorithm == "seq"].itertuples()
    }  # a record's own SEQ (bmuf-64's is bmuf's, recorded with it)
    return found.assign(seq_curve=found.record.map(seq))


def control_of(row, found: pd.DataFrame):
    """The control of a recorded configuration: SSGD at its global batch, with its budget, on its
    corpus (in its record where it has one, else in another); SEQ itself where its global batch is
    SEQ's. None where the records have none."""
    if row.algorithm in ("seq", "ssgd"):
        return None
    same = found[
        (found.corpus == row.corpus)
        & (found.global_batch == row.global_batch)
        & (found.budget == row.budget)
    ]
    for algorithm in ("ssgd", "seq"):
        like = same[same.algorithm == algorithm]
        if not like.empty:
            own = like[like.record == row.record]
            return (own if not own.empty else like).iloc[0]
    return None


def own_penalties(records: list[Path]) -> pd.DataFrame:
    """Each recorded configuration's own penalty beyond its global batch, against its control
    (`control_of`): whether it ended within `MARGIN` of its control's best dev TER (`reaches`), and
    the median over the control's epochs of the epochs it took to reach the control's dev TER
    there, over the control's (`factor`)."""
    if not records:
        return pd.DataFrame()
    found = recorded(records)
    rows = []
    for row in found.itertuples():
        control = control_of(row, found)
        if control is None:
            continue
        ratios = [
            epochs_to(row.curve, level) / epoch
            for epoch, level in enumerate(control.curve, start=1)
        ]
        ratios = [ratio for ratio in ratios if math.isfinite(ratio)]
        best, reference = row.curve.min(), control.curve.min()
        rows.append(
            {
                "record": row.record,
                "corpus": row.corpus,
                "algorithm": row.algorithm,
                "learners": row.learners,
                "global_batch": row.global_batch,
                "budget": row.budget,
                "control": f"{label(control.algorithm)} at {control.learners}"
                + ("" if control.record == row.record else f" of records/{control.record}"),
                "gap": best / reference - 1,
                "reaches": best <= (1 + MARGIN) * reference,
                "factor": float(np.median(ratios)) if ratios else math.nan,
            }
        )
    return pd.DataFrame(rows)


# ---- the prediction for a planned study ----


@dataclass(frozen=True)
class Penalty:
    """An algorithm's own penalty beyond its global batch, as a factor on its epochs, whether it
    is predicted to reach the target at all, and what that rests on, in words."""

    factor: float
    reaches: bool
    said: str


def penalty_for(algorithm: str, learners: int, penalties: pd.DataFrame) -> Penalty:
    """What the records say of `algorithm` at `learners` beyond its global batch (`own_penalties`):
    its record at these learners, else at the nearest count recorded (the longest budget where
    two are); SEQ and SSGD none; an algorithm with no record is taken as SSGD at its batch."""
    if algorithm in ("seq", "ssgd"):
        return Penalty(1.0, True, "none: the steps model alone")
    mine = penalties[penalties.algorithm == algorithm] if len(penalties) else penalties
    if mine.empty:
        return Penalty(1.0, True, "no record: assumed as SSGD at its global batch")
    distance = (np.log(mine.learners / learners)).abs()
    nearest = mine[distance == distance.min()]
    nearest = nearest[nearest.learners == nearest.learners.max()]
    row = nearest.sort_values("budget", ascending=False).iloc[0]
    at = "" if row.learners == learners else f", as at {row.learners}"
    source = f"records/{row.record}{at}: against {row.control}"
    if not row.reaches:
        return Penalty(
            math.inf,
            False,
            f"not predicted to reach the target ({source}, it ended {100 * row.gap:+.0f}% in dev "
            f"TER after {row.budget} epochs)",
        )
    return Penalty(row.factor, True, f"×{row.factor:.2f} the epochs ({source})")


def seq_epochs(budget: int, pilot: Pilot) -> tuple[int, str]:
    """SEQ's epochs to the target: the study's budget for SEQ, or the pilot's epochs to within
    `MARGIN` of its best where they are more; with what they rest on."""
    if pilot.epochs_to_target > budget:
        return pilot.epochs_to_target, (
            f"the pilot's epochs to within {100 * MARGIN:g}% of its best dev TER, more than the "
            f"study's budget for SEQ of {budget}"
        )
    return budget, "the study's budget for SEQ, its train.epochs"


def predict(configurations: pd.DataFrame, pilot: Pilot, penalties: pd.DataFrame) -> pd.DataFrame:
    """Each planned configuration's epochs, wall time and device-hours to the accuracy SEQ reaches
    in its epochs, with bands. `configurations`: one row each of an algorithm at a learner count,
    as `asrscale.costmodel.plan` prices it (global_batch, ranks, epoch_s with its band) with its
    `budget` (train.epochs); SEQ's among them."""
    seq = configurations[configurations.algorithm == "seq"].iloc[0]
    epochs, _ = seq_epochs(int(seq.budget), pilot)
    rows = []
    for row in configurations.itertuples():
        penalty = penalty_for(row.algorithm, row.learners, penalties)
        factors = [
            epochs_factor(row.global_batch, seq.global_batch, noise) * penalty.factor
            for noise in (pilot.noise, pilot.noise_high, pilot.noise_low)
        ]
        needed = [epochs * factor for factor in factors]
        rows.append(
            {
                "algorithm": row.algorithm,
                "learners": row.learners,
                "global_batch": row.global_batch,
                "ranks": row.ranks,
                "budget": row.budget,
                "epochs": needed[0],
                "epochs_low": min(needed),
                "epochs_high": max(needed),
                "time_s": needed[0] * row.epoch_s,
                "time_s_low": min(needed) * row.epoch_s_low,
                "time_s_high": max(needed) * row.epoch_s_high,
                "penalty": penalty.said,
            }
        )
    table = pd.DataFrame(rows)
    hours = {
        f"device_hours{edge}": table[f"time_s{edge}"] * table.ranks / 3600
        for edge in ("", "_low", "_high")
    }
    seq_time = table.time_s[table.algorithm == "seq"].iloc[0]
    return table.assign(**hours, speedup=seq_time / table.time_s)


def configurations_of(priced: pd.DataFrame) -> pd.DataFrame:
    """One row of each planned configuration (an algorithm at a learner count) of a plan's runs
    (asrscale.costmodel.plan.price): its reported run's, where a tuned grid has others; by learners,
    then in the table of algorithms' order."""
    reported = priced.variant.isin(["default", "tuned"])
    found = pd.concat([priced[reported], priced[~reported]])
    found = found.drop_duplicates(["algorithm", "learners"])
    order = found.algorithm.map(list(ALGORITHMS).index)
    return found.assign(order=order).sort_values(["learners", "order"]).drop(columns="order")


def differences(pilot: Pilot, corpus: str, seq) -> list[str]:
    """Where the pilot is not the study's SEQ (`seq`, its planned row) on the study's `corpus`, in
    words: each makes the prediction another setting's."""
    found = []
    if pilot.corpus != corpus:
        found.append(f"its corpus is {pilot.corpus}, not this study's {corpus}")
    if not math.isclose(pilot.parameters, seq.parameters, rel_tol=0.01):
        found.append(
            f"its model has {pilot.parameters / 1e6:.2f} M parameters, not "
            f"{seq.parameters / 1e6:.2f} M"
        )
    if pilot.batch != seq.global_batch:
        found.append(f"its SEQ's batch is {pilot.batch}, not {seq.global_batch}")
    if pilot.optimizer != seq.optimizer or not math.isclose(pilot.lr, seq.lr):
        found.append(
            f"it trained with {pilot.optimizer} at {pilot.lr:g}, not {seq.optimizer} at {seq.lr:g}"
        )
    return found


# ---- the steps model against the records ----


def validation(records: list[Path], noise: float, margins=(MARGIN,)) -> pd.DataFrame:
    """Each recorded configuration's epochs to a target, measured against predicted: the target is
    within `margin` of the best of SEQ's mean dev TER in its record; measured, the first epoch
    whose mean dev TER over the configuration's seeds reaches it (NaN where none did in its
    budget); predicted, SEQ's measured epochs to it times `epochs_factor` at the corpus's `noise`
    and the configuration's own penalty (`own_penalties`, from the same records: in sample), NaN
    where it is not predicted to reach the target."""
    found = recorded(records)
    penalties = own_penalties(records).set_index(["record", "algorithm", "learners"])
    seq_batch = int(found.global_batch[found.algorithm == "seq"].iloc[0])
    rows = []
    for margin in margins:
        for row in found[found.algorithm != "seq"].itertuples():
            best = row.seq_curve.min()
            seq_epochs = first_within(row.seq_curve, best, margin)
            factor = epochs_factor(row.global_batch, seq_batch, noise)
            key = (row.record, row.algorithm, row.learners)
            own = penalties.loc[key] if key in penalties.index else None
            if own is not None:
                factor = factor * own.factor if own.reaches else math.nan
            measured = first_within(row.curve, best, margin)
            rows.append(
                {
                    "margin": margin,
                    "record": row.record,
                    "algorithm": row.algorithm,
                    "learners": row.learners,
                    "global_batch": row.global_batch,
                    "budget": row.budget,
                    "seq_epochs": seq_epochs,
                    "own_factor": 1.0 if own is None else own.factor,
                    "predicted": seq_epochs * factor,
                    "measured": math.nan if measured is None else measured,
                }
            )
    table = pd.DataFrame(rows)
    return table.assign(ratio=table.measured / table.predicted)


def soonest(table: pd.DataFrame) -> list[str]:
    """At each learner count above one, the configuration predicted to reach the target soonest
    (`predict`'s table), in words, with the others whose bands overlap its; "none" where none is
    predicted to reach it."""
    said = []
    for learners, mine in table[table.learners > 1].groupby("learners"):
        reaching = mine[np.isfinite(mine.time_s)].sort_values("time_s")
        if reaching.empty:
            said.append(f"at {learners}: none is predicted to reach the target")
            continue
        best = reaching.iloc[0]
        close = reaching[reaching.time_s_low <= best.time_s_high].algorithm.iloc[1:]
        said.append(
            f"at {learners}: {label(best.algorithm)}, {best.time_s / 3600:.3g} h "
            f"({best.time_s_low / 3600:.3g}-{best.time_s_high / 3600:.3g}), "
            f"{best.speedup:.2f}× SEQ's time"
            + (f"; within its band: {', '.join(close.map(label))}" if len(close) else "")
        )
    return said
