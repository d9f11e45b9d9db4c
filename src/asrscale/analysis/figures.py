"""The report's figures, one function each, drawn from the tables `gather` writes. Every figure is
returned as an HTML <figure> with the PNG embedded (the report opens from disk, with no network)
and saved as a PNG for Snakemake's own report. Where a configuration ran with several seeds, a
line is their mean and the band or bar their range.
"""

import base64
import io
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from asrscale.analysis.measures import beyond_p, trained
from asrscale.config import algorithms
from asrscale.worlds.timing import CATEGORIES  # noqa: E402

MEASURES = {"dev_loss": "dev loss", "dev_ter": "dev TER"}  # train.best_by's, in words
SPREAD = ("pi", 100)  # the band around a mean over seeds: their whole range


def _learner_axis(axis, table):
    axis.set_xscale("log", base=2)
    axis.set_xticks(
        sorted(table.learners.unique()), labels=[str(p) for p in sorted(table.learners.unique())]
    )
    axis.set_xlabel("learners P")


def wer_vs_learners(table, palette):
    figure, axis = plt.subplots(figsize=(6.5, 4))
    sns.lineplot(
        data=table.assign(wer=100 * table.wer),
        x="learners",
        y="wer",
        hue="algorithm",
        palette=palette,
        marker="o",
        errorbar=SPREAD,
        ax=axis,
    )
    late = table[~table.converged.astype(bool)]
    if (
        not late.empty
    ):  # a run stopped by its budget before it converged: a hollow ring over its point
        axis.scatter(
            late.learners,
            100 * late.wer,
            s=140,
            facecolors="white",
            edgecolors="black",
            zorder=3,
            label="stopped by its budget",
        )
        axis.legend(fontsize="small")
    _learner_axis(axis, table)
    axis.set_ylabel("test WER (%), best model")
    axis.set_title(
        "Accuracy against learners (hollow: stopped by its budget)"
        if not late.empty
        else "Accuracy against learners"
    )
    return figure


def speedup_vs_learners(table, palette):
    """Time, throughput and time-to-target speedups against P, each panel drawn only with runs
    that have its speedup (a panel none has says so, with no legend)."""
    columns = ("time_speedup", "throughput_speedup", "target_speedup")
    target = table.target_dev_loss.iloc[0]
    explained = {
        "time": "SEQ's time an epoch / the run's",
        "throughput": "frames/s ratio",
        "time-to-target": f"to dev loss {target:.3g}"
        if target == target
        else "no target (no SEQ run converged)",
    }
    figure, axes = plt.subplots(1, 3, figsize=(15, 4), sharey=True)
    for axis, column, label in zip(axes, columns, explained):
        data = table.dropna(subset=[column])
        axis.set_title(f"{label.capitalize()} speedup: {explained[label]}", fontsize="medium")
        _learner_axis(axis, table)
        if data.empty:
            axis.text(
                0.5,
                0.5,
                "no run reached the target" if column == "target_speedup" else "no run has it",
                ha="center",
                va="center",
                transform=axis.transAxes,
                color="grey",
            )
            continue
        # a line per algorithm and clock: a measured speedup and a modelled one are never averaged
        sns.lineplot(
            data=data,
            x="learners",
            y=column,
            hue="algorithm",
            style="speedup_kind",
            palette=palette,
            marker="o",
            errorbar=SPREAD,
            ax=axis,
        )
        if f"{column}_low" in data:  # the cost model's band around a modelled speedup
            for (algorithm, _), runs in data.groupby(["algorithm", "speedup_kind"]):
                edges = runs.groupby("learners")[[f"{column}_low", f"{column}_high"]].mean()
                axis.fill_between(
                    edges.index,
                    edges.iloc[:, 0],
                    edges.iloc[:, 1],
                    color=palette[algorithm],
                    alpha=0.1,
                )
        ideal = sorted(table.learners.unique())
        axis.plot(ideal, ideal, "k--", linewidth=1, label="ideal (P)")
        axis.set_ylabel(
            "speedup over SEQ (shaded: the model's band)\n("
            + ", ".join(table.speedup_kind.unique())
            + ")"
        )
        axis.legend(fontsize="small")
    return figure


