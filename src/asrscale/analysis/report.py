"""A study's report: its gathered tables (`asrscale.analysis.gather`), analysed by
`asrscale.analysis.measures` and `asrscale.analysis.claims`, rendered as one self-contained HTML
page. The figures are also written as PNGs for Snakemake's own report."""

import hashlib
import html
import json
from pathlib import Path

import pandas as pd

from asrscale.analysis.claims import SPEEDUP_SHARE, verdicts
from asrscale.analysis.figures import figures, sweep_name
from asrscale.analysis.measures import (
    KEYS,
    WER_TOLERANCE,
    baseline,
    best_run,
    by_learners,
    diverged,
    learner_hours,
    matches_seq,
    modelled_against_measured,
    runs_of,
    trained,
)  # fmt: skip
from asrscale.io import atomic_write_text


def _summary(table: pd.DataFrame, claims: pd.DataFrame) -> str:
    """The best WER; SEQ; per P the fastest algorithm to the target and in time, and which keep
    SEQ's accuracy (the claims' rule: within the tolerance plus the spreads over seeds)."""
    means = by_learners(table)
    best = means.wer.idxmin()
    lines = [f"Best test WER: <b>{100 * means.wer.min():.1f}%</b> ({best[0]}, P={best[1]}; decoded with the word "
             f"LM, greedy {100 * means.greedy_wer[best]:.1f}%)."]  # fmt: skip
    seq = baseline(table)
    if not seq.empty:
        target = table.target_dev_loss.iloc[0]
        lines.append(f"SEQ (the baseline): test WER {100 * seq.wer.mean():.1f}% (greedy "
                     f"{100 * seq.greedy_wer.mean():.1f}%), trained in {seq.train_s.mean():.3g} "
                     f"s; time to target: training until the dev loss reaches {target:.3g}.")  # fmt: skip
    else:
        lines.append("No SEQ run in this study: no speedups or accuracy against SEQ (add seq to study.runs).")
    for p, group in means.drop("seq", level=0, errors="ignore").groupby(level="learners"):
        if seq.empty:
            break
        fastest, reached = group.speedup.idxmax()[0], group.to_target.dropna()
        first = reached.idxmax() if not reached.empty else None
        to_target = "no algorithm reaches the target"
        if first:
            hours = group.hours[first]
            to_target = f"fastest to target <b>{first[0]}</b> ({reached.max():.2f}× SEQ, {hours:.2g} learner-hours)"
        runs = {a: runs_of(trained(table), a, p) for a, _ in group.index}
        late = [a for a, r in runs.items() if not r.converged.all()]
        kept = [a for a, r in runs.items() if a not in late and matches_seq(table, r)]
        lines.append(
            f"P={p}: {to_target}; fastest in time {fastest} ({group.speedup.max():.2f}×); "
            f"keep SEQ's accuracy: {', '.join(kept) or 'none'}"
            + (f"; did not converge: {', '.join(late)}" if late else "")
            + "; WER change against SEQ: "
            + ", ".join(
                f"{a} {100 * (w - seq.wer.mean()):+.1f}" if pd.notna(w) else f"{a} diverged"
                for (a, _), w in group.wer.items()
            )
            + " points."
        )
    counts = claims.verdict.str.split(":").str[0].value_counts()
    lines.append("The studies' claims: " + ", ".join(f"{n} {verdict}" for verdict, n in counts.items())
                 + ' (<a href="#claims">below</a>).')  # fmt: skip
    lines.append(_decides(table, claims))
    return "".join(f"<li>{line}</li>" for line in lines)


REPRODUCTIONS = ("<code>snakemake --cores all --configfile studies/claims-at-4.yaml</code> (the claims at 4 "
                 "learners, on 2 CPU cores in about 90 minutes), <code>--configfile studies/scaled-64.yaml</code> "
                 "(KAVG at 16 and H-ADPSGD at 64 learners against SEQ, scaled down to 2 CPU cores: about 85 "
                 "minutes) and <code>--configfile studies/reproduction.yaml</code> (every claim, 1 to 64 learners, "
                 "with its sweeps and seeds: sized for a GPU)")  # fmt: skip


