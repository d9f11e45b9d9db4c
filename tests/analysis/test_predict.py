"""Time to accuracy predicted from a pilot (asrscale.analysis.predict): the steps model on a
problem whose critical batch is known, a pilot read from its results or its record, each
algorithm's own penalty from the recorded studies, and the prediction's table."""

import json
import math
import re

import numpy as np
import pandas as pd
import pytest

from asrscale.analysis.predict import (
    Pilot,
    differences,
    epochs_factor,
    epochs_to,
    first_within,
    own_penalties,
    penalty_for,
    predict,
    read_pilot,
    standing_records,
    steps,
    validation,
)
from asrscale.cli import main
from asrscale.errors import UserError
from helpers import ROOT

# ---- the steps model on a quadratic whose critical batch is known ----
#
# L(w) = ½ Σ λ_i w_i², curvatures λ log-spaced over 1 to 1/100, every direction starting with the
# same loss. One example's gradient is Hw plus Gaussian noise of covariance Σ = s² H, with
# s² = C · wᵀH³w / tr(H²): then tr(HΣ) / (GᵀHG) = C at every w, McCandlish et al.'s critical
# batch (their B_noise; the simple noise scale tr(Σ)/|G|² equals it at the start). SGD's expected
# loss then follows the second moments m_i = E[w_i²] exactly: m_i ← (1 − ελ_i)² m_i + ε² s² λ_i / B.
CRITICAL, DIMENSIONS, TARGET = 64, 20, 100.0  # steps until the loss is a hundredth of its start
CURVATURES = np.logspace(0, -2, DIMENSIONS)
RATES = np.exp(np.linspace(math.log(1e-3), math.log(2.5), 120))  # one grid for every batch


def step(moments: np.ndarray, rates: np.ndarray, batch: float) -> np.ndarray:
    """One SGD step's expected second moments, a row for each rate."""
    with np.errstate(over="ignore", invalid="ignore"):
        noise = CRITICAL * (moments @ CURVATURES**3) / (CURVATURES**2).sum()
        found = (1 - rates[:, None] * CURVATURES) ** 2 * moments + rates[:, None] ** 2 * noise[
            :, None
        ] * CURVATURES / batch
    return np.where(np.isfinite(found), found, np.inf)


def steps_to_target(batch: float, cap: int = 3000) -> int:
    """The fewest steps of SGD at `batch` to the target loss, at the best constant rate of the
    grid (each batch tuned alike, as the studies tune)."""
    moments = np.tile(1 / CURVATURES, (len(RATES), 1))
    start = 0.5 * moments[0] @ CURVATURES
    for done in range(cap):
        if (0.5 * moments @ CURVATURES <= start / TARGET).any():
            return done
        moments = step(moments, RATES, batch)
    raise AssertionError(f"no rate reached the target at batch {batch} in {cap} steps")


def test_sgds_expected_loss_is_the_simulated_runs_mean():
    """The recursion the steps test rests on, against 400 sampled runs of SGD at batch 16."""
    generator = np.random.default_rng(0)
    runs, rate, batch = 400, 0.3, 16
    weights = np.tile(1 / np.sqrt(CURVATURES), (runs, 1))
    moments = np.tile(1 / CURVATURES, (1, 1))
    for _ in range(40):
        gradient = weights * CURVATURES
        scale = np.sqrt(CRITICAL * (weights**2 @ CURVATURES**3) / (CURVATURES**2).sum())
        noise = generator.standard_normal((runs, DIMENSIONS)) * np.sqrt(CURVATURES)
        weights = weights - rate * (gradient + scale[:, None] * noise / np.sqrt(batch))
        moments = step(moments, np.array([rate]), batch)
    sampled = 0.5 * (weights**2 @ CURVATURES)
    expected = 0.5 * moments[0] @ CURVATURES
    assert sampled.mean() == pytest.approx(expected, rel=4 * sampled.std() / math.sqrt(runs))


