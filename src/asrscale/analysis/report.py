"""A study's report in three steps: its gathered tables loaded (`asrscale.analysis.tables`),
analysed (`asrscale.analysis.findings`, the claims included), and rendered into one self-contained
HTML page from the template beside this module (report.html.jinja). The figures are also written as
PNGs for Snakemake's own report."""

import base64
import json
from pathlib import Path

import jinja2
import numpy as np
import pandas as pd
from markupsafe import Markup

from asrscale.analysis import halves
from asrscale.analysis.answer import NONE
from asrscale.analysis.bootstrap import CONFIDENCE
from asrscale.analysis.convergence import near_tie
from asrscale.analysis.figures import MEASURES, configuration_names, figures, sweep_name
from asrscale.analysis.findings import Findings, analyse
from asrscale.analysis.halves import NOT_MEASURED, SPEED_MARGIN, SPEED_SEEDS, WER_MARGIN
from asrscale.analysis.measures import beyond_p, diverged, trained
from asrscale.analysis.tables import Tables, load
from asrscale.config.algorithms import GRIDDED, ORDER, label
from asrscale.costmodel.fitted import TOLERANCE, fitted_record
from asrscale.io import atomic_write_text

#: why a run has not converged, as the report says it (measures.convergence's converged_by)
NOT_CONVERGED = {**halves.NOT_CONVERGED, "diverged": "diverged"}
#: what the studies trained, for the line that sets a study's scale beside theirs (docs/studies.md)
STUDIES_SCALE = (
    "the studies trained DNN and LSTM acoustic models of 12-46 M parameters on 100-2,000 hours of "
    "real speech (Switchboard's conversational telephone speech, Polish, IBM's LVCSR data), for "
    "days to a week on one GPU"
)

TEMPLATE = jinja2.Environment(
    loader=jinja2.PackageLoader("asrscale.analysis", "."),
    autoescape=True,
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
).get_template("report.html.jinja")

RUN_COLUMNS = {
    "algorithm": "algorithm",
    "variant": "variant",
    "learners": "P",
    "seed": "seed",
    "wer": "WER %",
    "cer": "CER %",
    "greedy_wer": "greedy WER %",
    "greedy_cer": "greedy CER %",
    "lm_change": "LM − greedy WER, points",
    "lm_weight": "LM weight",
    "word_bonus": "word bonus",
    "train_s": "train s",
    "time_speedup": "time speedup",
    "own_speedup": "speedup over its P=1",
    "throughput_speedup": "throughput speedup",
    "time_to_target_s": "s to target",
    "target_speedup": "time-to-target speedup",
    "target_epochs_ratio": "epochs to target / SEQ's",
    "accuracy_speedup": "speedup to SEQ's accuracy",
    "efficiency": "efficiency",
    "device_hours_to_target": "learner-hours to target",
    "frames_per_s": "frames/s",
    "best_dev_loss": "best dev loss",
    "best_epoch": "best epoch",
    "converged": "converged",
    "stopped": "stopped",
    "updates": "updates",
    "global_batch": "global batch",
    "noise_scale": "noise scale",
    "batch_over_noise": "global batch / noise scale",
    "training_rule": "trained with",
    "epochs": "epochs",
    "parameters": "params",
    "threads_per_learner": "threads/learner",
    "speedup_kind": "speedups",
    "bound_by": "time bound by",
    "band_rests_on": "band rests on",
    "world": "world",
    "device": "device",
    "hardware": "hardware",
    "transports": "exchanges by",
    "exchange_gbps": "exchanges Gb/s (learner 0, waits included)",
    "stragglers": "stragglers",
    "trained_as": "trained as",
    "cpu": "CPU",
    "cores": "cores",
    "gpu": "GPU",
    "hostname": "host",
    "torch": "torch",
    "mpi": "MPI",
    "commit": "commit",
}