def _decides(table: pd.DataFrame, claims: pd.DataFrame) -> str:
    """What this study can decide: how many of its runs converged, and where the rest is decided."""
    runs = trained(table)
    converged = runs[runs.converged]
    undecided = (~claims.verdict.str.startswith(("reproduced", "not reproduced"))).sum()
    return (f"<b>What this study decides</b>: {len(converged)} of its {len(runs)} runs converged (their dev "
            f"loss stopped falling while they transcribe, or reached the target dev loss); accuracy claims rest on "
            f"converged runs only, so {undecided} of the {len(claims)} claims are not decided here. Those are "
            f"decided by {REPRODUCTIONS}.")  # fmt: skip


def _diverged(table: pd.DataFrame) -> str:
    """The runs that diverged, sweeps' included: results of nothing."""
    gone = trained(table)[diverged(trained(table))]
    if gone.empty:
        return ""
    named = ", ".join(f"{r.algorithm}{'' if r.variant == 'default' else f' ({r.variant})'} P={r.learners} seed {r.seed}"
                      for r in gone.itertuples())  # fmt: skip
    return f"<li><b>Diverged</b> (no result; each run's run.json says where and why): {named}.</li>"


def _cost(table: pd.DataFrame) -> str:
    parts = [f"<b>{h:.3g}</b> learner-hours {kind}" for kind, h in learner_hours(table).items()]
    return (f"<li>Training this study took {' and '.join(parts)} ({len(trained(table))} runs; learners × training "
            "time).</li>")  # fmt: skip


TABLE_COLUMNS = {
    "algorithm": "algorithm", "variant": "variant", "learners": "P", "seed": "seed", "wer": "WER %", "cer": "CER %",
    "greedy_wer": "greedy WER %", "greedy_cer": "greedy CER %", "lm_weight": "LM weight", "word_bonus": "word bonus",
    "train_s": "train s", "time_speedup": "time speedup", "throughput_speedup": "throughput speedup",
    "time_to_target_s": "s to target", "target_speedup": "time-to-target speedup", "efficiency": "efficiency",
    "device_hours_to_target": "learner-hours to target",
    "frames_per_s": "frames/s", "final_dev_loss": "dev loss", "converged": "converged", "updates": "updates",
    "global_batch": "global batch",
    "training_rule": "trained with", "epochs": "epochs", "parameters": "params",
    "threads_per_learner": "threads/learner",
    "speedup_kind": "speedups", "world": "world", "hardware": "hardware", "stragglers": "stragglers",
    "trained_as": "trained as",
    "cpu": "CPU", "cores": "cores", "gpu": "GPU", "hostname": "host", "torch": "torch", "mpi": "MPI",
    "commit": "commit",
}  # fmt: skip


def _converged(table: pd.DataFrame) -> pd.Series:
    """How each run converged (its dev loss stopped falling, or it reached the target), or why not."""
    shown = ("yes: " + table.converged_by.fillna("")).where(table.converged, "<b>no</b>")
    return shown.mask(diverged(table), "<b>diverged</b>")


def _format(column: str, value) -> str:
    if column == "converged":  # already markup (_converged)
        return value
    if isinstance(value, float) and value != value:  # NaN: a target never reached
        return "not reached" if column == "time_to_target_s" else "–"
    if column in ("wer", "cer", "greedy_wer", "greedy_cer"):
        return f"{100 * value:.2f}"
    if column.endswith("speedup"):
        return f"{value:.2f}×"
    if column in ("train_s", "frames_per_s"):
        return f"{value:,.0f}"
    if isinstance(value, float):
        return f"{value:.4g}"
    return html.escape(str(value))


def _timing_note(table: pd.DataFrame) -> str:
    notes = []
    shared = sorted(table[table.algorithm != table.trained_as].algorithm.unique())
    if shared:
        notes.append(
            f"With one learner {', '.join(shared)} are exactly SEQ's computation (no exchange takes place; "
            "tested), so their one-learner rows report SEQ's run."
        )
    if (table.world == "mpi").any():
        notes.append("<b>Measured</b> runs: real MPI ranks on this machine, timed by the wall clock.")
    simulated = table[table.world == "simulated"]
    for hardware, basis in simulated[["hardware", "compute_basis"]].drop_duplicates().itertuples(index=False):
        notes.append(
            f"<b>Modelled</b> runs: every learner really trained, in one process, while a modelled clock kept time "
            f"on the hardware profile <b>{html.escape(str(hardware))}</b> (config.yaml hardware:, cost model in "
            f"src/asrscale/worlds/costmodel.py; {html.escape(str(basis))}); accuracy is real, times are the model's."
        )
    return " ".join(notes)


