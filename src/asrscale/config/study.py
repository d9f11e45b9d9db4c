"""The one place that turns a configuration (config.yaml and the files over it) into a study: its
runs, each run's complete settings, the settings of every other stage, and what the workflow
needs to know to run them (paths, job counts, launchers). The workflow writes each stage's and
each run's settings into a file (a run's `settings.json` is also its record of what it was asked
to do), and `asrscale <stage> --settings` reads it; nothing else reads the configuration.

A run is one algorithm at one learner count and seed, in one world, as configured or in a
variant: the configuration with one setting changed by a sweep, named "<setting>=<value>" (an
option of algorithms.<name>, or train.<key>). An algorithm may train with settings of its own over
train: (study.runs[].train, as a study trained it). An algorithm that is SEQ with one learner
reports SEQ's run (trained once), and one that is another in one node (H-ADPSGD: SSGD) that
one's, unless it has train settings of its own. A tuned study's grids, and their halving, are
`asrscale.config.grids`'s."""

import copy
import json
import re
from dataclasses import asdict, fields, replace

from asrscale.config import paths
from asrscale.config.algorithms import algorithm_spec
from asrscale.config.grids import TUNED, Grids
from asrscale.config.runs import Run
from asrscale.config.schema import PROFILES, validate, with_profiles
from asrscale.config.sections import STAGES, RunConfig, TrainConfig, from_settings, world_of
from asrscale.errors import ConfigError


def value_in_variant(value) -> str:
    """A sweep's value as its variant's folder names it: JSON, but a word (an option's choice, as
    learner_momentum's "kept") as it is, its quotes kept out of the paths the shell is given."""
    return value if isinstance(value, str) else json.dumps(value)


