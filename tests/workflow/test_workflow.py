"""The workflow end to end on a tiny study, and its configuration checks."""

import base64
import io
import json
import os
import re
import shutil
from pathlib import Path
from unittest import mock

import pandas as pd
import pytest
import yaml

from asrscale.analysis.claims import CLAIMS
from asrscale.analysis.measures import beyond_p
from asrscale.config.paths import TABLES
from helpers import ROOT, recomputed_wer, run_snakemake

pytestmark = pytest.mark.slow  # starts Snakemake, MPI ranks, SLURM or a browser

TINY = ROOT / "studies" / "quick.yaml"


def snakemake(workdir: Path, *arguments, configfile: Path = TINY, check=True):
    return run_snakemake(workdir, *arguments, configfile=configfile, check=check)


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("study")
    snakemake(workdir)
    return workdir


STUDY = Path("results") / "tiny" / "studies" / "tiny"


def table(study: Path, name: str) -> pd.DataFrame:
    return pd.read_csv(study / STUDY / f"{name}.tsv", sep="\t")


def page_of(study: Path) -> str:
    return (study / "reports" / "tiny.html").read_text()


def expected_runs() -> list[tuple]:
    """(world, algorithm, variant, learners, seed) of every run quick.yaml configures, sweeps
    included."""
    config = yaml.safe_load(TINY.read_text())
    return sorted(
        (r.get("world", "simulated"), r["algorithm"], "default", p, seed)
        for r in config["study"]["runs"]
        for p in r["learners"]
        for seed in r.get("seeds", [1])
    ) + [
        ("simulated", "ssgd", "train.batch_size=4", 2, 1),
        ("simulated", "ssgd", "train.lr=10000", 2, 1),
    ]


def test_every_run_is_gathered_with_real_scores_and_the_diverged_one_with_none(study):
    runs = table(study, "runs")
    assert (
        sorted(zip(runs.world, runs.algorithm, runs.variant, runs.learners, runs.seed))
        == expected_runs()
    )
    diverged = runs.diverged.notna()
    assert runs[diverged].variant.tolist() == ["train.lr=10000"]  # a result of nothing
    assert runs[diverged][["wer", "train_s", "frames_per_s", "time_speedup"]].isna().all(axis=None)
    assert "untrained model's dev loss" in runs[diverged].diverged.iloc[0]
    runs = runs[~diverged]
    assert (
        runs.train_s.gt(0).all() and runs.frames_per_s.gt(0).all() and runs.lm_weight.notna().all()
    )
    test_set = study / "results" / "tiny" / "data" / "test"
    for (
        run
    ) in runs.itertuples():  # both decodes of every run, scored against the test set's own text
        assert run.wer == pytest.approx(recomputed_wer(study / run.run / "test", test_set, "lm")), (
            run.run
        )
        assert run.greedy_wer == pytest.approx(
            recomputed_wer(study / run.run / "test", test_set, "greedy")
        ), run.run
    assert set(runs.speedup_kind) == {"measured", "modelled on this-machine"} and set(
        runs.device
    ) == {"cpu"}
    assert (
        set(runs.stopped_by) == {"budget"} and (runs.converged_by == "budget").all()
    )  # 2 epochs: its budget


def test_each_run_scores_every_test_utterance_for_the_bootstrap(study):
    """Each run's alignments, and its word errors per test utterance, which add up to its WERs,
    each with the speaker the test set's utt2spk names (the intervals draw a speaker's together)."""
    runs, utterances = table(study, "runs"), table(study, "utterances")
    for run in runs[runs.diverged.isna()].itertuples():
        alignment = (study / run.run / "test" / "alignment.lm.txt").read_text()
        assert alignment.startswith("id: ") and "\nREF:  " in alignment and "\nEval: " in alignment
        scored = utterances[utterances.run == run.run]
        assert len(scored) == 24 and scored.lm_errors.sum() / scored.words.sum() == pytest.approx(
            run.wer
        )
        assert scored.greedy_errors.sum() / scored.words.sum() == pytest.approx(run.greedy_wer)
        utt2spk = dict(
            line.split()
            for line in (study / "results/tiny/data/test/utt2spk").read_text().splitlines()
        )
        assert scored.set_index("utt").speaker.to_dict() == {
            utt: utt2spk[utt] for utt in scored.utt
        }


def test_a_straggler_makes_ssgds_fast_learner_wait(study):
    learners = table(study, "learners")
    seconds = learners.filter(like="_s").sum(axis=1)
    waiting = learners.assign(share=(learners.communication_s + learners.idle_s) / seconds)
    ssgd = (
        (waiting.algorithm == "ssgd")
        & (waiting.variant == "default")
        & (waiting.world == "simulated")
    )
    by_learner = waiting[ssgd & (waiting.learners == 2)].set_index("rank").share
    assert (
        by_learner[0] > 2 * by_learner[1]
    )  # SSGD's fast learner waits for its straggler (quick.yaml: learner 1)


