"""The study resolver as plain Python: a configuration into runs, each run's complete settings, and
every other stage's, with errors that name the key."""

import copy
import gzip
import re
from dataclasses import asdict, fields

import pytest

from asrscale.config.runs import Run
from asrscale.config.sections import (
    STAGES,
    WORLDS,
    RunConfig,
    TrainConfig,
    from_settings,
    read_settings_of,
    world_of,
)
from asrscale.config.study import Study
from asrscale.errors import ConfigError
from asrscale.inputs import checked_study
from asrscale.io import atomic_write_json
from asrscale.jobs import train_threads
from helpers import ROOT, merged


def test_the_default_study_resolves_into_its_runs_each_with_complete_settings():
    study = Study(merged())
    runs = study.runs()
    # SEQ, ASGD and MA alone, and 6 algorithms at 4: H-ADPSGD's 4 learners are one of the profile's
    # nodes of 8, SSGD's run
    assert len({study.folder(run) for run in runs}) == 9
    ssgd_alone = Run("simulated", "ssgd", "default", 1, 1)
    assert study.trained_as(ssgd_alone) == Run("simulated", "seq", "default", 1, 1)
    in_one_node = Run("simulated", "hadpsgd", "default", 4, 1)
    assert study.trained_as(in_one_node) == Run("simulated", "ssgd", "default", 4, 1)
    assert study.trained_as(Run("simulated", "hadpsgd", "default", 16, 1)).algorithm == "hadpsgd"
    for run in runs:
        settings = study.run_settings(run)
        assert set(settings["train"]) == {field.name for field in fields(TrainConfig)}
        assert RunConfig.from_settings(settings).algorithm == run.algorithm
        world = settings["world"]
        assert world["kind"] == "simulated" and world["hardware"]["name"] == "zhang19b-v100"
        assert (
            "collectives" not in world and world["learners"] == run.learners
        )  # not MPI's settings
    # one policy: every algorithm trains with the study's train settings; options are its own
    settings = [study.run_settings(run) for run in runs]
    assert all(s["train"] == settings[0]["train"] for s in settings)
    # every option of the algorithm: the table's defaults, config.yaml's over them
    options = study.run_settings(Run("simulated", "ma", "default", 4, 1))["options"]
    assert options == {
        "frames_per_job": 50000,
        "natural_gradient": True,
        "max_param_change": 2.0,
        "averages": "model_and_optimizer",
        "reduce": "allreduce",
    }


def test_sweeps_make_variants_and_the_configured_value_is_the_algorithms_own_run():
    study = Study(merged("studies/reproduction.yaml"))
    points = [
        p
        for p in study.sweep_points()
        if p["sweep"] == "train.batch_size" and p["algorithm"] == "ssgd"
    ]
    assert [p["variant"] for p in points] == [
        "train.batch_size=8",
        "default",
        "train.batch_size=96",
    ]
    variant = study.run_settings(Run("simulated", "ssgd", "train.batch_size=96", 4, 1))
    assert variant["train"]["batch_size"] == 96
    mpi = Study(merged("studies/algorithms.yaml"))
    world = mpi.run_settings(Run("mpi", "hadpsgd", "default", 4, 1))["world"]
    assert world == {"kind": "mpi", "transport": "auto", "timeout_s": 600, "node_size": 2}
    assert mpi.ranks(Run("mpi", "asgd", "default", 4, 1)) == 5


def test_a_sweep_of_words_names_its_variants_without_quotes():
    """A sweep of an option's choices (KAVG's learner_momentum): its variants name the word as it
    is, no quotes in the paths the shell is given, and its runs train with it."""
    config = merged()
    config["study"]["sweeps"] = [
        {
            "algorithm": "kavg",
            "learners": 4,
            "vary": "learner_momentum",
            "values": ["kept", "corrected"],
        }
    ]
    study = Study(config)
    assert [p["variant"] for p in study.sweep_points()] == ["default", "learner_momentum=corrected"]
    run = Run("simulated", "kavg", "learner_momentum=corrected", 4, 1)
    assert study.run_settings(run)["options"]["learner_momentum"] == "corrected"
    assert '"' not in study.folder(run)


