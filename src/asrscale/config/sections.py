"""The settings of each stage, one shape each: a dataclass per section of config.yaml, and one per
stage's settings file (`STAGES`) and per run's world (`WORLDS`). The study resolver
(`asrscale.config.study`) makes each stage's and run's settings in that shape and writes them into
its settings file; the stage reads them back into it (`read_settings_of`). Their defaults are the
schema's (schema.yaml): every field is required here, so that a setting can never take a second
default in code."""

import typing
from dataclasses import dataclass, fields, is_dataclass
from pathlib import Path

from asrscale.errors import ConfigError
from asrscale.io import read_settings

#: the corpus formats a source may have (corpus.subsets' `format`): each an importer in
#: asrscale.data.corpus.formats, which checks its registry against these names
CORPUS_FORMATS = ("kaldi", "librispeech", "manifest", "lhotse")


@dataclass(frozen=True)
class SyntheticConfig:
    """corpus.builtin: the built-in corpus (asrscale.data.corpus.synthetic)."""

    seed: int
    sample_rate: int
    utterances: dict  # subset -> count
    utterances_per_speaker: int
    vocabulary: int  # content words of the grammar
    held_out_variants: dict  # "dev"/"test" -> number of voice variants reserved for that subset
    snr_db: tuple  # (min, max) of the additive noise
    rate_wpm: tuple  # (min, max) speaking rate
    pitch: tuple  # (min, max) eSpeak pitch, 0-99


@dataclass(frozen=True)
class TextNormalisation:
    """corpus.text: applied to every transcript on import, so training targets and scoring
    references agree (asrscale.data.corpus.sources.normalise)."""

    lowercase: bool
    punctuation: str  # "strip": drop it (apostrophes inside words stay); "keep"


@dataclass(frozen=True)
class BadInputPolicy:
    """corpus.bad_input: what happens to an utterance that cannot be used."""

    policy: str  # "skip": leave the utterance out and report it; "stop": stop at the first
    max_fraction: float  # more than this fraction of a subset bad stops the run even when skipping

    def __post_init__(self):
        if self.policy not in ("skip", "stop"):
            raise ConfigError(
                f"corpus.bad_input.policy must be 'skip' or 'stop', not {self.policy!r}"
            )


@dataclass(frozen=True)
class FeatureConfig:
    """features: as extracted (their normalisation, `features.cmvn`, is applied when they are
    loaded, so that changing it extracts nothing again)."""

    # "fbank" (log-mel), "mfcc" (13 cepstra plus deltas and double deltas), or "kaldi": each
    # utterance's features from its Kaldi data dir's feats.scp (`kaldi_dim` of them), not its audio
    kind: str
    bins: int  # the mel filterbank's bands
    kaldi_dim: int | None
    sample_rate: int
    window_ms: float
    shift_ms: float
    dither: float  # fbank: Kaldi's dither at int16's scale (0: off)
    channel: int  # of multi-channel audio

    @property
    def dim(self) -> int:
        return {"mfcc": 39, "kaldi": self.kaldi_dim}.get(self.kind, self.bins)


@dataclass(frozen=True)
class ImportSettings:
    """What importing a subset of your own corpus needs besides its sources."""

    features: FeatureConfig  # rate, channel; kind "kaldi": feats.scp
    text: TextNormalisation
    bad_input: BadInputPolicy
    speakers: int | None  # each source's first speakers alone (corpus.speakers.<subset>); None: all


@dataclass(frozen=True)
class ModelConfig:
    """model: the acoustic model (asrscale.models)."""

    kind: str  # "lstm" or "dnn"
    layers: int
    units: int
    bidirectional: bool
    stack: int
    context: int  # dnn only: stacked frames spliced on each side


@dataclass(frozen=True)
class TrainConfig:
    """train: one policy for every algorithm."""

    epochs: int
    batch_size: int  # per learner
    batch_order: (
        str  # "like-lengths" (rounds of like lengths) or "own" (each learner its own order)
    )
    optimizer: str  # "adam" or "sgd" (with momentum)
    lr: float
    momentum: float
    lr_scaling: str  # how lr follows the learners an update combines: "linear", "sqrt" or "none"
    warmup_epochs: float  # from lr to the scaled rate, linearly
    # "cosine" (to lr_final of the peak at the last of `epochs`), "exponential" (lr_decay an epoch,
    # for `epochs`) or "newbob" (until converged, `epochs` at most)
    schedule: str
    lr_decay: float  # exponential: multiplied into the rate after every epoch
    lr_final: float  # cosine: the last epoch's rate, a share of the peak
    newbob: dict  # newbob: start_halving, stop (relative dev-loss gains) and halving (the factor)
    # "dev_loss" or "dev_ter": the dev measure that picks the run's model and a tuning's rate
    best_by: str
    clip_grad_norm: float  # 0 disables
    divergence_factor: float  # a loss above this times the untrained model's dev loss: diverged
    log_interval: int  # steps
    checkpoint_steps: (
        int  # also checkpoint every this many steps within an epoch (0: at its end only)
    )
    prefetch: int  # batches built ahead by a thread; 0 builds them in the learner's thread
    device: str  # "cpu", "cuda", or "auto" (the world places its learners)
    threads: int  # torch threads per learner; 0: the machine's cores shared among its learners
    noise_scale: dict  # share, batch_size, batches, smoothing (asrscale.training.noise_scale)

    def __post_init__(self):
        if self.checkpoint_steps % self.log_interval:  # checkpoints come at log lines
            raise ConfigError(
                f"train.checkpoint_steps ({self.checkpoint_steps}) must be a multiple of "
                f"train.log_interval ({self.log_interval})"
            )


