"""Lhotse manifests, as ESPnet, icefall and k2 recipes keep corpora, read by the lhotse library: a
supervisions manifest (`*_supervisions_<subset>.jsonl[.gz]`) with the recordings manifest beside it
(the same name with `recordings` for `supervisions`), or a cuts manifest (`*_cuts_<subset>.jsonl
[.gz]`), whose cuts hold their recording, supervisions and perhaps their features. Each
supervision is an utterance: its cut, trimmed to it, as lhotse makes it, transforms (speed
perturbation, resampling, volume) and a recording's several sources included, is kept in the data
dir (asrscale.data.datadir's cuts.jsonl.gz), from which the features stage loads its audio, or its
precomputed features where they are the study's (asrscale.data.features).

Each line is read on its own, so that a bad one (not lhotse's, a recording not in its manifest, a
missing audio file) is named with its manifest and line and left out. A file's relative path is
taken from the working directory, as lhotse writes it, else from the manifest's folder. lhotse
(which loads torch) is imported where a manifest is read, never where a path is checked."""

import math
from pathlib import Path

from asrscale.data.badinput import Skipped
from asrscale.data.corpus.entry import Entry, not_a_listing
from asrscale.data.corpus.manifest import json_lines


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


def _items(path: Path, skipped: Skipped, kind):
    """(lhotse's object, "file:line") of every line of a manifest that lhotse reads as `kind`; a
    line it does not is named with its reason."""
    from lhotse.serialization import deserialize_item

    for row, where in json_lines(path, skipped):
        try:
            item = deserialize_item(row)
            if not isinstance(item, kind):
                raise ValueError(f"not a {kind.__name__} but a {type(item).__name__}")
        except Exception as error:  # lhotse raises many kinds for a bad line
            skipped.add(
                f"{path.name}:{where.rsplit(':', 1)[1]}",
                where,
                f"not lhotse's: {' '.join(str(error).split())[:300]}",
            )
            continue
        yield item, where


def _resolved(path: str, manifest: Path) -> str:
    """A file's path as lhotse wrote it: from the working directory, else the manifest's folder."""
    found = Path(path)
    beside = manifest.parent / found
    return (
        str(beside) if not found.is_absolute() and not found.exists() and beside.exists() else path
    )


def _located(cut: dict, manifest: Path) -> dict:
    """A cut's dict with its audio files' and features' relative paths resolved (`_resolved`)."""
    for source in cut.get("recording", {}).get("sources", []):
        if source.get("type") == "file":
            source["source"] = _resolved(source["source"], manifest)
    if features := cut.get("features"):
        features["storage_path"] = _resolved(features["storage_path"], manifest)
    return cut


def _missing_audio(cut: dict) -> str | None:
    """A file of the cut's recording that does not exist."""
    for source in cut.get("recording", {}).get("sources", []):
        if source.get("type") == "file" and not Path(source["source"]).is_file():
            return source["source"]
    return None


def _supervision_problem(supervision, cut) -> str | None:
    """What is wrong with a supervision of a cut, which lhotse would cut as it is."""
    start, duration = supervision.start, supervision.duration
    if not (math.isfinite(start) and math.isfinite(duration) and start >= 0 and duration > 0):
        return (
            f"supervision from {start:g} s lasting {duration:g} s: expected finite times, "
            "start >= 0, a duration > 0"
        )
    if start + duration > cut.duration + 0.01:
        end = start + duration
        return f"supervision ends at {end:g} s, after the end of its cut ({cut.duration:.2f} s)"
    if supervision.text is not None and not isinstance(supervision.text, str):
        return "text is not a string"
    return None


def _entries(cut, where: str, manifest: Path, skipped: Skipped) -> list[Entry]:
    """The utterances of one cut: each supervision's cut, trimmed to it."""
    from lhotse import CutSet

    entries, kept = [], []
    for supervision in cut.supervisions:
        if problem := _supervision_problem(supervision, cut):
            skipped.add(supervision.id, where, problem)
        else:
            kept.append(supervision)
    cut.supervisions = kept
    for piece in CutSet.from_cuts([cut]).trim_to_supervisions(keep_overlapping=False):
        (supervision,) = piece.supervisions
        kept = _located(piece.to_dict(), manifest)
        sources = [source["source"] for source in kept.get("recording", {}).get("sources", [])]
        if missing := _missing_audio(kept):
            skipped.add(supervision.id, where, f"audio file {missing} does not exist", missing)
            continue
        entries.append(
            Entry(
                supervision.id,
                " ".join(sources) or "(features)",
                supervision.text or "",
                supervision.speaker or supervision.id,
                where,
                recording=piece.recording_id,
                end=piece.duration,
                cut=kept,
            )
        )
    return entries


def _recordings(path: Path, skipped: Skipped) -> tuple[dict, dict]:
    """Recording id -> (recording, "file:line"), and the ids listed more than once -> where."""
    from lhotse import Recording

    found, duplicated = {}, {}
    for recording, where in _items(path, skipped, Recording):
        if recording.id in duplicated:
            duplicated[recording.id] += f" and {where}"
        elif recording.id in found:
            duplicated[recording.id] = f"at {found.pop(recording.id)[1]} and {where}"
        else:
            found[recording.id] = (recording, where)
    return found, duplicated


def _supervised(path: Path, skipped: Skipped) -> list[tuple]:
    """A supervisions manifest's supervisions, each as a cut of its recording."""
    from lhotse import SupervisionSegment

    recordings_path = _recordings_manifest(path)
    recordings, duplicated = _recordings(recordings_path, skipped)
    cuts = []
    for supervision, where in _items(path, skipped, SupervisionSegment):
        recording = supervision.recording_id
        if recording in duplicated:
            skipped.add(
                supervision.id,
                where,
                f"its recording {recording!r} is listed twice, {duplicated[recording]}",
            )
        elif recording not in recordings:
            skipped.add(
                supervision.id, where, f"its recording {recording!r} is not in {recordings_path}"
            )
        else:
            cut = recordings[recording][0].to_cut()
            cut.supervisions = [supervision]
            cuts.append((cut, where))
    return cuts


def import_lhotse(path: Path, skipped: Skipped) -> list[Entry]:
    """The utterances of a lhotse manifest (`lhotse_problem` says it is one)."""
    from lhotse.cut import Cut

    cuts = list(_items(path, skipped, Cut)) if "cuts" in path.name else _supervised(path, skipped)
    entries = []
    for cut, where in cuts:
        try:
            entries += _entries(cut, where, path, skipped)
        except Exception as error:  # a cut lhotse cannot trim: named with its line
            skipped.add(
                cut.id, where, f"lhotse cannot cut it: {' '.join(str(error).split())[:300]}"
            )
    return entries