def test_an_algorithm_may_train_as_its_study_did():
    """MA with Kaldi's plain SGD at N times an effective rate, every other algorithm with train:;
    an algorithm with train settings of its own trains its one-learner run itself, and its sweeps
    vary its own settings."""
    config = merged()
    kaldi = {"optimizer": "sgd", "lr_scaling": "linear", "lr": 0.0003}
    config["study"]["runs"] = [
        {"algorithm": "seq"},
        {"algorithm": "ma", "train": kaldi},
        {"algorithm": "ssgd", "learners": [1, 4], "train": {"optimizer": "sgd"}},
    ]
    config["study"]["sweeps"] = [
        {"algorithm": "ma", "learners": 4, "vary": "train.lr", "values": [0.0003, 0.001]}
    ]
    study = Study(config)
    ma = study.run_settings(Run("simulated", "ma", "default", 4, 1))["train"]
    seq = study.run_settings(Run("simulated", "seq", "default", 1, 1))["train"]
    assert (
        {key: ma[key] for key in kaldi} == kaldi
        and seq["optimizer"] == "adam"
        and seq["lr"] == config["train"]["lr"]
    )
    assert {key: ma[key] for key in ma if key not in kaldi} == {
        key: seq[key] for key in seq if key not in kaldi
    }
    ssgd_alone = Run("simulated", "ssgd", "default", 1, 1)
    assert study.trained_as(ssgd_alone) == ssgd_alone  # not SEQ's computation: it trains with SGD
    assert [p["variant"] for p in study.sweep_points()] == ["default", "train.lr=0.001"]
    assert (
        study.run_settings(Run("simulated", "ma", "train.lr=0.001", 4, 1))["train"]["optimizer"]
        == "sgd"
    )


@pytest.mark.parametrize(
    "train, message",
    [
        ({"optimiser": "sgd"}, r"study.runs\[1\].train: \['optimiser'\] are not train settings"),
        ({"optimizer": "lbfgs"}, r"study.runs\[1\].train: train.optimizer: 'lbfgs' is not one of"),
    ],
)
def test_an_algorithms_own_train_settings_are_checked(train, message):
    config = merged()
    config["study"]["runs"] = [{"algorithm": "seq"}, {"algorithm": "ma", "train": train}]
    with pytest.raises(ConfigError, match=message):
        Study(config)
    config["study"]["runs"] = [
        {"algorithm": "ma", "learners": [2], "train": {"optimizer": "sgd"}},
        {"algorithm": "ma", "learners": [4]},
    ]
    with pytest.raises(
        ConfigError, match=r"study.runs\[1\].train: ma's entries state other train settings"
    ):
        Study(config)


def test_every_other_stage_has_its_settings():
    study = Study(merged())
    assert (
        "cmvn" not in study.stage_settings("features")["features"]
    )  # normalising extracts nothing again
    assert "jobs" not in study.stage_settings("synthesise")
    calibrate = study.stage_settings("calibrate")
    assert calibrate["model"]["units"] == 128 and calibrate["cmvn"] == "speaker"
    gather = study.stage_settings("gather")
    assert (
        len(gather["runs"]) == len(study.runs())
        and gather["convergence"]["target_dev_loss"] is None
    )
    decode = study.stage_settings("decode")
    assert decode["beam"] == 32 and decode["device"] == "auto" and "lm" not in decode
    assert study.stage_settings("language-model") == {
        "source": "train",
        "order": 3,
        "max_oov_rate": 0.1,
        "text": {"lowercase": True, "punctuation": "strip"},
    }
    with pytest.raises(ValueError, match="no settings of a stage 'nope'"):
        study.stage_settings("nope")


@pytest.mark.parametrize("stage", sorted(set(STAGES) - {"import"}))
def test_each_stage_reads_back_the_settings_the_resolver_writes_for_it(stage, tmp_path):
    """One shape a stage: the resolver writes its settings file in the dataclass the stage reads."""
    config = merged()
    config["study"]["tuning"] = {
        "lr_factors": [0.5, 1, 2],
        "halving": {"epoch": 1, "keep": 2},
    }  # halving's
    written = Study(config).stage_settings(stage)
    atomic_write_json(tmp_path / "settings.json", written)
    assert asdict(read_settings_of(STAGES[stage], tmp_path / "settings.json")) == written
    with pytest.raises(TypeError, match=r"has no setting \['surplus'\]"):
        from_settings(STAGES[stage], {**written, "surplus": 1})


@pytest.mark.parametrize("world", ["simulated", "mpi"])
def test_a_runs_settings_are_its_run_and_its_world_in_the_shapes_train_reads(world):
    settings = Study(merged()).run_settings(Run(world, "kavg", "default", 4, 1))
    assert asdict(RunConfig.from_settings(settings)) == {
        k: v for k, v in settings.items() if k != "world"
    }
    assert (
        type(world_of(settings)) is WORLDS[world]
        and asdict(world_of(settings)) == settings["world"]
    )


