"""A study's price before it is queued: each run's modelled time an epoch on a hardware profile,
its device-hours for train.epochs, and the study's total, each with its band, from stand-in
learners that replay every algorithm's schedule of requests without arithmetic
(asrscale.costmodel.replay), charged by the fitted cost model; and the jobs beside training
(feature extraction, calibration, decoding), at the rates the benchmark suite measured.

What a plan rests on: the profile's measured compute, carried to the study's model by its FLOPs a
frame (a profile measured on a smaller model is an upper bound of the time: a small model leaves a
GPU idle), each epoch's band holding that extrapolation's error (`extrapolation`); each subset's
size, from its extracted features where they exist, else LibriSpeech's published subset sizes or the
built-in corpus's utterances at their measured mean length (`subset_size`); each run's own band
(asrscale.costmodel.fitted.Band). Training: dev evaluation and checkpoints add a little, data
loading none beyond the profile's. A run is priced for every epoch it may take (newbob usually stops
a run earlier; a fixed-epoch schedule not), a halved grid's run for its share of its grid's
(`expected_epochs`). The other jobs: CPU work at the rates of `OTHER_JOBS` (a machine of another
speed scales them; a larger lexicon and LM search slower than the built-in corpus's), a decode's
forward passes on the profile's device. Which claims' halves the study can decide is the analysis's
to say (asrscale.analysis.decidable).
"""

import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import torch

from asrscale.config import paths
from asrscale.config.algorithms import algorithm_spec
from asrscale.config.runs import Run
from asrscale.config.sections import FeatureConfig, ModelConfig
from asrscale.config.study import Study
from asrscale.costmodel.fitted import GOSSIP, Band, bound_by
from asrscale.costmodel.replay import Workload, replay
from asrscale.data.features import read_frame_counts
from asrscale.errors import ConfigError
from asrscale.models import build_model, flops_per_frame
from asrscale.worlds.clock import Achieved, Compute, Hardware

#: the built-in corpus's mean utterance, in frames of 10 ms: the default corpus's 5,000 training
#: utterances hold 1.12 M frames (measured 2026-11-29 on its utt2num_frames)
BUILTIN_FRAMES_PER_UTTERANCE = 223
#: LibriSpeech's subsets (openslr.org/12, its CHAPTERS/SPEAKERS.TXT): utterances, hours, speakers
LIBRISPEECH = {
    "train-clean-100": (28_539, 100.6, 251),
    "train-clean-360": (104_014, 363.6, 921),
    "train-other-500": (148_688, 496.7, 1_166),
    "dev-clean": (2_703, 5.4, 40),
    "dev-other": (2_864, 5.3, 33),
    "test-clean": (2_620, 5.4, 40),
    "test-other": (2_939, 5.1, 33),
}
#: the jobs beside training, as the benchmark suite measured them (`python -m benchmarks` at 319fd4a
#: on the 2-core machine, AMD EPYC; benchmarks/results.json: the built-in corpus, its 0.66
#: M-parameter BLSTM, a word LM of its transcripts, beam 32): features extracted 1,841× faster than
#: real time a core (two jobs side by side); the decode's choice of LM weight and word bonus 13.25 s
#: for 16 pairs over 65,113 dev frames, its test set's beam search 1.03 s beyond the greedy decode's
#: 1.43 s over 227,586 frames (its calibration job, 17.9 s then, now repeats its timings)
OTHER_JOBS = {
    "features_real_time": 1841.0,
    "choose_s_per_frame_and_pair": 13.25 / 16 / 65_113,
    "beam_s_per_frame": 1.03 / 227_586,
    "calibrate_s": 25.1,
    "synthesise_s_per_utterance": 34.0 / 6_300,
}
#: each stage's band: its jobs' measured time over their price, on the studies run since the
#: rates were measured (Snakemake's benchmarks/ of each job, docs/benchmarks.md "The plan's other
#: jobs"), widened to hold 1. The built-in corpus's synthesis (34 s for the default study's 6,300
#: utterances at 4aaabf8) and the calibration job (25.1 s in claims-at-4 at 6d08e33: it repeats its
#: timings since issue 60) are priced at those studies' own times, the others at the benchmark's
OTHER_JOB_MISSES = {
    "synthesise": (1.0, 1.03),
    "features": (1.14, 1.18),
    "calibrate": (1.0, 1.0),
    "log-probs": (
        1.20,
        1.21,
    ),  # measured on the decode job, before its forward passes had their own
    "decode": (1.20, 1.21),
}
# a character set's size (letters, space, apostrophe, blank), where the corpus's is not yet made
TOKENS = 30
REPLAYED_STEPS = (
    64  # a learner's steps replayed (fewer where an epoch has fewer); the rest in proportion
)
#: how much less time a FLOP may take on a model larger than the one a profile's compute was
#: measured on, where no efficiency curve (`compute.by_size`) says: the best the H100 measured of
#: the default BLSTM, one model at batch 2048 (5.26 M frames/s, docs/gpus.md), over its rate at
#: the calibrated batch of 32 (0.957 M frames/s, profiles.yaml): a larger model fills the GPU
#: better, and no better than that
LARGER_MODEL_GAIN = 5.26 / 0.957


