"""The analysis of a study's runs, in one place: which runs are SEQ's baseline, which were trained
(not reported under another name), means and spreads over seeds, speedups, time to target, which
runs converged, and the simulator against measurement. The claims, the figures and the report all
read them here.

Every run is scored on its best model: the epoch of lowest dev loss that its schedule kept
(asrscale.training.loop), which is the model it decodes; `best_dev_loss` is that epoch's.

Convergence. A run has converged when its dev loss stopped improving while its rate could still
move it: its last epoch's dev loss is less than `plateau` (relative, report.plateau) below the
best of the epochs before, while its rate was at least `RATE_FLOOR` of its peak (a rate decayed
below it stops any run improving, whatever it has learnt) and its best model transcribes (dev
token error rate below report.plateau_max_dev_ter: an untrained CTC model emits blanks only, at
a dev loss just as flat). A run other than SEQ has converged too when its dev loss reached the
study's target: 5% above SEQ's best dev loss (or report.target_dev_loss). Any other run was
stopped by its budget (its epochs ran out, or its rate decayed): the accuracy claims it feeds are
not decided. A run that diverged (asrscale.training.loop) is no result at all: it counts in no
mean, speedup or claim.

Speedups, two ways: for the same epochs (time an epoch, SEQ's over the run's: runs of a schedule
that stops each at its own epoch compare per epoch), and to accuracy (the training time until the
dev loss first reached the target, SEQ's over the run's, with the ratio of the epochs each took
beside it). A modelled speedup carries the cost model's band (asrscale.analysis.fit: the range of
the published speedups over the model's out-of-sample predictions); a measured one has none."""

import pandas as pd

from asrscale.training.schedule import RATE_FLOOR

KEYS = ["algorithm", "variant", "learners", "seed"]  # what identifies a run in every table
WER_TOLERANCE = 0.03  # relative: a 1,000-utterance test set's sampling error at 14% WER (0.4 points)
TARGET_MARGIN = 0.05  # the target dev loss: this much above SEQ's best
#: the measures an accuracy claim must agree on: test WER decoded with the word LM (as the studies
#: scored) and decoded greedily, by the acoustic model alone (which an LM cannot flatter)
ACCURACY = {"wer": "with the LM", "greedy_wer": "greedily"}
SPEEDUPS = ("time_speedup", "target_speedup", "own_speedup")  # each carries a band where modelled


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


def below(a: pd.Series, b: pd.Series) -> bool:
    """Whether the mean of `a` is below that of `b` by more than both spreads."""
    (mean_a, spread_a), (mean_b, spread_b) = mean_spread(a), mean_spread(b)
    return mean_a + spread_a < mean_b - spread_b


def matches(runs: pd.DataFrame, reference: pd.DataFrame, measure: str = "wer",
            tolerance: float = WER_TOLERANCE) -> bool:  # fmt: skip
    """Accuracy that matches the reference's by one `measure` of ACCURACY: the runs' mean WER at
    most the reference's times 1 + `tolerance` (relative), plus both spreads."""
    (wer, spread), (reference_wer, reference_spread) = mean_spread(runs[measure]), mean_spread(reference[measure])
    return wer <= reference_wer * (1 + tolerance) + spread + reference_spread


def keeps_accuracy(table: pd.DataFrame, runs: pd.DataFrame, reference: pd.DataFrame | None = None,
                   tolerance: float = WER_TOLERANCE) -> dict[str, bool]:  # fmt: skip
    """Whether the runs match the reference's accuracy (SEQ's by default), by each measure of ACCURACY."""
    reference = baseline(table) if reference is None else reference
    return {measure: matches(runs, reference, measure, tolerance) for measure in ACCURACY}


def target_of(table: pd.DataFrame, target: float | None) -> float:
    """The study's target dev loss: as configured, or `TARGET_MARGIN` above SEQ's best (the mean
    over its seeds)."""
    if target is not None:
        return target
    seq = baseline(table[~diverged(table)])
    return (1 + TARGET_MARGIN) * seq.best_dev_loss.mean() if not seq.empty else float("nan")