def test_the_report_says_what_the_lm_knows_of_the_test_set(study):
    """The built-in corpus's test sentences are never training ones, and the report says so."""
    lm = json.loads((study / STUDY / "lm.json").read_text())
    assert lm["test"]["in_training_text"] == 0 and lm["dev"]["in_training_text"] == 0
    assert (
        lm["test"]["perplexity"] > 1
        and 0 < lm["test"]["oov_rate"] < 1
        and set(lm["test"]["coverage"]) == {"2-grams", "3-grams"}
    )
    page = page_of(study)
    assert re.search(
        r"test perplexity <b>[\d.]+</b>, out-of-vocabulary rate [\d.]+%, 0 of its 24 sentences",
        page,
    )
    assert "<b>WER</b> everywhere in this report, the claims included, is the LM decode's" in page
    confusions = re.search(r'<table id="confusions">.*?</table>', page).group(
        0
    )  # the best run's word errors
    assert re.search(r"<tr><td>[^<]+</td><td>[^<]+</td><td>\d+</td></tr>", confusions)


def test_device_hours_read_in_plain_decimals_at_every_size():
    from asrscale.analysis.report import device_hours

    shown = [device_hours(hours) for hours in (8.1e-05, 0.0012, 0.5, 3.456, 9.99, 1234.5)]
    assert shown == ["0.000081", "0.0012", "0.5", "3.5", "10", "1,234"]


def test_the_report_opens_with_its_scale_every_algorithm_at_a_glance_and_the_verdicts_half_by_half(
    study,
):
    page = page_of(study)
    top = page.split("<h2>Summary</h2>")[0]
    # it opens with the answer: here none, its runs deciding nothing (a demonstration)
    answer = top.split("<h2>At a glance</h2>")[0]
    assert '<table id="answers">' in answer and "none reaches the target</b> at P=" in answer
    assert "This study recommends no algorithm at any learner count" in answer
    assert re.search(
        r"Scale: these runs train a model of 0.0\d M parameters on 0.\d hours of read speech", top
    )
    glance = re.findall(r'<table class="glance" id="glance">.*?</table>', top)
    assert len(glance) == 2 and "<th>measured</th>" in glance[0]  # one table per kind of timing
    rows = re.findall(r"<tr><th>([\w-]+)</th>(.*?)</tr>", glance[1])
    assert [name for name, _ in rows] == ["SEQ", "SSGD", "ASGD", "ADPSGD"]
    cells = dict(rows)
    assert re.search(
        r"[\d.]+% \([\d.]+%-[\d.]+%\) · [\d.]+× \([\d.]+-[\d.]+\) · 0.00\d+ device-hours · its "
        r"budget ran out",
        cells["ASGD"],
    )
    assert re.search(
        r"[\d.]+% \([\d.]+%-[\d.]+%\) · 0.00\d+ device-hours · its budget ran out", cells["SEQ"]
    )
    verdicts = re.search(r'<table id="verdicts">.*?</table>', top).group(0)
    assert (
        verdicts.count("<tr>") == 1 + 2 * len(CLAIMS)
        and "<th>accuracy half</th><th>speed half</th>" in verdicts
    )
    # 2 epochs: under-trained, and before that its rates' grids chose at an edge (SEQ's highest, in
    # 2 epochs)
    assert "not testable here: needs GPUs" in verdicts and re.search(
        r"not decided: (under-trained|tuned at the edge)", verdicts
    )
    claims = re.search(r'<table id="claims">.*?</table>', page).group(
        0
    )  # every half of every claim, with its rule
    halves = sum(bool(c.accuracy_rule) + bool(c.speed_rule) for c in CLAIMS)
    assert (
        claims.count("<tr>") == 1 + 2 * halves
        and "needs sweeps of train.batch_size for ssgd and adpsgd" in claims
    )


def test_the_report_shows_every_run_and_lets_them_be_downloaded(study):
    page = page_of(study)
    every_run = re.search(r'<table id="runs">.*?</table>', page).group(0)
    rows = re.findall(
        r"<tr><td>(\w+)</td><td>([\w.=]+)</td><td>(\d+)</td><td>(\d+)</td>", every_run
    )
    assert sorted((a, v, int(p), int(s)) for a, v, p, s in rows) == sorted(
        run[1:] for run in expected_runs()
    )
    assert "modelled clock kept time on the hardware profile <b>this-machine</b>" in page
    assert (
        "<b>Diverged</b> (no result; each run's run.json says where and why): ssgd "
        "(train.lr=10000) P=2" in page
    )
    assert re.search(
        r"<td>train.lr=10000</td><td>2</td><td>1</td><td>–</td>.*?<td><b>diverged</b></td>", page
    )
    validation = re.search(r'<table id="validation">.*?</table>', page).group(
        0
    )  # runs made in both worlds
    assert re.findall(r"<tr><td>(\w+)</td><td>(\d+)</td>", validation) == [
        ("seq", "1"),
        ("ssgd", "2"),
    ]
    link = re.search(
        r'<a id="runs-tsv" download="runs.tsv" '
        r'href="data:text/tab-separated-values;charset=utf-8;base64,'
        r'([^"]+)">',
        page,
    )
    downloaded = pd.read_csv(io.StringIO(base64.b64decode(link.group(1)).decode()), sep="\t")
    assert len(downloaded) == len(table(study, "runs"))


def test_the_report_replays_the_published_speedups_beside_the_fit(study):
    page = page_of(study)
    published = re.search(r'<table id="published">.*?</table>', page).group(0)
    figures = pd.read_csv(study / "results" / "published-speedups.tsv", sep="\t")
    assert (
        sorted(re.findall(r"<tr><td>(\w+)</td>", published)) == sorted(figures.study)
        and len(figures) == 7
    )
    assert (
        "held out / published" in published and figures.held_out.notna().all()
    )  # every one out of sample
    assert (
        "not comparable: its epochs are not stated" in published
        and "turns on a value nothing states" in published
    )
    assert figures[~figures.agrees].agrees_at.notna().all()
    assert (
        '<table id="achieved">' in page and "shares.tcp" in page
    )  # the shared parameters, beside their evidence


