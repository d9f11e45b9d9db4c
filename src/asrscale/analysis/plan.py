"""A study's price before it is queued: each run's modelled time an epoch on a hardware profile,
its device-hours for train.epochs, and the study's total, each with its band, from stand-in
learners that replay every algorithm's schedule of requests without arithmetic
(asrscale.training.replay), charged by the fitted cost model.

What a plan rests on: the profile's measured compute, carried to the study's model by its FLOPs a
frame (a profile measured on a smaller model is an upper bound of the time: a small model leaves a
GPU idle); the training set's size, from its extracted features where they exist, else LibriSpeech's
published subset sizes or the built-in corpus's utterances at their measured mean length
(`corpus_size`); each run's own band (asrscale.analysis.fitted.Band). Training time only: dev
evaluation and checkpoints add a little, data loading none beyond the profile's. A run is priced
for every epoch it may take (newbob usually stops a run earlier; a fixed-epoch schedule not).
Beside the price, which claims' halves the study can decide with its runs, seeds and worlds.
"""

import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import torch

from asrscale.analysis.decidable import decidable
from asrscale.analysis.fitted import Band
from asrscale.analysis.measures import GOSSIP
from asrscale.config import paths
from asrscale.config.algorithms import algorithm_spec
from asrscale.config.sections import FeatureConfig, ModelConfig
from asrscale.config.study import Study
from asrscale.data.features import read_frame_counts
from asrscale.errors import ConfigError
from asrscale.models import build_model, flops_per_frame
from asrscale.training.replay import Workload, replay
from asrscale.worlds.costmodel import Hardware

#: the built-in corpus's mean utterance, in frames of 10 ms: the default corpus's 5,000 training
#: utterances hold 1.12 M frames (measured 2026-11-29 on its utt2num_frames)
BUILTIN_FRAMES_PER_UTTERANCE = 223
#: LibriSpeech's training subsets (openslr.org/12, its CHAPTERS/SPEAKERS.TXT): utterances, hours, speakers
LIBRISPEECH = {"train-clean-100": (28_539, 100.6, 251), "train-clean-360": (104_014, 363.6, 921),
               "train-other-500": (148_688, 496.7, 1_166)}  # fmt: skip
TOKENS = 30  # a character set's size (letters, space, apostrophe, blank), where the corpus's is not yet made
REPLAYED_STEPS = 64  # a learner's steps replayed (fewer where an epoch has fewer); the rest in proportion


@dataclass(frozen=True)
class CorpusSize:
    utterances: int
    frames: int  # of 10 ms
    source: str  # what the size rests on

    @property
    def hours(self) -> float:
        return self.frames / 360_000


def corpus_size(study: Study) -> CorpusSize:
    """The training set's size: from its extracted features, else LibriSpeech's published sizes of
    the subsets its sources name, else the built-in corpus's utterances at their mean length."""
    extracted = Path(study.at(paths.FEATURES, subset="train"))
    if (extracted / "utt2num_frames").is_file():
        frames = read_frame_counts(extracted)
        return CorpusSize(len(frames), sum(frames.values()), f"its features ({extracted})")
    if not study.imported:
        utterances = study.config["corpus"]["builtin"]["utterances"]["train"]
        return CorpusSize(utterances, utterances * BUILTIN_FRAMES_PER_UTTERANCE,
                          f"the built-in corpus's {utterances:,} utterances at their mean length")  # fmt: skip
    found = [LIBRISPEECH.get(Path(source["path"]).name) for source in study.sources("train")]
    if any(size is None for size in found):
        raise ConfigError("asrscale plan: corpus.subsets.train: its size is known only once its features are "
                          "extracted (snakemake ... features), or for LibriSpeech's training subsets")  # fmt: skip
    # corpus.speakers.train keeps a source's first speakers: its share of the subset's, at its mean per speaker
    kept = study.config["corpus"]["speakers"].get("train")
    shares = [min(1.0, kept / speakers) if kept else 1.0 for _, _, speakers in found]
    utterances = round(sum(n * share for (n, _, _), share in zip(found, shares)))
    hours = sum(h * share for (_, h, _), share in zip(found, shares))
    said = f", its first {kept} speakers of each at their mean share" if kept else ""
    return CorpusSize(utterances, round(hours * 360_000), f"LibriSpeech's published subset sizes{said}")


