"""The importers and the feature stage fuzzed: seeded random corpora, well-formed and malformed, of
every format mixed into one subset. The property: import and feature_config either finish with every
bad utterance listed with its file and line (or audio) in skipped.tsv, or stop with a one-line
named error; never a traceback, and never an utterance dropped without a word."""

import gzip
import json
import math
import random
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
import soundfile

from asrscale.data.badinput import BadInput
from asrscale.data.corpus.sources import import_subset
from asrscale.data.datadir import read_data_dir
from asrscale.data.features import extract_part
from helpers import bad_input_policy, feature_config, import_settings

CASES = 150  # a fixed budget, seeded: the same cases on every run (about 8 s on 2 cores)
FORMATS = (
    "kaldi",
    "kaldi_segments",
    "librispeech",
    "manifest_tsv",
    "manifest_jsonl",
    "lhotse",
    "lhotse_cuts",
)
GOOD_AUDIO = ("good",) * 12 + ("flac", "stereo", "low_rate", "pipe")
BAD_AUDIO = ("failing_pipe", "silent", "short", "empty", "corrupt", "truncated", "missing")
AUDIO = GOOD_AUDIO + BAD_AUDIO
SPANS = [None] * 6 + [
    (0.1, 0.6),
    (0.2, 0.9),
    (0.0, 99.0),
    (-1.0, 0.5),
    (0.6, 0.2),
    (0.3, 0.3),
    (math.nan, 0.5),
    (0.4, math.inf),
]
TEXTS = ["turn the lights on"] * 3 + [
    "OPEN THE DOOR, please!",
    "café au lait",
    "",
    "   ",
    "!!! ...",
    b"caf\xe9 bad bytes",
]
IDS = ["{n}", "{n}", "{n}", "utt-{n}", "Ü{n}", "{n} spaced", "x" * 80 + "{n}"]


@dataclass
class Utterance:
    id: str
    text: str | bytes
    audio: str  # a path or a command ending in "|"
    span: tuple | None
    speaker: str
    names: set = field(
        default_factory=set
    )  # what the importers may call it: its id, or a "file:line"