def make_report(
    table_files: list[Path],
    lm_statistics: Path,
    published_speedups: Path,
    figures_dir: Path,
    title: str,
    out: Path,
    skipped: list[Path] = (),
    config: dict | None = None,
) -> None:
    """`asrscale report`: the page of a study's gathered tables, of what its word LM knows of dev
    and test (`asrscale lm-statistics`) and of the cost model's replays of the studies' published
    speedups (`asrscale replay-published`); `skipped`: the folders whose skipped.tsv lists
    utterances left out as bad input."""
    tables = load(table_files)
    lm = json.loads(Path(lm_statistics).read_text())
    published = pd.read_csv(published_speedups, sep="\t")
    found = analyse(
        tables, lm, published, [Path(folder) / "skipped.tsv" for folder in skipped], config or {}
    )
    atomic_write_text(out, render(found, draw(tables, figures_dir), title, tuned(tables.tuning)))


def draw(tables: Tables, folder: Path) -> dict[str, Markup]:
    """Every figure of the study, as the HTML of an inline image, by name."""
    drawn = figures(
        tables.runs,
        tables.epochs,
        tables.staleness,
        tables.exchanges,
        tables.learners,
        tables.points,
        tables.tuning,
        folder,
    )
    return {name: Markup(image) for name, image in drawn.items()}


def _near_tie(grid: pd.DataFrame, chosen: pd.Series) -> str:
    """Where another point of a grid scored within the dev set's noise of the chosen one
    (convergence.near_tie) when the choice was made (at the rung where the grid was halved), in
    words: the choice rests on a near tie. Grids halved before their rung scores were kept say
    nothing."""
    rung = "rung_score" in grid and pd.notna(chosen.get("rung_score"))
    if not rung and grid.stopped_early.any():
        return ""
    column = "rung_score" if rung else "score"
    others = grid[~grid.chosen & grid.diverged.isna() & grid[column].notna()]
    gap = (others[column] - chosen[column]).abs() / chosen[column]
    close = others[gap < near_tie(chosen.by)]
    if close.empty:
        return ""
    each = ", ".join(f"lr {lr:g} {score:.4g}" for lr, score in zip(close.lr, close[column]))
    when = " at the rung" if rung else ""
    return f"; a near tie{when}, within the dev set's noise: {each} against {chosen[column]:.4g}"


def tuned(tuning: pd.DataFrame) -> list[dict]:
    """Each tuned configuration's grid and choice, in words, as the report's tuning table shows
    them."""
    rows = []
    for configuration, grid in tuning.groupby(configuration_names(tuning), sort=False):
        chosen = grid[grid.chosen].iloc[0]
        edge = (
            f"at the edge (its {chosen.at_edge} rate)"
            if isinstance(chosen.at_edge, str)
            else "tuned"
        )
        momenta = (
            sorted(grid.momentum.dropna().unique()) if "momentum" in grid else []
        )  # none in older records
        said = f", momentum {chosen.momentum:g}" if len(momenta) > 1 else ""
        options = _gridded_options(grid)
        said += "".join(f", {key} {chosen[key]:g}" for key in options)
        edge += _near_tie(grid, chosen)
        rows.append(
            {
                "configuration": configuration,
                "rates": ", ".join(f"{lr:g}" for lr in sorted(grid.lr.unique())),
                "batches": ", ".join(str(batch) for batch in sorted(grid.batch_size.unique())),
                "momenta": ", ".join(f"{momentum:g}" for momentum in momenta) or "as trained",
                "options": "; ".join(
                    f"{key} {', '.join(f'{value:g}' for value in values)}"
                    for key, values in options.items()
                )
                or "none",
                "chosen": f"lr {chosen.lr:g}, batch {chosen.batch_size}{said}",
                "score": f"{MEASURES[chosen.by]} {chosen.score:.4g}",
                "diverged": int(grid.diverged.notna().sum()),
                "stopped": int(grid.stopped_early.sum()),
                "state": edge,
            }
        )
    return rows


