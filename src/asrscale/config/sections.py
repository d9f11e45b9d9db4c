"""The settings of each stage, a dataclass per section of config.yaml. The study resolver
(`asrscale.config.study`) writes them into a stage's or a run's settings file; the stage reads
them back into these. Their defaults are the schema's (schema.yaml): every field is required here,
so that a setting can never take a second default in code."""

from dataclasses import dataclass

from asrscale.errors import ConfigError


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
            raise ConfigError(f"corpus.bad_input.policy must be 'skip' or 'stop', not {self.policy!r}")


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

    @classmethod
    def from_settings(cls, settings: dict) -> "ImportSettings":
        return cls(FeatureConfig(**settings["features"]), TextNormalisation(**settings["text"]),
                   BadInputPolicy(**settings["bad_input"]))  # fmt: skip


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
    optimizer: str  # "adam" or "sgd" (with momentum)
    lr: float
    momentum: float
    lr_scaling: str  # how lr follows the learners an update combines: "linear", "sqrt" or "none"
    warmup_epochs: float  # from lr to the scaled rate, linearly
    schedule: str  # "exponential" (lr_decay an epoch, for `epochs`) or "newbob" (until converged, `epochs` at most)
    lr_decay: float  # exponential: multiplied into the rate after every epoch
    newbob: dict  # newbob: start_halving, stop (relative dev-loss gains) and halving (the factor)
    clip_grad_norm: float  # 0 disables
    divergence_factor: float  # a loss above this times the untrained model's dev loss: diverged
    log_interval: int  # steps
    checkpoint_steps: int  # also checkpoint every this many steps within an epoch (0: at its end only)
    prefetch: int  # batches built ahead by a thread; 0 builds them in the learner's thread
    device: str  # "cpu", "cuda", or "auto" (the world places its learners)
    threads: int  # torch threads per learner; 0: the machine's cores shared among its learners

    def __post_init__(self):
        if self.checkpoint_steps % self.log_interval:  # checkpoints come at log lines
            raise ConfigError(f"train.checkpoint_steps ({self.checkpoint_steps}) must be a multiple of "
                              f"train.log_interval ({self.log_interval})")  # fmt: skip


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
        return cls(settings["algorithm"], settings["options"], settings["seed"], TrainConfig(**settings["train"]),
                   ModelConfig(**settings["model"]), FeatureConfig(**settings["features"]),
                   settings["cmvn"])  # fmt: skip


@dataclass(frozen=True)
class DecodeSettings:
    """decode: both decodings of a run's test set (asrscale.decoding.decode)."""

    beam: int
    beam_threshold: float
    lm_weights: list[float]
    word_bonuses: list[float]
    device: str  # "cpu", or "auto": a GPU where the job has one