def test_steps_to_a_loss_follow_the_steps_model_at_the_known_critical_batch():
    """S(B) = S_min (1 + B_noise/B) within 25% for every pair of batches 16 times apart from C/16
    to 16C: the model takes the path to the target as the same at every batch, where here the
    noise moves it (the fitted critical batch is about 0.7-0.9 of C), and the rate is one a batch,
    not the best at each step. Perfect scaling (S ∝ 1/B) and none (S the same) each miss some pair
    by 2.5 times or more."""
    batches = [4, 8, 16, 32, 64, 128, 256, 512, 1024]
    found = {batch: steps_to_target(batch) for batch in batches}
    fewest = steps_to_target(1e12)
    misses = {"model": [], "epochs": [], "perfect scaling": [], "none": []}
    for small, large in zip(batches, batches[4:]):
        simulated = found[small] / found[large]
        epochs = small * found[small] / (large * found[large])  # a larger batch's epoch: fewer
        misses["model"].append(steps(small, CRITICAL, fewest) / steps(large, CRITICAL, fewest))
        misses["model"][-1] /= simulated
        misses["epochs"].append(epochs_factor(small, large, CRITICAL) / epochs)
        misses["perfect scaling"].append(large / small / simulated)
        misses["none"].append(1 / simulated)
    worst = {name: max(max(m, 1 / m) for m in found) for name, found in misses.items()}
    assert worst["model"] < 1.25 and worst["epochs"] < 1.25, worst
    assert worst["perfect scaling"] > 2.5 and worst["none"] > 2.5, worst
    # at the critical batch, about twice the fewest steps (McCandlish et al.'s definition)
    assert found[CRITICAL] / fewest == pytest.approx(2, rel=0.25)


def test_the_epochs_factor_is_one_at_seqs_batch_and_grows_past_the_noise_scale():
    assert epochs_factor(32, 32, 50) == 1
    assert epochs_factor(128, 32, 50) == pytest.approx((1 + 128 / 50) / (1 + 32 / 50))
    assert epochs_factor(64, 32, 1e9) == pytest.approx(1)  # far below it: as many epochs
    assert epochs_factor(3200, 32, 1.0) == pytest.approx(3201 / 33)  # far past: as many steps


# ---- a pilot, read from its results folder or its record ----


def write_pilot(folder, noise=(40.0, 55.0, 60.0, 58.0), corpus="mine", record=False):
    """A pilot's gathered tables (or record): SEQ at batch 32, its dev TER and noise scale at each
    epoch's end."""
    folder.mkdir(parents=True)
    run = "results/mine/studies/pilot/runs/sim/seq/default/P1/seed1"
    runs = pd.DataFrame(
        [
            {
                "algorithm": "seq",
                "variant": "default",
                "learners": 1,
                "seed": 1,
                "run": run,
                "trained_as": "seq",
                "global_batch": 32,
                "parameters": 658_460,
                "lr": 8.1,
                "optimizer": "sgd",
            }
        ]
    )
    ter = [0.40, 0.25, 0.20, 0.19]
    epochs = pd.DataFrame(
        {
            "kind": "epoch",
            "epoch": range(1, len(noise) + 1),
            "run": run,
            "dev_ter": ter[: len(noise)],
            "noise_scale": noise,
        }
    )
    settings = {"title": "a pilot", "config": {"corpus": {"name": corpus}}}
    suffix = ".tsv.gz" if record else ".tsv"
    runs.to_csv(folder / f"runs{suffix}", sep="\t", index=False)
    epochs.to_csv(folder / f"epochs{suffix}", sep="\t", index=False)
    if record:
        (folder / "record.json").write_text(json.dumps({"report": settings}))
    else:
        (folder / "settings").mkdir()
        (folder / "settings" / "report.json").write_text(json.dumps(settings))
    return folder


@pytest.mark.parametrize("record", [False, True])
def test_a_pilot_is_read_from_its_results_or_its_record(tmp_path, record):
    pilot = read_pilot(write_pilot(tmp_path / "pilot", record=record))
    assert (pilot.corpus, pilot.batch, pilot.optimizer, pilot.lr) == ("mine", 32, "sgd", 8.1)
    # the last epoch's noise scale, banded by the last 3
    assert (pilot.noise, pilot.noise_low, pilot.noise_high) == (58.0, 55.0, 60.0)
    assert pilot.epochs == 4 and pilot.epochs_to_target == 4  # 0.19 is the best; 0.20 is 5.3% off
    assert "a noise scale of 58 utterances" in pilot.said()


