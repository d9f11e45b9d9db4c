import json
import os
import shutil
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import pytest

from asrscale.config.schema import build, defaults
from asrscale.config.sections import BadInputPolicy, FeatureConfig, ModelConfig, RunConfig, SyntheticConfig, TrainConfig
from asrscale.data.corpus.synthetic import synthesise_part
from asrscale.data.datadir import read_table
from asrscale.data.features import combine_parts, extract_part, read_frame_counts
from asrscale.data.shard import write_shards
from asrscale.data.tokens import Tokens
from asrscale.training.run import RunPaths

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def tiny_corpus_config(**changes) -> SyntheticConfig:
    settings = dict(
        seed=7, sample_rate=16000, utterances={"train": 96, "dev": 16, "test": 16}, utterances_per_speaker=8,
        vocabulary=3000, held_out_variants={"dev": 8, "test": 12}, snr_db=(15, 30), rate_wpm=(150, 190), pitch=(30, 70),
    )  # fmt: skip
    settings.update(changes)
    return SyntheticConfig(**settings)


@pytest.fixture(scope="session")
def corpus(tmp_path_factory) -> Path:
    """A tiny real corpus: eSpeak audio, Kaldi data dirs, features, tokens and shards for 1, 2 and 4 learners."""
    root = tmp_path_factory.mktemp("corpus")
    for subset, data in synthesise_part(tiny_corpus_config(), 0, 1, root / "audio").items():
        data.write(root / "data" / subset)
        extract_part(data, build(FeatureConfig, "features"), 0, 1, root / "feats" / subset / "part0",
                     build(BadInputPolicy, "corpus.bad_input"))  # fmt: skip
        combine_parts([root / "feats" / subset / "part0"], root / "feats" / subset)
    Tokens.from_texts(read_table(root / "data" / "train" / "text").values()).write(root / "tokens.txt")
    for learners in (1, 2, 4):
        write_shards(read_frame_counts(root / "feats" / "train"), learners, root / "shards" / f"P{learners}")
    return root


SMALL_MODEL = {"layers": 1, "units": 32}
QUICK = {"epochs": 2, "batch_size": 8, "optimizer": "adam", "lr": 3e-3, "log_interval": 4, "threads": 1,
         "device": "cpu"}  # fmt: skip
MPI_WORLD = {"kind": "mpi", "collectives": "auto", "timeout_s": 600, "node_size": None}


def model_config(**changes) -> ModelConfig:
    return build(ModelConfig, "model", **changes)


def run_config(algorithm: str = "seq", seed: int = 3, options: dict | None = None, model: dict = SMALL_MODEL,
               **train) -> RunConfig:  # fmt: skip
    """A run's settings as the study resolver makes them, over the schema's defaults: by default a
    small model trained quickly on the CPU."""
    return RunConfig(algorithm, options or {}, seed, build(TrainConfig, "train", **{**QUICK, **train}),
                     build(ModelConfig, "model", **model), build(FeatureConfig, "features"),
                     defaults("features")["cmvn"])  # fmt: skip


def run_paths(corpus: Path, shards: Path, out: Path) -> RunPaths:
    """A run's inputs in a corpus laid out as the `corpus` fixture's."""
    return RunPaths(corpus / "data" / "train", corpus / "data" / "dev", corpus / "feats" / "train",
                    corpus / "feats" / "dev", shards, corpus / "tokens.txt", out)  # fmt: skip


def corpus_arguments(corpus: Path, *subsets: str) -> list:
    """The arguments of `asrscale train` or `calibrate` that name subsets of the `corpus` fixture."""
    return [argument for name in subsets for argument in
            (f"--{name}-data", corpus / "data" / name, f"--{name}-feats", corpus / "feats" / name)]  # fmt: skip


