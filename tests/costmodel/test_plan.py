"""A study's price before it is queued (`asrscale plan`): every run it trains, its modelled epoch
and device-hours on a profile, with its own band, from stand-in learners."""

import re

import pandas as pd
import pytest
import yaml

from asrscale.analysis.claims import CLAIMS, STUDIES
from asrscale.analysis.convergence import FINISHED
from asrscale.analysis.decidable import decidable, under_trained_risks
from asrscale.cli import main
from asrscale.config.study import Study
from asrscale.costmodel.fitted import Band
from asrscale.costmodel.plan import (
    BUILTIN_FRAMES_PER_UTTERANCE,
    LARGER_MODEL_GAIN,
    LIBRISPEECH,
    OTHER_JOB_MISSES,
    OTHER_JOBS,
    extrapolation,
    plan,
    subset_size,
)
from asrscale.errors import ConfigError
from asrscale.training.schedule import last_factor
from asrscale.worlds.clock import Compute
from helpers import ROOT


def config_of(*files) -> dict:
    from snakemake.utils import update_config

    config = {}
    for file in files:
        update_config(config, yaml.safe_load((ROOT / file).read_text()))
    return config


def study_of(*files) -> Study:
    return Study(config_of(*files))


def test_the_smoke_study_is_priced_at_its_first_speakers(capfd):
    """corpus.speakers.train: 4 keeps 4 of train-clean-100's 251 speakers: 455 of its 28,539
    utterances, 1.6 of its 100.6 hours, at their mean per speaker."""
    main(
        [
            "plan",
            "--configfile",
            *(
                str(ROOT / name)
                for name in (
                    "config.yaml",
                    "studies/librispeech.yaml",
                    "studies/librispeech-smoke.yaml",
                )
            ),
            "--hardware",
            "h100",
        ]
    )
    printed = capfd.readouterr().out
    assert (
        "455 training utterances, 1.6 hours (LibriSpeech's published subset sizes, its first 4 "
        "speakers of each at their mean share)"
    ) in printed
    # its small prices in significant figures, not rounded to zero; its model (2 × 64) smaller than
    # the one h100's compute was measured on (2 × 128): priced by FLOPs a lower bound
    assert re.search(
        r"seq default +1 +1 +1 +0\.2\d\d s \(0\.2\d\d-0\.6\d\d\) +1 +7\.\d\de-05", printed
    ), printed


@pytest.mark.slow
def test_the_librispeech_study_is_priced_run_by_run_on_h100s(capfd, tmp_path):
    main(
        [
            "plan",
            "--configfile",
            str(ROOT / "config.yaml"),
            str(ROOT / "studies" / "librispeech.yaml"),
            "--hardware",
            "h100",
            "--out",
            str(tmp_path / "plan.tsv"),
        ]
    )
    printed = capfd.readouterr().out
    assert (
        "28,539 training utterances, 100.6 hours (LibriSpeech's published subset sizes)" in printed
    )
    table = pd.read_csv(tmp_path / "plan.tsv", sep="\t")
    # SEQ once; SSGD, KAVG, MA, ADPSGD at 2, 4, 8, 16; H-ADPSGD at 16 (SSGD's in one node)
    assert len(table) == 1 + 4 * 4 + 1 and (table.epochs == 30).all()
    assert table.device_hours.tolist() == pytest.approx(
        (table.epoch_s * 30 * table.ranks / 3600).tolist()
    )
    assert (table.epoch_s_low <= table.epoch_s).all() and (
        table.epoch_s <= table.epoch_s_high
    ).all()
    seq = table[table.algorithm == "seq"].iloc[0]
    ssgd = table[table.algorithm == "ssgd"].set_index("learners")
    assert ssgd.epoch_s[16] < ssgd.epoch_s[2] < seq.epoch_s  # more learners, shorter epochs
    # inside a node and across two, bound by their arithmetic: each band is the model's held-out
    # misses of the figures so bound (0.90-2.0×), wider than the parameters' spread for either,
    # its low edge lowered further by the compute's extrapolation to this model (17 times the
    # FLOPs of the one h100's compute was measured on: its arithmetic as little as 0.18 of it)
    lowest, highest = Band.fitted().misses("arithmetic")
    fewest = 1 / LARGER_MODEL_GAIN
    assert ssgd.bound_by[16] == ssgd.bound_by[8] == "arithmetic"
    for learners in (8, 16):
        carried = (1 - ssgd.outside_share[learners]) * fewest + ssgd.outside_share[learners]
        assert ssgd.epoch_s_high[learners] / ssgd.epoch_s_low[learners] == pytest.approx(
            highest / lowest / carried
        )
    # SEQ's one learner has no band of links, but its extrapolation's
    assert seq.epoch_s_high == seq.epoch_s
    carried = (1 - seq.outside_share) * fewest + seq.outside_share
    assert seq.epoch_s_low == pytest.approx(seq.epoch_s * carried)
    assert seq.epoch_s_low < 0.2 * seq.epoch_s
    assert (
        "the profile's compute was measured on a model of 0.44 MFLOP a frame, this study's has "
        "7.52 (17.2×): each epoch's band holds its arithmetic at 0.18-1.00 times its price"
    ) in printed
    total = re.search(r"training in all: ([\d,.]+) device-hours \(([\d,.]+)-([\d,.]+)\)", printed)
    assert float(total.group(1).replace(",", "")) == pytest.approx(
        table.device_hours.sum(), rel=1e-3
    )


