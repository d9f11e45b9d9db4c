"""Your own corpus through the whole workflow: a Kaldi data dir (segments, a piped entry, FLAC and
SPHERE) to train on, LibriSpeech to develop on, two manifests to test on; bad input skipped and
counted in the report; a fix reruns only what depends on it, and extracts only what changed."""

import re
import shutil

import pandas as pd
import pytest
import yaml

from asrscale.decoding.lm import write_arpa
from helpers import ROOT, recomputed_wer, run_snakemake, write_own_corpora

pytestmark = pytest.mark.slow  # starts Snakemake, MPI ranks, SLURM or a browser


def jobs_to_run(workdir, configfile) -> dict[str, int]:
    """Rule -> job count that Snakemake would run now (a dry run)."""
    out = run_snakemake(workdir, "--dry-run", configfile=configfile).stdout
    table = out.split("Job stats:")[1] if "Job stats:" in out else ""
    return {
        rule: int(count)
        for rule, count in re.findall(r"^(\w+)\s+(\d+)$", table, re.M)
        if rule != "total"
    }


@pytest.fixture(scope="module")
def own_study(corpus, tmp_path_factory):
    root = tmp_path_factory.mktemp("own_study")
    sources = write_own_corpora(corpus, root / "corpora")
    missing = root / "corpora" / "late.wav"  # listed in a manifest, but not there yet
    with open(sources["tsv"], "a") as tsv:
        tsv.write(f"{missing}\tTURN THE LIGHTS ON\tlate-speaker\tlate-utterance\n")
    config = yaml.safe_load((ROOT / "studies" / "quick.yaml").read_text())
    config["corpus"] = {
        "name": "own",
        "subsets": {
            "train": [{"format": "kaldi", "path": str(sources["kaldi"])}],
            "dev": [{"format": "librispeech", "path": str(sources["librispeech"])}],
            "test": [
                {"format": "manifest", "path": str(sources["tsv"])},
                {"format": "manifest", "path": str(sources["jsonl"]), "prefix": "j-"},
            ],
        },
        "bad_input": {"max_fraction": 0.2},
    }
    config["study"].update(
        runs=[{"algorithm": "seq", "learners": [1]}, {"algorithm": "ssgd", "learners": [2]}],
        sweeps=[],
        tuning={},
    )
    config["report"]["title"] = "own corpus"
    # your own language model: an ARPA file of the words of the corpus's commands
    words = root / "corpora" / "words.arpa"
    write_arpa(
        words,
        [
            line.split(maxsplit=1)[1]
            for line in (sources["kaldi"] / "text").read_text().splitlines()
        ],
        2,
    )
    # (it knows the tiny training text alone: 28% of the dev words are not in it)
    config["decode"] = {
        "lm": str(words),
        "lm_weights": [1.0],
        "word_bonuses": [0.0, 1.0],
        "max_lm_oov_rate": 0.5,
    }
    configfile = root / "own.yaml"
    configfile.write_text(yaml.safe_dump(config))
    workdir = root / "work"
    run_snakemake(workdir, configfile=configfile)
    return workdir, configfile, sources, missing


def test_each_format_trains_decodes_and_reports(own_study):
    workdir, _, _, _ = own_study
    runs = pd.read_csv(workdir / "results" / "own" / "studies" / "own" / "runs.tsv", sep="\t")
    assert sorted(runs.algorithm) == ["seq", "ssgd"]
    data = workdir / "results" / "own" / "data"
    for run in runs.itertuples():  # scored against the imported test set's own text (both sources)
        assert run.wer == pytest.approx(
            recomputed_wer(workdir / run.run / "test", data / "test")
        ), run.run
    assert (data / "train" / "segments").is_file() and any(
        " |" in line for line in open(data / "train" / "wav.scp")
    )
    test_ids = [line.split()[0] for line in (data / "test" / "text").read_text().splitlines()]
    assert (
        sum(u.startswith("j-") for u in test_ids) == 8 and len(test_ids) == 16
    )  # two sources, one prefixed
    assert "TURN" not in (data / "test" / "text").read_text()  # normalised on import
    page = (workdir / "reports" / "own.html").read_text()
    assert (
        "1 utterance was left out as bad input" in page
        and "results/own/data/test/skipped.tsv" in page
    )
    assert (
        "your model " + str(workdir.parent / "corpora" / "words.arpa") in page
    )  # decoded with the user's LM
    assert set(runs.lm_weight) == {1.0}
    folded = (
        workdir / "results" / "own" / "lm" / "words.arpa"
    ).read_text()  # folded as the transcripts were
    assert "another" in folded and "ANOTHER" not in folded


def test_a_fix_reruns_only_what_depends_on_it(own_study, corpus):
    workdir, configfile, _, missing = own_study
    assert jobs_to_run(workdir, configfile) == {}  # a rerun with nothing changed has nothing to do
    original = sorted((corpus / "audio").rglob("*.wav"))[0]
    shutil.copy(original, missing)  # the user fixes the input
    jobs = jobs_to_run(workdir, configfile)
    assert jobs["import_subset"] == 1 and jobs["features"] == 2 and jobs["decode"] == 2
    assert (
        "train" not in jobs and "calibrate" not in jobs
    )  # the test set changed, not the training data
    run_snakemake(workdir, configfile=configfile)
    logs = [
        (workdir / "logs" / "own" / "features" / f"test-part{p}.log").read_text() for p in (0, 1)
    ]
    computed = sum(int(re.search(r"(\d+) utterances computed", log).group(1)) for log in logs)
    assert computed == 1  # the fixed utterance; the others came from the cache
    assert "late-utterance" in (workdir / "results" / "own" / "data" / "test" / "text").read_text()
    assert (
        "No utterance of the corpus was left out" in (workdir / "reports" / "own.html").read_text()
    )
    assert jobs_to_run(workdir, configfile) == {}


def test_a_wrong_path_in_the_config_is_named(own_study, tmp_path):
    workdir, configfile, _, _ = own_study
    config = yaml.safe_load(configfile.read_text())
    config["corpus"]["subsets"]["dev"][0]["path"] = "/no/such/LibriSpeech"
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(config))
    result = run_snakemake(tmp_path, "--dry-run", configfile=bad, check=False)
    assert result.returncode != 0
    assert (
        "corpus.subsets.dev[0].path: /no/such/LibriSpeech does not exist"
        in result.stdout + result.stderr
    )