def test_every_figure_is_in_the_report_and_saved_for_snakemakes(study):
    page = page_of(study)
    figures = (
        "wer_vs_learners",
        "speedup_vs_learners",
        "accuracy_against_speedup",
        "communication_vs_learners",
        "learning_curves",
        "time_split",
        "asgd_staleness",
        "pairings",
        "stragglers",
        "sweep_train_batch_size",
    )
    for figure in figures:
        assert f'<figure id="{figure}"><img alt="{figure}" src="data:image/png;base64,' in page
        assert (study / STUDY / "figures" / f"{figure}.png").stat().st_size > 1000


def test_one_implementation_gives_one_model_in_both_worlds_and_a_run_is_trained_once(study):
    runs = table(study, "runs")

    def run(world, algorithm, learners):
        return runs[
            (runs.world == world) & (runs.algorithm == algorithm) & (runs.learners == learners)
        ].iloc[0]

    seq = run("simulated", "seq", 1)
    # SSGD with one learner is SEQ's computation: the study trains it once and reports it twice
    assert (
        run("simulated", "ssgd", 1).run == seq.run
        and run("simulated", "ssgd", 1).trained_as == "seq"
    )
    assert "With one learner ssgd are exactly SEQ's computation" in page_of(study)
    # one implementation, two worlds: the same computation gives the same model
    assert seq.best_dev_loss == pytest.approx(run("mpi", "seq", 1).best_dev_loss, rel=1e-6)
    assert run("simulated", "ssgd", 2).best_dev_loss == pytest.approx(
        run("mpi", "ssgd", 2).best_dev_loss, rel=1e-3
    )


def test_adpsgd_records_every_averaging_with_a_neighbour_on_its_graph(study):
    from asrscale.training.algorithms.adpsgd import neighbours

    exchanges = pd.read_csv(
        study / "results" / "tiny" / "studies" / "tiny" / "exchanges.tsv", sep="\t"
    )
    assert set(exchanges.algorithm) == {"adpsgd"} and set(exchanges.learners) == {3}
    # learner 1, the only active one, asks one of its neighbours (0 and 2) at every step
    assert set(exchanges["rank"]) == {1} and all(
        r.peer in neighbours(1, 3, "ring") for r in exchanges.itertuples()
    )
    assert exchanges.step.tolist() == list(range(1, len(exchanges) + 1)) and set(
        exchanges.peer
    ) == {0, 2}


def test_every_configuration_is_tuned_over_its_grid_and_its_chosen_run_is_its_first_seed(study):
    """quick.yaml's 6 configurations as trained (SSGD alone is SEQ's), each over 3 rates at seed 1:
    the lowest best dev loss chose; the chosen run is the configuration's at seed 1, and SEQ's
    seed 2 trained at its choice; the report shows each grid."""
    tuning, runs = table(study, "tuning"), table(study, "runs")
    grids = tuning.groupby(["world", "algorithm", "learners"])
    assert len(grids) == 6 and grids.size().eq(3).all() and grids.chosen.sum().eq(1).all()
    assert set(tuning.lr) == {0.0015, 0.003, 0.006} and tuning.diverged.isna().all()
    assert grids.stopped_early.sum().eq(1).all() and set(tuning.by) == {
        "dev_loss"
    }  # halved: 2 of 3 go on
    for (world, algorithm, learners), grid in grids:
        chosen = grid[grid.chosen].iloc[0]
        assert chosen.score == chosen.best_dev_loss == grid[~grid.stopped_early].score.min()
        edge = {0.0015: "lowest", 0.006: "highest"}.get(chosen.lr)
        assert (chosen.at_edge if isinstance(chosen.at_edge, str) else None) == edge
        configured = runs[
            (runs.world == world)
            & (runs.algorithm == algorithm)
            & (runs.learners == learners)
            & (runs.variant == "default")
        ]
        for run in configured.itertuples():
            over = (
                "rates 0.0015-0.006"  # the grid's, so a verdict says what its rate was chosen among
            )
            assert run.lr == chosen.lr and run.tuning == (
                f"tuned at the edge (its {edge} rate) of {over}" if edge else f"tuned over {over}"
            )
            settings = json.loads((study / run.run / "settings.json").read_text())
            assert settings["train"]["lr"] == chosen.lr and settings["seed"] == run.seed
        first = configured[configured.seed == 1].iloc[0]
        assert (study / first.run / "model.pt").read_bytes() == (
            study / chosen.run / "model.pt"
        ).read_bytes()
    assert len(runs[(runs.algorithm == "seq") & (runs.world == "simulated")]) == 2  # seeds 1 and 2
    assert set(runs[runs.variant != "default"].tuning) == {"not tuned"}  # the sweeps' other points
    page = page_of(study)
    grid_table = re.search(r'<table id="tuning-grids">.*?</table>', page).group(0)
    assert len(re.findall(r"<tr>", grid_table)) == 1 + 6
    assert (
        len(re.findall(r'<td class="text">dev loss [\d.]+</td><td>0</td><td>1</td>', grid_table))
        == 6
    )
    assert '<figure id="tuning">' in page


