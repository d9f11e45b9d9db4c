"""Manifests: one utterance per row of a TSV file with a header, or per line of a JSON-lines
file (.jsonl or .json). Fields: `path` and `text`; optional `id` (default: the audio file's
name, with the start time for a segment), `speaker` (default: the id), `start` and `end` in
seconds. Relative paths are taken from the manifest's folder. Either may be gzipped (.gz)."""

import gzip
import hashlib
import json
import math
from pathlib import Path

from asrscale.data.badinput import BadInput, Skipped
from asrscale.data.corpus.entry import Entry, not_a_listing

REQUIRED = ("path", "text")


def read_lines(path: Path) -> list[bytes]:
    """A file's lines, gunzipped where its name ends in .gz."""
    return (
        gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    ).splitlines()


def json_lines(path: Path, skipped: Skipped):
    """(object, "file:line") for every line of a JSON-lines file that is an object; a line that
    is not is reported to `skipped`, under the id "<file name>:<line>"."""
    for number, raw in enumerate(read_lines(path), 1):
        where, name = f"{path}:{number}", f"{path.name}:{number}"
        if not raw.strip():
            continue
        try:
            row = json.loads(raw.decode("utf-8"))
        except UnicodeDecodeError as error:
            skipped.add(name, where, f"not valid UTF-8 ({error.reason} at byte {error.start})")
            continue
        except json.JSONDecodeError as error:
            skipped.add(name, where, f"not JSON: {error}")
            continue
        if not isinstance(row, dict):
            skipped.add(name, where, f"not a JSON object: {raw[:40]!r}")
            continue
        yield row, where


def _tsv_rows(path: Path, skipped: Skipped):
    """(row, "file:line") for every readable row of a TSV file with a header."""
    lines = read_lines(path)
    header = lines[0].decode("utf-8", "replace").split("\t") if lines else []
    if not set(REQUIRED) <= set(header):
        raise BadInput(
            f"{path}:1: the header must name the columns {REQUIRED} (tab-separated), not {header}"
        )
    for number, raw in enumerate(lines[1:], 2):
        where = f"{path}:{number}"
        if not raw.strip():
            continue
        try:
            fields = raw.decode("utf-8").split("\t")
        except UnicodeDecodeError as error:
            skipped.add(
                f"{path.name}:{number}",
                where,
                f"not valid UTF-8 ({error.reason} at byte {error.start})",
            )
            continue
        if len(fields) != len(header):
            skipped.add(
                f"{path.name}:{number}",
                where,
                f"{len(fields)} fields, the header has {len(header)}",
            )
            continue
        yield dict(zip(header, fields)), where


def seconds(value) -> float | None:
    """A time in seconds from a manifest field (a number, or a string of one); None if absent."""
    if value is None or value == "":
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float, str))
        or not math.isfinite(float(value))
    ):
        raise ValueError(value)
    return float(value)


def manifest_listings(path: Path) -> list[Path]:
    return [path]


def manifest_problem(path: Path) -> str | None:
    """Why `path` is not a manifest that lists utterances; None where it may be one."""
    return not_a_listing(path)


def import_manifest(path: Path, skipped: Skipped) -> list[Entry]:
    entries = []
    json_file = path.name.removesuffix(".gz").endswith((".jsonl", ".json"))
    for row, where in json_lines(path, skipped) if json_file else _tsv_rows(path, skipped):
        invalid = [
            key
            for key in REQUIRED
            if not isinstance(row.get(key), str) or key == "path" and not row[key]
        ]
        invalid += [
            key
            for key in ("id", "speaker")
            if row.get(key) is not None and not isinstance(row[key], str)
        ]
        try:
            start, end = seconds(row.get("start")) or 0.0, seconds(row.get("end"))
        except ValueError:
            invalid.append("start/end as numbers")
        if invalid:
            name = (
                row["id"]
                if isinstance(row.get("id"), str) and row["id"]
                else f"{path.name}:{where.split(':')[-1]}"
            )
            skipped.add(name, where, f"missing or invalid: {', '.join(invalid)}")
            continue
        audio = Path(row["path"])
        audio = audio if audio.is_absolute() else path.parent / audio
        segmented = start > 0 or end is not None
        utt = row.get("id") or (
            f"{audio.stem}-{round(start * 100):07d}" if segmented else audio.stem
        )
        recording = (
            f"{audio.stem}-{hashlib.sha1(str(audio).encode()).hexdigest()[:8]}"
            if segmented
            else None
        )
        entries.append(
            Entry(
                utt,
                str(audio),
                row["text"],
                row.get("speaker") or utt,
                where,
                start,
                end,
                recording,
            )
        )
    return entries
