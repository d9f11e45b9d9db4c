"""Kaldi-style data directories: the one interface between corpora and everything downstream.

A data dir holds `wav.scp` (recording → audio path, or a command ending in `|` that writes the
audio), `text` (utt → transcript), `utt2spk`, `spk2utt`, `utt2dur` (seconds) and, when utterances
are cut from longer recordings, `segments` (utt → recording, start and end in seconds; an end of
-1 is the end of the recording). Without `segments` each utterance is its own recording; with it,
every utterance is listed there (Kaldi's rule), an utterance that is a whole recording as the
segment from 0 to -1, so that sources with and without segments mix in one data dir. Every
importer, the built-in corpus included, writes one.
"""

from dataclasses import dataclass, field
from pathlib import Path

from asrscale.io import atomic_write_text


@dataclass
class DataDir:
    wav: dict[str, str] = field(default_factory=dict)  # recording -> audio
    text: dict[str, str] = field(default_factory=dict)
    utt2spk: dict[str, str] = field(default_factory=dict)
    utt2dur: dict[str, float] = field(default_factory=dict)
    segments: dict[str, tuple[str, float, float | None]] = field(default_factory=dict)
    feats: dict[str, str] = field(
        default_factory=dict
    )  # utt -> Kaldi features, used instead of audio

    def add(
        self,
        utt: str,
        wav: str | None,
        text: str,
        speaker: str,
        duration: float,
        segment=None,
        feats: str | None = None,
    ) -> None:
        """One utterance; `segment` (recording, start, end or None) when it is cut from `wav`;
        `feats` (a feats.scp entry) for an utterance known by its features, not its audio."""
        if utt in self.text:
            raise ValueError(f"duplicate utterance id {utt!r}")
        recording = segment[0] if segment else utt
        if wav is not None and self.wav.setdefault(recording, wav) != wav:
            raise ValueError(f"recording {recording!r} is both {self.wav[recording]!r} and {wav!r}")
        if segment:
            self.segments[utt] = segment
        if feats is not None:
            self.feats[utt] = feats
        self.text[utt], self.utt2spk[utt], self.utt2dur[utt] = text, speaker, duration

    def audio(self, utt: str) -> tuple[str, float, float | None]:
        """Where an utterance's audio is: (audio, start, end or None) in seconds."""
        recording, start, end = self.segments.get(utt, (utt, 0.0, None))
        return self.wav[recording], start, end

    def merge(self, other: "DataDir") -> None:
        for utt in other.text:
            wav = other.audio(utt)[0] if not other.feats else None
            self.add(
                utt,
                wav,
                other.text[utt],
                other.utt2spk[utt],
                other.utt2dur[utt],
                other.segments.get(utt),
                other.feats.get(utt),
            )

    @property
    def spk2utt(self) -> dict[str, list[str]]:
        result: dict[str, list[str]] = {}
        for utt in sorted(self.utt2spk):
            result.setdefault(self.utt2spk[utt], []).append(utt)
        return result

    def write(self, folder: Path) -> None:
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        for name, table in (("wav.scp", self.wav), ("text", self.text), ("utt2spk", self.utt2spk)):
            atomic_write_text(folder / name, "".join(f"{u} {table[u]}\n" for u in sorted(table)))
        atomic_write_text(
            folder / "utt2dur",
            "".join(f"{u} {self.utt2dur[u]:.3f}\n" for u in sorted(self.utt2dur)),
        )
        atomic_write_text(
            folder / "spk2utt", "".join(f"{s} {' '.join(us)}\n" for s, us in self.spk2utt.items())
        )
        if self.feats:
            atomic_write_text(
                folder / "feats.scp", "".join(f"{u} {self.feats[u]}\n" for u in sorted(self.feats))
            )
        if self.segments:
            whole = {
                u: (u, 0.0, None)
                for u in self.text
                if u not in self.segments and u not in self.feats
            }
            lines = (
                f"{u} {r} {s:.6f} {-1 if e is None else e:.6f}\n"
                for u, (r, s, e) in sorted({**self.segments, **whole}.items())
            )
            atomic_write_text(folder / "segments", "".join(lines))
        else:
            (folder / "segments").unlink(missing_ok=True)  # from an earlier import that had them


def read_table(path: Path) -> dict[str, str]:
    """A Kaldi table file: `key value...` per line. Errors name the file and line."""
    table: dict[str, str] = {}
    with open(path, encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            key, _, value = line.rstrip("\n").partition(" ")
            if not key:
                raise ValueError(f"{path}:{number}: empty line, expected '<key> <value>'")
            if key in table:
                raise ValueError(f"{path}:{number}: duplicate key {key!r}")
            table[key] = value
    return table


def read_data_dir(folder: Path) -> DataDir:
    folder = Path(folder)
    wav, text, utt2spk = (read_table(folder / name) for name in ("wav.scp", "text", "utt2spk"))
    durations = {u: float(d) for u, d in read_table(folder / "utt2dur").items()}
    segments = {}
    if (folder / "segments").is_file():
        for utt, value in read_table(folder / "segments").items():
            recording, start, end = value.split()
            segments[utt] = (recording, float(start), None if float(end) < 0 else float(end))
    feats = read_table(folder / "feats.scp") if (folder / "feats.scp").is_file() else {}
    # the utterances: those of segments, else of feats.scp (features without audio), else of wav.scp
    listing = "segments" if segments else "feats.scp" if feats else "wav.scp"
    utterances = segments or feats or wav
    for name, table in (("text", text), ("utt2spk", utt2spk), ("utt2dur", durations)):
        if table.keys() != utterances.keys():
            missing = sorted(utterances.keys() ^ table.keys())[:3]
            raise ValueError(
                f"{folder / name} and {folder / listing} list different utterances, e.g. {missing}"
            )
    return DataDir(wav, text, utt2spk, durations, segments, feats)
