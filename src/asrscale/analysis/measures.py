"""The analysis of a study's runs, in one place: which runs are SEQ's baseline, which were trained
(not reported under another name), speedups, time to target, which runs converged, and the
simulator against measurement. The claims, the figures and the report all read them here.

Every run is scored on its best model: the epoch of lowest dev loss that its schedule kept
(asrscale.training.loop), which is the model it decodes; `best_dev_loss` is that epoch's.

Convergence, by one rule for every study (asrscale.analysis.convergence, docs/studies.md): newbob's
own stop, or a fixed-epoch schedule finished and a flat curve of the measure that chose the model
(train.best_by), its best model transcribing (dev token error rate below
report.plateau_max_dev_ter: an untrained CTC model emits blanks only). A run that has not
converged carries a bound on what it could still gain, by which an accuracy half may still be
decided (asrscale.analysis.halves). A run that diverged (asrscale.training.loop) is no result at
all: it counts in no mean, speedup or claim.

Speedups, three ways: for the same epochs (time an epoch, SEQ's over the run's: runs of a schedule
that stops each at its own epoch compare per epoch); to the target (the training time until the dev
loss first reached the study's target, 5% above SEQ's best, SEQ's over the run's, with the ratio of
the epochs each took beside it); and to SEQ's accuracy (until SEQ's own best dev loss, cong17's
"6.1× to the accuracy of sequential"). A target comes only from SEQ's runs that converged: where
none did, nothing has a time to target. A modelled speedup carries a band of its own run's
(asrscale.costmodel.fitted.Band: from its time outside its arithmetic, the links it used and what
the cost model's validation found of them); a measured one has none."""

import pandas as pd

from asrscale.analysis.convergence import Curve
from asrscale.costmodel.fitted import GOSSIP

KEYS = ["algorithm", "variant", "learners", "seed"]  # what identifies a run in every table
TARGET_MARGIN = 0.05  # the target dev loss: this much above SEQ's best
SPEEDUPS = (
    "time_speedup",
    "target_speedup",
    "accuracy_speedup",
    "own_speedup",
)  # each with a band where modelled
#: a time speedup for the same epochs above P by more than this share is impossible work for P
#: learners (flagged with its cause, ranked nowhere: a busy calibration makes one)
BEYOND_P = 0.05


def baseline(table: pd.DataFrame) -> pd.DataFrame:
    """SEQ's runs as configured (no sweep's variant): every speedup and accuracy is against them."""
    return table[(table.algorithm == "seq") & (table.variant == "default")]


def trained(table: pd.DataFrame) -> pd.DataFrame:
    """Each run trained once: not SEQ's run again under every algorithm that is SEQ alone, nor
    SSGD's under H-ADPSGD in one node (a run reported only under another name, once under it)."""
    own = table.algorithm == table.trained_as
    return table[own | ~table.run.isin(table.run[own]) & ~table.run.duplicated()]


def best_run(table: pd.DataFrame) -> pd.Series | None:
    """The trained run of lowest test WER (None where every run diverged)."""
    runs = trained(table).dropna(subset=["wer"])
    return None if runs.empty else runs.loc[runs.wer.idxmin()]


def runs_of(table: pd.DataFrame, algorithm: str, learners: int) -> pd.DataFrame:
    return table[(table.algorithm == algorithm) & (table.learners == learners)]


def mean_spread(values: pd.Series) -> tuple[float, float]:
    """The mean over seeds, and half their range (the spread: none for one seed)."""
    return values.mean(), (values.max() - values.min()) / 2


def seq_converged(table: pd.DataFrame) -> pd.DataFrame:
    """SEQ's runs as configured that converged (and did not diverge): what a target rests on."""
    seq = baseline(table)
    return seq[seq.converged & ~diverged(seq)]


def target_of(table: pd.DataFrame, target: float | None) -> float:
    """The study's target dev loss: as configured, or `TARGET_MARGIN` above the best dev loss of
    SEQ's converged runs (the mean over their seeds; NaN where none converged)."""
    if target is not None:
        return target
    return (1 + TARGET_MARGIN) * seq_converged(table).best_dev_loss.mean()


