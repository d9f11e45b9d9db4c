"""What the tests share: the tiny corpus's and runs' settings, MPI and Snakemake launchers, the
simulated world's test profiles. Fixtures are conftest.py's; a test imports these by name."""

# the tests compute as every job does (study.cpu_arithmetic's default), pinned before torch computes
from asrscale import machine

machine.pin()

import copy
import dataclasses
import functools
import json
import os
import shutil
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import yaml

from asrscale.config.schema import MINIMAL, profile_defaults, validate
from asrscale.config.sections import (
    BadInputPolicy,
    FeatureConfig,
    ImportSettings,
    ModelConfig,
    RunConfig,
    SyntheticConfig,
    TextNormalisation,
    TrainConfig,
)
from asrscale.data.audio import read_audio, resample
from asrscale.data.corpus.synthetic import synthesise_part
from asrscale.data.datadir import read_table
from asrscale.data.features import combine_parts, extract_part, read_frame_counts
from asrscale.data.shard import write_shards
from asrscale.data.tokens import Tokens
from asrscale.models import build_model
from asrscale.training.fused.learners import fusers
from asrscale.training.run import RunPaths, train
from asrscale.worlds.clock import CostModel, Hardware
from asrscale.worlds.simulated import SimWorld

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def merged(*names: str) -> dict:
    """config.yaml with other files over it, key by key, as Snakemake merges --configfile."""

    def update(base: dict, over: dict) -> dict:
        for key, value in over.items():
            base[key] = (
                update(base.get(key, {}), value)
                if isinstance(value, dict) and key in base
                else value
            )
        return base

    config = yaml.safe_load((ROOT / "config.yaml").read_text())
    for name in names:
        update(config, yaml.safe_load((ROOT / name).read_text()))
    return config


def defaults(section: str, **changes) -> dict:
    """The defaults of the configuration's `section` (a dotted path: "train", "corpus.builtin"),
    with `changes` over them."""
    settings = validate(copy.deepcopy(MINIMAL))
    for key in section.split("."):
        settings = settings[key]
    return {**settings, **changes}


def build(cls, section: str, **changes):
    """The dataclass `cls` of a section's settings: its defaults with `changes` over them; the
    section's keys that are the workflow's (such as `jobs`) are left out."""
    names = {field.name for field in dataclasses.fields(cls)}
    if unknown := set(changes) - names:
        raise TypeError(f"{cls.__name__} has no setting {sorted(unknown)}")
    return cls(
        **{key: value for key, value in defaults(section, **changes).items() if key in names}
    )


def load_audio(
    audio: str, sample_rate: int, start: float = 0.0, end: float | None = None, channel: int = 0
):
    """An audio file's samples at `sample_rate` (read_audio, resampled)."""
    samples, rate = read_audio(audio, start, end, channel)
    if rate != sample_rate:
        samples = resample(samples, sample_rate, rate).astype(np.float32)
    return samples


def tiny_corpus_config(**changes) -> SyntheticConfig:
    settings = dict(
        seed=7,
        sample_rate=16000,
        utterances={"train": 96, "dev": 16, "test": 16},
        utterances_per_speaker=8,
        vocabulary=3000,
        held_out_variants={"dev": 8, "test": 12},
        snr_db=(15, 30),
        rate_wpm=(150, 190),
        pitch=(30, 70),
    )
    settings.update(changes)
    return SyntheticConfig(**settings)


SMALL_MODEL = {"layers": 1, "units": 32}
QUICK = {
    "epochs": 2,
    "batch_size": 8,
    "optimizer": "adam",
    "lr": 3e-3,
    "log_interval": 4,
    "threads": 1,
    "device": "cpu",
}
MPI_WORLD = {"kind": "mpi", "transport": "auto", "timeout_s": 600, "node_size": None}


def model_config(**changes) -> ModelConfig:
    return build(ModelConfig, "model", **changes)