def _claims_html(rows: pd.DataFrame) -> str:
    body = "".join(
        f'<tr><td>{html.escape(r.study)}</td><td class="text">{html.escape(r.claim)}</td>'
        f'<td class="text">{html.escape(r.rule)}</td><td class="text">{html.escape(r.measured)}</td>'
        f'<td class="text {r.verdict.split(":")[0].replace(" ", "-")}">{html.escape(r.verdict)}</td></tr>'
        for r in rows.itertuples()
    )
    return (
        '<h2>The studies\' claims</h2><p class="note">Each claim of docs/studies.md, decided from '
        f"this study's runs by the rule beside it (src/asrscale/analysis/claims.py). Accuracy (test WER decoded "
        "with the word LM, as the studies scored, for every run) matches SEQ's within "
        f"{100 * WER_TOLERANCE:.0f} WER point plus the spread over seeds (half their range); a claimed speedup is "
        f"reached at {100 * SPEEDUP_SHARE:.0f}% of it, within the spread (other models, other hardware); a setting "
        "beats another when its mean is better by more than both spreads.</p>"
        '<table id="claims"><thead><tr><th>study</th><th>claim</th><th>rule</th><th>measured here</th>'
        f"<th>verdict</th></tr></thead><tbody>{body}</tbody></table>"
    )


def _decoding_html(table: pd.DataFrame, confusions: pd.DataFrame, config: dict) -> str:
    """How the test sets were decoded, and the most frequent word errors of the best run."""
    decode = config.get("decode", {})
    lm = decode.get("lm")
    lm = "a Kneser-Ney model of the training transcripts" if lm == "train" else f"your model {lm}"
    note = (
        "Every run's test set is decoded twice: greedy CTC (the model alone), and a CTC beam search over a lexicon "
        f"with a word {decode.get('lm_order', '')}-gram language model ({html.escape(str(lm))}; flashlight-text, beam "
        f"{decode.get('beam')}), its LM weight and word bonus chosen on the dev set per run. <b>WER</b> everywhere "
        "in this report, the claims included, is the LM decode's, as the studies scored; greedy WER is beside it in "
        "the table of every run. Each run's alignments (sclite-like) are in its test/alignment.*.txt."
    )
    best = best_run(table)
    if best is None:
        return f'<h2>Decoding</h2><p class="note">{note}</p>'
    mine = confusions.merge(best[KEYS].to_frame().T.astype(confusions[KEYS].dtypes), on=KEYS)
    rows = "".join(
        f"<tr><td>{html.escape(r.reference) if isinstance(r.reference, str) else '(inserted)'}</td>"
        f"<td>{html.escape(r.hypothesis) if isinstance(r.hypothesis, str) else '(deleted)'}</td><td>{r.count}</td></tr>"
        for r in mine.head(10).itertuples()
    )
    return (
        f'<h2>Decoding</h2><p class="note">{note}</p><p class="note">The most frequent word errors of the best run '
        f"({html.escape(best.algorithm)} P={best.learners} seed {best.seed}: WER {100 * best.wer:.2f}% with the LM "
        f"at weight {best.lm_weight:g} and word bonus {best.word_bonus:g}, {100 * best.greedy_wer:.2f}% greedy):</p>"
        '<table id="confusions"><thead><tr><th>reference</th><th>hypothesis</th><th>count</th></tr></thead>'
        f"<tbody>{rows}</tbody></table>"
    )