def accuracy_against_speedup(table, palette):
    """Per learner count, each algorithm's test WER against its time speedup (its band where
    modelled), with SEQ's WER as a line: the runs below it and to the right are better on both
    (the Pareto front joins those no other beats on both, one front a clock: a measured speedup
    is never ranked against a modelled one; a speedup beyond P is on none). Hollow: stopped by its
    budget; squares: modelled."""
    counts = sorted(p for p in table.learners.unique() if p > 1)
    seq = table[table.algorithm == "seq"].wer.mean()
    figure, axes = plt.subplots(
        1, len(counts), figsize=(5.2 * len(counts), 4), squeeze=False, sharey=True
    )
    for axis, p in zip(axes[0], counts):
        runs = (
            table[table.learners == p]
            .groupby(["speedup_kind", "algorithm"])
            .agg(
                wer=("wer", "mean"),
                speedup=("time_speedup", "mean"),
                low=("time_speedup_low", "mean"),
                high=("time_speedup_high", "mean"),
                converged=("converged", "all"),
            )
            .dropna(subset=["wer", "speedup"])
        )
        runs = runs.assign(beyond=[beyond_p(x, p) for x in runs.speedup])
        for (kind, algorithm), run in runs.iterrows():
            colour, said = palette[algorithm], ", beyond P: ranked nowhere" if run.beyond else ""
            axis.errorbar(
                run.speedup,
                100 * run.wer,
                xerr=[[run.speedup - run.low], [run.high - run.speedup]],
                fmt="s" if kind.startswith("modelled") else "o",
                color=colour,
                capsize=3,
                mfc=colour if run.converged else "white",
                label=f"{algorithm} ({kind}{said})",
            )
        for kind, of_kind in runs[~runs.beyond].groupby(level="speedup_kind"):
            front = of_kind.sort_values("speedup", ascending=False)
            front = front[front.wer <= front.wer.cummin()]
            axis.plot(
                front.speedup,
                100 * front.wer,
                ":",
                color="grey",
                linewidth=1,
                label=f"Pareto front ({kind})",
            )
        if seq == seq:
            axis.axhline(
                100 * seq,
                color=palette.get("seq", "black"),
                linestyle="--",
                linewidth=1,
                label="SEQ's WER",
            )
        axis.set_xlabel(f"time speedup over SEQ at P={p}")
        axis.set_title(f"P={p}: accuracy against speedup", fontsize="medium")
        axis.legend(fontsize="small")
    axes[0][0].set_ylabel("test WER (%), best model")
    return figure


def communication_vs_learners(table, palette):
    parallel = table[table.learners > 1]
    figure, axes = plt.subplots(1, 2, figsize=(11, 3.8), sharey=True)
    for axis, column in zip(axes, ("communication_share", "idle_share")):
        sns.lineplot(
            data=parallel.assign(share=100 * parallel[column]),
            x="learners",
            y="share",
            hue="algorithm",
            palette=palette,
            marker="o",
            errorbar=SPREAD,
            ax=axis,
        )
        _learner_axis(axis, parallel)
        axis.set_ylabel("share of training time (%)")
        axis.set_title(f"{column.split('_')[0].capitalize()} share against learners")
    return figure


def learning_curves(table, epochs, palette):
    # one curve per run trained (an algorithm reported with SEQ's run would repeat SEQ's curve)
    curves = epochs.merge(trained(table)[["algorithm", "run"]], on=["algorithm", "run"])
    curves = curves.assign(
        learners=curves.learners.astype(str),
        frames_seen=curves.groupby("run").frames.cumsum() / 1e6,
    )
    figure, axes = plt.subplots(1, 3, figsize=(15, 4.5), sharey=True)
    panels = (
        ("epoch", "epoch"),
        ("frames_seen", "frames processed (millions)"),
        ("time_s", "training time (s)"),
    )
    for axis, (x, label) in zip(axes, panels):
        sns.lineplot(
            data=curves,
            x=x,
            y="dev_loss",
            hue="algorithm",
            style="learners",
            palette=palette,
            marker="o",
            style_order=sorted(curves.learners.unique(), key=int),
            errorbar=None,
            units="run",
            estimator=None,
            ax=axis,
            legend=axis is axes[-1],
        )
        axis.set_xlabel(label)
        axis.set_ylabel("dev loss (CTC per token)")
        axis.set_title(f"Dev loss against {label.split(' (')[0]}")
    # a diverging run must not flatten every other curve
    axes[0].set_ylim(0, 1.1 * curves.dev_loss.quantile(0.9))
    axes[-1].legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.02, 1), ncols=1)
    return figure