@dataclass(frozen=True)
class CorpusSize:
    utterances: int
    frames: int  # of 10 ms
    source: str  # what the size rests on

    @property
    def hours(self) -> float:
        return self.frames / 360_000


def subset_size(study: Study, subset: str = "train") -> CorpusSize:
    """A subset's size: from its extracted features, else LibriSpeech's published sizes of the
    subsets its sources name, else the built-in corpus's utterances at their mean length."""
    extracted = Path(study.at(paths.FEATURES, subset=subset))
    if (extracted / "utt2num_frames").is_file():
        frames = read_frame_counts(extracted)
        return CorpusSize(len(frames), sum(frames.values()), f"its features ({extracted})")
    if not study.imported:
        utterances = study.config["corpus"]["builtin"]["utterances"][subset]
        return CorpusSize(
            utterances,
            utterances * BUILTIN_FRAMES_PER_UTTERANCE,
            f"the built-in corpus's {utterances:,} utterances at their mean length",
        )
    found = [LIBRISPEECH.get(Path(source["path"]).name) for source in study.sources(subset)]
    if any(size is None for size in found):
        key = f"corpus.subsets.{subset.replace('test-', 'test.')}"
        raise ConfigError(
            f"asrscale plan: {key}: its size is known only once its features are extracted "
            "(snakemake ... features), or for LibriSpeech's subsets"
        )
    # corpus.speakers.<subset> keeps a source's first speakers: its share of the subset's, at its
    # mean per speaker
    kept = study.config["corpus"]["speakers"].get(subset.split("-")[0])
    shares = [min(1.0, kept / speakers) if kept else 1.0 for _, _, speakers in found]
    utterances = round(sum(n * share for (n, _, _), share in zip(found, shares)))
    hours = sum(h * share for (_, h, _), share in zip(found, shares))
    said = f", its first {kept} speakers of each at their mean share" if kept else ""
    return CorpusSize(
        utterances, round(hours * 360_000), f"LibriSpeech's published subset sizes{said}"
    )


def _model_size(settings: dict) -> dict:
    """The model's parameters and forward FLOPs a frame, built on the meta device (no memory)."""
    model, features = ModelConfig(**settings["model"]), FeatureConfig(**settings["features"])
    with torch.device("meta"):
        built = build_model(model, features.dim, TOKENS)
    return {
        "parameters": sum(p.numel() for p in built.parameters()),
        "flops_per_frame": flops_per_frame(model, features.dim, TOKENS),
    }


def extrapolation(compute: Compute, flops: float) -> tuple[float, float]:
    """The band of a model's compute time where the profile's measured compute is carried to it
    (`flops` a frame; `Compute.seconds_per_frame`), as factors on that time: none at a size
    measured; between two sizes measured (an efficiency curve, `by_size`), the time at either's
    efficiency; beyond them, from the time at the nearest size's efficiency (an upper bound for a
    larger model, which fills a GPU better, and a lower one for a smaller) to the time a frame of
    that size itself (a larger model takes no less a frame, a smaller no more), a larger model at
    most `LARGER_MODEL_GAIN` times as efficient."""
    curve = sorted({(compute.flops_per_frame, compute.backward_s_per_frame), *compute.by_size})
    sizes = [size for size, _ in curve]
    if any(math.isclose(flops, size, rel_tol=0.01) for size in sizes):
        return 1.0, 1.0
    if flops > sizes[-1]:
        return max(sizes[-1] / flops, 1 / LARGER_MODEL_GAIN), 1.0
    if flops < sizes[0]:
        return 1.0, sizes[0] / flops
    above = next(index for index, size in enumerate(sizes) if size > flops)
    priced = compute.seconds_per_frame(flops)
    either = [seconds * flops / size / priced for size, seconds in curve[above - 1 : above + 1]]
    return min(either), max(either)