def write_settings(path: Path, run: RunConfig, world: dict = MPI_WORLD) -> Path:
    """A run's settings file, as the workflow writes it for `asrscale train --settings`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({**asdict(run), "world": world}))
    return path


def mpiexec(ranks: int, *command, timeout: float = 300, check: bool = True) -> subprocess.CompletedProcess:
    """Run `command` on `ranks` real MPI ranks (the pip-installed MPICH), one thread each."""
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT / "src"))
    launcher = shutil.which("mpiexec", path=str(BIN)) or "mpiexec"
    result = subprocess.run(
        [launcher, "-n", str(ranks), *map(str, command)], capture_output=True, text=True, timeout=timeout, env=env
    )
    if check and result.returncode != 0:
        raise AssertionError(f"mpiexec -n {ranks} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
    return result


def run_snakemake(workdir: Path, *arguments, configfile: Path | list[Path], check=True) -> subprocess.CompletedProcess:
    """The workflow in `workdir` with a config file (or several, each over the ones before), on 2 cores."""
    configfiles = configfile if isinstance(configfile, list) else [configfile]
    command = [sys.executable, "-m", "snakemake", "--snakefile", ROOT / "Snakefile", "--directory", workdir,
               "--configfile", *configfiles, "--cores", "2", *arguments]  # fmt: skip
    result = subprocess.run(list(map(str, command)), capture_output=True, text=True, timeout=900)
    if check and result.returncode != 0:
        raise AssertionError(f"snakemake failed:\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}")
    return result


def write_own_corpora(corpus: Path, out: Path) -> dict[str, Path]:
    """A user's corpora, made from the tiny corpus's audio: its train set as a Kaldi data dir (one
    recording cut into segments, a piped wav.scp entry, FLAC and NIST SPHERE files), its dev set
    in the LibriSpeech layout, its test set as a TSV and a JSON-lines manifest. Transcripts are
    upper-case with punctuation, as corpora often are."""
    import json

    import numpy as np
    import soundfile

    from asrscale.data.datadir import read_data_dir

    def shout(text: str) -> str:
        return text.upper().replace(" ", ", ", 1) + "."

    train = read_data_dir(corpus / "data" / "train")
    kaldi = out / "kaldi_train"
    (kaldi / "audio").mkdir(parents=True)
    utts = sorted(train.text)
    joined = [soundfile.read(train.wav[u])[0] for u in utts[:3]]
    soundfile.write(kaldi / "audio" / "long.wav", np.concatenate(joined), 16000)
    wav, segments, start = {"long": "audio/long.wav"}, {}, 0.0
    for utt, audio in zip(utts[:3], joined):
        segments[utt] = f"long {start:.6f} {start + len(audio) / 16000:.6f}"
        start += len(audio) / 16000
    for index, utt in enumerate(utts[3:]):
        formats = {0: ("flac", "FLAC", "PCM_16"), 1: ("sph", "NIST", "PCM_16")}
        if index == 2:
            wav[utt] = f"cat {train.wav[utt]} |"
        elif index in formats:
            extension, kind, subtype = formats[index]
            soundfile.write(kaldi / "audio" / f"{utt}.{extension}", soundfile.read(train.wav[utt])[0], 16000,
                            format=kind, subtype=subtype)  # fmt: skip
            wav[utt] = f"audio/{utt}.{extension}"
        else:
            wav[utt] = train.wav[utt]
        segments[utt] = f"{utt} 0 -1"
    for name, table in (("wav.scp", wav), ("segments", segments), ("text", {u: shout(train.text[u]) for u in utts}),
                        ("utt2spk", train.utt2spk)):  # fmt: skip
        (kaldi / name).write_text("".join(f"{key} {table[key]}\n" for key in sorted(table)))
    shutil.copy(corpus / "feats" / "train" / "feats.scp", kaldi / "feats.scp")  # for features.kind "kaldi"

    dev = read_data_dir(corpus / "data" / "dev")
    libri = out / "LibriSpeech" / "dev-tiny"
    speakers = {s: 100 + i for i, s in enumerate(sorted(set(dev.utt2spk.values())))}
    for speaker, number in speakers.items():
        chapter = libri / str(number) / "7"
        chapter.mkdir(parents=True)
        lines = []
        for index, utt in enumerate(u for u in sorted(dev.text) if dev.utt2spk[u] == speaker):
            soundfile.write(chapter / f"{number}-7-{index:04d}.flac", soundfile.read(dev.wav[utt])[0], 16000)
            lines.append(f"{number}-7-{index:04d} {dev.text[utt].upper()}\n")
        (chapter / f"{number}-7.trans.txt").write_text("".join(lines))

    test = read_data_dir(corpus / "data" / "test")
    rows = [
        {"id": u, "path": test.wav[u], "text": shout(test.text[u]), "speaker": test.utt2spk[u]}
        for u in sorted(test.text)
    ]
    half = len(rows) // 2
    tsv = out / "test.tsv"
    tsv.write_text(
        "path\ttext\tspeaker\tid\n"
        + "".join(f"{r['path']}\t{r['text']}\t{r['speaker']}\t{r['id']}\n" for r in rows[:half])
    )
    jsonl = out / "test.jsonl"
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in rows[half:]))
    return {"kaldi": kaldi, "librispeech": libri, "tsv": tsv, "jsonl": jsonl}
