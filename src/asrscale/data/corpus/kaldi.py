"""Kaldi data directories: wav.scp (paths, or commands ending in `|` such as
`sph2pipe -f wav -p -c 1 file.sph |`), text, optional utt2spk and segments; optional feats.scp,
whose features are used instead of the audio when features.kind is "kaldi"."""

from pathlib import Path

from asrscale.data.badinput import Skipped
from asrscale.data.corpus.entry import Entry, not_a_folder, not_a_listing, read_listing
from asrscale.data.wavspec import is_command

LISTINGS = ("wav.scp", "text", "utt2spk", "segments", "feats.scp")


def kaldi_listings(folder: Path) -> list[Path]:
    """The tables of a data dir that list its utterances (editing one imports it again)."""
    return [folder / name for name in LISTINGS if (folder / name).is_file()]


def kaldi_problem(folder: Path) -> str | None:
    """Why `folder` is not a Kaldi data dir that lists utterances (its wav.scp and text); None where
    it is one."""
    if problem := not_a_folder(folder, "a Kaldi data directory"):
        return problem
    for required in ("wav.scp", "text"):
        if problem := not_a_listing(folder / required):
            return f"is not a Kaldi data directory: its {required} {problem}"
    return None


def import_kaldi(folder: Path, skipped: Skipped) -> list[Entry]:
    """The utterances of a Kaldi data dir (`kaldi_problem` says it is one). Relative audio paths are
    taken from the data dir; without utt2spk each utterance is its own speaker (Kaldi's
    convention)."""
    wav, text = read_listing(folder / "wav.scp", skipped), read_listing(folder / "text", skipped)
    speakers = read_listing(folder / "utt2spk", skipped) if (folder / "utt2spk").is_file() else {}
    feats = read_listing(folder / "feats.scp", skipped) if (folder / "feats.scp").is_file() else {}
    if (folder / "segments").is_file():
        audio, segments = _segments(folder, wav, skipped)
    else:
        audio, segments = wav, {}

    entries = []
    for utt in sorted(audio.keys() | text.keys() | speakers.keys()):
        if utt in skipped:
            continue
        if utt not in text and utt not in audio:
            skipped.add(
                utt,
                speakers[utt][1],
                f"has a speaker but neither audio nor a transcript in {folder}",
            )
        elif utt not in text:
            skipped.add(utt, audio[utt][1], f"has audio but no transcript in {folder / 'text'}")
        elif utt not in audio:
            listed_in = "segments" if segments else "wav.scp"
            skipped.add(utt, text[utt][1], f"has a transcript but is not in {folder / listed_in}")
        else:
            entries.append(_entry(folder, utt, audio, text, speakers, segments, feats))
    return entries


def _segments(folder: Path, wav: dict, skipped: Skipped) -> tuple[dict, dict]:
    """The audio of each utterance of a data dir's segments file (its recording's, with the line
    that names it) and its segment (recording, start, end: None to the recording's end); a line
    that cannot be read, or names a recording wav.scp lacks, is skipped."""
    audio, segments = {}, {}
    for utt, (value, where) in read_listing(folder / "segments", skipped).items():
        fields = value.split()
        try:
            recording, start, end = fields[0], float(fields[1]), float(fields[2])
        except (IndexError, ValueError):
            skipped.add(utt, where, f"expected '<utt> <recording> <start> <end>', not {value!r}")
            continue
        if recording not in wav:
            skipped.add(utt, where, f"recording {recording!r} is not in {folder / 'wav.scp'}")
            continue
        audio[utt], segments[utt] = (
            (wav[recording][0], where),
            (recording, start, None if end < 0 else end),
        )
    return audio, segments


def _entry(
    folder: Path, utt: str, audio: dict, text: dict, speakers: dict, segments: dict, feats: dict
) -> Entry:
    """An utterance that has both audio and a transcript, as an importer yields it."""
    spec = audio[utt][0]
    if not is_command(spec) and not Path(spec).is_absolute():
        spec = str(folder / spec)
    recording, start, end = segments.get(utt, (None, 0.0, None))
    speaker = speakers.get(utt, (utt, ""))[0]
    transcript, text_where = text[utt]
    matrix = feats.get(utt, (None,))[0]
    return Entry(
        utt,
        spec,
        transcript,
        speaker,
        audio[utt][1],
        start,
        end,
        recording,
        text_where,
        matrix,
    )