@dataclass(frozen=True)
class RunConfig:
    """What one run trains: its settings file (but its world), as the resolver writes it."""

    algorithm: str
    options: dict  # the algorithm's own settings, every one (config.yaml algorithms.<name>)
    seed: int
    train: TrainConfig
    model: ModelConfig
    features: FeatureConfig
    cmvn: str  # features.cmvn: their normalisation, applied when they are loaded

    @classmethod
    def from_settings(cls, settings: dict) -> "RunConfig":
        """A run's settings file's run, its world aside (`world_of`)."""
        return from_settings(cls, {key: value for key, value in settings.items() if key != "world"})


@dataclass(frozen=True)
class DecodeSettings:
    """decode: both decodings of a run's test set (asrscale.decoding.decode)."""

    beam: int
    beam_threshold: float
    lm_weights: list[float]
    word_bonuses: list[float]
    device: str  # "cpu", or "auto": a GPU where the job has one


# each stage's settings file
@dataclass(frozen=True)
class ImportStage:
    """import-<subset>: the subset's sources (corpus.subsets.<subset>), and how they are
    imported."""

    sources: list
    features: FeatureConfig
    text: TextNormalisation
    bad_input: BadInputPolicy
    speakers: int | None

    @property
    def importing(self) -> ImportSettings:
        return ImportSettings(self.features, self.text, self.bad_input, self.speakers)


@dataclass(frozen=True)
class FeatureStage:
    """features: how a part of a subset is extracted, and what becomes of a bad utterance."""

    features: FeatureConfig
    bad_input: BadInputPolicy


@dataclass(frozen=True)
class CalibrationStage:
    """calibrate: the model and the training policy timed on this machine."""

    train: TrainConfig
    model: ModelConfig
    features: FeatureConfig
    cmvn: str


@dataclass(frozen=True)
class LanguageModelStage:
    """language-model: the word n-gram LM of decoding: estimated from the training transcripts
    (`source` "train", decode.lm), or a user's ARPA file (its path) folded as the transcripts are
    (`text`, corpus.text) and checked against the dev transcripts (`max_oov_rate`)."""

    source: str
    order: int
    text: TextNormalisation
    max_oov_rate: float


@dataclass(frozen=True)
class GatherStage:
    """gather: the study's runs (each as reported, the folder trained for it and its tuning's
    file), its sweeps' points, when a run counts as converged (report.*), and each tuned
    configuration's file of its grid and choice (study.tuning)."""

    runs: list
    sweeps: list
    test_sets: list  # every run's test sets (Study.test_sets)
    convergence: dict
    tunings: list


@dataclass(frozen=True)
class ReportStage:
    """report: its title, and the study's configuration that it shows."""

    title: str
    config: dict


@dataclass(frozen=True)
class HalvingStage:
    """halving: successive halving of every grid (study.tuning.halving): the epoch after which
    each grid is halved, and how many of its runs go on."""

    epoch: int
    keep: int


#: every stage's settings file, by stage ("import" for each import-<subset>)
STAGES = {
    "synthesise": SyntheticConfig,
    "import": ImportStage,
    "features": FeatureStage,
    "calibrate": CalibrationStage,
    "language-model": LanguageModelStage,
    "decode": DecodeSettings,
    "gather": GatherStage,
    "report": ReportStage,
    "halving": HalvingStage,
}


# a run's world (its settings file's `world`)
@dataclass(frozen=True)
class MPIWorldSettings:
    """Real MPI ranks (asrscale.worlds.mpi)."""

    kind: str  # "mpi"
    transport: str  # mpi.transport
    timeout_s: float  # mpi.timeout_s
    node_size: int | None  # study.node_size


@dataclass(frozen=True)
class SimulatedWorldSettings:
    """A simulated cluster (asrscale.worlds.simulated) on a hardware profile."""

    kind: str  # "simulated"
    learners: int
    hardware: dict  # the profile, its name included
    node_size: int | None  # study.node_size
    fuse_learners: str  # study.fuse_learners


WORLDS = {"mpi": MPIWorldSettings, "simulated": SimulatedWorldSettings}


def world_of(settings: dict) -> MPIWorldSettings | SimulatedWorldSettings:
    """A run's settings file's world."""
    return from_settings(WORLDS[settings["world"]["kind"]], settings["world"])


def from_settings(cls, settings: dict):
    """The dataclass `cls` of settings as a settings file holds them: each field from its key, a
    field that is itself a dataclass made the same way; a key missing or unknown is a TypeError
    naming it."""
    hints = typing.get_type_hints(cls)
    if unknown := sorted(set(settings) - {field.name for field in fields(cls)}):
        raise TypeError(f"{cls.__name__} has no setting {unknown}")
    return cls(
        **{
            name: from_settings(hints[name], value) if is_dataclass(hints[name]) else value
            for name, value in settings.items()
        }
    )


def read_settings_of(cls, path: Path):
    """The dataclass `cls` of a stage's settings file."""
    return from_settings(cls, read_settings(path))
