"""The LibriSpeech layout: <speaker>/<chapter>/<speaker>-<chapter>.trans.txt beside the chapter's
<utt>.flac files; any subset (train-clean-100, dev-clean, ...) or several under one folder."""

from pathlib import Path

from asrscale.data.badinput import Skipped
from asrscale.data.corpus.entry import Entry, not_a_folder, read_listing


def librispeech_listings(folder: Path) -> list[Path]:
    return sorted(folder.rglob("*.trans.txt"))


def librispeech_problem(folder: Path) -> str | None:
    """Why `folder` is not a LibriSpeech subset: no <speaker>/<chapter>/*.trans.txt, or no audio
    (*.flac) beside the first; None where it is one."""
    if problem := not_a_folder(folder, "a LibriSpeech subset"):
        return problem
    transcript = next(folder.rglob("*.trans.txt"), None)
    if transcript is None:
        return "holds no <speaker>/<chapter>/*.trans.txt: not a LibriSpeech directory"
    if next(transcript.parent.glob("*.flac"), None) is None:
        return (
            "is not a LibriSpeech directory: no audio (*.flac) beside "
            f"{transcript.relative_to(folder)}"
        )
    return None


def import_librispeech(folder: Path, skipped: Skipped) -> list[Entry]:
    """The utterances of a LibriSpeech subset (`librispeech_problem` says it is one)."""
    transcripts = sorted(folder.rglob("*.trans.txt"))
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