def run_config(
    algorithm: str = "seq",
    seed: int = 3,
    options: dict | None = None,
    model: dict = SMALL_MODEL,
    **train,
) -> RunConfig:
    """A run's settings as the study resolver makes them, over the schema's defaults: by default a
    small model trained quickly on the CPU."""
    return RunConfig(
        algorithm,
        options or {},
        seed,
        build(TrainConfig, "train", **{**QUICK, **train}),
        build(ModelConfig, "model", **model),
        build(FeatureConfig, "features"),
        defaults("features")["cmvn"],
    )


def run_paths(corpus: Path, shards: Path, out: Path) -> RunPaths:
    """A run's inputs in a corpus laid out as the `corpus` fixture's."""
    return RunPaths(
        corpus / "data" / "train",
        corpus / "data" / "dev",
        corpus / "feats" / "train",
        corpus / "feats" / "dev",
        shards,
        corpus / "tokens.txt",
        out,
    )


def write_tiny_corpus(root: Path) -> Path:
    """A tiny real corpus under `root`: eSpeak audio, Kaldi data dirs, features, tokens and shards
    for 1, 2 and 4 learners."""
    for subset, data in synthesise_part(tiny_corpus_config(), 0, 1, root / "audio").items():
        data.write(root / "data" / subset)
        extract_part(
            data,
            build(FeatureConfig, "features"),
            0,
            1,
            root / "feats" / subset / "part0",
            build(BadInputPolicy, "corpus.bad_input"),
        )
        combine_parts([root / "feats" / subset / "part0"], root / "feats" / subset)
    Tokens.from_texts(read_table(root / "data" / "train" / "text").values()).write(
        root / "tokens.txt"
    )
    for learners in (1, 2, 4):
        write_shards(
            read_frame_counts(root / "feats" / "train"), learners, root / "shards" / f"P{learners}"
        )
    return root


def corpus_subset(corpus: Path, name: str = "train", cmvn: str = "global"):
    """A subset of the tests' corpus, normalised by the training set's statistics."""
    from asrscale.data.batches import Subset

    return Subset(
        corpus / "data" / name,
        corpus / "feats" / name,
        corpus / "feats" / "train",
        cmvn,
        Tokens.read(corpus / "tokens.txt"),
    )


def corpus_arguments(corpus: Path, *subsets: str) -> list:
    """The arguments of `asrscale train` or `calibrate` that name subsets of the `corpus`
    fixture."""
    return [
        argument
        for name in subsets
        for argument in (
            f"--{name}-data",
            corpus / "data" / name,
            f"--{name}-feats",
            corpus / "feats" / name,
        )
    ]


def write_settings(path: Path, run: RunConfig, world: dict = MPI_WORLD) -> Path:
    """A run's settings file, as the workflow writes it for `asrscale train --settings`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({**asdict(run), "world": world}))
    return path


def open_mpi(launcher: str) -> bool:
    version = subprocess.run([launcher, "--version"], capture_output=True, text=True)
    return "Open MPI" in version.stdout or "OpenRTE" in version.stdout


@functools.cache
def launcher_environment(launcher: str) -> dict:
    """What an mpiexec needs here: Open MPI's, to start ranks as root (CI's user) on a machine
    of fewer cores than ranks; MPICH's nothing."""
    if not open_mpi(launcher):
        return {}
    return {
        "OMPI_ALLOW_RUN_AS_ROOT": "1",
        "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
        "OMPI_MCA_rmaps_base_oversubscribe": "1",
    }


def default_launcher() -> str:
    """The mpiexec the MPI tests start ranks with: the mpich extra's, else the one on PATH."""
    return shutil.which("mpiexec", path=str(BIN)) or shutil.which("mpiexec") or "mpiexec"


