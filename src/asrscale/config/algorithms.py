"""The one table of training algorithms: what the study resolver and the workflow need to know of
each (its world ranks, whether one learner is SEQ's computation, its options), and the class that
trains it, named here and loaded only when training (`asrscale.training.algorithms.make_algorithm`),
so that reading a configuration loads no torch.

An option is one row: its default, its JSON schema (type, bounds) and what it does. The
configuration's schema takes the algorithms' options from here when it loads
(`asrscale.config.schema`), and `make_algorithm` resolves a run's options by the same rows
(`AlgorithmSpec.resolve`): the classes take them checked."""

from dataclasses import dataclass, field

import jsonschema

from asrscale.errors import ConfigError, key_of


@dataclass(frozen=True)
class Option:
    default: object
    schema: dict  # a JSON schema fragment: type, bounds, enum
    doc: str

    @property
    def documented(self) -> dict:
        return {**self.schema, "description": self.doc}


@dataclass(frozen=True)
class AlgorithmSpec:
    name: str  # as config.yaml's study.runs and algorithms: name it
    implementation: str  # "<module>.<class>" under asrscale.training.algorithms
    rows: dict = field(default_factory=dict)  # option -> Option (config.yaml algorithms.<name>)
    #: world ranks that serve rather than learn (ASGD's parameter server)
    servers: int = 0
    #: with one learner, exactly SEQ's computation at SEQ's cost (no exchange happens), so a study
    #: trains SEQ once and reports its run for this algorithm too (tests/worlds/test_mpi.py checks
    #: it)
    alone_is_seq: bool = False
    #: with all its learners in one node, exactly this algorithm's computation, so a study trains
    #: that one and reports its run for this algorithm too (tests/worlds/test_simulated.py
    #: checks it)
    in_one_node_is: str | None = None
    #: the options a tuned study may grid beside the rates: option -> its list in study.tuning
    grids: dict = field(default_factory=dict)
    #: whether an update combines every learner's minibatch (directly, or by averaging models that
    #: each took a step): the learning rate then follows P (asrscale.training.schedule), and the
    #: global batch is P times a learner's
    combines_learners: bool = True
    #: how the reports name it, where not its name in capitals
    display: str = ""
    #: its colour in every figure (colour-blind safe, each clearly apart from the others)
    colour: str = "#000000"

    @property
    def label(self) -> str:
        """The algorithm as the reports name it."""
        return self.display or self.name.upper()

    def global_batch(self, learners: int, batch_size: int) -> int:
        """The utterances an update applies: `learners`' minibatches of `batch_size`, or one where
        each learner's gradient is applied alone (ASGD)."""
        return batch_size * (learners if self.combines_learners else 1)

    @property
    def options(self) -> dict:
        """Every option's default."""
        return {name: row.default for name, row in self.rows.items()}

    @property
    def schema(self) -> dict:
        """The JSON schema of config.yaml's `algorithms.<name>`."""
        return {
            "type": "object",
            "additionalProperties": False,
            "properties": {name: row.documented for name, row in self.rows.items()},
        }

    def resolve(self, options: dict | None = None) -> dict:
        """Every option, `options` over the defaults, checked against the rows: a ConfigError
        names `algorithms.<name>.<option>` and what it expects."""
        resolved = {**self.options, **(options or {})}
        for error in jsonschema.Draft202012Validator(self.schema).iter_errors(resolved):
            where = key_of(["algorithms", self.name, *error.absolute_path])
            raise ConfigError(f"{where}: {error.message}")
        return resolved


#: what an averaging algorithm's averaging makes common: the model and the optimizer's state (the
#: study's one policy), or "model": the weights alone, as the studies averaged
AVERAGES = {
    "averages": Option(
        "model_and_optimizer",
        {"enum": ["model_and_optimizer", "model"]},
        "what an averaging makes common: the model and the optimizer's state, or the model's "
        "weights alone (as the studies averaged)",
    )
}


def learner_momentum(default: str) -> dict:
    """The learners' optimizer momentum across a block-averaging algorithm's averagings (KAVG's,
    BMUF's: training/algorithms/kavg.py)."""
    return {
        "learner_momentum": Option(
            default,
            {"enum": ["kept", "restarted", "corrected"]},
            "each learner's optimizer momentum across averagings: kept; restarted from zero "
            "(CNTK's block-momentum learner); or restarted and bias-corrected as Adam's moments "
            "are (the rate at a block's t-th step divided by 1 − μ^t)",
        )
    }


GRAPH = {
    "graph": Option(
        "ring",
        {"enum": ["ring", "exponential"]},
        "the gossip graph: neighbours at distance 1 along the ring, or at 1, 3, 7, ...",
    )
}