def extrapolation_said(compute: Compute, flops: float) -> str:
    """What `extrapolation` holds for a model of `flops` a frame, in words ("" where nothing)."""
    fewest, most = extrapolation(compute, flops)
    if fewest == most == 1.0:
        return ""
    measured = compute.flops_per_frame
    why = (
        "between the efficiencies its calibration measured at the sizes either side"
        if compute.by_size
        else "a larger model fills a GPU better, at most as the H100 measured the default model "
        "at batch 2048 (docs/gpus.md); a smaller one no worse a frame"
    )
    return (
        f"the profile's compute was measured on a model of {measured / 1e6:.2f} MFLOP a frame, "
        f"this study's has {flops / 1e6:.2f} ({flops / measured:.1f}×): each epoch's band holds "
        f"its arithmetic at {fewest:.2f}-{most:.2f} times its price carried over ({why})"
    )


def expected_epochs(study: Study, run: Run, epochs: int) -> float:
    """The epochs a run trains at most: a halved grid's run (study.tuning.halving) its rung's, and
    the rest as often as its grid keeps a run (which ones go on is not known before)."""
    tuned = study.halved_grid(run)
    if tuned is None:
        return epochs
    rung, keep = study.halving["epoch"], study.halving["keep"]
    return rung + (epochs - rung) * keep / len(study.halved_runs(tuned))


def price(study: Study, hardware: Hardware, size: CorpusSize, band: Band) -> pd.DataFrame:
    """Every run the study trains, priced on `hardware` (see the module)."""
    rows = []
    for run in study.trained():
        settings = study.run_settings(run)
        train, learners = settings["train"], run.learners
        steps = math.ceil(size.utterances / (learners * train["batch_size"]))
        frames_per_step = round(size.frames / size.utterances * train["batch_size"])
        replayed_steps = min(steps, REPLAYED_STEPS)
        workload = Workload(
            **_model_size(settings),
            frames_per_step=frames_per_step,
            steps=replayed_steps,
            optimizer=train["optimizer"],
        )
        found = replay(
            run.algorithm,
            learners,
            workload,
            hardware,
            settings["options"],
            prefetch=train["prefetch"],
        )
        epoch_s = found.seconds * steps / replayed_steps
        outside = 1 - found.split["compute"] / sum(found.split.values())
        ranks = learners + algorithm_spec(run.algorithm).servers
        used = {hardware.node_link.transport} if ranks > 1 else set()
        used |= {hardware.network_link.transport} if ranks > hardware.learners_per_node else set()
        bound = bound_by(outside, ranks > hardware.learners_per_node, learners)
        low, high = band.of(1.0, outside, used, run.algorithm in GOSSIP, bound)
        fewest, most = extrapolation(hardware.compute, workload.flops_per_frame)
        # the compute's share of the time moved by its extrapolation to this model (`fewest` to
        # `most` times it), each edge with the links' band's
        low, high = (
            low / ((1 - outside) * most + outside),
            high / ((1 - outside) * fewest + outside),
        )
        epochs = expected_epochs(study, run, train["epochs"])
        hours = epoch_s * epochs * ranks / 3600
        rows.append(
            {
                "algorithm": run.algorithm,
                "variant": run.variant,
                "learners": learners,
                "seed": run.seed,
                "global_batch": algorithm_spec(run.algorithm).global_batch(
                    learners, train["batch_size"]
                ),
                "ranks": ranks,
                "parameters": workload.parameters,
                "optimizer": train["optimizer"],
                "lr": train["lr"],
                "epoch_s": epoch_s,
                "epoch_s_low": epoch_s / high,
                "epoch_s_high": epoch_s / low,
                "epochs": epochs,
                "budget": train["epochs"],  # its schedule's, a halved grid's run's too
                "schedule": train["schedule"],
                "device_hours": hours,
                "device_hours_low": hours / high,
                "device_hours_high": hours / low,
                "outside_share": outside,
                "bound_by": bound,
            }
        )
    return pd.DataFrame(rows)


@dataclass(frozen=True)
class Plan:
    """A study's price: each run's (`runs`), the training set's size and the jobs beside training
    (`others`)."""

    study: str
    size: CorpusSize
    runs: pd.DataFrame
    others: pd.DataFrame
    carried: str = ""  # what the epochs' bands hold of the compute's extrapolation to the model


def plan(study: Study, hardware: str) -> Plan:
    """The price of `study` on the profile `hardware` (its own or built in)."""
    runs = price_on(study, hardware)
    profile = Hardware.from_config(hardware, study.config["hardware"][hardware])
    others = other_jobs(study, profile)
    flops = _model_size(study.run_settings(study.trained()[0]))["flops_per_frame"]
    carried = extrapolation_said(profile.compute, flops)
    return Plan(study.name, subset_size(study), runs, others, carried)