def test_a_studys_record_makes_its_report_again_without_training(study, tmp_path):
    """`snakemake record` keeps every file of the report in the study's record folder (the tables
    gzipped), outside the source tree; `asrscale rerender` makes the same page from it alone,
    verdicts, figures and all."""
    import subprocess
    import sys

    snakemake(study, "record")
    record = study / STUDY / "record"
    assert not (study / "records").exists()
    assert {path.name for path in record.glob("*.tsv.gz")} == {
        f"{name}.tsv.gz" for name in TABLES
    } | {"published-speedups.tsv.gz"}
    made = json.loads((record / "record.json").read_text())
    assert (
        made["report"]["title"] == "asrscale: the tiny study's end-to-end run"
        and made["made"]["date"]
    )
    elsewhere = tmp_path / "elsewhere"  # the record alone, copied away from the study's results
    shutil.copytree(record, elsewhere / "record")

    def rerendered() -> str:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "asrscale",
                "rerender",
                "--record",
                "record",
                "--out",
                "tiny.html",
                "--figures",
                "figures",
            ],
            cwd=elsewhere,
            check=True,
        )
        return (elsewhere / "tiny.html").read_text()

    assert rerendered() == page_of(study)
    # a record is assessed again by today's rules, from its epochs: what its runs table says of
    # convergence and speedups is not read back
    runs = elsewhere / "record" / "runs.tsv.gz"
    stale = pd.read_csv(runs, sep="\t")
    stale.assign(
        converged=False, converged_by="budget", recent_gain=1.0, gain_bound=1.0, time_speedup=99.0
    ).to_csv(runs, sep="\t", index=False)
    assert rerendered() == page_of(study)


def test_every_run_records_its_provenance_and_a_rerun_has_nothing_to_do(study):
    records = list(
        (study / "results" / "tiny" / "studies" / "tiny" / "runs").glob("*/*/*/P*/seed*/run.json")
    )
    # 6 configurations' grids of 3 and their chosen runs adopted, SEQ's seed 2, the sweeps' 2 others
    assert len(records) == 6 * 3 + 6 + 1 + 2  # the diverged run has its record too
    for record in records:
        text = record.read_text()
        assert all(
            key in text for key in ('"seed"', '"packages"', '"cpu"', '"hostname"', '"train"')
        )
    assert "Nothing to be done" in snakemake(study).stdout + snakemake(study).stderr


def test_a_training_job_that_fails_fails_in_snakemake_with_its_output_kept_per_attempt(
    study, tmp_path
):
    """Training's output goes through a pipeline (tee): the job must still fail by its exit
    status."""
    workdir = tmp_path / "study"
    shutil.copytree(study, workdir, symlinks=True)
    # a sweep's point: untuned, so no grid's training comes before it (--forcerun would rerun those)
    run = Path("results/tiny/studies/tiny/runs/sim-this-machine/ssgd/train.batch_size=4/P2/seed1")
    (workdir / run / "settings.json").write_text("{ not the workflow's")
    result = snakemake(workdir, "--forcerun", "train", run / "model.pt", check=False)
    printed = result.stdout + result.stderr
    assert result.returncode != 0 and "returned non-zero exit status 1" in printed, printed[-3000:]
    log = f"{workdir}/logs/tiny/tiny/train/sim-this-machine/ssgd/train.batch_size=4-P2-seed1"
    assert "not a settings file the workflow wrote" in Path(f"{log}.log").read_text()
    attempts = Path(f"{log}.attempts.log").read_text()
    assert (
        attempts.startswith("== attempt ") and "not a settings file the workflow wrote" in attempts
    )


def browser():
    """Headless Chromium through its WebDriver (Debian's chromium and chromium-driver), as the
    README's screenshot is made. Where they are missing the test is skipped, unless
    ASRSCALE_REQUIRE_BROWSER is set (as CI does)."""
    from asrscale.analysis import screenshot

    if not (shutil.which("chromium") and shutil.which("chromedriver")):
        if os.environ.get("ASRSCALE_REQUIRE_BROWSER"):
            raise AssertionError(
                "ASRSCALE_REQUIRE_BROWSER is set, but chromium or chromedriver is not installed"
            )
        pytest.skip("needs Debian's chromium and chromium-driver")
    return screenshot.browser()


