"""The regime each verdict across global batches measured (asrscale.analysis.regime): the batches
beside the corpus's gradient noise scale as SEQ measured it, on both sides of it; the report's
figure of it and the plan's lines."""

import pandas as pd
import pytest
from test_claims import SEQ, row, runs

from asrscale.analysis.figures import noise_scale
from asrscale.analysis.halves import better, matches, worse
from asrscale.analysis.regime import measured, rounded, sentence
from asrscale.cli import main
from helpers import ROOT


def table(seq_noise: list[float], kavg_batch: int = 128) -> pd.DataFrame:
    """SEQ's runs at batch 32, each with its noise scale at its last epoch, and KAVG's at 4."""
    seq = pd.DataFrame(
        {
            "algorithm": "seq",
            "variant": "default",
            "learners": 1,
            "global_batch": 32,
            "noise_scale": seq_noise,
            "run": [f"seq/{i}" for i in range(len(seq_noise))],
        }
    )
    kavg = pd.DataFrame(
        {"algorithm": ["kavg"], "variant": "default", "learners": 4, "global_batch": kavg_batch}
    )
    return pd.concat([seq, kavg.assign(noise_scale=60.0, run="kavg/0")])


def said(found: pd.DataFrame, rule=None) -> str:
    sides = [
        ("KAVG P=4", found[found.algorithm == "kavg"]),
        ("SEQ", found[found.algorithm == "seq"]),
    ]
    return sentence(found, *sides, rule or matches())


def test_a_batch_past_the_noise_scale_is_the_large_batch_regime_and_outside_a_no_loss_claims():
    # SEQ's three runs measured 38, 40 and 45: the median, 40; KAVG's own 60 is not the corpus's
    text = said(table([38.0, 40.0, 45.0]))
    assert text.startswith(
        "; global batches 128 (KAVG P=4) and 32 (SEQ) against the corpus's noise scale of about "
        "40 (SEQ's at its last epoch, the median of 3 runs): KAVG P=4's past it, the large-batch "
        "regime"
    ), text
    assert "SEQ's at or below it: the control's share of a gap is the batch's" in text
    assert "the study's claim (KAVG P=4: matches SEQ's accuracy) was made below" in text
    assert "the claim is measured outside its regime" in text
    # a claim that KAVG is less accurate is not one of no loss: said in its regime alone
    assert "outside its regime" not in said(table([40.0]), worse())
    assert "outside its regime" in said(table([40.0]), better())


def test_below_the_noise_scale_both_batches_are_the_small_batch_regime():
    text = said(table([400.0]))
    assert (
        "against the corpus's noise scale of about 400 (SEQ's at its last epoch, one run)" in text
    )
    assert "both at or below it, the small-batch regime" in text
    assert "outside" not in text
    # at the noise scale itself a batch is not past it
    assert "both at or below it" in said(table([128.0]))
    assert "both past it, the large-batch regime" in said(table([20.0]))


def test_no_sentence_at_one_global_batch_or_without_a_measurement():
    assert said(table([40.0], kavg_batch=32)) == ""
    assert said(table([float("nan")])) == "" and measured(table([float("nan")])) is None
    assert said(table([40.0]).drop(columns="noise_scale")) == ""
    assert "no regime said" in said(table([float("inf")]))
    assert [rounded(v) for v in (7.46, 65.3, 123.0, 12_345.0)] == ["7.5", "65", "120", "12,000"]


def test_the_verdict_of_kavg_at_4_names_the_regime_it_measured():
    found = runs(SEQ, ("kavg", 4, 1, 0.2, 3.9))
    found = found.assign(noise_scale=found.algorithm.map({"seq": 40.0, "kavg": 90.0}))
    measured_text = row(found, "KAVG with 4").accuracy_measured
    assert "global batches 128 (KAVG P=4) and 32 (SEQ) against the corpus's noise scale of " in (
        measured_text
    )
    assert "about 40 (SEQ's at its last epoch, the median of 3 runs)" in measured_text
    # the verdict stays decided
    assert row(found, "KAVG with 4").accuracy.startswith("reproduced")
    assert (
        "noise scale"
        not in row(runs(SEQ, ("kavg", 4, 1, 0.2, 3.9)), "KAVG with 4").accuracy_measured
    )


def test_the_report_draws_the_noise_scale_against_each_global_batch():
    found = table([38.0, 40.0]).assign(trained_as=lambda t: t.algorithm)
    epochs = pd.concat(
        [
            pd.DataFrame(
                {"algorithm": a, "learners": p, "run": r, "epoch": [1, 2, 3], "noise_scale": v}
            )
            for a, p, r, v in (
                ("seq", 1, "seq/0", [20.0, 30.0, 38.0]),
                ("seq", 1, "seq/1", [22.0, 31.0, 40.0]),
                ("kavg", 4, "kavg/0", [25.0, 40.0, 60.0]),
            )
        ]
    )
    axis = noise_scale(found, epochs, None).axes[0]
    lines = {line.get_ydata()[0] for line in axis.lines if len(set(line.get_ydata())) == 1}
    assert {32, 128} <= lines
    labels = [text.get_text() for text in axis.texts]
    assert "global batch 32: SEQ 1" in labels and "global batch 128: KAVG 4" in labels


@pytest.mark.slow
def test_the_plan_says_each_configurations_regime_once_a_run_has_measured_it(
    tmp_path, monkeypatch, capfd
):
    monkeypatch.chdir(tmp_path)
    command = ["plan", "--configfile", str(ROOT / "config.yaml"), "--hardware", "h100"]
    main(command)
    assert "no run of corpus espeak has measured its gradient noise scale" in capfd.readouterr().out
    gathered = tmp_path / "results" / "espeak" / "studies" / "espeak"
    gathered.mkdir(parents=True)
    table([60.0, 65.0, 70.0]).to_csv(gathered / "runs.tsv", sep="\t", index=False)
    main(command)
    printed = capfd.readouterr().out
    assert "in espeak, the corpus's noise scale of about 65 (SEQ's at its last epoch" in printed
    assert "seq at 1: global batch 32 (the small-batch regime)" in printed
    assert "kavg at 4: global batch 128 (the large-batch regime)" in printed
    # ASGD's server applies each learner's minibatch alone
    assert "asgd at 4: global batch 32 (the small-batch regime)" in printed