def test_a_models_compute_carried_from_another_size_carries_its_error_in_the_band():
    """Measured on one size alone (h100's), a model 17 times larger is priced by FLOPs, an upper
    bound, at most LARGER_MODEL_GAIN too high, a model half the size a lower bound, at most twice
    too low; with an efficiency curve (by_size), a size between two measured ones lies between
    their efficiencies; a size measured has no band."""
    h100 = Compute("H100", 436_224.0, 658_460, 0.0, 1.045e-6, 0.0018, 0.0443, 1.0)
    assert extrapolation(h100, 436_224.0) == (1.0, 1.0)
    assert extrapolation(h100, 17 * 436_224.0) == (pytest.approx(0.957 / 5.26), 1.0)
    assert extrapolation(h100, 2 * 436_224.0) == (0.5, 1.0)  # no less a frame than measured
    assert extrapolation(h100, 436_224.0 / 2) == (1.0, 2.0)
    # twice the size measured at 1.5 times the time a frame: three quarters the time a FLOP
    curve = Compute(
        "H100", 436_224.0, 658_460, 0.0, 1.0e-6, 0.0018, 0.0443, 1.0, by_size=[[872_448.0, 1.5e-6]]
    )
    assert extrapolation(curve, 872_448.0) == (1.0, 1.0)
    fewest, most = extrapolation(curve, 654_336.0)  # 1.5 times: between the two
    assert fewest < 1 < most and most / fewest == pytest.approx(1 / 0.75)
    assert extrapolation(curve, 4 * 872_448.0)[0] == 0.25  # no less a frame than measured
    assert extrapolation(curve, 8 * 872_448.0)[0] == pytest.approx(1 / LARGER_MODEL_GAIN)