def _model_size(settings: dict) -> dict:
    """The model's parameters and forward FLOPs a frame, built on the meta device (no memory)."""
    model, features = ModelConfig(**settings["model"]), FeatureConfig(**settings["features"])
    with torch.device("meta"):
        built = build_model(model, features.dim, TOKENS)
    return {"parameters": sum(p.numel() for p in built.parameters()),
            "flops_per_frame": flops_per_frame(model, features.dim, TOKENS)}  # fmt: skip


def price(study: Study, hardware: Hardware, size: CorpusSize, band: Band) -> pd.DataFrame:
    """Every run the study trains, priced on `hardware` (see the module)."""
    rows = []
    for run in study.trained():
        settings = study.run_settings(run)
        train, learners = settings["train"], run.learners
        steps = math.ceil(size.utterances / (learners * train["batch_size"]))
        frames_per_step = round(size.frames / size.utterances * train["batch_size"])
        replayed_steps = min(steps, REPLAYED_STEPS)
        workload = Workload(**_model_size(settings), frames_per_step=frames_per_step, steps=replayed_steps,
                            optimizer=train["optimizer"])  # fmt: skip
        found = replay(run.algorithm, learners, workload, hardware, settings["options"], prefetch=train["prefetch"])
        epoch_s = found.seconds * steps / replayed_steps
        outside = 1 - found.split["compute"] / sum(found.split.values())
        ranks = learners + algorithm_spec(run.algorithm).servers
        used = {hardware.node_link.transport} if ranks > 1 else set()
        used |= {hardware.network_link.transport} if ranks > hardware.learners_per_node else set()
        low, high = band.of(1.0, outside, used, run.algorithm in GOSSIP)
        hours = epoch_s * train["epochs"] * ranks / 3600
        rows.append({"algorithm": run.algorithm, "variant": run.variant, "learners": learners, "seed": run.seed,
                     "ranks": ranks, "epoch_s": epoch_s, "epoch_s_low": epoch_s / high, "epoch_s_high": epoch_s / low,
                     "epochs": train["epochs"], "schedule": train["schedule"], "device_hours": hours,
                     "device_hours_low": hours / high, "device_hours_high": hours / low,
                     "outside_share": outside})  # fmt: skip
    return pd.DataFrame(rows)


def plan(config: dict, hardware: str) -> tuple[pd.DataFrame, CorpusSize, str, pd.DataFrame]:
    """The price of the study `config` describes on the profile `hardware` (its own or built in),
    and which claims' halves it can decide (asrscale.analysis.decidable)."""
    study = Study(config, check_paths=False)
    size = corpus_size(study)
    return price_on(study, hardware), size, study.name, decidable(study, size.utterances)


def price_on(study: Study, hardware: str) -> pd.DataFrame:
    """`price` on the profile named `hardware`; a ConfigError where it cannot price the study."""
    profiles = study.config["hardware"]
    if hardware not in profiles:
        raise ConfigError(
            f"--hardware {hardware!r} is not a profile: one of {sorted(profiles)}, or one of your "
            "own under hardware: in a config file (docs/gpus.md: a hardware profile of your own GPU)"
        )
    profile = Hardware.from_config(hardware, profiles[hardware])
    if profile.device != "dedicated":
        raise ConfigError(f"--hardware {hardware}: a plan needs a profile whose devices state their "
                          "compute (device: dedicated), as h100's do")  # fmt: skip
    return price(study, profile, corpus_size(study), Band.fitted())
