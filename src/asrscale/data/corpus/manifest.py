"""Manifests: one utterance per row of a TSV file with a header, or per line of a JSON-lines
file (.jsonl or .json). Fields: `path` and `text`; optional `id` (default: the audio file's
name, with the start time for a segment), `speaker` (default: the id), `start` and `end` in
seconds. Relative paths are taken from the manifest's folder."""

import hashlib
import json
from pathlib import Path

from asrscale.data.badinput import BadInput, Skipped
from asrscale.data.corpus.sources import Entry

REQUIRED = ("path", "text")


def _rows(path: Path, skipped: Skipped):
    """(row, "file:line") for every readable row."""
    lines = path.read_bytes().splitlines()
    json_lines = path.suffix in (".jsonl", ".json")
    header = None if json_lines else lines[0].decode("utf-8", "replace").split("\t") if lines else []
    if header is not None and not set(REQUIRED) <= set(header):
        raise BadInput(f"{path}:1: the header must name the columns {REQUIRED} (tab-separated), not {header}")
    for number, raw in enumerate(lines[0 if json_lines else 1 :], 1 if json_lines else 2):
        where = f"{path}:{number}"
        if not raw.strip():
            continue
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            skipped.add(f"{path.name}:{number}", where, f"not valid UTF-8 ({error.reason} at byte {error.start})")
            continue
        if json_lines:
            try:
                row = json.loads(line)
            except json.JSONDecodeError as error:
                skipped.add(f"{path.name}:{number}", where, f"not JSON: {error}")
                continue
        else:
            fields = line.split("\t")
            if len(fields) != len(header):
                skipped.add(f"{path.name}:{number}", where, f"{len(fields)} fields, the header has {len(header)}")
                continue
            row = dict(zip(header, fields))
        yield row, where


def import_manifest(path: Path, skipped: Skipped) -> list[Entry]:
    entries = []
    for row, where in _rows(path, skipped):
        missing = [key for key in REQUIRED if key not in row]
        try:
            start = float(row.get("start") or 0)
            end = float(row["end"]) if row.get("end") not in (None, "") else None
        except (TypeError, ValueError):
            missing.append("start/end as numbers")
        if missing:
            skipped.add(row.get("id") or where, where, f"missing or invalid: {', '.join(missing)}")
            continue
        audio = Path(row["path"])
        audio = audio if audio.is_absolute() else path.parent / audio
        segmented = start > 0 or end is not None
        utt = row.get("id") or (f"{audio.stem}-{round(start * 100):07d}" if segmented else audio.stem)
        recording = f"{audio.stem}-{hashlib.sha1(str(audio).encode()).hexdigest()[:8]}" if segmented else None
        entries.append(
            Entry(utt, str(audio), str(row["text"]), row.get("speaker") or utt, where, start, end, recording)
        )
    return entries