def _validation_html(table: pd.DataFrame) -> str:
    pairs = modelled_against_measured(table)
    if pairs.empty:
        return ""
    columns = ("algorithm", "P", "seed", "measured s/epoch", "modelled s/epoch", "modelled / measured",
               "dev loss measured", "dev loss modelled")  # fmt: skip
    header = "".join(f"<th>{column}</th>" for column in columns)
    body = "".join(
        f"<tr><td>{r.algorithm}</td><td>{r.learners}</td><td>{r.seed}</td><td>{r.epoch_s_measured:.1f}</td>"
        f"<td>{r.epoch_s_modelled:.1f}</td><td>{r.time_ratio:.2f}</td><td>{r.final_dev_loss_measured:.3f}</td>"
        f"<td>{r.final_dev_loss_modelled:.3f}</td></tr>"
        for r in pairs.itertuples()
    )
    return (
        '<h2>Modelled against measured</h2><p class="note">The same runs on real MPI ranks (wall clock) and '
        "simulated (cost model): time per epoch and final dev loss.</p>"
        f'<table id="validation"><thead><tr>{header}</tr></thead><tbody>{body}</tbody></table>'
    )


def _skipped_html(reports: list[Path]) -> str:
    """How many utterances the import and feature extraction left out, and where they are listed."""
    counts = {report: len(Path(report).read_text().splitlines()) - 1 for report in reports}
    total = sum(counts.values())
    if not total:
        return '<p class="note" id="skipped">No utterance of the corpus was left out as bad input.</p>'
    listed = ", ".join(f"{n} in {html.escape(str(report))}" for report, n in counts.items() if n)
    counted = "1 utterance was" if total == 1 else f"{total} utterances were"
    return (f'<p class="note" id="skipped"><b>{counted} left out as bad input</b> (missing or unreadable '
            f"audio, no transcript, ...), each listed with its reason: {listed}.</p>")  # fmt: skip


def _sweeps_html(points: pd.DataFrame, images: dict[str, str]) -> str:
    if points.empty:
        return ""
    parts = ['<h2>Sweeps</h2><p class="note">One setting varied at a time (study.sweeps in the config); every '
             "other setting as configured. Mean over seeds with their range.</p>"]  # fmt: skip
    for setting, group in points.groupby("sweep", sort=True):
        runs = ", ".join(f"{a} P={p}" for a, p in group.groupby("algorithm").learners.first().items())
        values = ", ".join(dict.fromkeys(group.value.map(json.dumps)))
        parts.append(f"<h3>{html.escape(setting)}</h3><p class=\"note\">{html.escape(runs)}; values "
                     f"{html.escape(values)}.</p>{images[sweep_name(setting)]}")  # fmt: skip
    return "".join(parts)


def _environment_html(table: pd.DataFrame, config: dict) -> str:
    environment = table.iloc[0]
    text = json.dumps(config, indent=1, sort_keys=True)
    digest = hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()[:12]
    return (
        f'<p class="note" id="environment">Environment: {html.escape(str(environment.cpu))} with '
        f"{environment.cores} cores, GPU: {html.escape(str(environment.gpu))}, torch "
        f"{html.escape(str(environment.torch))}, {html.escape(str(environment.mpi))}, commit "
        f"{html.escape(str(environment.commit))[:12]}, study configuration {digest} "
        f"(sha256 of its JSON).</p><details><summary>The study's configuration</summary><pre>"
        f"{html.escape(text)}</pre></details>"
    )


