"""Kaldi-style data directories: the one interface between corpora and everything downstream.

A data dir holds `wav.scp` (utt → audio path), `text` (utt → transcript), `utt2spk`,
`spk2utt` and `utt2dur` (seconds). Every importer, the built-in corpus included, writes one.
"""

from dataclasses import dataclass, field
from pathlib import Path

from asrscale.io import atomic_write_text


@dataclass
class DataDir:
    wav: dict[str, str] = field(default_factory=dict)
    text: dict[str, str] = field(default_factory=dict)
    utt2spk: dict[str, str] = field(default_factory=dict)
    utt2dur: dict[str, float] = field(default_factory=dict)

    def add(self, utt: str, wav: str, text: str, speaker: str, duration: float) -> None:
        if utt in self.wav:
            raise ValueError(f"duplicate utterance id {utt!r}")
        self.wav[utt], self.text[utt], self.utt2spk[utt], self.utt2dur[utt] = wav, text, speaker, duration

    def merge(self, other: "DataDir") -> None:
        for utt in other.wav:
            self.add(utt, other.wav[utt], other.text[utt], other.utt2spk[utt], other.utt2dur[utt])

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
        atomic_write_text(folder / "utt2dur", "".join(f"{u} {self.utt2dur[u]:.3f}\n" for u in sorted(self.utt2dur)))
        atomic_write_text(folder / "spk2utt", "".join(f"{s} {' '.join(us)}\n" for s, us in self.spk2utt.items()))


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
    for name, table in (("text", text), ("utt2spk", utt2spk), ("utt2dur", durations)):
        if table.keys() != wav.keys():
            missing = sorted(wav.keys() ^ table.keys())[:3]
            raise ValueError(f"{folder / name} and {folder / 'wav.scp'} list different utterances, e.g. {missing}")
    return DataDir(wav, text, utt2spk, durations)