def time_to_target(table: pd.DataFrame, epochs: pd.DataFrame, target: float | None) -> pd.DataFrame:
    """Each run's training time, epochs and updates until its dev loss first reached the target
    (NaN: never), MLPerf style, with learner-hours (GPU-hours on a dedicated profile); and its
    time and epochs until SEQ's own best dev loss (the mean over SEQ's converged seeds), for a
    speedup to SEQ's accuracy."""
    epochs = epochs.drop_duplicates(["run", "epoch"]).sort_values(["run", "epoch"])
    epochs = epochs.assign(updates=epochs.groupby("run").step.cumsum())
    goals = {
        "target": target_of(table, target),
        "seq_best": seq_converged(table).best_dev_loss.mean(),
    }
    found = {"target_dev_loss": goals["target"]}
    for name, goal in goals.items():
        reached = epochs[epochs.dev_loss <= goal].groupby("run")
        found |= {
            f"time_to_{name}_s": table.run.map(reached.time_s.min()),
            f"epochs_to_{name}": table.run.map(reached.epoch.min()),
        }
    found["updates_to_target"] = table.run.map(
        epochs[epochs.dev_loss <= goals["target"]].groupby("run").updates.min()
    )
    table = table.assign(**found)
    return table.assign(device_hours_to_target=table.time_to_target_s * table.learners / 3600)


def curves_of(table: pd.DataFrame, epochs: pd.DataFrame) -> dict[str, Curve]:
    """Each run's curve (asrscale.analysis.convergence.Curve): the measure that chose its model
    (its `best_by`: dev_loss where the table has none) at each accepted epoch, with each epoch's
    rate as a share of its peak. SEQ's run stands for every algorithm that is SEQ alone: its
    epochs count once."""
    epochs = epochs.drop_duplicates(["run", "epoch"]).sort_values(["run", "epoch"])
    if "accepted" in epochs:
        epochs = epochs[epochs.accepted.fillna(1).astype(bool)]
    measure = table.best_by if "best_by" in table else pd.Series("dev_loss", index=table.index)
    peaks = dict(zip(table.run, table.peak_lr))
    found = {}
    for run, name in dict(zip(table.run, measure)).items():
        mine = epochs[epochs.run == run]
        rates = (mine.lr / peaks[run]).to_numpy(float)
        found[run] = Curve(name, mine[name].to_numpy(float), rates)
    return found


def convergence(
    table: pd.DataFrame, epochs: pd.DataFrame, plateau_max_dev_ter: float
) -> pd.DataFrame:
    """Each run's updates (optimizer steps of each learner), its curve's recent gain (the mean an
    epoch over its last epochs: asrscale.analysis.convergence) and last rate (a share of its peak),
    whether and how it converged, and where it did not, the bound on what it could still gain
    (`gain_bound`, relative; 0 where it converged). `converged_by` is "schedule" (newbob stopped
    it) or "plateau" (its fixed-epoch schedule finished and its curve is flat) where it converged;
    "unfinished" where its fixed-epoch schedule stopped above `convergence.FINISHED` of its peak,
    "budget" where its epochs ran out while it still gained, "untrained" where its best model does
    not transcribe."""
    curves = curves_of(table, epochs)
    by_run = epochs.drop_duplicates(["run", "epoch"]).groupby("run")
    table = table.assign(
        updates=table.run.map(by_run.step.sum()),
        recent_gain=table.run.map({run: curve.recent_gain() for run, curve in curves.items()}),
        last_rate=table.run.map(by_run.lr.last()) / table.peak_lr,
    )
    fixed = table.schedule != "newbob"
    finished = fixed & table.run.map({run: curve.finished for run, curve in curves.items()})
    flat = finished & table.run.map({run: curve.flat() for run, curve in curves.items()})
    stopped = table.stopped_by == "schedule"
    transcribes = table.best_dev_ter < plateau_max_dev_ter
    converged = (stopped | flat) & transcribes
    converged_by = (
        pd.Series("budget", index=table.index)
        .mask(fixed & ~finished, "unfinished")
        .mask(flat, "plateau")
        .mask(stopped, "schedule")
        .mask((stopped | flat) & ~transcribes, "untrained")
    )
    bounds = {run: curve.bound(curve.continued_rate()) for run, curve in curves.items()}
    gain_bound = table.run.map(bounds).where(~converged, 0.0)
    return table.assign(converged=converged, converged_by=converged_by, gain_bound=gain_bound)