def site_mpi() -> tuple[str, dict] | None:
    """The MPI that PATH finds outside this environment (a site's, as `module load` sets it): its
    mpiexec, and the environment in which mpi4py loads its library even where the mpich extra is
    installed (mpi4py's wheel dlopens MPI4PY_LIBMPI first: Open MPI's libmpi.so.40); None where
    PATH has none, or one whose library cannot be told apart from the extra's (an MPICH)."""
    folders = [f for f in os.environ["PATH"].split(os.pathsep) if f and Path(f) != BIN]
    launcher = shutil.which("mpiexec", path=os.pathsep.join(folders))
    if launcher is None:
        return None
    if open_mpi(launcher):
        return launcher, {**launcher_environment(launcher), "MPI4PY_LIBMPI": "libmpi.so.40"}
    return None if (BIN / "mpiexec").exists() else (launcher, {})


def mpiexec(
    ranks: int,
    *command,
    timeout: float = 300,
    check: bool = True,
    env: dict | None = None,
    launcher: str | None = None,
):
    """Run `command` on `ranks` real MPI ranks, one thread each, with `env` added to the
    environment: by `launcher`, or the mpich extra's mpiexec, else the one on PATH."""
    paths = os.pathsep.join([str(ROOT / "src"), str(ROOT / "tests")])
    launcher = launcher or default_launcher()
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "PYTHONPATH": paths,
        **launcher_environment(launcher),
        **(env or {}),
    }
    result = subprocess.run(
        [launcher, "-n", str(ranks), *map(str, command)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )
    if check and result.returncode != 0:
        raise AssertionError(
            f"mpiexec -n {ranks} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}"
        )
    return result


def run_snakemake(
    workdir: Path, *arguments, configfile: Path | list[Path], check=True
) -> subprocess.CompletedProcess:
    """The workflow in `workdir` with a config file (or several, each over the ones before), on 2
    cores."""
    configfiles = configfile if isinstance(configfile, list) else [configfile]
    command = [
        sys.executable,
        "-m",
        "snakemake",
        "--snakefile",
        ROOT / "Snakefile",
        "--directory",
        workdir,
        "--configfile",
        *configfiles,
        "--cores",
        "2",
        *arguments,
    ]
    result = subprocess.run(list(map(str, command)), capture_output=True, text=True, timeout=900)
    if check and result.returncode != 0:
        raise AssertionError(f"snakemake failed:\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}")
    return result


def write_own_corpora(corpus: Path, out: Path) -> dict[str, Path]:
    """A user's corpora, made from the tiny corpus's audio: its train set as a Kaldi data dir (one
    recording cut into segments, a piped wav.scp entry, FLAC and NIST SPHERE files), its dev set
    in the LibriSpeech layout, its test set as a TSV and a JSON-lines manifest. Transcripts are
    upper-case with punctuation, as corpora often are."""
    from asrscale.data.datadir import read_data_dir

    train, dev, test = (
        read_data_dir(corpus / "data" / subset) for subset in ("train", "dev", "test")
    )
    kaldi = _write_kaldi_corpus(train, out / "kaldi_train")
    shutil.copy(
        corpus / "feats" / "train" / "feats.scp", kaldi / "feats.scp"
    )  # for features.kind "kaldi"
    return {
        "kaldi": kaldi,
        "librispeech": _write_librispeech_corpus(dev, out / "LibriSpeech" / "dev-tiny"),
        **_write_manifests(test, out),
    }


def _shout(text: str) -> str:
    return text.upper().replace(" ", ", ", 1) + "."


def _write_kaldi_corpus(train, kaldi: Path) -> Path:
    import soundfile

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
            soundfile.write(
                kaldi / "audio" / f"{utt}.{extension}",
                soundfile.read(train.wav[utt])[0],
                16000,
                format=kind,
                subtype=subtype,
            )
            wav[utt] = f"audio/{utt}.{extension}"
        else:
            wav[utt] = train.wav[utt]
        segments[utt] = f"{utt} 0 -1"
    for name, table in (
        ("wav.scp", wav),
        ("segments", segments),
        ("text", {u: _shout(train.text[u]) for u in utts}),
        ("utt2spk", train.utt2spk),
    ):
        (kaldi / name).write_text("".join(f"{key} {table[key]}\n" for key in sorted(table)))
    return kaldi


def _write_librispeech_corpus(dev, libri: Path) -> Path:
    import soundfile

    speakers = {s: 100 + i for i, s in enumerate(sorted(set(dev.utt2spk.values())))}
    for speaker, number in speakers.items():
        chapter = libri / str(number) / "7"
        chapter.mkdir(parents=True)
        lines = []
        for index, utt in enumerate(u for u in sorted(dev.text) if dev.utt2spk[u] == speaker):
            soundfile.write(
                chapter / f"{number}-7-{index:04d}.flac", soundfile.read(dev.wav[utt])[0], 16000
            )
            lines.append(f"{number}-7-{index:04d} {dev.text[utt].upper()}\n")
        (chapter / f"{number}-7.trans.txt").write_text("".join(lines))
    return libri


def _write_manifests(test, out: Path) -> dict[str, Path]:
    rows = [
        {"id": u, "path": test.wav[u], "text": _shout(test.text[u]), "speaker": test.utt2spk[u]}
        for u in sorted(test.text)
    ]
    half = len(rows) // 2
    tsv, jsonl = out / "test.tsv", out / "test.jsonl"
    lines = [f"{r['path']}\t{r['text']}\t{r['speaker']}\t{r['id']}\n" for r in rows[:half]]
    tsv.write_text("path\ttext\tspeaker\tid\n" + "".join(lines))
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in rows[half:]))
    return {"tsv": tsv, "jsonl": jsonl}