def _gridded_options(grid: pd.DataFrame) -> dict[str, list[float]]:
    """The options a configuration's grid spans besides its rates (BMUF's block_momentum η and
    block_lr ζ), each with its values; none in a grid that spans none, or in older records."""
    present = [key for key in GRIDDED if key in grid and grid[key].notna().any()]
    return {key: sorted(grid[key].dropna().unique()) for key in present}


def render(found: Findings, images: dict[str, Markup], title: str, tuning: list[dict] = ()) -> str:
    runs = found.runs
    test_sets = [subset for subset in found.lm if subset not in ("lm", "dev")]
    per_set = {
        f"{decode}_{name}": f"{label} {name} %"
        for name in test_sets
        if len(test_sets) > 1
        for decode, label in (("wer", "WER"), ("greedy_wer", "greedy WER"))
    }
    return TEMPLATE.render(
        title=title,
        found=found,
        images=images,
        columns=RUN_COLUMNS | per_set,
        cell=cell,
        percent=percent,
        test_sets=test_sets,
        margin=WER_MARGIN,
        confidence=CONFIDENCE,
        speed_margin=SPEED_MARGIN,
        speed_seeds=SPEED_SEEDS,
        speedup_tolerance=TOLERANCE,
        fit=fitted_record(),
        verdict_class=verdict_class,
        glance=glance(found.grid),
        scale=scale(found),
        sweep_name=sweep_name,
        diverged=diverged(runs),
        not_converged=NOT_CONVERGED,
        verdicts=found.claims.verdict.value_counts().items(),
        environment=runs.iloc[0],
        config_text=json.dumps(found.config, indent=1, sort_keys=True),
        runs_tsv=data_uri(runs.to_csv(sep="\t", index=False), "text/tab-separated-values"),
        decode=found.config.get("decode", {}),
        tuning=tuning,
        measures_of=measures_of,
        answered=answered(found),
        none_reaches=NONE,
    )


def answered(found: Findings) -> str:
    """What a study that recommends no algorithm at any learner count shows, in words, and which
    studies answer ("" where it recommends one)."""
    table = found.answer
    if table.empty or (table.algorithm != NONE).any():
        return ""
    runs = trained(found.runs[found.runs.variant == "default"])
    seeds, epochs = runs.seed.nunique(), runs.epochs.max()
    said = (
        f"This study recommends no algorithm at any learner count: its runs ({seeds} seed"
        f"{'s' if seeds > 1 else ''}, {epochs} epochs at most) do not decide that any reaches "
        "the target (why, for each, in the table)."
    )
    if seeds < halves.ACCURACY_SEEDS:
        said += (
            f" With fewer than {halves.ACCURACY_SEEDS} seeds of each system it is a demonstration "
            "of the workflow, not an answer."
        )
    return said


def measures_of(runs: pd.DataFrame) -> list[str]:
    """The measures that chose the runs' models (train.best_by), in words: each run's plateau is its
    own."""
    return sorted(
        {MEASURES[by] for by in runs.get("best_by", pd.Series(["dev_loss"])).fillna("dev_loss")}
    )


def verdict_class(verdict: str) -> str:
    """The CSS class of a verdict: its outcome (a half this study has no runs for apart)."""
    return "not-measured" if NOT_MEASURED in verdict else verdict.split(":")[0].replace(" ", "-")


def speedup(value: float, low: float, high: float) -> str:
    return f"{value:.2f}×" + (f" ({low:.2f}-{high:.2f})" if high > low else "")


def glance(
    grid: pd.DataFrame,
) -> list[tuple[str, list[int], list[tuple[str, list[tuple[str, str]]]]]]:
    """The algorithm × learners table of each kind of timing: (kind, learner counts, rows of
    (algorithm, cells of (CSS class, text)))."""
    tables = []
    for kind, found in grid.groupby("speedups", sort=True):
        counts = sorted(found.learners.unique())
        rows = []
        for algorithm, runs in found.groupby("algorithm", sort=False):
            by_count = runs.set_index("learners")
            rows.append(
                (
                    label(algorithm),
                    [
                        _glance_cell(by_count.loc[p]) if p in by_count.index else ("", "–")
                        for p in counts
                    ],
                )
            )
        rows.sort(key=lambda row: ORDER.index(row[0]) if row[0] in ORDER else len(ORDER))
        tables.append((kind, counts, rows))
    return tables