class Case:
    """One random corpus: sources of random formats, utterances with random faults."""

    def __init__(self, seed: int, root: Path, signals: list[np.ndarray]):
        self.rng, self.root, self.signals = random.Random(seed), root, signals
        self.utterances: list[Utterance] = []
        self.counter = 0
        self.sources = [self.source(index) for index in range(self.rng.randint(1, 3))]

    def pick(self, options):
        return self.rng.choice(options)

    def audio(self, kind: str, folder: Path) -> str:
        """An audio file of `kind` in `folder`, good or faulty: its path, or a command that reads
        it."""
        self.counter += 1
        path = self.written(kind, folder / f"a{self.counter}.wav", self.pick(self.signals))
        if kind == "truncated":
            path.write_bytes(path.read_bytes()[: len(path.read_bytes()) // 2])
        if kind == "missing":
            path.unlink()
        return {"pipe": f"cat {path} |", "failing_pipe": f"cat {path}.gone |"}.get(kind, str(path))

    def written(self, kind: str, path: Path, signal: np.ndarray) -> Path:
        """The file of an audio kind as it is written, before a truncated one is cut or a missing
        one removed: `signal` at its rate and channels, or bytes that are not audio."""
        if kind in ("good", "pipe", "truncated", "failing_pipe", "missing"):
            soundfile.write(path, signal, 16000)
        elif kind == "flac":
            path = path.with_suffix(".flac")
            soundfile.write(path, signal, 16000)
        elif kind == "stereo":
            soundfile.write(path, np.stack([signal, signal], 1), 16000)
        elif kind == "low_rate":
            soundfile.write(path, signal[::2], 8000)
        elif kind == "silent":
            soundfile.write(path, np.zeros_like(signal), 16000)
        elif kind == "short":
            soundfile.write(path, signal[:800], 16000)
        elif kind == "empty":
            soundfile.write(path, signal[:0], 16000)
        elif kind == "corrupt":
            path.write_bytes(self.rng.randbytes(self.rng.choice([0, 3, 400])))
        return path

    def utterance(self, folder: Path, spaced_ids: bool, spans: bool) -> Utterance:
        self.counter += 1
        ids = IDS if spaced_ids else [i for i in IDS if " " not in i]
        if self.utterances and self.rng.random() < 0.08:  # the same id again
            utt = self.pick(self.utterances).id
        else:
            utt = self.pick(ids).format(n=self.counter)
        span = self.pick(SPANS) if spans else None
        made = Utterance(
            utt,
            self.pick(TEXTS),
            self.audio(self.pick(AUDIO), folder),
            span,
            f"s{self.counter % 3}",
        )
        self.utterances.append(made)
        return made

    def lines(self, path: Path, lines: list[bytes], owners: list[Utterance | None]) -> None:
        """Write `lines` with random faults: blank lines, garbage, duplicates; each utterance
        may be named by any line that carries it."""
        out, named = [], []
        for line, owner in zip(lines, owners):
            roll = self.rng.random()
            if roll < 0.05:
                out.append(b"")
                named.append(None)
            elif roll < 0.1:
                out.append(
                    self.pick([b"\xff\xfe\xfd", b"garbage", b"{not json", b"[1, 2]", b"\t\t"])
                )
                named.append(None)
            out.append(line)
            named.append(owner)
            if roll > 0.95:
                out.append(line)
                named.append(owner)
        for number, owner in enumerate(named, 1):
            if owner is not None:
                owner.names.add(f"{path.name}:{number}")
        data = b"".join(line + b"\n" for line in out)
        path.write_bytes(gzip.compress(data) if path.suffix == ".gz" else data)

    def source(self, index: int) -> dict:
        kind = self.pick(FORMATS)
        folder = self.root / f"source{index}"
        folder.mkdir(parents=True)
        prefix = self.pick(["", "", f"p{index}-"])
        count = self.rng.randint(1, 6)
        if kind == "librispeech":
            path = self.librispeech(folder, count)
        elif kind.startswith("kaldi"):
            path = self.kaldi(folder, count, kind == "kaldi_segments")
        elif kind.startswith("manifest"):
            path = self.manifest(folder, count, kind == "manifest_jsonl")
        else:
            path = self.lhotse(folder, count, kind == "lhotse_cuts")
        for made in self.utterances:
            made.names |= {made.id, prefix + made.id}
        return {
            "format": kind.split("_")[0] if kind != "kaldi_segments" else "kaldi",
            "path": str(path),
            "prefix": prefix,
        }

    @staticmethod
    def encoded(text) -> bytes:
        return text if isinstance(text, bytes) else text.encode()

    def kaldi(self, folder: Path, count: int, segmented: bool) -> Path:
        made = [self.utterance(folder, spaced_ids=False, spans=segmented) for _ in range(count)]
        rolls = {
            id(u): self.rng.random() for u in made
        }  # a few orphans: audio with no text, or text with none
        keep = [u for u in made if rolls[id(u)] > 0.08]
        in_text = [u for u in made if not 0.08 < rolls[id(u)] < 0.16]
        if segmented:
            wav = [f"r{made.index(u)} {u.audio}".encode() for u in keep]
            segments = [
                (
                    f"{u.id} r{made.index(u)} "
                    + ("{:g} {:g}".format(*u.span) if u.span else "0 -1")
                ).encode()
                for u in keep
            ]
            self.lines(folder / "segments", segments, keep)
        else:
            wav = [f"{u.id} {u.audio}".encode() for u in keep]
        self.lines(folder / "wav.scp", wav, keep)
        self.lines(
            folder / "text", [u.id.encode() + b" " + self.encoded(u.text) for u in in_text], in_text
        )
        if self.rng.random() < 0.5:
            self.lines(folder / "utt2spk", [f"{u.id} {u.speaker}".encode() for u in made], made)
        return folder

    def librispeech(self, folder: Path, count: int) -> Path:
        chapter = folder / "7" / "11"
        chapter.mkdir(parents=True)
        lines, owners = [], []
        for index in range(count):
            made = self.utterance(chapter, spaced_ids=False, spans=False)
            made.id = f"7-11-{index:04d}"
            flac = chapter / f"{made.id}.flac"
            if Path(made.audio).is_file():
                Path(made.audio).rename(flac)
            if not flac.exists() or self.rng.random() > 0.1:  # else: audio with no transcript
                lines.append(made.id.encode() + b" " + self.encoded(made.text))
                owners.append(made)
        self.lines(chapter / "7-11.trans.txt", lines, owners)
        return folder

    def manifest(self, folder: Path, count: int, json_lines: bool) -> Path:
        made = [self.utterance(folder, spaced_ids=True, spans=True) for _ in range(count)]
        if json_lines:
            rows = []
            for u in made:
                row = {
                    "id": u.id,
                    "path": u.audio,
                    "text": u.text if isinstance(u.text, str) else None,
                }
                if u.span:
                    row.update(start=u.span[0], end=u.span[1])
                for key in self.rng.sample(
                    ["id", "text", "speaker", "path", "start"], self.rng.choice([0, 0, 0, 1])
                ):
                    row[key] = self.pick(
                        [None, 5, True, [1], "", "nan"]
                    )  # a field missing or of the wrong type
                rows.append(json.dumps(row).encode())
            path = folder / self.pick(["m.jsonl", "m.jsonl.gz"])
            self.lines(path, rows, made)
        else:
            rows = []
            for u in made:
                start, end = u.span or ("", "")
                rows.append(
                    b"\t".join(
                        [
                            u.id.encode(),
                            u.audio.encode(),
                            self.encoded(u.text),
                            f"{start}".encode(),
                            f"{end}".encode(),
                        ]
                    )
                )
            path = folder / "m.tsv"
            self.lines(path, [b"id\tpath\ttext\tstart\tend"] + rows, [None] + made)
        for u in made:  # an id the manifest lacks is made from the audio's name
            stem = Path(u.audio.split()[1] if u.audio.endswith("|") else u.audio).stem
            u.names |= {stem} | (
                {f"{stem}-{round(u.span[0] * 100):07d}"}
                if u.span and math.isfinite(u.span[0])
                else set()
            )
        return path

    def lhotse(self, folder: Path, count: int, cuts: bool) -> Path:
        made = [self.utterance(folder, spaced_ids=True, spans=True) for _ in range(count)]
        recordings, supervisions = [], []
        for index, u in enumerate(made):
            source = (
                {"type": "command", "source": u.audio[:-1].strip()}
                if u.audio.endswith("|")
                else {"type": "file", "source": u.audio}
            )
            recording = {
                "id": f"rec{index}",
                "sources": [{"channels": [0], **source}],
                "sampling_rate": 16000,
                "num_samples": 16000,
                "duration": 1.0,
            }
            fault = self.rng.random()
            if fault < 0.05:
                recording["sources"] = [source, source]
            elif fault < 0.1:
                recording["transforms"] = [{"name": "Speed", "kwargs": {"factor": 1.1}}]
            elif fault < 0.15:
                source["type"] = "url"
            start, end = u.span or (0.0, 0.5)
            text = u.text if isinstance(u.text, str) else 7  # not a string: a bad supervision
            supervision = {
                "id": u.id,
                "recording_id": f"rec{index}",
                "start": start,
                "duration": end - start,
                "channel": 0,
                "text": text,
                "speaker": u.speaker,
            }
            if self.rng.random() < 0.1:
                del supervision[self.pick(["id", "recording_id", "start", "duration"])]
            recordings.append(recording)
            supervisions.append(supervision)
        if cuts:
            cut_lines = [
                {
                    "id": f"cut{i}",
                    "start": 0.0,
                    "duration": 1.0,
                    "supervisions": [s],
                    "recording": r,
                }
                for i, (s, r) in enumerate(zip(supervisions, recordings))
            ]
            lines = [json.dumps(cut).encode() for cut in cut_lines]
            path = folder / "c_cuts_train.jsonl.gz"
            self.lines(path, lines, made)
            return path
        self.lines(
            folder / "c_recordings_train.jsonl", [json.dumps(r).encode() for r in recordings], made
        )
        path = folder / "c_supervisions_train.jsonl"
        self.lines(path, [json.dumps(s).encode() for s in supervisions], made)
        return path


def rows(report: Path) -> dict[str, str]:
    """utt -> where, of a skipped-utterance report."""
    return {
        line.split("\t")[0]: line.split("\t")[2] for line in report.read_text().splitlines()[1:]
    }


@pytest.fixture(scope="module")
def signals(corpus):
    data = read_data_dir(corpus / "data" / "train")
    return [soundfile.read(data.wav[u])[0] for u in sorted(data.text)[:4]]


def test_random_corpora_import_and_extract_or_stop_in_one_line(signals, tmp_path):
    outcomes = {
        "finished": 0,
        "stopped at import": 0,
        "stopped at features": 0,
        "skipped at features": 0,
    }
    for seed in range(CASES):
        case = Case(seed, tmp_path / f"case{seed}", signals)
        out = tmp_path / f"out{seed}"
        # each stage's policy drawn on its own, so that both stages stop in some cases
        bad_input, at_features = (
            case.pick(
                [{"max_fraction": 1.0}] * 5 + [{"max_fraction": 0.3}] * 3 + [{"policy": "stop"}, {}]
            )
            for _ in range(2)
        )
        try:
            data = import_subset(case.sources, import_settings(bad_input=bad_input), out / "data")
        except BadInput as error:  # a stop: one line, naming what
            assert "\n" not in str(error) and str(error), (seed, error)
            outcomes["stopped at import"] += 1
            continue
        skipped = rows(out / "data" / "skipped.tsv")
        for where in skipped.values():
            assert str(case.root) in where, (
                seed,
                where,
            )  # a file of the case's corpus, with its line
        for made in case.utterances:  # none dropped without a word
            assert made.names & (set(data.text) | set(skipped)), (
                seed,
                made,
                sorted(skipped),
                sorted(data.text),
            )
        data = read_data_dir(out / "data")  # what the feature stage reads
        try:
            extract_part(
                data,
                feature_config(),
                0,
                1,
                out / "part0",
                bad_input_policy(
                    at_features.get("policy", "skip"), at_features.get("max_fraction", 0.05)
                ),
            )
        except BadInput as error:
            assert "\n" not in str(error) and str(error), (seed, error)
            outcomes["stopped at features"] += 1
            continue
        extracted = set(Path(f"{out / 'part0'}.frames").read_text().split()[::2])
        left_out = rows(Path(f"{out / 'part0'}.skipped"))
        assert set(data.text) == extracted | set(left_out), seed
        outcomes["finished"] += 1
        outcomes["skipped at features"] += len(left_out)
    print(outcomes)
    assert all(outcomes.values()), outcomes  # the cases reach every outcome
