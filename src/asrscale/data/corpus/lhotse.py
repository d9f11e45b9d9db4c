"""Lhotse manifests, as ESPnet, icefall and k2 recipes keep corpora: a supervisions manifest
(`*_supervisions_<subset>.jsonl[.gz]`: id, recording_id, start, duration, text, speaker) with the
recordings manifest beside it (the same name with `recordings` for `supervisions`: id, sources,
duration), or a cuts manifest (`*_cuts_<subset>.jsonl[.gz]`), whose cuts hold their recording
and supervisions. Each supervision is an utterance, cut from its recording. A recording's audio
is its one source: a file (a relative path is taken from the working directory, as lhotse writes
it, else from the manifest's folder) or a command that writes the audio. The channel is
features.channel for every recording, as for the other formats."""

import math
from pathlib import Path

from asrscale.data.badinput import Skipped
from asrscale.data.corpus.entry import Entry, not_a_listing
from asrscale.data.corpus.manifest import json_lines


def _text(row: dict, key: str) -> str:
    value = row.get(key)
    if not isinstance(value, str) or not value:
        raise ValueError(f"no {key} (a string)")
    return value


def _number(row: dict, key: str) -> float:
    value = row.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"no {key} (a number)")
    return float(value)


def _audio(recording: dict, manifest: Path) -> str:
    """The audio of a recording (a path, or a command ending in "|"); ValueError says why none."""
    sources = recording.get("sources")
    if not isinstance(sources, list) or len(sources) != 1 or not isinstance(sources[0], dict):
        raise ValueError("a recording needs exactly one source (one per channel is not supported)")
    if any(
        not isinstance(t, dict) or t.get("name") != "Resample"
        for t in recording.get("transforms") or []
    ):
        raise ValueError(
            "transforms other than Resample (speed perturbation, ...) are not supported"
        )
    kind, where = sources[0].get("type"), _text(sources[0], "source")
    if kind == "command":
        return f"{where} |"
    if kind != "file":
        raise ValueError(f"source type {kind!r} is not supported (only file and command)")
    path = Path(where)
    return str(path if path.is_absolute() or path.exists() else manifest.parent / path)


def _recordings(path: Path, skipped: Skipped) -> tuple[dict[str, tuple[dict, str]], dict[str, str]]:
    """Recording id -> (recording, "file:line"), and the ids listed more than once -> where."""
    found, duplicated = {}, {}
    for row, where in json_lines(path, skipped):
        key = row.get("id")
        if not isinstance(key, str):
            skipped.add(f"{path.name}:{where.rsplit(':', 1)[1]}", where, "a recording with no id")
        elif key in duplicated:
            duplicated[key] += f" and {where}"
        elif key in found:
            duplicated[key] = f"at {found.pop(key)[1]} and {where}"
        else:
            found[key] = (row, where)
    return found, duplicated


def _entry(
    supervision: dict, where: str, recording: dict, manifest: Path, offset: float = 0.0
) -> Entry:
    """The utterance of one supervision (its times `offset` into the recording, for a cut's)."""
    start = offset + _number(supervision, "start")
    end = start + _number(supervision, "duration")
    text = supervision.get("text")
    if text is not None and not isinstance(text, str):
        raise ValueError("text is not a string")
    speaker = supervision.get("speaker") or supervision["id"]
    if not isinstance(speaker, str):
        raise ValueError("speaker is not a string")
    return Entry(
        supervision["id"],
        _audio(recording, manifest),
        text or "",
        speaker,
        where,
        start,
        end,
        _text(recording, "id"),
    )


def _recordings_manifest(supervisions: Path) -> Path:
    return supervisions.with_name(supervisions.name.replace("supervisions", "recordings"))


def lhotse_listings(path: Path) -> list[Path]:
    """The manifest, and a supervisions manifest's recordings manifest beside it."""
    recordings = _recordings_manifest(path)
    return [path] + ([recordings] if recordings != path and recordings.is_file() else [])


def lhotse_problem(path: Path) -> str | None:
    """Why `path` is not a lhotse manifest of utterances: a supervisions manifest (with its
    recordings manifest beside it) or a cuts manifest; None where it may be one."""
    if problem := not_a_listing(path):
        return problem
    if "supervisions" not in path.name and "cuts" not in path.name:
        return (
            "is not a lhotse manifest: a lhotse source is a supervisions or a cuts manifest "
            "(its name says which)"
        )
    recordings = _recordings_manifest(path)
    if "cuts" not in path.name and (problem := not_a_listing(recordings)):
        return f"is a supervisions manifest whose recordings manifest {recordings} {problem}"
    return None


def import_lhotse(path: Path, skipped: Skipped) -> list[Entry]:
    """The utterances of a lhotse manifest (`lhotse_problem` says it is one)."""
    name = path.name
    if "cuts" in name:
        return _from_cuts(path, skipped)
    recordings_path = _recordings_manifest(path)
    recordings, duplicated = _recordings(recordings_path, skipped)
    entries = []
    for row, where in json_lines(path, skipped):
        if not isinstance(row.get("id"), str) or not row["id"]:
            skipped.add(f"{name}:{where.rsplit(':', 1)[1]}", where, "a supervision with no id")
            continue
        recording_id = row.get("recording_id")
        if recording_id in duplicated:
            skipped.add(
                row["id"],
                where,
                f"its recording {recording_id!r} is listed twice, {duplicated[recording_id]}",
            )
        elif not isinstance(recording_id, str) or recording_id not in recordings:
            skipped.add(
                row["id"], where, f"its recording {recording_id!r} is not in {recordings_path}"
            )
        else:
            try:
                entries.append(_entry(row, where, recordings[recording_id][0], path))
            except ValueError as error:
                skipped.add(row["id"], where, str(error))
    return entries


def _from_cuts(path: Path, skipped: Skipped) -> list[Entry]:
    entries = []
    for cut, where in json_lines(path, skipped):
        supervisions = cut.get("supervisions")
        recording = cut.get("recording")
        if not isinstance(supervisions, list) or not isinstance(recording, dict):
            skipped.add(
                f"{path.name}:{where.rsplit(':', 1)[1]}",
                where,
                "a cut needs its recording and supervisions",
            )
            continue
        for supervision in supervisions:
            if (
                not isinstance(supervision, dict)
                or not isinstance(supervision.get("id"), str)
                or not supervision["id"]
            ):
                skipped.add(
                    f"{path.name}:{where.rsplit(':', 1)[1]}", where, "a supervision with no id"
                )
                continue
            try:
                entries.append(_entry(supervision, where, recording, path, _number(cut, "start")))
            except ValueError as error:
                skipped.add(supervision["id"], where, str(error))
    return entries