def test_the_report_opens_from_disk_in_a_real_browser_with_every_figure(study, tmp_path):
    """A laptop-sized headless Chromium opens the report from disk: no error in the console, no
    request beyond the page itself, every figure decoded, no sideways scrolling of the page, every
    table within its own box (which scrolls where the table is wider: the table of every run; the
    cost model's fits); and its screenshot is made by the code that makes the README's."""
    from asrscale.analysis.screenshot import capture, recorded, template_digest

    page = study / "reports" / "tiny.html"
    driver = browser()
    try:
        driver.get(page.as_uri())
        images = driver.execute_script(
            "return Array.from(document.images).map(i => [i.alt, i.complete && i.naturalWidth > 0])"
        )
        fetched = driver.execute_script(
            "return performance.getEntriesByType('resource').map(e => e.name)"
        )
        widths = driver.execute_script(
            "return [document.documentElement.scrollWidth, window.innerWidth]"
        )
        boxes = driver.execute_script(
            "return Array.from(document.querySelectorAll('table')).map(t => [t.id, "
            "t.parentElement.className, "
            "getComputedStyle(t.parentElement).overflowX, "
            "t.parentElement.getBoundingClientRect().right, "
            "t.scrollWidth <= t.parentElement.clientWidth])"
        )
        errors = [entry for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]
        capture(page, tmp_path / "report.png", driver)
    finally:
        driver.quit()
    figures = re.findall(r'<figure id="(\w+)">', page.read_text())
    assert len(figures) >= 8 and [alt for alt, _ in images] == figures
    assert all(loaded for _, loaded in images), images
    assert not errors, errors
    assert all(name.startswith("data:") for name in fetched), fetched
    assert widths[0] <= widths[1], widths
    assert all(
        box == "table" and overflow == "auto" and right <= widths[1]
        for _, box, overflow, right, _ in boxes
    )
    fits = {table: fits for table, *_, fits in boxes}
    assert fits["published"] and fits["claims"] and fits["verdicts"] and not fits["runs"], boxes
    assert (tmp_path / "report.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert recorded(tmp_path / "report.png") == {
        "Source": "asrscale: the tiny study's end-to-end run",
        "Template": template_digest(),
        "Software": "asrscale.analysis.screenshot",
    }


def test_the_readmes_screenshot_is_of_the_default_report_as_the_template_renders_it_now():
    """reports/screenshot.png is made by `asrscale screenshot` from the default study's report, of
    the report template as it is: a change of the template needs a new screenshot
    (docs/report.md)."""
    from asrscale.analysis.screenshot import recorded, template_digest

    shown = recorded(ROOT / "reports" / "screenshot.png")
    assert (
        shown["Software"] == "asrscale.analysis.screenshot"
        and shown["Template"] == template_digest()
    )
    assert shown["Source"] == yaml.safe_load((ROOT / "config.yaml").read_text())["report"]["title"]
    assert "reports/screenshot.png" in (ROOT / "README.md").read_text()


def test_snakemake_report_has_the_figures(study):
    snakemake(study, "--report", study / "snakemake-report.zip")
    import zipfile

    archive = zipfile.ZipFile(study / "snakemake-report.zip")
    assert sum(name.endswith(".png") for name in archive.namelist()) >= 8
    page = archive.read(
        next(name for name in archive.namelist() if name.endswith("report.html"))
    ).decode()
    # each figure with its own caption; the study's own report and RESULTS.md beside them
    assert (
        "A sweep (study.sweeps): one setting varied" in page
        and "ASGD: the distribution of the staleness" in page
    )
    names = archive.namelist()
    assert any(name.endswith("tiny.html") for name in names), names
    assert any(name.endswith("RESULTS.md") for name in names), names


@pytest.mark.parametrize(
    "change, message",
    [
        (  # named with the file and line that set it
            ("model", "units", "big"),
            r"config: \S+bad.yaml, line \d+, column \d+: "
            r"model.units: 'big' is not of type 'integer'",
        ),
        (
            ("train", "optimiser", "adam"),
            r"train.optimiser: not a setting \(did you mean optimizer\?\)",
        ),
        (
            ("study", "runs", [{"algorithm": "seq", "learners": [2]}]),
            r"study.runs\[0\]: seq is one learner",
        ),
        (
            (
                "study",
                "sweeps",
                [{"algorithm": "ma", "learners": 2, "vary": "period", "values": [1, 2]}],
            ),
            r"study.sweeps\[0\].vary: ma has no setting 'period'; one of \['averages', "
            r"'frames_per_job'",
        ),
    ],
)
def test_a_wrong_config_stops_before_any_job_naming_the_key(tmp_path, change, message):
    config = yaml.safe_load(TINY.read_text())
    section, key, value = change
    config[section][key] = value
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(config))
    result = snakemake(tmp_path, "-n", configfile=tmp_path / "bad.yaml", check=False)
    assert result.returncode != 0
    assert re.search(message, result.stdout + result.stderr, re.DOTALL)
    assert not (tmp_path / "results").exists()


def test_a_typo_in_config_yaml_stops_the_workflow_naming_its_line_and_column(tmp_path):
    (tmp_path / "config.yaml").write_text("model:\n  units: 128\n   layers: 2\n")
    result = snakemake(tmp_path, "-n", check=False)
    assert result.returncode != 0
    assert (
        "config: config.yaml, line 3, column 10: not valid YAML: mapping values"
        in result.stdout + result.stderr
    )


def test_the_all_algorithms_study_plans_every_run_on_real_ranks(tmp_path):
    configs = [ROOT / "config.yaml", ROOT / "studies" / "algorithms.yaml"]
    result = snakemake(tmp_path, "-n", "--printshellcmds", configfile=configs)
    planned = re.findall(r"^train\s+(\d+)$", result.stdout, re.MULTILINE)
    # 7 × 3 runs, SEQ's run reported 5 times, SSGD's at 2 for H-ADPSGD (its 2 learners are one node)
    assert planned[0] == "14", result.stdout[-2000:]
    assert (
        "--calibration" not in result.stdout and "mpiexec -n 5" in result.stdout
    )  # ASGD's 4 ranks + server
    assert not re.search(
        r"asrscale \S+ [^>]*'\{", result.stdout
    )  # settings travel in files, not on command lines