RESULTS = [
    "wer",
    "cer",
    "greedy_wer",
    "greedy_cer",
    "train_s",
    "frames_per_s",
    "best_dev_loss",
    "best_dev_ter",
    "time_to_target_s",
    "device_hours_to_target",
    "updates_to_target",
    "epochs_to_target",
    "time_to_seq_best_s",
    "epochs_to_seq_best",
]


def diverged(table: pd.DataFrame) -> pd.Series:
    """Which runs diverged."""
    if "diverged" not in table:
        return pd.Series(False, index=table.index)
    return table.diverged.notna() & (
        table.diverged.astype(str) != ""
    )  # a table read back: NaN where none did


def discount_diverged(table: pd.DataFrame) -> pd.DataFrame:
    """Diverged runs with no results (NaN), and not converged."""
    gone = diverged(table)
    table = table.assign(converged=table.converged & ~gone)
    table.loc[gone, RESULTS] = float("nan")
    return table


def add_speedups(table: pd.DataFrame, band) -> pd.DataFrame:
    """Speedups against SEQ timed the same way (measured, or modelled on the same hardware), with
    the same seed (the mean over SEQ's seeds where it has none): time speedup for the same epochs
    (SEQ's time an epoch over the run's), throughput (frames/s) speedup, time-to-target speedup
    with the ratio of the epochs the run took to the target to SEQ's, the speedup to SEQ's accuracy
    (its own best dev loss) with its ratio of epochs, and efficiency. Beside them the speedup over
    the same algorithm and variant at one learner, as su15 measured MA against its own one-GPU run
    (NaN where the study has no such run). A modelled speedup's band (`<speedup>_low`,
    `<speedup>_high`) is its run's from `band` (asrscale.costmodel.fitted.Band: the run's share of
    time outside its arithmetic, `transports`, gossip, and what bounds its time), with what it
    rests on (`band_rests_on`); a measured one's is itself."""
    modelled = table.speedup_kind.str.startswith("modelled")
    factors = [
        band.of(
            1.0,
            run.outside_share,
            set(filter(None, run.transports.split(","))),
            run.trained_as in GOSSIP,
            run.bound_by,
        )
        if is_modelled
        else (1.0, 1.0)
        for run, is_modelled in zip(table.itertuples(), modelled)
    ]
    table = table.assign(
        band_low=[low for low, _ in factors],
        band_high=[high for _, high in factors],
        band_rests_on=[
            band.rests_on(bound) if is_modelled else ""
            for bound, is_modelled in zip(table.bound_by, modelled)
        ],
    )
    # each kind of timing against its own SEQ, the rows back in the study's order
    return pd.concat(
        [_speedups(group) for _, group in table.groupby("speedup_kind", sort=False)]
    ).loc[table.index]


def _of_seeds(runs: pd.DataFrame, column: str, seeds: pd.Series) -> pd.Series:
    """`runs`' `column` for each seed of `seeds`, the mean over `runs` where it has no such seed."""
    return seeds.map(runs.set_index("seed")[column]).fillna(runs[column].mean())


def _speedups(table: pd.DataFrame) -> pd.DataFrame:
    table = table.assign(epoch_s=table.train_s / table.epochs)
    alone = table[table.learners == 1]
    own = pd.concat(
        [
            _of_seeds(
                alone[(alone.algorithm == algorithm) & (alone.variant == variant)],
                "epoch_s",
                runs.seed,
            )
            for (algorithm, variant), runs in table.groupby(["algorithm", "variant"])
        ]
    )
    table = table.assign(own_speedup=own / table.epoch_s)
    seq = baseline(table)
    if seq.empty:
        empty = (
            "time_speedup",
            "throughput_speedup",
            "target_speedup",
            "target_epochs_ratio",
            "accuracy_speedup",
            "accuracy_epochs_ratio",
            "efficiency",
        )
        table = table.assign(**dict.fromkeys(empty, float("nan")))
    else:

        def of_seq(column):
            return _of_seeds(seq, column, table.seed)

        table = table.assign(
            time_speedup=of_seq("epoch_s") / table.epoch_s,
            throughput_speedup=table.frames_per_s / of_seq("frames_per_s"),
            target_speedup=of_seq("time_to_target_s") / table.time_to_target_s,
            target_epochs_ratio=table.epochs_to_target / of_seq("epochs_to_target"),
            accuracy_speedup=of_seq("time_to_seq_best_s") / table.time_to_seq_best_s,
            accuracy_epochs_ratio=table.epochs_to_seq_best / of_seq("epochs_to_seq_best"),
            efficiency=of_seq("epoch_s") / table.epoch_s / table.learners,
        )
    return table.assign(
        **{
            f"{s}_{edge}": table[s] * table[f"band_{edge}"]
            for s in SPEEDUPS
            for edge in ("low", "high")
        }
    )