# this machine: 1 ms per frame at one thread, 0.5 ms at two; a dedicated device: 0.5 ms per frame
# for the model calibrated here; 1 Gb/s links without latency: 1 MB takes 8 ms
MODEL = {"flops_per_frame": 1e6, "parameters": 100_000}


CALIBRATION = {
    "device": "cpu",
    "device_name": "cpu",
    "cores": 2,
    "gpus": 0,
    "data_frames_per_s": 10_000.0,
    "by_threads": {
        "1": {
            "backward_s_per_frame": 1e-3,
            "backward_s_per_batch": 0.0,
            "update_s": 0.01,
            "precondition_s": 0.1,
            "frames_per_s": 1000.0,
        },
        "2": {
            "backward_s_per_frame": 5e-4,
            "backward_s_per_batch": 0.0,
            "update_s": 0.005,
            "precondition_s": 0.05,
            "frames_per_s": 2000.0,
        },
    },
    "model": MODEL,
}


DEVICE = {
    "measured_on": "a test device",
    **MODEL,
    "backward_s_per_batch": 0.0,
    "backward_s_per_frame": 5e-4,
    "update_s": 0.005,
    "precondition_s": 0.05,
    "relative_speed": 1.0,
}


LINK = {"latency_us": 0, "bandwidth_gbps": 1.0}


GPU = dict(
    device="dedicated", compute=DEVICE, node_link=LINK, network_link=LINK, learners_per_node=8
)


def train_command(corpus, out, shards, algorithm="ssgd", options=None, world=MPI_WORLD, **train):
    """`asrscale train` of a quick run on the tiny corpus, its settings written beside its
    folder."""
    run = run_config(algorithm, options=options, **{"log_interval": 2, **train})
    settings = write_settings(out.parent / f"{out.name}.settings.json", run, world)
    return [
        sys.executable,
        "-m",
        "asrscale",
        "train",
        "--settings",
        settings,
        *corpus_arguments(corpus, "train", "dev"),
        "--shards",
        shards,
        "--tokens",
        corpus / "tokens.txt",
        "--out",
        out,
    ]


def same_models(a, b) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[name], b[name]) for name in a)


class Killed(BaseException):
    """A job's end by a signal, as far as the trainer can tell: no clean-up of its own runs."""


