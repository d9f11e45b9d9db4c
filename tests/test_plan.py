"""A study's price before it is queued (`asrscale plan`): every run it trains, its modelled epoch
and device-hours on a profile, with its own band, from stand-in learners."""

import re

import pandas as pd
import pytest
import yaml

from asrscale.analysis.plan import BUILTIN_FRAMES_PER_UTTERANCE, LIBRISPEECH, plan
from asrscale.cli import main
from asrscale.errors import ConfigError
from conftest import ROOT


def config_of(*files) -> dict:
    from snakemake.utils import update_config

    config = {}
    for file in files:
        update_config(config, yaml.safe_load((ROOT / file).read_text()))
    return config


def test_the_smoke_study_is_priced_at_its_first_speakers(capfd):
    """corpus.speakers.train: 4 keeps 4 of train-clean-100's 251 speakers: 455 of its 28,539
    utterances, 1.6 of its 100.6 hours, at their mean per speaker."""
    main(["plan", "--configfile", *(str(ROOT / name) for name in ("config.yaml", "studies/librispeech.yaml",
          "studies/librispeech-smoke.yaml")), "--hardware", "h100"])  # fmt: skip
    assert ("455 training utterances, 1.6 hours (LibriSpeech's published subset sizes, its first 4 speakers of each "
            "at their mean share)") in capfd.readouterr().out  # fmt: skip


def test_the_librispeech_study_is_priced_run_by_run_on_h100s(capfd, tmp_path):
    main(["plan", "--configfile", str(ROOT / "config.yaml"), str(ROOT / "studies" / "librispeech.yaml"),
          "--hardware", "h100", "--out", str(tmp_path / "plan.tsv")])  # fmt: skip
    printed = capfd.readouterr().out
    assert "28,539 training utterances, 100.6 hours (LibriSpeech's published subset sizes)" in printed
    table = pd.read_csv(tmp_path / "plan.tsv", sep="\t")
    # SEQ once; SSGD, KAVG, MA, ADPSGD at 2, 4, 8, 16; H-ADPSGD at 16 (SSGD's in one node)
    assert len(table) == 1 + 4 * 4 + 1 and (table.epochs == 30).all()
    assert table.device_hours.tolist() == pytest.approx((table.epoch_s * 30 * table.ranks / 3600).tolist())
    assert (table.epoch_s_low <= table.epoch_s).all() and (table.epoch_s <= table.epoch_s_high).all()
    seq = table[table.algorithm == "seq"].iloc[0]
    ssgd = table[table.algorithm == "ssgd"].set_index("learners")
    assert ssgd.epoch_s[16] < ssgd.epoch_s[2] < seq.epoch_s  # more learners, shorter epochs
    # across two nodes the network sets part of the time: a wider band than inside one node
    assert ssgd.epoch_s_high[16] / ssgd.epoch_s_low[16] > ssgd.epoch_s_high[8] / ssgd.epoch_s_low[8]
    total = re.search(r"in all: ([\d,.]+) device-hours \(([\d,.]+)-([\d,.]+)\)", printed)
    assert float(total.group(1).replace(",", "")) == pytest.approx(table.device_hours.sum(), rel=1e-3)


def test_the_built_in_corpus_is_priced_from_its_utterances_and_a_shared_profile_is_refused():
    table, size, name = plan(config_of("config.yaml"), "zhang19b-v100")
    assert name == "espeak" and size.frames == 5000 * BUILTIN_FRAMES_PER_UTTERANCE
    assert set(table.algorithm) == {"seq", "ssgd", "asgd", "kavg", "ma", "adpsgd"} and (table.epochs == 6).all()
    assert table[table.algorithm == "asgd"].ranks.max() == 5  # ASGD's 4 learners and its server
    with pytest.raises(ConfigError, match="this-machine: a plan needs a profile whose devices state their compute"):
        plan(config_of("config.yaml"), "this-machine")
    with pytest.raises(ConfigError, match="^--hardware 'nowhere' is not a profile: .*docs/gpus.md: a hardware profile"):
        plan(config_of("config.yaml"), "nowhere")


def test_a_corpus_of_unknown_size_is_priced_once_its_features_are_extracted(tmp_path, monkeypatch):
    config = config_of("config.yaml", "studies/librispeech.yaml")
    config["corpus"]["subsets"]["train"] = [{"format": "librispeech", "path": str(tmp_path / "my-train")}]
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match="its size is known only once its features are extracted"):
        plan(config, "h100")
    feats = tmp_path / "results" / "librispeech-100" / "feats" / "train"
    feats.mkdir(parents=True)
    (feats / "utt2num_frames").write_text("".join(f"u{i} 1500\n" for i in range(1000)))
    _, size, _ = plan(config, "h100")
    assert (size.utterances, size.frames) == (1000, 1_500_000) and "its features" in size.source
    assert LIBRISPEECH["train-clean-100"][0] == 28_539