def test_a_pilot_without_its_tables_or_noise_scale_is_refused_by_name(tmp_path):
    with pytest.raises(UserError, match="--pilot .*nowhere: neither a study's gathered results"):
        read_pilot(tmp_path / "nowhere")
    folder = write_pilot(tmp_path / "old", noise=(math.nan,) * 4)
    with pytest.raises(UserError, match="--pilot .*old: its SEQ run measured no gradient noise"):
        read_pilot(folder)


def test_the_pilot_is_compared_with_the_studys_seq():
    pilot = Pilot("p", "espeak8k", 658_460, 32, 8.1, "sgd", 50.0, 40.0, 60.0, 6, 5)
    same = pd.Series({"parameters": 658_460, "global_batch": 32, "optimizer": "sgd", "lr": 8.1})
    assert differences(pilot, "espeak8k", same) == []
    other = pd.Series({"parameters": 11_000_000, "global_batch": 16, "optimizer": "sgd", "lr": 2.0})
    found = differences(pilot, "librispeech-100", other)
    assert found[0] == "its corpus is espeak8k, not this study's librispeech-100"
    assert len(found) == 4


# ---- the records: each algorithm's own penalty, and the model's validation ----


def test_curves_reach_a_level_between_their_epochs():
    curve = np.array([0.5, 0.3, 0.2, 0.2])
    assert epochs_to(curve, 0.25) == pytest.approx(2.5)
    assert epochs_to(curve, 0.6) == 1.0 and math.isnan(epochs_to(curve, 0.1))
    assert first_within(curve, 0.2) == 3 and first_within(curve, 0.1) is None


def test_each_algorithms_own_penalty_is_read_from_its_ssgd_control_in_the_records():
    penalties = own_penalties(standing_records(ROOT / "records")).set_index(
        ["record", "algorithm", "learners"]
    )
    kavg = penalties.loc[("claims-at-4", "kavg", 4)]
    assert kavg.control == "SSGD at 4"
    assert kavg.reaches and 1.0 < kavg.factor < 1.2
    # at 64 learners the control is SSGD at the same global batch (128) and budget: bmuf's at 16
    assert penalties.loc[("bmuf-64", "kavg", 64)].control == "SSGD at 16 of records/bmuf"
    # ASGD's batch is SEQ's: SEQ is its control; far short of it, as BMUF is of SSGD
    asgd = penalties.loc[("asgd-at-4", "asgd", 4)]
    assert asgd.control == "SEQ at 1" and not asgd.reaches
    assert asgd.gap > 0.3 and not penalties.loc[("bmuf", "bmuf", 16)].reaches


def test_a_planned_configuration_takes_the_nearest_recorded_penalty_or_ssgds():
    penalties = own_penalties(standing_records(ROOT / "records"))
    assert penalty_for("kavg", 4, penalties).said.startswith("×1.09 the epochs (records/claims")
    assert "as at 16" in penalty_for("kavg", 12, penalties).said
    asgd = penalty_for("asgd", 4, penalties)  # asgd-at-4, the longer budget, over claims-at-4's
    assert not asgd.reaches and "records/asgd-at-4" in asgd.said
    assert asgd.said.startswith("not predicted to reach the target")
    assert penalty_for("ma", 16, penalties).said == "no record: assumed as SSGD at its global batch"
    assert penalty_for("ssgd", 16, penalties).factor == 1