@pytest.mark.slow
def test_the_plan_prices_the_jobs_beside_training_from_every_subsets_size():
    """LibriSpeech's 116.5 hours of audio in four subsets (train-clean-100, dev-clean, test-clean,
    test-other), 32 extraction jobs each; 18 runs decoded (H-ADPSGD at 16 its own; each decoding
    5.4 hours of dev for each of the 9 pairs of LM weight and word bonus, then 10.5 of test)."""
    found = plan(study_of("config.yaml", "studies/librispeech.yaml"), "h100")
    others = found.others.set_index("stage")
    assert others.jobs.to_dict() == {
        "features": 4 * 32,
        "calibrate": 1,
        "log-probs": 18,
        "decode": 18,
    }  # no synthesis: imported
    assert others.cpu_hours["features"] == pytest.approx(116.5 / OTHER_JOBS["features_real_time"])
    dev, tests = 5.4 * 360_000, (5.4 + 5.1) * 360_000
    search_s = (
        dev * 9 * OTHER_JOBS["choose_s_per_frame_and_pair"] + tests * OTHER_JOBS["beam_s_per_frame"]
    )
    assert others.cpu_hours["decode"] == pytest.approx(18 * search_s / 3600, rel=1e-3)
    assert (
        others.device_hours["decode"] == 0 == others.cpu_hours["log-probs"]
    )  # a GPU's job, a CPU's
    assert (
        0 < others.device_hours["log-probs"] < found.runs.device_hours.sum() / 100
    )  # forward passes on H100s
    smoke = plan(
        study_of("config.yaml", "studies/librispeech.yaml", "studies/librispeech-smoke.yaml"),
        "h100",
    )
    hours = (
        100.6 * 4 / 251 + 5.4 * 2 / 40 + 5.4 * 2 / 40 + 5.1 * 2 / 33
    )  # speakers: {train: 4, dev: 2, test: 2}
    assert smoke.others.set_index("stage").cpu_hours["features"] == pytest.approx(
        hours / OTHER_JOBS["features_real_time"], rel=1e-3
    )
    assert smoke.size.utterances == round(28_539 * 4 / 251)


def test_the_built_in_corpus_is_priced_from_its_utterances_and_a_shared_profile_is_refused(
    tmp_path, monkeypatch
):
    monkeypatch.chdir(
        tmp_path
    )  # no features extracted here (README command 1 leaves its own in results/)
    found = plan(study_of("config.yaml"), "zhang19b-v100")
    table, size = found.runs, found.size
    assert found.study == "espeak" and size.frames == 5000 * BUILTIN_FRAMES_PER_UTTERANCE
    others = found.others.set_index("stage")
    # decoded: SEQ, ASGD and MA alone; at 4 every algorithm but H-ADPSGD (SSGD's run in one node)
    assert others.jobs["decode"] == 9 and others.cpu_hours["features"] == pytest.approx(
        (5000 + 300 + 1000)
        * BUILTIN_FRAMES_PER_UTTERANCE
        / 360_000
        / OTHER_JOBS["features_real_time"]
    )
    # its synthesis priced too; each stage's band its misses on the studies run since, widened to
    # hold the price
    assert (
        others.cpu_hours["synthesise"] == pytest.approx(6300 * 34.0 / 6300 / 3600)
        and others.jobs["synthesise"] == 2
    )
    for stage, (low, high) in OTHER_JOB_MISSES.items():
        hours = "device_hours" if stage in ("calibrate", "log-probs") else "cpu_hours"
        band = others.loc[stage, [f"{hours}_low", f"{hours}_high"]] / others.loc[stage, hours]
        assert tuple(band) == pytest.approx((min(1, low), max(1, high)))
    assert others.cpu_hours_high["decode"] == pytest.approx(1.21 * others.cpu_hours["decode"])
    assert (
        set(table.algorithm) == {"seq", "ssgd", "asgd", "kavg", "ma", "adpsgd", "bmuf"}
        and (table.epochs == 6).all()
    )
    assert table[table.algorithm == "asgd"].ranks.max() == 5  # ASGD's 4 learners and its server
    with pytest.raises(
        ConfigError, match="this-machine: a plan needs a profile whose devices state their compute"
    ):
        plan(study_of("config.yaml"), "this-machine")
    with pytest.raises(
        ConfigError,
        match="^--hardware 'nowhere' is not a profile: .*docs/gpus.md: a hardware profile",
    ):
        plan(study_of("config.yaml"), "nowhere")


def test_a_corpus_of_unknown_size_is_priced_once_its_features_are_extracted(tmp_path, monkeypatch):
    config = config_of("config.yaml", "studies/librispeech.yaml")
    config["corpus"]["subsets"]["train"] = [
        {"format": "librispeech", "path": str(tmp_path / "my-train")}
    ]
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match="its size is known only once its features are extracted"):
        plan(Study(config), "h100")
    feats = tmp_path / "results" / "librispeech-100" / "feats" / "train"
    feats.mkdir(parents=True)
    (feats / "utt2num_frames").write_text("".join(f"u{i} 1500\n" for i in range(1000)))
    size = plan(Study(config), "h100").size
    assert (size.utterances, size.frames) == (1000, 1_500_000) and "its features" in size.source
    assert LIBRISPEECH["train-clean-100"][0] == 28_539