@pytest.mark.parametrize(
    "study, runs, simulated",
    [
        ((), 9, 4),
        (("validation.yaml",), 24, 4),
        (("reproduction.yaml",), 77, 4),
        (("claims-at-4.yaml",), 28, 4),
        (("stragglers.yaml",), 9, 4),
        (("kavg-at-20.yaml",), 21, 20),
        (("adpsgd-at-32.yaml",), 21, 32),
        (("scaled-64.yaml",), 21, 64),
        (("averaging.yaml",), 12, 4),
        (("averaging-scaled.yaml",), 9, 32),
        (("large-batch.yaml",), 21, 16),
        (("bmuf.yaml",), 38, 16),
        (("bmuf-64.yaml",), 31, 64),
        (("bmuf-ma.yaml",), 31, 16),
        (("bmuf-longer.yaml",), 24, 16),
    ],
)
def test_the_default_and_validation_studies_plan_every_run(tmp_path, study, runs, simulated):
    configs = [ROOT / "config.yaml", *(ROOT / "studies" / name for name in study)]
    result = snakemake(tmp_path, "-n", "--printshellcmds", configfile=configs)
    assert re.findall(r"^train\s+(\d+)$", result.stdout, re.MULTILINE)[0] == str(runs), (
        result.stdout[-2000:]
    )
    command = (
        rf"asrscale train --settings \S+/P{simulated}/seed1/settings.json .* --calibration \S+"
    )
    assert re.search(command, result.stdout)


def test_simulated_runs_on_the_cpu_take_a_core_each_and_runs_on_ranks_the_machine(tmp_path):
    """A simulated run's clock is modelled, so on the CPU it computes with one core beside other
    jobs; a run on MPI ranks is timed by the clock and takes all the cores (here 2)."""
    cpu = tmp_path / "cpu.yaml"
    cpu.write_text(yaml.safe_dump({"train": {"device": "cpu"}}))
    configs = [ROOT / "config.yaml", ROOT / "studies" / "validation.yaml", cpu]
    result = snakemake(tmp_path, "-n", "--printshellcmds", configfile=configs)
    simulated = re.findall(
        r"asrscale train .* --calibration \S+ --cores (\d+); \} 2>&1", result.stdout
    )
    on_ranks = re.findall(r"wildcards: [^\n]*cluster=mpi[^\n]*\n\s+threads: (\d+)", result.stdout)
    assert simulated and set(simulated) == {"1"}, result.stdout[-2000:]
    assert on_ranks and set(on_ranks) == {"2"}, result.stdout[-2000:]


def report_of(study: Path, tmp_path: Path, change) -> str:
    """The report of the tiny study's gathered tables with its runs changed by `change`; no figure
    nor cell of it says "nan" (it says what is missing instead)."""
    from matplotlib.text import Text

    from asrscale.analysis import figures
    from asrscale.analysis.report import make_report
    from asrscale.config.paths import TABLES

    shown, draw = [], figures._html

    def html(figure, name, folder):
        shown.extend(f"{name}: {text.get_text()}" for text in figure.findobj(Text))
        return draw(figure, name, folder)

    tables = [tmp_path / f"{name}.tsv" for name in TABLES]
    for table in tables:
        shutil.copy(study / "results" / "tiny" / "studies" / "tiny" / table.name, table)
    runs = pd.read_csv(tables[0], sep="\t")
    change(runs).to_csv(tables[0], sep="\t", index=False)
    lm = study / "results" / "tiny" / "studies" / "tiny" / "lm.json"
    published = study / "results" / "published-speedups.tsv"
    with mock.patch.object(figures, "_html", html):
        make_report(
            tables,
            lm,
            published,
            tmp_path / "figures",
            "changed",
            tmp_path / "report.html",
            [],
            yaml.safe_load(TINY.read_text()),
        )
    page = (tmp_path / "report.html").read_text()
    assert len(shown) > 100 and not [
        text for text in shown if re.search(r"\bnan\b", text, re.IGNORECASE)
    ]
    assert not re.findall(r".{60}\bnan\b.{20}", re.sub(r'data:[^"]+', "", page), re.IGNORECASE)
    return page


def test_the_report_of_a_study_whose_every_run_diverged(study, tmp_path):
    from asrscale.analysis.measures import RESULTS

    def every_run_diverged(runs):
        runs.loc[:, RESULTS] = float("nan")
        return runs.assign(diverged="the dev loss was not finite", converged=False)

    page = report_of(study, tmp_path, every_run_diverged)
    assert "No run has a test WER: every run diverged." in page
    assert "SEQ (the baseline) diverged: no speedups or accuracy against SEQ." in page
    assert (
        "0 of its 9 runs, sweeps' included, converged" in page
        and '<table id="confusions">' not in page
    )
    assert "the others did not (diverged: 9)" in page
    assert page.count("<td><b>diverged</b></td>") == len(
        pd.read_csv(tmp_path / "runs.tsv", sep="\t")
    )