@pytest.mark.parametrize(
    "change, message",
    [
        (
            ("study", "hardware", "lab"),
            r"study.hardware is 'lab', but the profiles are only \['h100', 'this-machine'",
        ),
        (
            ("study", "runs", [{"algorithm": "seq", "learners": [2]}]),
            r"study.runs\[0\]: seq is one learner",
        ),
        # the schema's errors name a list's item as the resolver's do, and say where an option goes
        (
            ("study", "runs", [{"algorithm": "seq"}, {"algorithm": "sgd"}]),
            r"config: study.runs\[1\].algorithm: 'sgd'",
        ),
        (
            ("study", "runs", [{"algorithm": "seq"}, {"algorithm": "kavg", "period": 8}]),
            r"study.runs\[1\]: .*'period' was unexpected\); period: kavg's options are set for all "
            r"its runs under "
            r"algorithms.kavg \(algorithms: \{kavg: \{period: ...\}\}\), or varied by a sweep "
            r"\(study.sweeps: "
            r"\{algorithm: kavg, learners: ..., vary: period, values: \[...\]\}\), not on an entry",
        ),
        (
            (
                "study",
                "sweeps",
                [{"algorithm": "kavg", "learners": 4, "vary": "k", "values": [1, 2]}],
            ),
            r"study.sweeps\[0\].vary: kavg has no setting 'k'",
        ),
        (
            (
                "study",
                "sweeps",
                [{"algorithm": "kavg", "learners": 4, "vary": "period", "values": [2, 0]}],
            ),
            r"study.sweeps\[0\].values: algorithms.kavg.period: 0 is less than the minimum of 1",
        ),
        (("train", "lr", -1), r"config: train.lr: -1 is less than or equal to the minimum of 0"),
        (("decode", "lm", "missing.arpa"), r"config: decode.lm: missing.arpa is not a file"),
        (("decode", "lm_order", 1), r"config: decode.lm_order: 1 is less than the minimum of 2"),
        (
            ("features", "kaldi_dim", 40),
            r"config: features.kaldi_dim: the dimension of feats.scp's features, needed "
            r"with features.kind 'kaldi' and only then",
        ),
        # a key that moved names where it is now
        (
            ("study", "learners_per_node", 2),
            r"config: study.learners_per_node is no longer a setting here: it is "
            r"study.node_size",
        ),
        (
            ("slurm", "account", "lab"),
            r"config: slurm.account is no longer a setting here: it is your SLURM profile's",
        ),
    ],
)
def test_a_wrong_configuration_is_an_error_naming_the_key(change, message):
    config = copy.deepcopy(merged())
    section, key, value = change
    config.setdefault(section, {})[key] = value
    with pytest.raises(ConfigError, match=message):
        checked_study(config)


def test_a_training_job_takes_the_machine_a_share_of_its_gpu_or_a_core():
    """Runs on ranks are timed by the clock: the machine; simulated runs by their cost model: on a
    GPU study.runs_per_gpu of them at once, each with its share of the cores; on the CPU a core."""
    config = Study(merged()).config
    assert [
        train_threads(config, world, 16, gpu)
        for world, gpu in [("mpi", True), ("simulated", True), ("simulated", False)]
    ] == [16, 16, 1]
    config["study"]["runs_per_gpu"] = 4
    assert (
        train_threads(config, "simulated", 16, True) == 4
        and train_threads(config, "mpi", 16, True) == 16
    )


@pytest.mark.parametrize(
    "text, line, column",
    [
        ("model:\n  units: 128\n   layers: 2\n", 3, 10),
        ("study: {runs: [{algorithm: seq}]\ntrain: {}\n", 2, 1),
    ],
)
def test_a_config_file_that_is_not_yaml_is_named_by_its_line_and_column(
    tmp_path, text, line, column
):
    from asrscale.config.files import read_config_file

    (tmp_path / "mine.yaml").write_text(text)
    with pytest.raises(
        ConfigError, match=rf"config: \S+mine.yaml, line {line}, column {column}: not valid YAML: "
    ):
        read_config_file(tmp_path / "mine.yaml")


def own_corpus(train: dict, dev: dict, test: dict, lm) -> dict:
    config = copy.deepcopy(merged())
    config["corpus"] = {"name": "own", "subsets": {"train": [train], "dev": [dev], "test": [test]}}
    config["decode"] = {"lm": str(lm)}
    return config