def kill_at_loss(monkeypatch, calls: int, fused: bool = False):
    """The run is killed as it computes its `calls`-th loss (`fused`: fused learners' losses, many
    in one computation)."""
    import asrscale.training.fused.learners as fusing
    import asrscale.training.learner as trainer

    real_loss, count = trainer.ctc_loss, iter(range(1, 10**9))
    if fused:  # learners stacked, or SSGD's as one batch (which computes them stacked only where
        # their models differ)
        for name in ("fused_gradients", "one_batch_gradients"):
            monkeypatch.setattr(fusing, name, counting(getattr(fusing, name), calls, count))
        return

    def loss(*args, **kwargs):
        if next(count) == calls:
            raise Killed
        return real_loss(*args, **kwargs)

    monkeypatch.setattr(trainer, "ctc_loss", loss)


def counting(gradients, calls: int, count):
    """`gradients` (a fuser of learners' gradients) killed as it computes the `calls`-th loss of
    `count`."""

    def counted(jobs, **options):
        if any(next(count) == calls for _ in jobs):
            raise Killed
        return gradients(jobs, **options)

    return counted


# what differs between a run and its resumed twin: the clock
TIMES = [
    "time_s",
    "frames_per_s",
    "wall_s",
    "compute_s",
    "communication_s",
    "data_wait_s",
    "idle_s",
]


def diverged_run(out):
    """What a diverged run left: its record's `diverged`, its metrics and model, its checkpoints."""
    record = json.loads((out / "run.json").read_text())
    model = torch.load(out / "model.pt", weights_only=False)["model"]
    return (
        record["diverged"],
        pd.read_csv(out / "metrics.tsv", sep="\t"),
        model,
        sorted(out.glob("checkpoints/*/*")),
    )


def import_settings(
    features: dict | None = None,
    text: dict | None = None,
    bad_input: dict | None = None,
    speakers: int | None = None,
) -> ImportSettings:
    """Import settings: the configuration's defaults with changes."""
    return ImportSettings(
        build(FeatureConfig, "features", **(features or {})),
        build(TextNormalisation, "corpus.text", **(text or {})),
        build(BadInputPolicy, "corpus.bad_input", **(bad_input or {})),
        speakers,
    )


def feature_config(**changes) -> FeatureConfig:
    return build(FeatureConfig, "features", **changes)


def bad_input_policy(name: str, max_fraction: float = 0.05) -> BadInputPolicy:
    return BadInputPolicy(name, max_fraction)


def read_frame_counts_of_part(prefix):
    return {utt: int(n) for utt, n in read_table(prefix.with_suffix(".frames")).items()}


FUSED_CONFIGS = [
    model_config(units=16),
    model_config(units=16, bidirectional=False),
    model_config(kind="dnn", units=32),
]


def learners_and_batch(config, learners=3, batch=4, dim=40, tokens=12):
    """Three models of `config` and their batches, in double precision."""
    torch.manual_seed(0)
    models = [build_model(config, dim, tokens).double() for _ in range(learners)]
    features = torch.randn(learners, batch, 50, dim, dtype=torch.double)
    lengths = torch.randint(
        10, 51, (learners, batch)
    )  # each learner's batch padded to the longest of all
    return models, features, lengths


def stack(models) -> dict:
    return {
        k: torch.stack([m.state_dict()[k] for m in models]).requires_grad_()
        for k in models[0].state_dict()
    }