ALGORITHMS: dict[str, AlgorithmSpec] = {
    spec.name: spec
    for spec in (
        AlgorithmSpec("seq", "seq.Sequential", colour="#000000"),
        AlgorithmSpec(
            "ssgd",
            "ssgd.SynchronousSGD",
            {
                "overlap": Option(
                    True,
                    {"type": "boolean"},
                    "allreduce the gradients in buckets while the backward pass runs and clip "
                    "their average, as DistributedDataParallel does (false: clip each learner's, "
                    "then allreduce)",
                ),
                "bucket_mb": Option(
                    25.0,
                    {"type": "number", "exclusiveMinimum": 0},
                    "overlap: the gradients' megabytes a bucket takes (DistributedDataParallel's "
                    "25)",
                ),
            },
            alone_is_seq=True,
            colour="#0173b2",
        ),
        AlgorithmSpec(
            "asgd",
            "asgd.AsynchronousSGD",
            {
                "staleness_lr": Option(
                    False, {"type": "boolean"}, "divide the learning rate by 1 + staleness"
                ),
                "max_staleness": Option(
                    None,
                    {"type": ["integer", "null"], "minimum": 0},
                    "drop gradients staler than this (null: none)",
                ),
            },
            servers=1,
            combines_learners=False,  # the server applies each learner's gradient alone
            colour="#de8f05",
        ),
        AlgorithmSpec(
            "kavg",
            "kavg.KStepAveraging",
            {
                "period": Option(
                    8, {"type": "integer", "minimum": 1}, "K: local steps between averagings"
                ),
                "period_policy": Option(
                    "fixed",
                    {"enum": ["fixed", "by_learners", "plateau"]},
                    "K fixed, chosen from P (by_learners), or halved when the dev loss stalls",
                ),
                "reference_learners": Option(
                    4, {"type": "integer", "minimum": 1}, "by_learners: P at which K = period"
                ),
                "plateau": Option(
                    0.01,
                    {"type": "number", "minimum": 0},
                    "plateau: relative dev-loss gain that counts as progress",
                ),
                **learner_momentum("kept"),
                **AVERAGES,
            },
            alone_is_seq=True,
            colour="#029e73",
        ),
        AlgorithmSpec(
            "ma",
            "ma.ModelAveraging",
            {
                "frames_per_job": Option(
                    400_000,
                    {"type": "integer", "minimum": 1},
                    "averaging period, in frames each job trains",
                ),
                "natural_gradient": Option(
                    True, {"type": "boolean"}, "online natural-gradient SGD preconditioning"
                ),
                "max_param_change": Option(
                    2.0,
                    {"type": "number", "minimum": 0},
                    "cap on one minibatch's parameter change; 0 disables",
                ),
                **AVERAGES,
                "reduce": Option(
                    "allreduce",
                    {"enum": ["allreduce", "master"]},
                    "how the models are averaged: one allreduce, or through learner 0 (rosc17's "
                    "master rank)",
                ),
            },
            colour="#cc78bc",
        ),
        AlgorithmSpec(
            "adpsgd",
            "adpsgd.DecentralizedSGD",
            {**GRAPH, **AVERAGES},
            alone_is_seq=True,
            colour="#d55e00",
        ),
        # one node is one super learner: its gradients allreduced every step, no gossip
        AlgorithmSpec(
            "hadpsgd",
            "hadpsgd.HierarchicalDecentralizedSGD",
            {**GRAPH, **AVERAGES},
            alone_is_seq=True,
            in_one_node_is="ssgd",
            display="H-ADPSGD",
            colour="#56b4e9",
        ),
        AlgorithmSpec(
            "bmuf",
            "bmuf.BlockwiseModelUpdateFiltering",
            {
                "period": Option(
                    8,
                    {"type": "integer", "minimum": 1},
                    "K: local steps a block, as KAVG's (no more than a learner's steps an epoch "
                    "times 1 − η, CNTK's data rule: docs/studies.md)",
                ),
                "block_momentum": Option(
                    None,
                    {"type": ["number", "null"], "minimum": 0, "exclusiveMaximum": 1},
                    "η, the block momentum (null: 1 − 1/P, CNTK's)",
                ),
                "block_lr": Option(
                    1.0, {"type": "number", "exclusiveMinimum": 0}, "ζ, the block learning rate"
                ),
                "nesterov": Option(
                    True,
                    {"type": "boolean"},
                    "start each block from the look-ahead W + η·G (Chen and Huo's Nesterov-like "
                    "block momentum, CNTK's default) rather than from W",
                ),
                **learner_momentum("corrected"),
                **AVERAGES,
            },
            alone_is_seq=True,
            grids={"block_momentum": "block_momenta", "block_lr": "block_lrs"},
            colour="#ca9161",
        ),
    )
}


#: every option some algorithm's grid may tune (a grid run's record names its value)
GRIDDED = tuple(dict.fromkeys(option for spec in ALGORITHMS.values() for option in spec.grids))


#: the algorithms as the reports name them, in the order of their tables
ORDER = [spec.label for spec in ALGORITHMS.values()]
#: every algorithm's colour, the same in every figure
COLOURS = {name: spec.colour for name, spec in ALGORITHMS.items()}


def label(name: str) -> str:
    """An algorithm as the reports name it (a name the table does not know, in capitals)."""
    return ALGORITHMS[name].label if name in ALGORITHMS else name.upper()


def algorithm_spec(name: str) -> AlgorithmSpec:
    if name not in ALGORITHMS:
        raise ConfigError(f"unknown algorithm {name!r}; known: {sorted(ALGORITHMS)}")
    return ALGORITHMS[name]