def test_the_report_of_a_study_where_no_run_converged(study, tmp_path):
    # tuned inside its grid and on a fixed schedule, so only the budget leaves the halves undecided
    page = report_of(
        study,
        tmp_path,
        lambda runs: runs.assign(
            converged=False, converged_by="budget", tuning="tuned", schedule="exponential"
        ),
    )
    # what the study decides in one sentence (a claim whose speed fails is decided all the same),
    # that an unconverged run enters a verdict by its bound, and which study decides the rest, with
    # its time
    decides = re.search(
        r"<li><b>What this study decides</b>: \d+ of the 12 claims.*?</li>", page
    ).group(0)
    assert "a run that has not converged enters a verdict by its bound" in decides
    studies = (
        "claims-at-4",
        "asgd-at-4",
        "kavg-at-20",
        "adpsgd-at-32",
        "scaled-64",
        "averaging",
        "averaging-scaled",
        "large-batch",
    )
    for study in studies:
        assert f"--configfile studies/{study}.yaml</code> (" in decides
    assert "KAVG with 4 learners matches SEQ accuracy" in decides.split("claims-at-4.yaml")[1]
    assert "0 of its 9 runs, sweeps' included, converged" in page
    assert "<b>no target dev loss</b>: no SEQ run converged" in page
    assert (
        "the others did not (its budget ran out while it still gained: 8, diverged: 1)" in page
    )  # a sweep's run diverged
    matching = (
        "match SEQ's accuracy (converged, an interval over speakers and seeds within 3%): none"
    )
    assert f"{matching}; <b>stopped by their budget</b>" in page
    table = page.split('<table id="claims">')[1].split("</table>")[0]
    assert "reproduced" not in re.sub(r"not[ -]reproduced", "", table)


def test_the_report_of_a_study_whose_runs_converged_decides_accuracy_by_the_bootstrap(
    study, tmp_path
):
    # every run converged, tuned inside its grid, for fixed epochs (the tiny study's newbob, 2
    # epochs, chose at edges)
    page = report_of(
        study,
        tmp_path,
        lambda runs: runs.assign(
            converged=True, converged_by="schedule", tuning="tuned", schedule="exponential"
        ),
    )
    assert (
        "9 of its 9 runs, sweeps' included, converged" in page and "the others did not" not in page
    )
    verdicts = re.search(r'<table id="verdicts">.*?</table>', page).group(0)
    asgd = re.search(
        r"<tr><td[^>]*>zhang13: ASGD gives[^<]*</td><td[^>]*>modelled.*?</tr>", verdicts
    ).group(0)
    # one seed of ASGD: the interval is computed (its speakers and seeds said) but cannot decide
    assert "<b>not decided: needs 3 seeds</b>" in asgd, asgd
    # the control's word beside the claim (in its measured text, below the verdicts): ASGD's server
    # applies one learner's batch, SEQ's, so none of its gap is a larger batch's
    assert "no share of the gap is a larger batch" in page
    assert re.search(
        r"test utterances of [\d,]+ voices, \d and \d seeds \(training", page
    )  # the built-in corpus
    assert "<b>not testable here: needs GPUs</b>" in asgd, asgd


def test_every_modelled_runs_band_covers_the_held_out_misses_of_its_kind(study):
    """A modelled speedup's band holds at least what the cost model missed by on the held-out
    figures of runs bound as it is (a model that predicted x times a published speedup leaves the
    truth at speedup / x); SEQ's, one learner, is its own ratio, 1. The report shows the same
    band."""
    from asrscale.costmodel.fitted import Band

    band, runs = Band.fitted(), table(study, "runs")
    modelled = runs[
        runs.speedup_kind.str.startswith("modelled")
        & (runs.learners > 1)
        & runs.time_speedup.notna()
    ]
    assert len(modelled) >= 4 and set(modelled.bound_by) - {"one learner"}
    for run in modelled.itertuples():
        lowest, highest = band.misses(run.bound_by)
        assert run.band_low <= 1 / highest + 1e-9 and run.band_high >= 1 / lowest - 1e-9, run
        assert run.time_speedup_low == pytest.approx(run.time_speedup * run.band_low)
        assert run.time_speedup_high == pytest.approx(run.time_speedup * run.band_high)
    seq = runs[runs.speedup_kind.str.startswith("modelled") & (runs.trained_as == "seq")]
    assert (seq.band_low == 1).all() and (seq.band_high == 1).all()


def test_the_summary_keeps_each_clock_apart_and_flags_a_speedup_beyond_p(study, tmp_path):
    """The tiny study times SSGD at 2 learners both ways: each summary line is of one clock, its
    fastest the mean of that clock's runs alone (never a mean of a measured and a modelled one). A
    modelled SSGD made 19× at P=2 (as a busy calibration made it) is flagged, with its cause, and
    ranked nowhere."""
    runs, page = table(study, "runs"), page_of(study)
    # SEQ's own times too: each clock's runs apart
    assert re.search(
        r"SEQ \(the baseline\): [^<]* trained in [\d.]+ s \(measured\), [\d.]+ s \(modelled on",
        page,
    )
    for kind in runs.speedup_kind.unique():
        line = re.search(rf"<li>P=2, {re.escape(kind)}: .*?</li>", page).group(0)
        of_kind = runs[
            (runs.speedup_kind == kind) & (runs.learners == 2) & (runs.variant == "default")
        ]
        # the fastest within P, or (a busy machine can slow SEQ's own timed run) one flagged beyond
        # it
        found = re.search(r"fastest in time an epoch (\w+) \(([\d.]+)×\)", line) or re.search(
            r"<b>(\w+) ([\d.]+)× is beyond what 2 learners can give</b>", line
        )
        algorithm, shown = found.groups()
        assert float(shown) == pytest.approx(
            of_kind[of_kind.algorithm == algorithm].time_speedup.mean(), abs=0.005
        )
        assert ("fastest in time an epoch" in line) != beyond_p(float(shown), 2)
    modelled = (runs.world == "simulated") & (runs.algorithm == "ssgd") & (runs.learners == 2)
    seq = runs[(runs.world == "simulated") & (runs.trained_as == "seq")]
    made = {
        column: runs[column].mask(modelled, 19.0 * factor)
        for column, factor in (
            ("time_speedup", 1.0),
            ("time_speedup_low", 0.9),
            ("time_speedup_high", 1.25),
            ("frames_per_s", seq.frames_per_s.mean()),
        )
    }
    page = report_of(study, tmp_path, lambda runs: runs.assign(**made))
    line = re.search(r"<li>P=2, modelled on [^:]*: .*?</li>", page).group(0)
    # its cause: the rates the runs trained at (each learner 9.5× SEQ's, whose 19× at 2), which
    # runs, what they rest on
    assert re.search(
        r"<b>ssgd 19.00× is beyond what 2 learners can give</b>, ranked nowhere \(each of its 2 "
        r"learners trained [\d,]+ frames/s, 9.5× SEQ&#39;s [\d,]+ \(seeds 1 against SEQ&#39;s 1, "
        r"2\); "
        r"modelled on this machine",
        line,
    ), line
    assert (
        "a calibration timed while another process held the cores" in line
        and "(19.00×)" not in line
    )
    assert re.search(
        r"19\.00× \([\d.-]+\) \(beyond what 2 learners can give\)", page
    )  # at a glance too
    assert re.search(
        r"calibrated rates \([^;]*; repeats at most [\d.]+× apart", line
    )  # the calibration's spread


