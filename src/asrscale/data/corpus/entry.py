"""What every importer of a corpus format yields (`Entry`s, each naming the file and line it came
from), the Kaldi-style listing that several formats share, and what the formats' checks of a
source's path share (`not_a_folder`, `not_a_listing`)."""

from dataclasses import dataclass
from pathlib import Path

from asrscale.data.badinput import Skipped


@dataclass(frozen=True)
class Entry:
    utt: str
    audio: str  # a file path, or a shell command ending in "|" that writes the audio to stdout
    text: str
    speaker: str
    where: str  # "file:line" that names its audio, for messages
    start: float = 0.0  # seconds into the recording (a segment)
    end: float | None = None  # None: to the end of the recording
    recording: str | None = None  # a segment's recording id; None: the utterance is the recording
    text_where: str | None = None  # "file:line" of its transcript, when not `where`
    feats: str | None = (
        None  # a Kaldi data dir's feats.scp entry (used when features.kind is "kaldi")
    )
    cut: dict | None = None  # a lhotse cut of the utterance alone, from which lhotse loads it


def not_a_folder(path: Path, what: str) -> str | None:
    """Why `path` is not the folder of a source (`what`, for the message); None where it is one."""
    if path.is_dir():
        return None
    return "does not exist" if not path.exists() else f"is a file, not a folder ({what})"


def not_a_listing(path: Path) -> str | None:
    """Why `path` cannot list utterances: it does not exist, is a folder or is empty; None where it
    can."""
    if not path.exists():
        return "does not exist"
    if not path.is_file():
        return "is a folder, not a file"
    return "is empty" if path.stat().st_size == 0 else None


def read_listing(path: Path, skipped: Skipped) -> dict[str, tuple[str, str]]:
    """A Kaldi-style table `key value...` as key -> (value, "file:line"). A line that is not
    UTF-8, and every line of a duplicated key, is reported to `skipped` and left out."""
    table, rejected = {}, set()
    for number, raw in enumerate(Path(path).read_bytes().splitlines(), 1):
        where = f"{path}:{number}"
        key = raw.split(maxsplit=1)[0].decode("utf-8", "replace") if raw.strip() else ""
        if not key:
            continue
        try:
            value = raw.decode("utf-8").strip().partition(" ")[2].strip()
        except UnicodeDecodeError as error:
            skipped.add(key, where, f"not valid UTF-8 ({error.reason} at byte {error.start})")
            rejected.add(key)
            continue
        if key in table or key in rejected:
            first = table.pop(key, (None, "an earlier line"))[1]
            skipped.add(key, where, f"duplicate id {key!r} (also at {first})")
            rejected.add(key)
            continue
        table[key] = (value, where)
    return table