def noise_scale(table, epochs, palette):
    """Each run's gradient noise scale over its epochs (asrscale.training.noise_scale), with every
    global batch the study compares as a line: a batch above the curves' end is past the critical
    batch (the large-batch regime)."""
    curves = epochs.merge(trained(table)[["algorithm", "run"]], on=["algorithm", "run"])
    curves = curves[np.isfinite(curves.noise_scale)]
    figure, axis = plt.subplots(figsize=(9, 4.5))
    sns.lineplot(
        data=curves.assign(learners=curves.learners.astype(str)),
        x="epoch",
        y="noise_scale",
        hue="algorithm",
        style="learners",
        palette=palette,
        marker="o",
        style_order=sorted(curves.learners.astype(str).unique(), key=int),
        errorbar=None,
        units="run",
        estimator=None,
        ax=axis,
    )
    for batch, runs in table.groupby("global_batch"):
        names = ", ".join(
            sorted({f"{algorithms.label(a)} {p}" for a, p in zip(runs.algorithm, runs.learners)})
        )
        axis.axhline(batch, color="grey", linestyle="--", linewidth=1)
        axis.annotate(
            f"global batch {batch:,.0f}: {names}",
            (0, batch),
            xycoords=("axes fraction", "data"),
            xytext=(4, 3),
            textcoords="offset points",
            fontsize="small",
            color="dimgrey",
        )
    axis.set_yscale("log")
    axis.set_ylabel("noise scale (utterances), smoothed")
    axis.set_title("Gradient noise scale against the global batches compared")
    axis.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.02, 1))
    return figure


def time_split(table):
    """Every configuration's split of training time, averaged over its seeds."""
    shares = [f"{c}_share" for c in CATEGORIES]
    means = table.groupby(["algorithm", "variant", "learners"], sort=True)[shares].mean() * 100
    means.index = [f"{a} P={p}" + ("" if v == "default" else f" {v}") for a, v, p in means.index]
    means.columns = [c.replace("_", " ") for c in CATEGORIES]
    figure, axis = plt.subplots(figsize=(8, 0.4 * len(means) + 1.5))
    means.plot.barh(stacked=True, ax=axis, color=sns.color_palette("Set2"), width=0.7)
    axis.set_xlabel("share of training time (%), mean over learners and seeds")
    axis.set_xlim(0, 100)
    axis.invert_yaxis()
    axis.set_title("Where the time goes")
    axis.legend(
        ncols=4,
        loc="upper center",
        bbox_to_anchor=(0.5, -0.8 / (0.4 * len(means) + 1.5)),
        fontsize="small",
    )
    return figure


def asgd_staleness(staleness):
    figure, axis = plt.subplots(figsize=(6.5, 3.5))
    order = [str(p) for p in sorted(staleness.learners.unique())]
    sns.histplot(
        data=staleness.assign(P=staleness.learners.astype(str)),
        x="staleness",
        hue="P",
        hue_order=order,
        discrete=True,
        stat="probability",
        common_norm=False,
        element="step",
        ax=axis,
    )
    axis.set_xlabel("staleness (server updates since the gradient's model was pulled)")
    axis.set_title("ASGD: staleness of the gradients the server applied")
    return figure