def test_the_prediction_multiplies_seqs_epochs_by_the_batchs_factor_and_the_penalty():
    pilot = Pilot("p", "espeak8k", 658_460, 32, 8.1, "sgd", 50.0, 40.0, 60.0, 6, 5)
    planned = pd.DataFrame(
        [
            ("seq", 1, 32, 1, 100.0),
            ("ssgd", 4, 128, 4, 30.0),
            ("kavg", 4, 128, 4, 25.0),
            ("asgd", 4, 32, 5, 26.0),
        ],
        columns=["algorithm", "learners", "global_batch", "ranks", "epoch_s"],
    ).assign(epoch_s_low=lambda t: t.epoch_s * 0.5, epoch_s_high=lambda t: t.epoch_s * 2, budget=16)
    penalties = own_penalties(standing_records(ROOT / "records"))
    table = predict(planned, pilot, penalties).set_index("algorithm")
    assert table.epochs["seq"] == 16  # the study's budget: the pilot reached its target sooner
    factor = epochs_factor(128, 32, 50.0)
    assert table.epochs["ssgd"] == pytest.approx(16 * factor)
    # a larger noise scale, fewer epochs past SEQ's batch
    assert table.epochs_low["ssgd"] == pytest.approx(16 * epochs_factor(128, 32, 60.0))
    assert table.time_s_high["ssgd"] == pytest.approx(16 * epochs_factor(128, 32, 40.0) * 60)
    kavg = penalty_for("kavg", 4, penalties).factor
    assert table.epochs["kavg"] == pytest.approx(16 * factor * kavg)
    assert math.isinf(table.epochs["asgd"]) and table.speedup["asgd"] == 0
    assert table.speedup["ssgd"] == pytest.approx(1600 / (16 * factor * 30))
    assert table.device_hours["ssgd"] == pytest.approx(16 * factor * 30 * 4 / 3600)


def test_the_validation_predicts_each_recorded_configuration_from_seqs_epochs():
    table = validation(standing_records(ROOT / "records"), 50.0, (0.05, 0.5))
    ssgd = table[(table.algorithm == "ssgd") & (table.learners == 4)].set_index("margin")
    # SEQ in claims-at-4 came within 5% of its best at epoch 9 and within 50% at epoch 3
    assert ssgd.seq_epochs.tolist() == [9, 3]
    assert ssgd.predicted.tolist() == pytest.approx(
        [9 * epochs_factor(128, 32, 50), 3 * 2.17], 0.01
    )
    assert math.isnan(ssgd.measured[0.05]) and ssgd.measured[0.5] == 7  # never within 5%
    assert table[table.algorithm == "asgd"].predicted.isna().all()  # not predicted to reach it


def test_the_plan_predicts_each_configurations_time_to_accuracy_and_warns_of_anothers_pilot(
    tmp_path, capfd
):
    """The smoke study (SEQ at batch 16, SSGD at 2, one epoch) from a pilot of the built-in
    corpus: SEQ's epochs the pilot's 4 (more than the study's one), SSGD's those times the batch's
    factor, loudly said to rest on another corpus's pilot."""
    pilot = write_pilot(tmp_path / "pilot", corpus="espeak8k", record=True)
    files = ("config.yaml", "studies/librispeech.yaml", "studies/librispeech-smoke.yaml")
    main(
        ["plan", "--configfile", *(str(ROOT / name) for name in files), "--hardware", "h100"]
        + ["--pilot", str(pilot)]
    )
    printed = capfd.readouterr().out
    said = printed[printed.index("time to accuracy, predicted from the pilot") :]
    assert said.startswith(
        f"time to accuracy, predicted from the pilot {pilot} (SEQ on corpus espeak8k, batch 32"
    )
    assert (
        "WARNING: this pilot is not this study's SEQ: its corpus is espeak8k, not this study's "
        "librispeech-smoke;" in said
    )
    assert "WARNING (again): the pilot is another setting's" in said
    assert (
        "the target: the dev TER SEQ reaches in 4 epochs (the pilot's epochs to within 5% of its "
        "best dev TER, more than the study's budget for SEQ of 1)" in said
    )
    ssgd = re.search(r"\n +ssgd +2 +32 +([\d.]+) \(([\d.]+)-([\d.]+)\)", said)
    assert float(ssgd.group(1)) == pytest.approx(4 * epochs_factor(32, 16, 58.0), abs=0.05)
    assert float(ssgd.group(2)) == pytest.approx(4 * epochs_factor(32, 16, 60.0), abs=0.05)
    assert "soonest to the target, at 2: SSGD" in said
    assert "ssgd at 2: 5 epochs, beyond the 1 it is given" in said