def time_to_target(table: pd.DataFrame, epochs: pd.DataFrame, target: float | None) -> pd.DataFrame:
    """Each run's training time until its dev loss first reached the target (NaN: never), MLPerf
    style, and the epochs it took (`epochs_to_target`); also in learner-hours: GPU-hours on a
    dedicated profile."""
    target = target_of(table, target)
    reached = epochs[epochs.dev_loss <= target].groupby("run")
    seconds = table.run.map(reached.time_s.min())
    return table.assign(target_dev_loss=target, time_to_target_s=seconds, epochs_to_target=table.run.map(
        reached.epoch.min()), device_hours_to_target=seconds * table.learners / 3600)  # fmt: skip


def convergence(table: pd.DataFrame, epochs: pd.DataFrame, plateau: float, plateau_max_dev_ter: float) -> pd.DataFrame:
    """Each run's updates (optimizer steps of each learner), its last epoch's relative dev-loss gain
    on the best before and its rate then (a share of its peak), the updates it took to reach the
    target, and whether and how it converged (see the module): `converged_by` is "plateau",
    "target", or "budget" where it did not. SEQ's run stands for every algorithm that is SEQ
    alone: its epochs count once."""
    epochs = epochs.drop_duplicates(["run", "epoch"]).sort_values(["run", "epoch"]).reset_index(drop=True)
    by_run = epochs.groupby("run")

    def last_gain(losses: pd.Series) -> float:
        best = losses.iloc[:-1].min()
        return (best - losses.iloc[-1]) / best if len(losses) > 1 else float("inf")

    reached = epochs[epochs.dev_loss <= table.target_dev_loss.iloc[0]]
    to_target = epochs.assign(updates=by_run.step.cumsum()).loc[reached.index].groupby("run").updates.min()
    table = table.assign(updates=table.run.map(by_run.step.sum()), updates_to_target=table.run.map(to_target),
                         last_epoch_gain=table.run.map(by_run.dev_loss.apply(last_gain)),
                         last_rate=table.run.map(by_run.lr.last()) / table.peak_lr)  # fmt: skip
    stalled = (table.last_epoch_gain < plateau) & (table.best_dev_ter < plateau_max_dev_ter)
    stalled &= table.last_rate >= RATE_FLOOR
    on_target = (table.trained_as != "seq") & table.time_to_target_s.notna()
    converged_by = pd.Series("budget", index=table.index).mask(stalled, "plateau").mask(on_target, "target")
    return table.assign(converged=stalled | on_target, converged_by=converged_by)


RESULTS = ["wer", "cer", "greedy_wer", "greedy_cer", "train_s", "frames_per_s", "best_dev_loss", "best_dev_ter",
           "time_to_target_s", "device_hours_to_target", "updates_to_target", "epochs_to_target"]  # fmt: skip


def diverged(table: pd.DataFrame) -> pd.Series:
    """Which runs diverged."""
    if "diverged" not in table:
        return pd.Series(False, index=table.index)
    return table.diverged.fillna("") != ""


def discount_diverged(table: pd.DataFrame) -> pd.DataFrame:
    """Diverged runs with no results (NaN), and not converged."""
    gone = diverged(table)
    table = table.assign(converged=table.converged & ~gone)
    table.loc[gone, RESULTS] = float("nan")
    return table