def pairings(exchanges):
    """How often each pair of learners averaged their models, in the largest run of each
    decentralized algorithm (its first seed)."""
    runs = [group for _, group in exchanges.groupby("algorithm")]
    figure, axes = plt.subplots(1, len(runs), figsize=(5.5 * len(runs), 4.6), squeeze=False)
    for axis, group in zip(axes[0], runs):
        largest = group[group.learners == group.learners.max()]
        largest = largest[largest.seed == largest.seed.min()]
        size = int(largest[["rank", "peer"]].max().max()) + 1
        counts = np.zeros((size, size))
        np.add.at(counts, (largest["rank"].to_numpy(), largest.peer.to_numpy()), 1)
        sns.heatmap(
            counts,
            ax=axis,
            cmap="viridis",
            square=True,
            cbar_kws={"label": "averagings"},
            xticklabels=max(1, size // 8),
            yticklabels=max(1, size // 8),
        )
        algorithm = group.algorithm.iloc[0]
        unit = "node" if algorithm == "hadpsgd" else "learner"
        axis.set_xlabel(f"partner {unit}")
        axis.set_ylabel(unit)
        axis.set_title(
            f"{algorithm}, P={largest.learners.iloc[0]}: who averaged with whom", fontsize="medium"
        )
    return figure


def stragglers(learners, table):
    """Where the hardware profile makes some learners stragglers: how much of their time the
    straggler and the others spent waiting (communication and idle), per algorithm at its largest P
    with a straggler (first seed). A synchronous algorithm's others wait for the straggler at every
    step; a wait-free one's do not. Each algorithm's time speedup over SEQ is written above."""
    runs = learners[
        learners.groupby(["world", "algorithm", "learners", "seed"]).slowdown.transform("max") > 1
    ]
    runs = runs[runs.learners == runs.groupby("algorithm").learners.transform("max")]
    runs = runs[runs.seed == runs.groupby("algorithm").seed.transform("min")]
    seconds = runs[[f"{c}_s" for c in CATEGORIES]].sum(axis=1)
    data = runs.assign(
        waiting=100 * (runs.communication_s + runs.idle_s) / seconds,
        learner=np.where(runs.slowdown > 1, "straggler", "the others"),
        run=runs.algorithm + " P=" + runs.learners.astype(str),
    ).sort_values(["algorithm", "rank"])
    figure, axis = plt.subplots(figsize=(2 + 1.6 * data.run.nunique(), 4))
    sns.barplot(
        data=data,
        x="run",
        y="waiting",
        hue="learner",
        hue_order=["the others", "straggler"],
        errorbar=SPREAD,
        ax=axis,
    )
    speedups = (
        table[table.world == "simulated"].set_index(["algorithm", "learners", "seed"]).time_speedup
    )
    for position, (_, first) in enumerate(data.drop_duplicates("run").iterrows()):
        speedup = speedups.get((first.algorithm, first.learners, first.seed), float("nan"))
        axis.annotate(
            f"{speedup:.2f}×", (position, data.waiting.max() * 1.05), ha="center", fontsize="small"
        )
    factors = ", ".join(
        f"learner {rank} ×{factor:g}"
        for rank, factor in data[data.slowdown > 1].groupby("rank").slowdown.first().items()
    )
    axis.set_ylim(0, max(5, data.waiting.max() * 1.15))
    axis.set_xlabel("")
    axis.set_ylabel("time communicating or idle (%)")
    axis.set_title(f"Stragglers ({factors}); above: time speedup over SEQ", fontsize="medium")
    return figure


def _sweep_x(points):
    """The sweep's x axis: global batch for a batch sweep; else the value, numeric where it is."""
    if points.sweep.iloc[0] == "train.batch_size":
        return points.assign(x=points.global_batch), "global batch (utterances)", True
    numeric = points.value.map(
        lambda v: isinstance(v, int | float) and not isinstance(v, bool)
    ).all()
    return (
        points.assign(x=points.value if numeric else points.value.map(json.dumps)),
        points.sweep.iloc[0],
        numeric,
    )


def sweep(points, palette):
    """One sweep (one setting varied, for one or more algorithms): final dev loss, test WER and
    training time against the setting's value."""
    points, label, numeric = _sweep_x(points)
    figure, axes = plt.subplots(1, 3, figsize=(15, 3.8))
    panels = (
        ("best_dev_loss", "best dev loss"),
        ("wer", "test WER (%)"),
        ("train_s", "training time (s)"),
    )
    for axis, (column, ylabel) in zip(axes, panels):
        data = points.assign(wer=100 * points.wer)
        plot = sns.lineplot if numeric else sns.pointplot
        plot(
            data=data,
            x="x",
            y=column,
            hue="algorithm",
            palette=palette,
            marker="o",
            errorbar=SPREAD,
            ax=axis,
        )
        if numeric and data.x.max() >= 4 * data.x.min():
            axis.set_xscale("log", base=2)
            axis.set_xticks(
                sorted(data.x.unique()), labels=[f"{v:g}" for v in sorted(data.x.unique())]
            )
        axis.set_xlabel(label)
        axis.set_ylabel(ylabel)
    learners = ", ".join(
        f"{a} P={p}" for a, p in points.groupby("algorithm").learners.first().items()
    )
    figure.suptitle(f"Sweep of {points.sweep.iloc[0]} ({learners}; {points.speedup_kind.iloc[0]})")
    return figure


def configuration_names(tuning: pd.DataFrame) -> pd.Series:
    """Each grid point's configuration, in words: "SEQ P=1, simulated"."""
    names = tuning.algorithm.map(algorithms.label)
    return names + " P=" + tuning.learners.astype(str) + ", " + tuning.world


def _grid_lines(points: pd.DataFrame) -> pd.Series:
    """Each grid point's line: its batch size, and its momentum where momenta were tuned."""
    lines = points.batch_size.map("batch {}".format)
    if (
        "momentum" in points and points.momentum.nunique() > 1
    ):  # older records have no momentum column
        lines += points.momentum.map(", momentum {:g}".format)
    return lines


def tuning(points: pd.DataFrame):
    """Each tuned configuration's grid (study.tuning): its score (best dev loss or TER,
    train.best_by) against the rate, a line per batch size and momentum (a legend where either was
    tuned), the chosen point ringed, a run stopped early by successive halving crossed (its score is
    its rung's); a diverged point is missing from its line."""
    data = points.assign(configuration=configuration_names(points), line=_grid_lines(points))
    lines = "line" if data.line.nunique() > 1 else None
    grid = sns.relplot(
        data=data,
        x="lr",
        y="score",
        hue=lines,
        col="configuration",
        kind="line",
        marker="o",
        col_wrap=min(4, data.configuration.nunique()),
        height=2.4,
        aspect=1.2,
        facet_kws={"sharey": False},
    )
    for configuration, axis in grid.axes_dict.items():
        chosen = data[(data.configuration == configuration) & data.chosen]
        axis.scatter(
            chosen.lr, chosen.score, s=160, facecolors="none", edgecolors="black", zorder=3
        )
        stopped = data[(data.configuration == configuration) & data.stopped_early.astype(bool)]
        axis.scatter(stopped.lr, stopped.score, s=60, marker="x", color="black", zorder=3)
        axis.set_xscale("log", base=2)
        axis.set_xticks(
            sorted(data.lr.unique()), labels=[f"{v:g}" for v in sorted(data.lr.unique())]
        )
    grid.set_titles("{col_name}")
    grid.set_axis_labels(
        "learning rate (train.lr)", " or ".join(f"best {MEASURES[by]}" for by in data.by.unique())
    )
    grid.figure.suptitle(
        "Tuning: each configuration's grid, the chosen rate ringed, runs stopped early crossed"
    )
    return grid.figure


def sweep_name(setting: str) -> str:
    return "sweep_" + setting.replace(".", "_")


def _html(figure, name: str, folder: Path) -> str:
    figure.tight_layout()
    figure.savefig(folder / f"{name}.png", dpi=110)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=110)
    plt.close(figure)
    data = base64.b64encode(buffer.getvalue()).decode()
    return f'<figure id="{name}"><img alt="{name}" src="data:image/png;base64,{data}"></figure>'


def figures(
    table: pd.DataFrame,
    epochs,
    staleness,
    exchanges,
    learners,
    points,
    tuned: pd.DataFrame,
    folder: Path,
) -> dict[str, str]:
    """Every figure, by name; the scaling figures from the configurations as written (variant
    "default"), a sweep figure per setting swept. A figure without data is the empty string."""
    sns.set_theme(style="whitegrid", context="notebook")
    folder.mkdir(parents=True, exist_ok=True)
    palette = algorithms.COLOURS
    # each run once: an algorithm's rows that another's run stands for (H-ADPSGD in one node is
    # SSGD's run) are drawn as that run; SEQ's, which starts every line at one learner, stays
    main = table[
        (table.variant == "default")
        & ((table.trained_as == table.algorithm) | (table.trained_as == "seq"))
    ]
    drawn = {
        "wer_vs_learners": lambda: wer_vs_learners(main, palette),
        "speedup_vs_learners": lambda: speedup_vs_learners(main, palette),
        "learning_curves": lambda: learning_curves(
            main, epochs[epochs.variant == "default"], palette
        ),
        "time_split": lambda: time_split(table),
    }
    if (main.learners > 1).any():
        drawn["communication_vs_learners"] = lambda: communication_vs_learners(main, palette)
        drawn["accuracy_against_speedup"] = lambda: accuracy_against_speedup(main, palette)
    if "noise_scale" in epochs and np.isfinite(epochs.noise_scale).any():
        drawn["noise_scale"] = lambda: noise_scale(
            main, epochs[epochs.variant == "default"], palette
        )
    if not staleness.empty:
        drawn["asgd_staleness"] = lambda: asgd_staleness(staleness[staleness.variant == "default"])
    if not exchanges.empty:
        drawn["pairings"] = lambda: pairings(exchanges[exchanges.variant == "default"])
    learners = learners[learners.variant == "default"]
    if (learners.slowdown > 1).any():
        drawn["stragglers"] = lambda: stragglers(learners, main)
    if not tuned.empty:
        drawn["tuning"] = lambda: tuning(tuned)
    for setting, group in points.groupby("sweep", sort=True):
        drawn[sweep_name(setting)] = lambda group=group: sweep(group, palette)
    return {name: _html(draw(), name, folder) for name, draw in drawn.items()}