def assess(table: pd.DataFrame, epochs: pd.DataFrame, rule: dict, band) -> pd.DataFrame:
    """Every judgement of the runs that rests on a rule of the analysis rather than on training:
    convergence (`rule`: report.plateau_max_dev_ter), times to the target
    (report.target_dev_loss), diverged runs discounted, speedups with their bands (`band`:
    asrscale.costmodel.fitted.Band). The gathered table and a study's record alike: a report
    assesses its runs again, so that a record is read by the rules of the day. Where `rule` holds
    the decoder's grid (decode.lm_weights, word_bonuses), each run's choice on it (`lm_grid`)."""
    table = convergence(table, epochs, rule["plateau_max_dev_ter"])
    if "lm_weights" in rule and "lm_weight" in table:
        table = table.assign(lm_grid=lm_grid(table, rule["lm_weights"], rule["word_bonuses"]))
    table = time_to_target(table, epochs, rule["target_dev_loss"])
    return add_speedups(discount_diverged(table), band)


def lm_grid(table: pd.DataFrame, lm_weights: list, word_bonuses: list) -> pd.Series:
    """Each run's LM weight and word bonus on the grid dev chose them from, as tuning's rates are
    said (asrscale.protocol.tuning): "inside", or "at the edge (...)" naming each setting chosen at
    its grid's lowest or highest value (a better one may lie beyond), or "one value" where a grid
    has no other."""

    def said(weight: float, bonus: float) -> str:
        edges = [
            f"its {end} {name}"
            for name, value, grid in (
                ("LM weight", weight, lm_weights),
                ("word bonus", bonus, word_bonuses),
            )
            if len(grid) > 1
            for end, at in (("lowest", min(grid)), ("highest", max(grid)))
            if value == at
        ]
        if edges:
            return f"at the edge ({', '.join(edges)})"
        return "inside" if len(lm_weights) > 1 or len(word_bonuses) > 1 else "one value"

    return pd.Series(
        [said(w, b) for w, b in zip(table.lm_weight, table.word_bonus)], index=table.index
    )


def beyond_p(speedup: float, learners: int) -> bool:
    """Whether a time speedup for the same epochs is more than P learners can give (`BEYOND_P`)."""
    return bool(speedup > learners * (1 + BEYOND_P))


def by_learners(table: pd.DataFrame) -> pd.DataFrame:
    """Per algorithm and learner count (runs trained, as configured): mean WER (with the LM and
    greedy), time speedup, time-to-target speedup and learner-hours to target."""
    return (
        trained(table)
        .groupby(["algorithm", "learners"])
        .agg(
            wer=("wer", "mean"),
            greedy_wer=("greedy_wer", "mean"),
            speedup=("time_speedup", "mean"),
            to_target=("target_speedup", "mean"),
            hours=("device_hours_to_target", "mean"),
        )
    )


def learner_hours(table: pd.DataFrame) -> pd.Series:
    """What a study's training took, per kind of timing: learners × training time over every run
    trained (GPU-hours where each learner has a GPU; dev evaluation not counted)."""
    runs = trained(table)
    return (runs.train_s * runs.learners / 3600).groupby(runs.speedup_kind).sum()


def modelled_against_measured(table: pd.DataFrame) -> pd.DataFrame:
    """Runs made in both worlds (same algorithm, learners and seed): the simulator's validation."""
    per_epoch = table.assign(epoch_s=table.train_s / table.epochs)[
        [*KEYS, "world", "epoch_s", "best_dev_loss"]
    ]
    measured = per_epoch[per_epoch.world == "mpi"].drop(columns="world")
    modelled = per_epoch[per_epoch.world == "simulated"].drop(columns="world")
    pairs = measured.merge(modelled, on=KEYS, suffixes=("_measured", "_modelled"))
    return pairs.assign(time_ratio=pairs.epoch_s_modelled / pairs.epoch_s_measured).sort_values(
        KEYS
    )
