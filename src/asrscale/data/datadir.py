"""Kaldi-style data directories: the one interface between corpora and everything downstream.

A data dir holds `wav.scp` (recording → audio path, or a command ending in `|` that writes the
audio), `text` (utt → transcript), `utt2spk`, `spk2utt`, `utt2dur` (seconds) and, when utterances
are cut from longer recordings, `segments` (utt → recording, start and end in seconds; an end of
-1 is the end of the recording). Without `segments` each utterance is its own recording; with it,
every utterance is listed there (Kaldi's rule), an utterance that is a whole recording as the
segment from 0 to -1, so that sources with and without segments mix in one data dir. An utterance of
a lhotse source is its lhotse cut instead (`cuts.jsonl.gz`, a manifest lhotse reads: its audio with
the cut's transforms, or its features), in none of wav.scp and segments. Every importer, the
built-in corpus included, writes one.
"""

import gzip
import json
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
    cuts: dict[str, dict] = field(default_factory=dict)  # utt -> its lhotse cut, instead of audio

    def add(
        self,
        utt: str,
        wav: str | None,
        text: str,
        speaker: str,
        duration: float,
        segment=None,
        feats: str | None = None,
        cut: dict | None = None,
    ) -> None:
        """One utterance; `segment` (recording, start, end or None) when it is cut from `wav`;
        `feats` (a feats.scp entry) for an utterance known by its features, not its audio; `cut`
        (a lhotse cut, as a dict) for one lhotse loads."""
        if utt in self.text:
            raise ValueError(f"duplicate utterance id {utt!r}")
        recording = segment[0] if segment else utt
        if wav is not None and self.wav.setdefault(recording, wav) != wav:
            raise ValueError(f"recording {recording!r} is both {self.wav[recording]!r} and {wav!r}")
        if segment:
            self.segments[utt] = segment
        if feats is not None:
            self.feats[utt] = feats
        if cut is not None:
            self.cuts[utt] = cut
        self.text[utt], self.utt2spk[utt], self.utt2dur[utt] = text, speaker, duration

    def audio(self, utt: str) -> tuple[str, float, float | None]:
        """Where an utterance's audio is: (audio, start, end or None) in seconds."""
        recording, start, end = self.segments.get(utt, (utt, 0.0, None))
        return self.wav[recording], start, end

    def merge(self, other: "DataDir") -> None:
        for utt in other.text:
            wav = other.audio(utt)[0] if not other.feats and utt not in other.cuts else None
            self.add(
                utt,
                wav,
                other.text[utt],
                other.utt2spk[utt],
                other.utt2dur[utt],
                other.segments.get(utt),
                other.feats.get(utt),
                other.cuts.get(utt),
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
        cuts = folder / "cuts.jsonl.gz"
        if self.cuts:
            # each cut under its utterance's id (a source's prefix included)
            lines = "".join(json.dumps({**self.cuts[u], "id": u}) + "\n" for u in sorted(self.cuts))
            with gzip.open(f"{cuts}.tmp", "wt", encoding="utf-8") as out:
                out.write(lines)
            Path(f"{cuts}.tmp").rename(cuts)
        else:
            cuts.unlink(missing_ok=True)
        if self.segments:
            whole = {
                u: (u, 0.0, None)
                for u in self.text
                if u not in self.segments and u not in self.feats and u not in self.cuts
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
    cuts = {}
    if (folder / "cuts.jsonl.gz").is_file():
        with gzip.open(folder / "cuts.jsonl.gz", "rt", encoding="utf-8") as lines:
            cuts = {cut["id"]: cut for cut in map(json.loads, lines)}
    # the utterances: those of segments, else of feats.scp (features without audio), else of
    # wav.scp; and lhotse's cuts
    listing = "segments" if segments else "feats.scp" if feats else "wav.scp"
    utterances = (segments or feats or wav).keys() | cuts.keys()
    for name, table in (("text", text), ("utt2spk", utt2spk), ("utt2dur", durations)):
        if table.keys() != utterances:
            missing = sorted(utterances ^ table.keys())[:3]
            raise ValueError(
                f"{folder / name} and {folder / listing} list different utterances, e.g. {missing}"
            )
    return DataDir(wav, text, utt2spk, durations, segments, feats, cuts)