def _glance_cell(cell: pd.Series) -> tuple[str, str]:
    if cell.wer != cell.wer:  # every seed diverged
        return "not-reproduced", "diverged"
    text = (
        f"{'★ ' if cell.best else ''}{percent(cell.wer)} "
        f"({percent(cell.wer_low)}-{percent(cell.wer_high)})"
    )
    if cell.algorithm != "seq" and cell.speedup == cell.speedup:
        text += " · " + speedup(cell.speedup, cell.speedup_low, cell.speedup_high)
        if beyond_p(
            cell.speedup, cell.name
        ):  # the summary says why: ranked nowhere (name: its learners)
            text += f" (beyond what {cell.name} learners can give)"
    text += f" · {device_hours(cell.device_hours)} device-hours"
    text += " · " + (
        "converged" if cell.converged else NOT_CONVERGED.get(cell.why_not, cell.why_not)
    )
    return "best" if cell.best else "", text


def scale(found: Findings) -> str:
    """One line that sets the study's runs beside the studies': the model, the hours of speech and
    its kind, the updates its learners made."""
    runs = trained(found.runs[found.runs.variant == "default"])
    if runs.empty:
        return ""
    corpus = found.config.get("corpus", {})
    kind = (
        "of your own corpus" if corpus.get("subsets") else "of read speech synthesised by eSpeak NG"
    )
    hours = f"{runs.train_hours.iloc[0]:.1f} hours " if "train_hours" in runs else ""
    updates = runs.groupby("learners").updates.max()
    said = ", ".join(f"{updates[p]:,.0f} at P={p}" for p in updates.index)
    return (
        f"Scale: these runs train a model of {runs.parameters.iloc[0] / 1e6:.2f} M parameters on "
        f"{hours}{kind}, each learner making at most {said} updates; {STUDIES_SCALE}. Weigh each "
        f"verdict knowing "
        "it."
    )


def data_uri(text: str, kind: str) -> str:
    """`text` as a data: URI, for a link that downloads it from a page opened from disk."""
    return f"data:{kind};charset=utf-8;base64,{base64.b64encode(text.encode()).decode()}"


def device_hours(hours: float) -> str:
    """Two significant figures below 10, whole hours above, never in exponent notation (a tiny
    run's 8.1e-05 reads as a typo beside its neighbours' 0.0012)."""
    if hours >= 10:
        return f"{hours:,.0f}"
    return np.format_float_positional(hours, precision=2, unique=False, fractional=False, trim="-")


def percent(value: float) -> str:
    return f"{100 * value:.1f}%"


def cell(run: pd.Series, column: str) -> str:
    """A run's value of `column` in the table of every run ("–" where its record has none)."""
    value = run.get(column, float("nan"))
    if column == "converged":
        if diverged(run.to_frame().T).iloc[0]:
            return Markup("<b>diverged</b>")
        return (
            f"yes: {run.converged_by}"
            if value
            else Markup(f"<b>no: {NOT_CONVERGED[run.converged_by]}</b>")
        )
    if isinstance(value, float) and value != value:  # NaN: a target never reached
        return "not reached" if column == "time_to_target_s" else "–"
    if column == "noise_scale" and value == np.inf:  # the mean gradient lost in its noise
        return "not resolved"
    if column in ("wer", "cer", "greedy_wer", "greedy_cer") or column.startswith(
        ("wer_", "greedy_wer_")
    ):
        return f"{100 * value:.2f}"
    if column == "lm_change":
        return f"{100 * value:+.2f}"
    if column.endswith("speedup"):
        low, high = run.get(f"{column}_low", value), run.get(f"{column}_high", value)
        return f"{value:.2f}×" + (f" ({low:.2f}-{high:.2f})" if high > low else "")
    if column in ("train_s", "frames_per_s"):
        return f"{value:,.0f}"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)