def other_jobs(study: Study, hardware: Hardware) -> pd.DataFrame:
    """The jobs beside training, each stage's count and CPU-hours at `OTHER_JOBS`' rates (a
    decode's forward passes in device-hours on `hardware`), each with its band (`OTHER_JOB_MISSES`):
    the built-in corpus's synthesis, every subset's features, the calibration, and each decoded run:
    its log-probabilities on the device, then its beam search on CPUs (the dev grid's every pair,
    then the test sets)."""
    sizes = {subset: subset_size(study, subset) for subset in study.subsets}
    audio_hours = sum(size.hours for size in sizes.values())
    dev = sizes["dev"].frames
    tests = sum(sizes[name].frames for name in study.test_sets)
    pairs = len(study.config["decode"]["lm_weights"]) * len(study.config["decode"]["word_bonuses"])
    search_s = (
        dev * pairs * OTHER_JOBS["choose_s_per_frame_and_pair"]
        + tests * OTHER_JOBS["beam_s_per_frame"]
    )
    model = _model_size(study.run_settings(study.trained()[0]))
    rates = hardware.compute.rates_for(model)
    forward_s = Achieved.fitted().forward_share * rates["backward_s_per_frame"] * (dev + 2 * tests)
    decoded = len(
        {study.trained_as(run) for run in study.runs()}
    )  # each run reported, from its best model
    stages = [] if study.imported else [_synthesis(study)]
    stages += [
        {
            "stage": "features",
            "jobs": study.feature_jobs * len(sizes),
            "cpu_hours": audio_hours / OTHER_JOBS["features_real_time"],
            "device_hours": 0.0,
            "rests_on": f"{audio_hours:,.1f} hours of audio in {len(sizes)} subsets, "
            f"{OTHER_JOBS['features_real_time']:,.0f}× real time a core",
        },
        {
            "stage": "calibrate",
            "jobs": 1,
            "cpu_hours": 0.0,
            "device_hours": OTHER_JOBS["calibrate_s"] / 3600,
            "rests_on": "claims-at-4's calibration job",
        },
        {
            "stage": "log-probs",
            "jobs": decoded,
            "cpu_hours": 0.0,
            "device_hours": decoded * forward_s / 3600,
            "rests_on": f"{dev + tests:,} dev and test frames' forward passes on {hardware.name}",
        },
        {
            "stage": "decode",
            "jobs": decoded,
            "cpu_hours": decoded * search_s / 3600,
            "device_hours": 0.0,
            "rests_on": f"{dev:,} dev frames × {pairs} pairs of LM weight and word bonus, "
            f"{tests:,} test frames; a job's wall time its CPU-hours over its processes",
        },
    ]
    table = pd.DataFrame(stages)
    bands = pd.DataFrame(
        [_widened(OTHER_JOB_MISSES[stage]) for stage in table.stage], columns=["low", "high"]
    )
    return table.assign(
        **{
            f"{hours}_{edge}": table[hours] * bands[edge]
            for hours in ("cpu_hours", "device_hours")
            for edge in bands
        }
    )


def _synthesis(study: Study) -> dict:
    """The built-in corpus's synthesis: every subset's utterances, at `OTHER_JOBS`' rate."""
    utterances = sum(study.config["corpus"]["builtin"]["utterances"].values())
    return {
        "stage": "synthesise",
        "jobs": study.synthesis_jobs,
        "cpu_hours": utterances * OTHER_JOBS["synthesise_s_per_utterance"] / 3600,
        "device_hours": 0.0,
        "rests_on": f"{utterances:,} utterances of the built-in corpus, the default study's rate",
    }


def _widened(misses: tuple[float, float]) -> tuple[float, float]:
    """A stage's band as factors of its price: its measured misses, widened to hold the price
    itself."""
    return min(1.0, misses[0]), max(1.0, misses[1])


def price_on(study: Study, hardware: str) -> pd.DataFrame:
    """`price` on the profile named `hardware`; a ConfigError where it cannot price the study."""
    profiles = study.config["hardware"]
    if hardware not in profiles:
        raise ConfigError(
            f"--hardware {hardware!r} is not a profile: one of {sorted(profiles)}, or one of your "
            "own under hardware: in a config file (docs/gpus.md: a hardware profile of your own "
            "GPU)"
        )
    profile = Hardware.from_config(hardware, profiles[hardware])
    if profile.device != "dedicated":
        raise ConfigError(
            f"--hardware {hardware}: a plan needs a profile whose devices state their "
            "compute (device: dedicated), as h100's do"
        )
    return price(study, profile, subset_size(study), Band.fitted())