def render(results: Path, figures_dir: Path, title: str, out: Path, skipped: list[Path] = (),
           config: dict | None = None) -> None:  # fmt: skip
    table = pd.read_csv(results / "runs.tsv", sep="\t").sort_values(KEYS)
    epochs = pd.read_csv(results / "epochs.tsv", sep="\t")
    sweeps = pd.read_csv(results / "sweeps.tsv", sep="\t", dtype={"value": str})
    # each value as the configuration wrote it (a number, a boolean, a string), decoded once
    points = sweeps.assign(value=sweeps.value.map(json.loads)).merge(
        table, on=["algorithm", "variant", "learners", "world"]
    )
    claims = verdicts(table, points)
    names = ("staleness", "exchanges", "confusions", "learners")
    tables = {name: pd.read_csv(results / f"{name}.tsv", sep="\t") for name in names}
    images = figures(table, epochs, tables["staleness"], tables["exchanges"], tables["learners"], points, figures_dir)
    header = "".join(f"<th>{label}</th>" for label in TABLE_COLUMNS.values())
    body = "".join(
        "<tr>" + "".join(f"<td>{_format(c, row[c])}</td>" for c in TABLE_COLUMNS) + "</tr>"
        for _, row in table.assign(converged=_converged(table)).iterrows()
    )

    def section(heading: str, name: str, note: str = "") -> str:
        if name not in images:
            return ""
        return f"<h2>{heading}</h2>" + (f'<p class="note">{note}</p>' if note else "") + images[name]

    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body {{ font-family: system-ui, sans-serif; max-width: 1150px; margin: 1.5em auto; padding: 0 1em; color: #222; }}
h1 {{ font-size: 1.5em; }} h2 {{ font-size: 1.2em; margin-top: 1.6em; border-bottom: 1px solid #ddd; }}
h3 {{ font-size: 1em; margin-bottom: 0; }} figure {{ margin: 1em 0; }} img {{ max-width: 100%; }}
table {{ border-collapse: collapse; font-size: 0.8em; display: block; overflow-x: auto; }}
th, td {{ border: 1px solid #ddd; padding: 3px 6px; text-align: right; white-space: nowrap; }}
th {{ background: #f3f3f3; }} .note {{ color: #555; font-size: 0.9em; }} pre {{ font-size: 0.75em; }}
td.text {{ text-align: left; white-space: normal; }} .reproduced {{ background: #e3f4e3; }}
.not-reproduced {{ background: #f9e0e0; }} .not-measured-in-this-study {{ color: #777; }}
.not-decided {{ background: #fdf3d8; }}
</style></head><body>
<h1>{html.escape(title)}</h1>
<h2>Summary</h2><ul id="summary">{_summary(table[table.variant == "default"], claims)}{_diverged(table)}
{_cost(table)}</ul>
<p class="note">{len(table)} runs. {_timing_note(table)} Speedups are against SEQ timed the same way, with the
same seed: time speedup is T(SEQ) / T(run) for the same number of epochs, throughput speedup the ratio of
frames per second.</p>
{_environment_html(table, config or {})}
{_skipped_html(skipped)}
{section("Accuracy", "wer_vs_learners")}
{section("Speedup", "speedup_vs_learners")}
{section("Communication", "communication_vs_learners", COMMUNICATION_NOTE)}
{_claims_html(claims)}
{_decoding_html(table, tables["confusions"], config or {})}
{_sweeps_html(points, images)}
{section("Learning curves", "learning_curves")}
{section("Time split", "time_split", TIME_SPLIT_NOTE)}
{section("ASGD staleness", "asgd_staleness")}
{section("ADPSGD pairings", "pairings", PAIRINGS_NOTE)}
{section("Stragglers", "stragglers", STRAGGLERS_NOTE)}
{_validation_html(table)}
<h2>Every run</h2><table id="runs"><thead><tr>{header}</tr></thead><tbody>{body}</tbody></table>
</body></html>
"""
    atomic_write_text(out, page)


COMMUNICATION_NOTE = ("Communication: time inside collectives and exchanges that compute did not hide. Idle: "
                      "barriers, waiting for slower learners.")  # fmt: skip
TIME_SPLIT_NOTE = ("Compute: forward, backward and update. Communication: time inside collectives. Data wait: time "
                   "blocked on the next batch (the prefetcher builds batches ahead). Idle: barriers (waiting for "
                   "slower learners), logging.")  # fmt: skip
STRAGGLERS_NOTE = ("The hardware profile makes some learners slower (<code>stragglers:</code>, a factor on their "
                   "compute): the share of time each learner spent communicating or idle. SSGD's and the other "
                   "synchronous algorithms' learners wait for the straggler at every step or averaging; ADPSGD's "
                   "pair with whichever partner is ready (lian18), and ASGD's do not wait at all.")  # fmt: skip
PAIRINGS_NOTE = ("How often each pair averaged their models ½–½ in the largest run (H-ADPSGD: nodes, whose leaders "
                 "exchange), from every learner's record of its partners: the bipartite graph rotates, so every "
                 "active learner meets every passive one in turn.")  # fmt: skip