def value_of_variant(text: str):
    """A variant's value (`value_in_variant`): JSON, else the word."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


SUBSETS = ("train", "dev", "test")  # a corpus's subsets; test may be several sets: test-<name> each
TRAIN_KEYS = sorted(field.name for field in fields(TrainConfig))


class Study(Grids):
    """A configuration, checked (every key against the schema, defaults filled in; keys that
    disagree named), and what follows from it."""

    def __init__(self, config: dict):
        """The paths it names are not read here: `asrscale.inputs.checked_study` checks them."""
        self.config = validate(with_profiles(copy.deepcopy(config)))
        self.corpus = self.config["corpus"]["name"]
        self.name = self.config["study"].get("name") or self.corpus
        self.imported = "subsets" in self.config["corpus"]
        self.hardware = self.config["study"]["hardware"]
        self._check()
        self._check_momenta()
        self._check_option_grids()
        self._check_halving()

    def _check(self) -> None:
        """What the schema cannot check: settings that must agree with one another."""
        self._check_hardware()
        self._check_kaldi_features()
        self._check_nodes()
        if self.config["report"]["drawn"] == "voices" and self.imported:
            raise ConfigError(
                "config: report.drawn: voices are the built-in corpus's (its speakers are "
                "settings of eSpeak's voices); your own corpus (corpus.subsets) is drawn by its "
                "speakers"
            )
        self._check_tuning(self.config["study"]["tuning"])
        self._check_runs()
        self._check_sweeps()

    def _check_hardware(self) -> None:
        """study.hardware names one of the hardware profiles."""
        config = self.config
        if self.hardware not in config["hardware"]:
            raise ConfigError(
                f"config: study.hardware is {self.hardware!r}, but the profiles are only "
                f"{sorted(config['hardware'])} (built in: {sorted(PROFILES)}; "
                "others: hardware:)"
            )

    def _check_kaldi_features(self) -> None:
        """Kaldi's features (features.kind 'kaldi') come with their dimension, from Kaldi data dirs
        alone."""
        config = self.config
        kaldi_features = config["features"]["kind"] == "kaldi"
        if kaldi_features and not self.imported:
            raise ConfigError(
                "config: features.kind 'kaldi' needs Kaldi data dirs under corpus.subsets"
            )
        if kaldi_features != (config["features"]["kaldi_dim"] is not None):
            raise ConfigError(
                "config: features.kaldi_dim: the dimension of feats.scp's features, needed with "
                "features.kind 'kaldi' and only then (features.bins: a filterbank's bands)"
            )
        for key, source in self.sources_by_key():
            if kaldi_features and source["format"] != "kaldi":
                raise ConfigError(
                    f"config: {key}: features.kind 'kaldi' takes features from Kaldi data dirs, "
                    f"not {source['format']}"
                )

    def _check_nodes(self) -> None:
        """study.node_size and slurm.ranks_per_node agree where runs are on MPI ranks."""
        config, study = self.config, self.config["study"]
        node_size, per_node = study["node_size"], config["slurm"]["ranks_per_node"]
        on_ranks = any(entry.get("world", study["world"]) == "mpi" for entry in study["runs"])
        if on_ranks and node_size and node_size != per_node:
            raise ConfigError(
                f"config: study.node_size ({node_size}) and slurm.ranks_per_node ({per_node}) both "
                "say how many ranks a node takes, and disagree: set slurm.ranks_per_node alone (a "
                "node's GPUs), from which the algorithms' nodes follow"
            )

    def _check_runs(self) -> None:
        """Each entry of study.runs: SEQ at one learner, its train settings (`_check_train`)."""
        self._train_of = {}  # an algorithm's own train settings (study.runs[].train)
        for index, entry in enumerate(self.config["study"]["runs"]):
            if entry["algorithm"] == "seq" and self._learners(entry) != [1]:
                raise ConfigError(
                    f"config: study.runs[{index}]: seq is one learner, so learners must be [1], "
                    f"not {entry['learners']}"
                )
            self._check_train(index, entry)

    def _check_sweeps(self) -> None:
        """Each entry of study.sweeps: SEQ at one learner, a setting its algorithm has, and values
        that make runs."""
        for index, sweep in enumerate(self.config["study"]["sweeps"]):
            key = f"config: study.sweeps[{index}]"
            if sweep["algorithm"] == "seq" and sweep["learners"] != 1:
                raise ConfigError(f"{key}.learners: seq is one learner, not {sweep['learners']}")
            spec = algorithm_spec(sweep["algorithm"])
            settings = sorted(spec.options) + [f"train.{key}" for key in TRAIN_KEYS]
            if sweep["vary"] not in settings:
                raise ConfigError(
                    f"{key}.vary: {sweep['algorithm']} has no setting {sweep['vary']!r}; "
                    f"one of {settings}"
                )
            for value in sweep["values"] if not sweep["vary"].startswith("train.") else ():
                try:  # each value as the run would be made with it
                    spec.resolve({**self._options(spec.name), sweep["vary"]: value})
                except ConfigError as error:
                    raise ConfigError(f"{key}.values: {error}") from None

    def sources_by_key(self) -> list[tuple[str, dict]]:
        """Every source of your own corpus, with its key (corpus.subsets.test.clean[0], a test set
        by name)."""
        subsets = self.subsets if self.imported else []
        return [
            (f"corpus.subsets.{subset.replace('test-', 'test.')}[{index}]", source)
            for subset in subsets
            for index, source in enumerate(self.sources(subset))
        ]

    def _check_train(self, index: int, entry: dict) -> None:
        """An entry's train settings: train's keys, valid over train:, the same for every entry of
        its algorithm."""
        key, algorithm, train = (
            f"config: study.runs[{index}].train",
            entry["algorithm"],
            entry.get("train", {}),
        )
        if unknown := sorted(set(train) - set(TRAIN_KEYS)):
            raise ConfigError(f"{key}: {unknown} are not train settings; one of {TRAIN_KEYS}")
        if algorithm in self._train_of:  # checked with its first entry
            if self._train_of[algorithm] != train:
                raise ConfigError(
                    f"{key}: {algorithm}'s entries state other train settings "
                    f"({self._train_of[algorithm]}); one algorithm trains one way"
                )
            return
        try:
            if train:
                validate({**copy.deepcopy(self.config), "train": {**self.config["train"], **train}})
        except ConfigError as error:
            raise ConfigError(f"{key}: {str(error).removeprefix('config: ')}") from None
        self._train_of[algorithm] = train

    # the runs
    def _learners(self, entry: dict) -> list[int]:
        """An entry's learner counts: its own, else study.learners (SEQ: always one)."""
        default = [1] if entry["algorithm"] == "seq" else self.config["study"]["learners"]
        return entry.get("learners", default)

    def _seeds(self, entry: dict) -> list[int]:
        return entry.get("seeds", self.config["study"]["seeds"])

    def _points(self) -> list[tuple[dict, dict]]:
        """Every point of every sweep, with its sweep: the setting varied, algorithm, learners,
        value, variant and world (sweeps run in study.world)."""
        world = self.config["study"]["world"]
        return [
            (
                sweep,
                {
                    "sweep": sweep["vary"],
                    "algorithm": sweep["algorithm"],
                    "learners": sweep["learners"],
                    "value": value,
                    "variant": self._variant(sweep["algorithm"], sweep["vary"], value),
                    "world": world,
                },
            )
            for sweep in self.config["study"]["sweeps"]
            for value in sweep["values"]
        ]

    def sweep_points(self) -> list[dict]:
        return [point for _, point in self._points()]

    def runs(self) -> list[Run]:
        """Every run the study reports, in the order of the configuration."""
        study = self.config["study"]
        runs = [
            Run(entry.get("world", study["world"]), entry["algorithm"], "default", learners, seed)
            for entry in study["runs"]
            for learners in self._learners(entry)
            for seed in self._seeds(entry)
        ]
        runs += [
            Run(point["world"], point["algorithm"], point["variant"], point["learners"], seed)
            for sweep, point in self._points()
            for seed in self._seeds(sweep)
        ]
        return list(dict.fromkeys(runs))

    def trained_as(self, run: Run) -> Run:
        """The run that is trained for `run`: SEQ's, where the algorithm is SEQ with one learner;
        the algorithm it is in one node, where all its learners are in one (the table of
        algorithms says which); with the same train settings: an option of the algorithm changes
        nothing there, its own train settings would. In a tuned study the configured run is the
        tuned one."""
        if self.tuned and run.variant == "default":
            run = replace(run, variant=TUNED)
        spec, same_training = algorithm_spec(run.algorithm), not self._train_of.get(run.algorithm)
        variant = (
            run.variant if run.variant.startswith("train.") or run.variant == TUNED else "default"
        )
        if run.learners == 1 and spec.alone_is_seq and same_training:
            return Run(run.world, "seq", variant, 1, run.seed)
        node = self._node_size(run.world)
        if spec.in_one_node_is and node and run.learners <= node and same_training:
            return self.trained_as(
                Run(run.world, spec.in_one_node_is, variant, run.learners, run.seed)
            )
        return run

    def trained(self) -> list[Run]:
        """Every run the study trains, each once: its runs as trained and its grids' runs (a
        tuned run at the tuning seed is its chosen grid run)."""
        adopted = set(self.tunings())
        grids = [self.trained_as(run) for tuned in self.tunings() for run in self.grid(tuned)]
        return list(
            dict.fromkeys(
                run
                for run in grids + [self.trained_as(r) for r in self.runs()]
                if run not in adopted
            )
        )

    def _node_size(self, world: str) -> int:
        """The learners of a node as the algorithms see them: study.node_size, else real ranks'
        slurm.ranks_per_node (a node's GPUs; on this machine its ranks are one node, as MPI finds
        them), a simulated run's profile's nodes."""
        if self.config["study"]["node_size"]:
            return self.config["study"]["node_size"]
        if world == "mpi":
            return self.config["slurm"]["ranks_per_node"]
        return self.config["hardware"][self.hardware]["learners_per_node"]

    def cluster(self, world: str) -> str:
        """What a run of a world ran on, as its results folder names it (paths.RUN's {cluster}):
        "mpi" (real ranks), or "sim-<profile>" (a simulated cluster of the study's profile)."""
        return "mpi" if world == "mpi" else f"sim-{self.hardware}"

    def folder(self, run: Run) -> str:
        """Where `run` is trained (SEQ's folder for an algorithm that is SEQ alone)."""
        run = self.trained_as(run)
        return self.at(
            paths.RUN,
            cluster=self.cluster(run.world),
            algorithm=run.algorithm,
            variant=run.variant,
            learners=run.learners,
            seed=run.seed,
        )

    def at(self, template: str, **fields) -> str:
        """A path of `asrscale.config.paths` in this study's corpus and study, other fields
        given."""
        return template.format(corpus=self.corpus, study=self.name, **fields)

    def run_of(self, cluster: str, algorithm: str, variant: str, learners, seed) -> Run:
        """The run a folder's names stand for."""
        return Run(
            "mpi" if cluster == "mpi" else "simulated", algorithm, variant, int(learners), int(seed)
        )

    def ranks(self, run: Run) -> int:
        """A run's processes: its learners and any server ranks on real ranks; one when
        simulated."""
        return run.learners + algorithm_spec(run.algorithm).servers if run.world == "mpi" else 1

    # each run's settings
    def _variant(self, algorithm: str, setting: str, value) -> str:
        return (
            "default"
            if value == self._in_effect(algorithm, setting)
            else f"{setting}={value_in_variant(value)}"
        )

    def _in_effect(self, algorithm: str, setting: str):
        """The value `setting` takes in `algorithm`'s runs as configured."""
        if setting.startswith("train."):
            return {**self.config["train"], **self._train_of.get(algorithm, {})}[
                setting.removeprefix("train.")
            ]
        return self._options(algorithm)[setting]

    def _options(self, algorithm: str) -> dict:
        """Every option of `algorithm` as configured: its defaults, with config.yaml's over them."""
        return algorithm_spec(algorithm).resolve(self.config["algorithms"].get(algorithm))

    def _features(self) -> dict:
        """features: as extracted (asrscale.config.sections.FeatureConfig): their normalisation
        applies as they load, and the number of jobs is the workflow's."""
        return {
            key: value
            for key, value in self.config["features"].items()
            if key not in ("jobs", "cmvn")
        }

    def run_settings(self, run: Run, chosen: dict | None = None) -> dict:
        """Everything `asrscale train` needs to know of a run: the algorithm and its options, the
        seed, the train (every algorithm the study's own), model and features settings, with the
        variant's changes (a tuned run's: the train settings and options its grid `chosen`;
        without them, as configured), and its world."""
        config = self.config
        options = copy.deepcopy(self._options(run.algorithm))
        train = {**config["train"], **self._train_of.get(run.algorithm, {})}
        if run.variant == TUNED:  # the train settings its grid chose, and the options (BMUF's η)
            for key, value in (chosen or {}).items():
                (options if key in algorithm_spec(run.algorithm).grids else train)[key] = value
        elif run.variant != "default":
            for change in re.split(r",(?=[a-z_.]+=)", run.variant):
                setting, value = change.split("=", 1)
                if setting.startswith("train."):
                    train[setting.removeprefix("train.")] = value_of_variant(value)
                else:
                    options[setting] = value_of_variant(value)
        node_size = config["study"]["node_size"]
        if run.world == "mpi":
            world_settings = {
                "kind": "mpi",
                "transport": config["mpi"]["transport"],
                "timeout_s": config["mpi"]["timeout_s"],
                "node_size": node_size,
            }
        else:
            profile = {
                key: value
                for key, value in config["hardware"][self.hardware].items()
                if key != "description"
            }
            world_settings = {
                "kind": "simulated",
                "learners": run.learners,
                "hardware": dict(profile, name=self.hardware),
                "node_size": node_size,
                "fuse_learners": config["study"]["fuse_learners"],
            }
        settings = {
            "algorithm": run.algorithm,
            "options": options,
            "seed": run.seed,
            "train": train,
            "model": config["model"],
            "features": self._features(),
            "cmvn": config["features"]["cmvn"],
            "world": world_settings,
        }
        # in the shape `asrscale train` reads
        return {**asdict(RunConfig.from_settings(settings)), "world": asdict(world_of(settings))}

    # what the workflow's rules need to know besides settings
    @property
    def device(self) -> str:
        """Where learners compute (train.device): "auto", "cpu" or "cuda"."""
        return self.config["train"]["device"]

    @property
    def machine(self) -> dict:
        """How every job meets the machine (asrscale.machine): its CPU's code path
        (study.cpu_arithmetic) and whether its calibration keeps a busy machine's rates
        (study.busy_machine)."""
        return {key: self.config["study"][key] for key in ("cpu_arithmetic", "busy_machine")}

    @property
    def wall_time(self) -> dict | None:
        """study.wall_time: the study's minutes on a machine of a stated speed, or None."""
        return self.config["study"]["wall_time"]

    @property
    def synthesis_jobs(self) -> int:
        return self.config["corpus"]["builtin"]["jobs"]

    @property
    def feature_jobs(self) -> int:
        """Feature extraction jobs per subset."""
        return self.config["features"]["jobs"]

    @property
    def test_sets(self) -> list[str]:
        """The test sets, each decoded and scored: "test", or "test-<name>" for each set of
        corpus.subsets.test given by name (LibriSpeech's test-clean and test-other)."""
        tests = self.config["corpus"].get("subsets", {}).get("test")
        return [f"test-{name}" for name in tests] if isinstance(tests, dict) else ["test"]

    @property
    def subsets(self) -> list[str]:
        return ["train", "dev", *self.test_sets]

    def sources(self, subset: str) -> list[dict]:
        """Your own corpus: a subset's sources (corpus.subsets.<subset>; a test set of several)."""
        subsets = self.config["corpus"]["subsets"]
        if subset.startswith("test-"):
            return subsets["test"][subset.removeprefix("test-")]
        return subsets[subset]

    @property
    def language_model(self) -> str:
        """The ARPA file of decoding: the training transcripts' model, or your own (decode.lm)
        folded as the transcripts are."""
        return self.at(paths.LANGUAGE_MODEL)

    @property
    def own_language_model(self) -> str | None:
        """Your own ARPA file (decode.lm), or None where decoding's LM is estimated."""
        lm = self.config["decode"]["lm"]
        return None if lm == "train" else lm

    # every other stage's settings
    def stage_settings(self, stage: str) -> dict:
        """The settings file of a stage that is not a run (`sections.STAGES`: `synthesise`,
        `import-<subset>`, `features`, `calibrate`, `language-model`, `decode`, `gather`, `report`
        or `halving`), in the shape its stage reads."""
        kind, _, subset = stage.partition("-") if stage.startswith("import-") else (stage, "", "")
        if kind not in STAGES or (
            kind == "import" and not (self.imported and subset in self.subsets)
        ):
            raise ValueError(f"no settings of a stage {stage!r}")
        return asdict(from_settings(STAGES[kind], _STAGE_SETTINGS[kind](self, subset)))

    def _synthesise(self, _) -> dict:
        return {
            key: value for key, value in self.config["corpus"]["builtin"].items() if key != "jobs"
        }

    def _import(self, subset: str) -> dict:
        corpus = self.config["corpus"]
        return {
            "sources": self.sources(subset),
            "features": self._features(),
            "text": corpus["text"],
            "bad_input": corpus["bad_input"],
            "speakers": corpus["speakers"].get(subset.split("-")[0]),
        }

    def _extract(self, _) -> dict:
        return {"features": self._features(), "bad_input": self.config["corpus"]["bad_input"]}

    def _calibrate(self, _) -> dict:
        config = self.config
        return {
            "train": config["train"],
            "model": config["model"],
            "features": self._features(),
            "cmvn": config["features"]["cmvn"],
        }

    def _language_model(self, _) -> dict:
        decode = self.config["decode"]
        return {
            "source": decode["lm"],
            "order": decode["lm_order"],
            "text": self.config["corpus"]["text"],
            "max_oov_rate": decode["max_lm_oov_rate"],
        }

    def _decode(self, _) -> dict:
        decode = {key: value for key, value in self.config["decode"].items() if key not in LM_KEYS}
        # a GPU where the job has one (decode jobs ask SLURM for none), unless training is kept off
        # GPUs
        return {**decode, "device": "cpu" if self.device == "cpu" else "auto"}

    def _gather(self, _) -> dict:
        reported = [
            {
                "algorithm": run.algorithm,
                "variant": run.variant,
                "run": self.folder(run),
                "tuning": self.tuning_file(tuned)
                if (tuned := self.trained_as(run)).variant == TUNED
                else None,
            }
            for run in self.runs()
        ]
        tunings = [
            {
                "algorithm": tuned.algorithm,
                "learners": tuned.learners,
                "world": tuned.world,
                "file": self.tuning_file(tuned),
            }
            for tuned in self.tunings()
        ]
        rule = {
            key: self.config["report"][key] for key in ("target_dev_loss", "plateau_max_dev_ter")
        } | {key: self.config["decode"][key] for key in ("lm_weights", "word_bonuses")}
        return {
            "runs": reported,
            "sweeps": self.sweep_points(),
            "test_sets": self.test_sets,
            "convergence": rule,
            "tunings": tunings,
        }

    def _report(self, _) -> dict:
        return {"title": self.config["report"]["title"], "config": self.config}

    def _halving(self, _) -> dict:
        return dict(self.halving)


LM_KEYS = ("lm", "lm_order", "max_lm_oov_rate")  # decode's keys of the language-model stage
# each stage's settings, by the stage of sections.STAGES they are for
_STAGE_SETTINGS = {
    "synthesise": Study._synthesise,
    "import": Study._import,
    "features": Study._extract,
    "calibrate": Study._calibrate,
    "language-model": Study._language_model,
    "decode": Study._decode,
    "gather": Study._gather,
    "report": Study._report,
    "halving": Study._halving,
}
if _STAGE_SETTINGS.keys() != STAGES.keys():
    raise RuntimeError(
        f"stages with settings {list(_STAGE_SETTINGS)} differ from sections.STAGES {list(STAGES)}"
    )