def test_every_path_of_a_study_is_checked_at_once_each_for_its_formats_files(tmp_path):
    """Three wrong paths, an empty folder and a 0-byte LM: one error naming each, before any job."""
    (tmp_path / "empty").mkdir()
    (tmp_path / "lm.arpa").write_bytes(b"")
    sources = [
        {"format": "kaldi", "path": str(tmp_path / "no-train")},
        {"format": "librispeech", "path": str(tmp_path / "empty")},
        {"format": "manifest", "path": str(tmp_path / "no-test.tsv")},
    ]
    config = own_corpus(*sources, tmp_path / "lm.arpa")
    with pytest.raises(ConfigError) as error:
        checked_study(config)
    assert str(error.value) == (
        f"config: 4 paths: corpus.subsets.train[0].path: {tmp_path}/no-train does not exist; "
        f"corpus.subsets.dev[0].path: {tmp_path}/empty holds no <speaker>/<chapter>/*.trans.txt: "
        "not a "
        f"LibriSpeech directory; corpus.subsets.test[0].path: {tmp_path}/no-test.tsv does not "
        "exist; "
        f"decode.lm: {tmp_path}/lm.arpa is not an ARPA language model (it is empty, where an ARPA "
        "file's first line is \\data\\), nor 'train'"
    )
    assert Study(config).name == "own"  # a plan of a study made on another machine


def test_a_folder_or_file_is_a_source_when_it_holds_its_formats_files(tmp_path):
    chapter, kaldi, lm = (
        tmp_path / "LibriSpeech" / "19" / "198",
        tmp_path / "kaldi",
        tmp_path / "lm.arpa.gz",
    )
    chapter.mkdir(parents=True)
    kaldi.mkdir()
    (chapter / "19-198.trans.txt").write_text("19-198-0000 A WORD\n")
    (kaldi / "wav.scp").write_text("u1 u1.wav\n")
    lm.write_bytes(gzip.compress(b"\n\\data\\\nngram 1=1\n"))  # a blank line before \data\, gzipped
    train, dev = (
        {"format": "kaldi", "path": str(kaldi)},
        {"format": "librispeech", "path": str(chapter.parent.parent)},
    )
    with pytest.raises(ConfigError) as error:
        checked_study(
            own_corpus(train, dev, {"format": "lhotse", "path": str(kaldi / "wav.scp")}, lm)
        )
    assert re.fullmatch(
        r"config: 3 paths: corpus.subsets.train\[0\].path: \S+kaldi is not a Kaldi data directory: "
        r"its text does "
        r"not exist; corpus.subsets.dev\[0\].path: \S+LibriSpeech is not a LibriSpeech directory: "
        r"no audio "
        r"\(\*.flac\) beside 19/198/19-198.trans.txt; corpus.subsets.test\[0\].path: \S+wav.scp is "
        r"not a lhotse "
        r"manifest: a lhotse source is a supervisions or a cuts manifest \(its name says which\)",
        str(error.value),
    )
    (kaldi / "text").write_text("u1 a word\n")
    (chapter / "19-198-0000.flac").write_bytes(b"")
    test = {"format": "lhotse", "path": str(kaldi / "supervisions.jsonl")}
    (kaldi / "supervisions.jsonl").write_text("{}\n")
    with pytest.raises(
        ConfigError,
        match=r"^config: corpus.subsets.test\[0\].path: \S+supervisions.jsonl is a "
        r"supervisions manifest whose recordings manifest \S+recordings.jsonl does not exist$",
    ):
        checked_study(own_corpus(train, dev, test, lm))
    (kaldi / "recordings.jsonl").write_text("{}\n")
    assert checked_study(own_corpus(train, dev, test, lm)).own_language_model == str(lm)


def test_the_rules_read_the_configuration_only_through_the_study():
    """No rule reads a setting raw (config["train"]["device"]): the resolver checked and filled
    every one, and asrscale.jobs answers from it what the rules size jobs by."""
    rules = [ROOT / "Snakefile", *sorted((ROOT / "workflow" / "rules").glob("*.smk"))]
    raw = [
        f"{path.name}: {line.strip()}"
        for path in rules
        for line in path.read_text().splitlines()
        if re.search(r"config\[", line)
    ]
    assert not raw, raw


def test_voices_are_drawn_for_the_built_in_corpus_alone(tmp_path):
    """report.drawn: by default the built-in corpus's intervals draw its voices (a speaker is one
    setting of an eSpeak voice), your own corpus's its speakers; voices asked of your own corpus
    is an error naming the key."""
    import pandas as pd

    from asrscale.analysis.findings import drawn_together

    rows = pd.DataFrame(
        {
            "utt": ["u1", "u2"],
            "speaker": ["test/test_annie_en_170_50_0", "test/test_m2_en-us_160_40_1"],
        }
    )
    assert drawn_together(rows, merged()).voice.tolist() == ["annie", "m2"]
    assert "voice" not in drawn_together(rows, {**merged(), "report": {"drawn": "speakers"}})
    own = own_corpus(*[{"format": "kaldi", "path": str(tmp_path)}] * 3, tmp_path / "lm.arpa")
    assert "voice" not in drawn_together(rows, own)
    with pytest.raises(
        ConfigError, match=r"^config: report.drawn: voices are the built-in corpus's"
    ):
        Study({**own, "report": {"drawn": "voices"}})