def test_the_report_of_a_study_without_seq(study, tmp_path):
    page = report_of(study, tmp_path, lambda runs: runs[runs.trained_as != "seq"])
    assert (
        "No SEQ run in this study: no speedups or accuracy against SEQ (add seq to study.runs)."
        in page
    )
    assert "<li>P=2, " not in page and re.search(r'<table id="runs">.*?</table>', page)


def test_a_halved_study_plans_every_grid_run_to_its_rung_then_each_grid_halved(tmp_path):
    """The tiny study's 6 grids of 3 halved after epoch 1 (study.tuning.halving): each grid run
    trains to its rung, each grid is halved, and its runs go on from their rung as it decides."""
    result = snakemake(tmp_path, "-n", "--printshellcmds")
    jobs = dict(re.findall(r"^(\w+)\s+(\d+)$", result.stdout, re.MULTILINE))
    # 18 grid runs, SEQ's seed 2 and the sweeps' 2 runs
    assert (jobs["train_rung"], jobs["halve"], jobs["train"]) == ("18", "6", "21"), result.stdout[
        -2000:
    ]
    grid_run = r"\S+/ssgd/train.lr=0.003/P2/seed1"
    assert re.search(
        rf"asrscale train .* --out {grid_run} --rung \S+/settings/halving.json --calibration",
        result.stdout,
    )
    decision = r"\S+/tuning/sim-this-machine/ssgd/P2.halving.json"
    assert re.search(
        rf"asrscale train .* --out {grid_run} --halving {decision} --calibration", result.stdout
    )
    rungs = r"(\S+/ssgd/train.lr=\S+/P2/seed1/rung.json ){3}"
    assert re.search(
        rf"asrscale halve --settings \S+/settings/halving.json --rungs {rungs}--out {decision}",
        result.stdout,
    )


def test_a_study_writes_its_results_md_per_test_set(study):
    """RESULTS.md, as icefall's recipes keep one: per test set, each algorithm's WER with the LM and
    greedily, each with its interval, and its speedup with what it rests on; every run's scores
    with Kaldi's %WER line and its three kinds of error, and a table of its speakers."""
    written = (study / STUDY / "RESULTS.md").read_text()
    assert written.startswith("# asrscale: the tiny study") and "\n## test\n" in written
    assert written.index("The answer: at each learner count") < written.index("\n## test\n")
    assert "| SEQ | 1 | 2 | " in written and "Speedups modelled on this-machine" in written
    for scores in (study / STUDY / "runs").glob("*/*/*/P*/seed*/test/scores.json"):
        found = json.loads(scores.read_text())
        errors = [found["lm"][kind] for kind in ("substitutions", "deletions", "insertions")]
        assert found["lm"]["wer_line"] == (
            f"%WER {100 * found['lm']['wer']:.2f} [ {sum(errors)} / {found['lm']['words']}, "
            f"{errors[2]} ins, {errors[1]} del, {errors[0]} sub ]"
        )
        speakers = pd.read_csv(scores.with_name("speakers.tsv"), sep="\t")
        assert speakers.words.sum() == found["lm"]["words"]


def test_an_interim_report_covers_the_runs_finished_so_far(study, tmp_path, monkeypatch):
    """A study of days: `asrscale interim` renders the runs finished so far, marked as interim."""
    from asrscale.analysis.interim import interim_report

    shutil.copytree(study / "results", tmp_path / "results")
    monkeypatch.chdir(tmp_path)
    runs = sorted({p.parents[1] for p in STUDY.glob("runs/*/*/*/P*/seed*/test/scores.json")})
    (runs[0] / "test" / "scores.json").unlink()  # its decode not yet done
    said = interim_report(STUDY, tmp_path / "interim.html")
    assert said == f"{len(runs) - 1} of {len(runs)} runs finished"
    page = (tmp_path / "interim.html").read_text()
    assert f"<h1>INTERIM, {said}: asrscale: the tiny study" in page