def decides(*files) -> pd.DataFrame:
    study = study_of("config.yaml", *files)
    return decidable(study, subset_size(study).utterances)


@pytest.mark.slow
def test_the_plan_says_which_halves_a_study_can_decide_and_why_not_the_others(capfd):
    """claims-at-4 (3 seeds, a fixed schedule, modelled speed) can decide the accuracy halves at 4
    learners, the one it is named for and the ASGD pair that asgd-at-4 decides at more epochs, and
    no speed half; the default study (newbob, 1 seed) none; LibriSpeech's one seed on GPUs fails on
    seeds or newbob, not on GPUs."""
    found = decides("studies/claims-at-4.yaml")
    assert set(found[found.can_decide].claim.str.split(": ", n=1).str[1]) == {
        claim.claim for claim in CLAIMS if claim.decided_by in ("claims-at-4", "asgd-at-4")
    }
    assert (found[found.can_decide].half == "accuracy").all() and found.can_decide.sum() == 3
    speed = found[found.half == "speed"]
    assert speed.why_not.str.contains(
        "asrscale does not run|modelled on zhang19b-v100$|no .* run"
    ).all()
    assert not speed.why_not.str.contains("×").any()  # no placeholder's speedup said as a figure
    default = decides()
    assert not default.can_decide.any()
    kavg = default[default.claim.str.contains("KAVG with 4 learners")].why_not.iloc[0]
    assert (
        "unequal updates a learner (SEQ 157, KAVG P=4 40)" in kavg
    )  # 5,000 utterances, batch 32 and 4 × 32
    main(
        [
            "plan",
            "--configfile",
            str(ROOT / "config.yaml"),
            str(ROOT / "studies" / "librispeech.yaml"),
            "--hardware",
            "h100",
        ]
    )
    printed = capfd.readouterr().out
    assert "it can decide 0 of the 19 claims' halves, if their runs converge:\n  none\n" in printed
    assert (
        "needs GPUs" not in printed and "4 GPUs measured" not in printed
    )  # its runs are measured on GPUs


@pytest.mark.parametrize("study", sorted(STUDIES))
def test_each_study_of_studies_can_decide_the_halves_it_is_named_for(study):
    """A study the report sends a reader to (claims.STUDIES) can decide, as configured, the accuracy
    half of every claim it is named for, whatever its runs then measure."""
    found = decides(f"studies/{study}.yaml")
    named = {claim.claim for claim in CLAIMS if claim.decided_by == study and claim.accuracy}
    accuracy = found[
        (found.half == "accuracy") & found.claim.str.split(": ", n=1).str[1].isin(named)
    ]
    assert len(accuracy) == len(named) and accuracy.can_decide.all(), accuracy.why_not.tolist()


@pytest.mark.slow
def test_a_halved_grids_runs_are_priced_for_their_share_of_its_epochs():
    """3 rates a configuration, halved after epoch 2 of 6 keeping 1: each grid run 2 + 4 / 3 epochs;
    its tuned runs at other seeds all 6."""
    config = config_of("config.yaml")
    config["study"] |= {
        "seeds": [1, 2],
        "tuning": {"lr_factors": [0.5, 1, 2], "halving": {"epoch": 2, "keep": 1}},
    }
    table = plan(Study(config), "zhang19b-v100").runs
    grid = table.variant.str.startswith("train.lr=")
    assert grid.sum() == 3 * 9 and table[grid].epochs.tolist() == pytest.approx([2 + 4 / 3] * 3 * 9)
    assert (table[~grid].variant == "tuned").all() and table[~grid].epochs.eq(6).all()


@pytest.mark.parametrize("study", sorted(STUDIES))
def test_every_study_that_decides_an_accuracy_half_finishes_its_schedule(study):
    """A run whose schedule stops above 2% of its peak rate cannot converge (docs/studies.md):
    every study the report sends a reader to anneals its fixed epochs to 2% or less."""
    study = study_of("config.yaml", f"studies/{study}.yaml")
    assert under_trained_risks(study, 8000) == []
    for run in study.runs():
        last = last_factor(study.run_settings(study.trained_as(run))["train"])
        assert last is None or last <= FINISHED