def add_speedups(table: pd.DataFrame, band: tuple[float, float]) -> pd.DataFrame:
    """Speedups against SEQ timed the same way (measured, or modelled on the same hardware), with
    the same seed (the mean over SEQ's seeds where it has none): time speedup for the same epochs
    (SEQ's time an epoch over the run's), throughput (frames/s) speedup, time-to-target speedup
    with the ratio of the epochs the run took to the target to SEQ's, and efficiency. Beside them
    the speedup over the same algorithm and variant at one learner, as su15 measured MA against
    its own one-GPU run (NaN where the study has no such run). A modelled speedup's band is
    `band` (low, high) times it (`<speedup>_low`, `<speedup>_high`); a measured one's is itself."""
    return pd.concat([_speedups(group, band) for _, group in table.groupby("speedup_kind", sort=False)])


def _of_seeds(runs: pd.DataFrame, column: str, seeds: pd.Series) -> pd.Series:
    """`runs`' `column` for each seed of `seeds`, the mean over `runs` where it has no such seed."""
    return seeds.map(runs.set_index("seed")[column]).fillna(runs[column].mean())


def _speedups(table: pd.DataFrame, band: tuple[float, float]) -> pd.DataFrame:
    table = table.assign(epoch_s=table.train_s / table.epochs)
    alone = table[table.learners == 1]
    own = pd.concat([_of_seeds(alone[(alone.algorithm == algorithm) & (alone.variant == variant)], "epoch_s", runs.seed)
                     for (algorithm, variant), runs in table.groupby(["algorithm", "variant"])])  # fmt: skip
    table = table.assign(own_speedup=own / table.epoch_s)
    seq = baseline(table)
    if seq.empty:
        empty = ("time_speedup", "throughput_speedup", "target_speedup", "target_epochs_ratio", "efficiency")
        table = table.assign(**dict.fromkeys(empty, float("nan")))
    else:

        def of_seq(column):
            return _of_seeds(seq, column, table.seed)

        table = table.assign(
            time_speedup=of_seq("epoch_s") / table.epoch_s,
            throughput_speedup=table.frames_per_s / of_seq("frames_per_s"),
            target_speedup=of_seq("time_to_target_s") / table.time_to_target_s,
            target_epochs_ratio=table.epochs_to_target / of_seq("epochs_to_target"),
            efficiency=of_seq("epoch_s") / table.epoch_s / table.learners,
        )
    low, high = band if table.speedup_kind.iloc[0].startswith("modelled") else (1.0, 1.0)
    return table.assign(**{f"{s}_{edge}": table[s] * factor for s in SPEEDUPS
                           for edge, factor in (("low", low), ("high", high))})  # fmt: skip


def by_learners(table: pd.DataFrame) -> pd.DataFrame:
    """Per algorithm and learner count (runs trained, as configured): mean WER (with the LM and greedy), time speedup,
    time-to-target speedup and learner-hours to target."""
    return trained(table).groupby(["algorithm", "learners"]).agg(
        wer=("wer", "mean"), greedy_wer=("greedy_wer", "mean"), speedup=("time_speedup", "mean"),
        to_target=("target_speedup", "mean"), hours=("device_hours_to_target", "mean"),
    )  # fmt: skip


def learner_hours(table: pd.DataFrame) -> pd.Series:
    """What a study's training took, per kind of timing: learners × training time over every run
    trained (GPU-hours where each learner has a GPU; dev evaluation not counted)."""
    runs = trained(table)
    return (runs.train_s * runs.learners / 3600).groupby(runs.speedup_kind).sum()


def modelled_against_measured(table: pd.DataFrame) -> pd.DataFrame:
    """Runs made in both worlds (same algorithm, learners and seed): the simulator's validation."""
    per_epoch = table.assign(epoch_s=table.train_s / table.epochs)[[*KEYS, "world", "epoch_s", "best_dev_loss"]]
    measured = per_epoch[per_epoch.world == "mpi"].drop(columns="world")
    modelled = per_epoch[per_epoch.world == "simulated"].drop(columns="world")
    pairs = measured.merge(modelled, on=KEYS, suffixes=("_measured", "_modelled"))
    return pairs.assign(time_ratio=pairs.epoch_s_modelled / pairs.epoch_s_measured).sort_values(KEYS)
