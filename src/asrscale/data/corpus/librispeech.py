"""The LibriSpeech layout: <speaker>/<chapter>/<speaker>-<chapter>.trans.txt beside the chapter's
<utt>.flac files; any subset (train-clean-100, dev-clean, ...) or several under one folder."""

from pathlib import Path

from asrscale.data.badinput import BadInput, Skipped
from asrscale.data.corpus.entry import Entry, read_listing


def librispeech_listings(folder: Path) -> list[Path]:
    return sorted(folder.rglob("*.trans.txt"))


def import_librispeech(folder: Path, skipped: Skipped) -> list[Entry]:
    transcripts = sorted(folder.rglob("*.trans.txt"))
    if not transcripts:
        raise BadInput(f"{folder}: no <speaker>/<chapter>/*.trans.txt: not a LibriSpeech directory")
    entries = []
    for transcript in transcripts:
        chapter = transcript.parent
        listed = read_listing(transcript, skipped)
        for audio in sorted(chapter.glob("*.flac")):
            if audio.stem not in listed and audio.stem not in skipped:
                skipped.add(audio.stem, str(audio), f"has audio but no transcript in {transcript}")
        for utt, (text, where) in listed.items():
            entries.append(Entry(utt, str(chapter / f"{utt}.flac"), text, utt.split("-")[0], where))
    return entries
