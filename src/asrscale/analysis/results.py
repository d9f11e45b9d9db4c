"""A study's RESULTS.md, as icefall's and ESPnet's recipes keep one beside each experiment: per test
set, every algorithm at every learner count with its WER with the word LM and greedily, each with
its 95% interval (over the test set's speakers and training's seeds: asrscale.analysis.bootstrap),
its time speedup over SEQ with its band, and what the speedup rests on (measured on MPI ranks, or
modelled on a hardware profile, and the band's basis). `results_markdown` renders it from the
tables a report is made of, so that a record renders it again."""

import pandas as pd

from asrscale.analysis.answer import answer, answer_markdown
from asrscale.analysis.bootstrap import CONFIDENCE, error_rate
from asrscale.analysis.findings import drawn_together, grid
from asrscale.analysis.measures import diverged
from asrscale.analysis.tables import Tables
from asrscale.config.algorithms import ORDER, label

HEADER = (
    "| algorithm | P | seeds | WER with the LM | greedy WER | speedup over SEQ (band) | converged |"
)


def _percent(value: float) -> str:
    return f"{100 * value:.2f}"


def _interval(found) -> str:
    return f"{_percent(found.estimate)} ({_percent(found.low)}-{_percent(found.high)})"


def _speedup(row: pd.Series) -> str:
    if row.algorithm == "seq" or row.speedup != row.speedup:
        return "–"
    band = (
        f" ({row.speedup_low:.2f}-{row.speedup_high:.2f})"
        if row.speedup_high > row.speedup_low
        else ""
    )
    return f"{row.speedup:.2f}×{band}"


def _row(row: pd.Series, runs: pd.DataFrame, utterances: pd.DataFrame) -> str:
    """One algorithm at one learner count: its cells of the table."""
    name = label(row.algorithm)
    if row.wer != row.wer:
        return f"| {name} | {row.learners} | {row.seeds} | diverged | | | |"
    live = runs[~diverged(runs)]
    greedy = error_rate(utterances, live.run, "greedy_wer")
    converged = "yes" if row.converged else f"no: {row.why_not}"
    return (
        f"| {name} | {row.learners} | {row.seeds} | {_percent(row.wer)} ({_percent(row.wer_low)}-"
        f"{_percent(row.wer_high)}) | {_interval(greedy)} | {_speedup(row)} | {converged} |"
    )


def _rests_on(runs: pd.DataFrame, kind: str) -> str:
    """What a kind of timing's speedups rest on."""
    bases = sorted(set(runs.get("band_rests_on", pd.Series(dtype=str)).dropna()))
    said = "timed by the wall clock on MPI ranks" if kind == "measured" else kind
    return f"Speedups {said}" + (f"; their bands: {'; '.join(bases)}." if bases else ".")


def _test_set(name: str, runs: pd.DataFrame, utterances: pd.DataFrame) -> list[str]:
    """A test set's section: a table a kind of timing."""
    words = utterances.drop_duplicates("utt").words.sum()
    lines = [f"## {name}", "", f"{utterances.utt.nunique():,} utterances, {words:,} words.", ""]
    found = grid(runs, utterances)
    for kind, rows in found.groupby("speedups", sort=True):
        lines += [f"{_rests_on(runs[runs.speedup_kind == kind], kind)}", "", HEADER]
        lines.append("|---|---|---|---|---|---|---|")
        names = rows.algorithm.map(lambda a: label(a))
        order = names.map(lambda name: ORDER.index(name) if name in ORDER else len(ORDER))
        rows = rows.assign(order=order).sort_values(["order", "learners"], kind="stable")
        for row in rows.itertuples(index=False):
            row = pd.Series(row._asdict())
            of = runs[
                (runs.speedup_kind == kind)
                & (runs.algorithm == row.algorithm)
                & (runs.learners == row.learners)
            ]
            lines.append(_row(row, of, utterances))
        lines.append("")
    return lines


def results_markdown(tables: Tables, config: dict, title: str) -> str:
    """RESULTS.md of a study's tables (asrscale.analysis.tables) and configuration."""
    runs = tables.runs[tables.runs.variant == "default"]
    utterances = drawn_together(tables.utterances, config)
    drawn = "voices" if "voice" in utterances else "speakers"
    lines = [
        f"# {title}",
        "",
        f"Word error rates in percent, each with its {CONFIDENCE:.0%} interval over the test set's "
        f"{drawn} and training's seeds; a run's WER with the LM is at the LM weight and word bonus "
        "best on dev. Every run's scores, with Kaldi's `%WER` line, are in "
        "`runs/.../<test set>/scores.json`, each speaker's in `speakers.tsv`.",
        "",
        *answer_markdown(answer(runs, utterances, config.get("report", {}).get("target_wer"))),
    ]
    for name in sorted(utterances.test_set.unique()):
        lines += _test_set(name, runs, utterances[utterances.test_set == name])
    return "\n".join(lines)