def test_a_plan_warns_of_a_schedule_that_stops_early_and_of_runs_whose_likes_were_steep():
    """claims-at-4 with its record's schedule (x0.9 an epoch for 20: 13.5% at the last) cannot
    converge; KAVG at 4 planned for 1,250 updates, where its recorded likes had flattened, is not
    warned of; planned for 300, where they were still gaining several % an epoch, it is."""
    config = config_of("config.yaml", "studies/claims-at-4.yaml")
    config["train"] |= {"schedule": "exponential", "lr_decay": 0.9}
    old = under_trained_risks(Study(config), 8000)
    assert any(
        risk.startswith("kavg at 4: its schedule stops at 13.5% of its peak rate") for risk in old
    )
    recorded = pd.DataFrame(
        {
            "study": "claims-at-4",
            "corpus": "espeak8k",
            "run": ["a"] * 3 + ["b"] * 3,
            "algorithm": "kavg",
            "global_batch": 128,
            "updates": [250, 500, 1250] * 2,
            "gain": [0.05, 0.03, 0.001] * 2,
            "plateau": 0.002,
        }
    )
    study = study_of("config.yaml", "studies/claims-at-4.yaml")
    assert not [r for r in under_trained_risks(study, 8000, recorded) if r.startswith("kavg")]
    short = study_of("config.yaml", "studies/claims-at-4.yaml")
    short.config["train"]["epochs"] = 5  # 62 updates a learner an epoch at 4 × 32: 310
    risks = [r for r in under_trained_risks(short, 8000, recorded) if r.startswith("kavg")]
    assert risks == [
        "kavg at 4 (global batch 128, 315 updates a learner): 2 recorded runs like it "
        "(claims-at-4) were still gaining 5.00% an epoch (their median) after as many updates, 5 "
        "times the plateau or more: it may end under-trained (more epochs, or a larger corpus)"
    ]
    assert under_trained_risks(short, 8000, recorded.assign(algorithm="ma")) == []
    assert under_trained_risks(short, 8000, recorded.assign(corpus="librispeech-100")) == []


def test_the_librispeech_claims_study_can_decide_the_halves_a_16_gpu_cluster_can():
    """3 seeds, a finished fixed-epoch schedule, every side tuned, on real ranks on GPUs: the
    accuracy and speed halves at 4 and 16 learners (KAVG and the ASGD pair at 4, BMUF at 16)."""
    found = decides("studies/librispeech.yaml", "studies/librispeech-claims.yaml")
    can = found[found.can_decide]
    assert sorted(zip(can.claim.str.split(":").str[0], can.half)) == [
        ("chen16", "accuracy"),
        ("chen16", "speed"),
        ("cong17", "accuracy"),
        ("cong17", "accuracy"),
        ("cong17", "speed"),
        ("zhang13", "accuracy"),
        ("zhang13", "speed"),
    ]


@pytest.mark.slow
def test_a_laptop_studys_plan_says_its_wall_time_at_this_machines_speed(capfd, monkeypatch):
    """claims-at-4 states its wall time at the speed it was measured at: the plan times this
    machine and scales it; LibriSpeech's cluster study states none and says nothing of it."""
    import asrscale.costmodel.calibration as calibration

    monkeypatch.setattr(calibration, "machine_rate", lambda: 23_050.0)
    for study, hardware in (("claims-at-4", "zhang19b-v100"), ("librispeech", "h100")):
        main(
            [
                "plan",
                "--configfile",
                str(ROOT / "config.yaml"),
                str(ROOT / "studies" / f"{study}.yaml"),
                "--hardware",
                hardware,
            ]
        )
    claims, librispeech = capfd.readouterr().out.split("librispeech on h100")
    assert (
        "its wall time: this machine: 23,050 frames/s on one thread (the default BLSTM at batch "
        "32), 0.38 times the 60,700 at which the study took 1 h 9 min: about 3 h 1 min here"
    ) in claims
    assert "its wall time" not in librispeech