def simulate(
    corpus,
    out,
    algorithm,
    learners,
    fuse,
    device="cpu",
    instead=None,
    calibration=CALIBRATION,
    halving=None,
    **train_changes,
):
    """A run of 4 simulated learners; `fuse`: whether to fuse them as the world on `device` does
    (asrscale.training.fused.learners.fusers: gradients, updates, preconditionings;
    study.fuse_learners's value where a string), with the fusers of `instead` (by kind of request)
    in place of its own; a halved grid's run, its part `halving` (at its rung: no model or metrics
    yet, None)."""
    hardware = Hardware.from_config("here", profile_defaults(jitter=0.05))
    costs = CostModel(hardware, calibration, seed=3)
    options = {"period": 2} if algorithm == "kavg" else {}
    run = run_config(
        algorithm,
        options=options,
        device=device,
        **{"epochs": 1, "batch_size": 4, "log_interval": 2, **train_changes},
    )
    servers = 1 if algorithm == "asgd" else 0
    setting = fuse if isinstance(fuse, str) else "on"
    together = {**fusers(torch.device(device), setting), **(instead or {})} if fuse else None
    world = SimWorld(
        learners,
        costs,
        servers,
        node_size=2,
        prefetch=run.train.prefetch,
        name=algorithm,
        device=device,
        fusers=together,
    )
    paths = run_paths(corpus, corpus / "shards" / f"P{learners}", out)
    train(run, paths, world, halving)
    if halving is not None and halving.rung:
        return None, None
    return torch.load(out / "model.pt", weights_only=False)["model"], pd.read_csv(
        out / "metrics.tsv", sep="\t"
    )


# the local cluster has no slurmdbd for sacct to ask
WITHOUT_ACCOUNTING = [
    "--slurm-status-command",
    "squeue",
    "--slurm-init-seconds-before-status-checks",
    "2",
]


# jobs this machine can hold: a core and a GB a rank
LOCAL = {
    "default-resources": {"mem_mb": 2000, "runtime": 30},
    "set-resources": {
        "train": {"mem_mb_per_cpu": 1000, "runtime": 30},
        "train_rung": {"mem_mb_per_cpu": 1000, "runtime": 30},
        "decode": {"mem_mb": 2000},
        "features": {"mem_mb": 2000},
    },
    "set-threads": {"train": 1, "train_rung": 1, "calibrate": 1, "log_probs": 1, "decode": 1},
}


def site_profile(folder: Path, **changes) -> Path:
    """A user's copy of the shipped profile with their site's settings (`changes`: its keys, and
    under set-resources each rule's)."""
    profile = yaml.safe_load((ROOT / "slurm" / "config.yaml").read_text())
    for key, value in changes.items():
        if key == "set-resources":
            value = {
                rule: {**profile[key].get(rule, {}), **settings} for rule, settings in value.items()
            }
        profile[key] = {**profile.get(key, {}), **value}
    (folder / "profile").mkdir(exist_ok=True)
    (folder / "profile" / "config.yaml").write_text(yaml.safe_dump(profile))
    return folder / "profile"


def cluster_answers() -> bool:
    if shutil.which("sinfo") is None:
        return False
    return subprocess.run(["sinfo", "-h"], capture_output=True).returncode == 0


def word_errors(reference: str, hypothesis: str) -> int:
    """The words a hypothesis substitutes, deletes and inserts against its reference at the
    least: the textbook edit distance, row by row."""
    ref, hyp = reference.split(), hypothesis.split()
    row = list(range(len(hyp) + 1))
    for i, word in enumerate(ref, 1):
        diagonal, row[0] = row[0], i
        for j, said in enumerate(hyp, 1):
            diagonal, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, diagonal + (word != said))
    return row[-1]


def recomputed_wer(scores: Path, data: Path, decode: str = "lm") -> float:
    """The WER of a run's `decode` ("lm" or "greedy") recomputed from its hypotheses (`scores`: its
    test set's folder) against the test set's own transcripts (`data`: its Kaldi data dir), by
    `word_errors`: a check of a run's scores that shares neither the decode's scoring nor its
    references. Every test utterance must have been decoded once."""
    references = read_table(data / "text")
    header, *rows = [
        line.split("\t") for line in (scores / "hypotheses.tsv").read_text().splitlines()
    ]
    hypotheses = {row[0]: row[header.index(decode)] for row in rows}
    assert len(rows) == len(hypotheses) and hypotheses.keys() == references.keys(), scores
    errors = sum(word_errors(references[utt], hypothesis) for utt, hypothesis in hypotheses.items())
    return errors / sum(len(text.split()) for text in references.values())
