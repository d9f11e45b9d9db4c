"""RESULTS.md: what the recorded studies decide today, one source for every verdict. Each record
(records/<name>) is assessed again by today's rules (asrscale.analysis.records) and its claims
decided; records/index.yaml says which record stands for a claim's half where two decide it, and
which records an other supersedes. `asrscale results` writes the page; a test holds the committed
page to what the records give."""

from pathlib import Path

import pandas as pd
import yaml

from asrscale.analysis.claims import CLAIMS, STUDIES
from asrscale.analysis.halves import NOT_MEASURED
from asrscale.analysis.records import record_claims, record_made
from asrscale.errors import UserError

INDEX = "index.yaml"
HEADER = """# Results

What the recorded studies decide today. Made by `asrscale results` from the records in `records/`
(tests/analysis/test_records.py checks that this page is what they give); do not edit it by hand.
How a half is decided: `docs/studies.md`. How each study ran: `docs/reproductions.md`.

Every record is a laptop study on the built-in eSpeak corpus (2 CPU cores, simulated learners):
its accuracy is measured, its speed modelled, so every speed half needs GPUs. Each verdict is
assessed again by the rules of the day, so a verdict may differ from the one its study first
printed (docs/reproductions.md says which moved, and why).
"""


def read_index(records: Path) -> dict:
    """records/index.yaml, checked against the records there."""
    path = records / INDEX
    index = yaml.safe_load(path.read_text())
    found = {folder.parent.name for folder in records.glob("*/record.json")}
    if missing := sorted(found ^ set(index["records"])):
        raise UserError(f"{path}: its records and the folders of {records} differ: {missing}")
    return index


def standing(records: Path) -> pd.DataFrame:
    """Each claim's accuracy half as the record that stands for it decides it: one row per claim,
    with the record, its verdict, what was measured and why; "owed" where no record decides it."""
    index = read_index(records)
    decided = {}
    for name, entry in index["records"].items():
        if entry.get("superseded_by"):
            continue
        for row in record_claims(records / name).itertuples():
            if row.accuracy and NOT_MEASURED not in row.accuracy:
                decided.setdefault(row.claim, []).append((name, row))
    rows = []
    for claim in CLAIMS:
        found = decided.get(claim.claim, [])
        chosen = index.get("stands_for", {}).get(claim.claim, {}).get("record")
        if len(found) > 1 and chosen is None:
            names = [name for name, _ in found]
            raise UserError(f"{records / INDEX}: {claim.claim!r} is decided by {names}: name one")
        found = [(name, row) for name, row in found if chosen in (None, name)]
        rows.append(_row(claim, found[0] if found else None))
    return pd.DataFrame(rows)


def _row(claim, found) -> dict:
    row = {"study": claim.study, "claim": claim.claim, "speed_rule": claim.speed_rule}
    if found is None:
        owed = f"owed: `studies/{claim.decided_by}.yaml`" if claim.decided_by in STUDIES else "–"
        return row | {"record": "", "accuracy": owed if claim.accuracy else "–", "why": ""}
    name, decided = found
    return row | {
        "record": name,
        "accuracy": decided.accuracy,
        "why": decided.accuracy_why,
        "measured": decided.accuracy_measured,
        "speed": decided.speed,
    }


def render(records: Path) -> str:
    """RESULTS.md."""
    index = read_index(records)
    found = standing(records)
    lines = [
        HEADER,
        "## The claims",
        "",
        "| claim | accuracy half | as measured | why | record |",
        "|---|---|---|---|---|",
    ]
    for row in found.itertuples():
        verdict = f"**{row.accuracy}**" if row.record else row.accuracy
        record = f"`records/{row.record}`" if row.record else ""
        lines.append(
            f"| {row.study}: {row.claim} | {verdict} | {_cell(_measured(row.measured))} | "
            f"{_cell(row.why)} | {record} |"
        )
    lines += [
        "",
        "Every speed half needs runs measured on GPUs (`docs/gpus.md`); a record's modelled "
        "speedups are in its report (`asrscale rerender`).",
        "",
        "## The records",
        "",
        "| record | study | what it ran | made |",
        "|---|---|---|---|",
    ]
    for name, entry in index["records"].items():
        made = record_made(records / name)
        superseded = (
            f" Superseded by `records/{entry['superseded_by']}`."
            if entry.get("superseded_by")
            else ""
        )
        lines.append(
            f"| `records/{name}` | `studies/{entry['study']}` | {entry['ran']}.{superseded} | "
            f"{made['date']} at {made['commit'][:7]} |"
        )
    stands = index.get("stands_for", {})
    if stands:
        lines += ["", "Where two records decide one half, the one that stands:", ""]
        lines += [
            f"- {claim}: `records/{e['record']}` ({e['why']})." for claim, e in stands.items()
        ]
    return "\n".join(lines) + "\n"


def _measured(measured: str) -> str:
    """The relative WER difference a half measured and, where a control split it, the split: the
    parts of its measured text a reader compares."""
    if not isinstance(measured, str):
        return ""
    parts = [part for part in measured.split("; ") if part.startswith(SAID)]
    return "; ".join(parts)


#: the parts of a half's measured text that RESULTS.md shows
SAID = ("WER +", "WER -", "the gap split by the control", "no share of the gap")


def _cell(text: str) -> str:
    """Text for a Markdown table's cell."""
    return text.replace("|", "\\|").replace("\n", " ")
