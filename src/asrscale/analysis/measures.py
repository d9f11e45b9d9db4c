"""The analysis of a study's runs, in one place: which runs are SEQ's baseline, which were trained
(not reported under another name), means and spreads over seeds, speedups, time to target, which
runs converged, and the simulator against measurement. The claims, the figures and the report all
read them here.

Convergence. A run has converged when its dev loss stopped falling: its last epoch's dev loss is
less than `plateau` (relative, report.plateau) below the best of the epochs before, while the model
transcribes (dev token error rate below report.plateau_max_dev_ter: an untrained CTC model emits
blanks only, at a dev loss just as flat). The study's target dev loss is 5% above where SEQ ends
(or report.target_dev_loss), and a run other than SEQ has converged too when its dev loss reached
it. An accuracy claim is decided only on converged runs. A run that diverged
(asrscale.training.loop) is no result at all: it counts in no mean, speedup or claim."""

import pandas as pd

KEYS = ["algorithm", "variant", "learners", "seed"]  # what identifies a run in every table
WER_TOLERANCE = 0.01  # one WER point, absolute: accuracy that "matches" SEQ's
#: the measures an accuracy claim must agree on: test WER decoded with the word LM (as the studies
#: scored) and decoded greedily, by the acoustic model alone (which an LM cannot flatter)
ACCURACY = {"wer": "with the LM", "greedy_wer": "greedily"}


def baseline(table: pd.DataFrame) -> pd.DataFrame:
    """SEQ's runs as configured (no sweep's variant): every speedup and accuracy is against them."""
    return table[(table.algorithm == "seq") & (table.variant == "default")]


def trained(table: pd.DataFrame) -> pd.DataFrame:
    """Each run trained once: not SEQ's run again under every algorithm that is SEQ alone."""
    return table[table.algorithm == table.trained_as]


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


def matches_seq(table: pd.DataFrame, runs: pd.DataFrame, measure: str = "wer") -> bool:
    """Accuracy that matches SEQ's by one `measure` of ACCURACY: the runs' mean at most SEQ's plus
    the tolerance and both spreads."""
    (wer, spread), (seq_wer, seq_spread) = mean_spread(runs[measure]), mean_spread(baseline(table)[measure])
    return wer <= seq_wer + WER_TOLERANCE + spread + seq_spread


def keeps_accuracy(table: pd.DataFrame, runs: pd.DataFrame) -> dict[str, bool]:
    """Whether the runs match SEQ's accuracy, by each measure of ACCURACY."""
    return {measure: matches_seq(table, runs, measure) for measure in ACCURACY}


def time_to_target(table: pd.DataFrame, epochs: pd.DataFrame, target: float | None) -> pd.DataFrame:
    """Each run's training time until its dev loss first reached the target (NaN: never), MLPerf
    style; without a target, 5% above the dev loss SEQ ends at (the mean over its seeds). Also in
    learner-hours: GPU-hours on a dedicated profile."""
    if target is None:
        seq = baseline(table[~diverged(table)])
        target = 1.05 * seq.final_dev_loss.mean() if not seq.empty else float("nan")
    seconds = table.run.map(epochs[epochs.dev_loss <= target].groupby("run").time_s.min())
    return table.assign(target_dev_loss=target, time_to_target_s=seconds,
                        device_hours_to_target=seconds * table.learners / 3600)  # fmt: skip


def convergence(table: pd.DataFrame, epochs: pd.DataFrame, plateau: float, plateau_max_dev_ter: float) -> pd.DataFrame:
    """Each run's updates (optimizer steps of each learner), its last epoch's relative dev-loss gain
    on the best before, the updates it took to reach the target, and whether and how it converged
    (see the module). SEQ's run stands for every algorithm that is SEQ alone: its epochs count once."""
    epochs = epochs.drop_duplicates(["run", "epoch"]).sort_values(["run", "epoch"]).reset_index(drop=True)
    by_run = epochs.groupby("run")

    def last_gain(losses: pd.Series) -> float:
        best = losses.iloc[:-1].min()
        return (best - losses.iloc[-1]) / best if len(losses) > 1 else float("inf")

    reached = epochs[epochs.dev_loss <= table.target_dev_loss.iloc[0]]
    to_target = epochs.assign(updates=by_run.step.cumsum()).loc[reached.index].groupby("run").updates.min()
    table = table.assign(updates=table.run.map(by_run.step.sum()), updates_to_target=table.run.map(to_target),
                         last_epoch_gain=table.run.map(by_run.dev_loss.apply(last_gain)))  # fmt: skip
    stalled = (table.last_epoch_gain < plateau) & (table.final_dev_ter < plateau_max_dev_ter)
    on_target = (table.trained_as != "seq") & table.time_to_target_s.notna()
    converged_by = pd.Series("", index=table.index).mask(stalled, "plateau").mask(on_target, "target")
    return table.assign(converged=stalled | on_target, converged_by=converged_by)


RESULTS = ["wer", "cer", "greedy_wer", "greedy_cer", "train_s", "frames_per_s", "final_dev_loss", "final_dev_ter",
           "time_to_target_s", "device_hours_to_target", "updates_to_target"]  # fmt: skip


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


def add_speedups(table: pd.DataFrame) -> pd.DataFrame:
    """Speedups against SEQ timed the same way (measured, or modelled on the same hardware), with
    the same seed (the mean over SEQ's seeds where it has none): time speedup T(SEQ) / T(run) for
    the same epochs, throughput (frames/s) speedup, time-to-target speedup, and efficiency. Beside
    them the speedup over the same algorithm and variant at one learner, T(P=1) / T(run), as su15
    measured MA against its own one-GPU run (NaN where the study has no such run)."""
    return pd.concat([_speedups(group) for _, group in table.groupby("speedup_kind", sort=False)])


def _of_seeds(runs: pd.DataFrame, column: str, seeds: pd.Series) -> pd.Series:
    """`runs`' `column` for each seed of `seeds`, the mean over `runs` where it has no such seed."""
    return seeds.map(runs.set_index("seed")[column]).fillna(runs[column].mean())


def _speedups(table: pd.DataFrame) -> pd.DataFrame:
    alone = table[table.learners == 1]
    own = pd.concat([_of_seeds(alone[(alone.algorithm == algorithm) & (alone.variant == variant)], "train_s", runs.seed)
                     for (algorithm, variant), runs in table.groupby(["algorithm", "variant"])])  # fmt: skip
    table = table.assign(own_speedup=own / table.train_s)
    seq = baseline(table)
    if seq.empty:
        return table.assign(**dict.fromkeys(("time_speedup", "throughput_speedup", "target_speedup", "efficiency"),
                                            float("nan")))  # fmt: skip

    def of_seq(column):
        return _of_seeds(seq, column, table.seed)

    return table.assign(
        time_speedup=of_seq("train_s") / table.train_s,
        throughput_speedup=table.frames_per_s / of_seq("frames_per_s"),
        target_speedup=of_seq("time_to_target_s") / table.time_to_target_s,
        efficiency=of_seq("train_s") / table.train_s / table.learners,
    )


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
    per_epoch = table.assign(epoch_s=table.train_s / table.epochs)[[*KEYS, "world", "epoch_s", "final_dev_loss"]]
    measured = per_epoch[per_epoch.world == "mpi"].drop(columns="world")
    modelled = per_epoch[per_epoch.world == "simulated"].drop(columns="world")
    pairs = measured.merge(modelled, on=KEYS, suffixes=("_measured", "_modelled"))
    return pairs.assign(time_ratio=pairs.epoch_s_modelled / pairs.epoch_s_measured).sort_values(KEYS)
