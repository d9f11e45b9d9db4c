"""The LibriSpeech study on a SLURM GPU cluster (studies/librispeech.yaml), as a user with a site
profile of their own runs it: on a fabricated LibriSpeech tree (a few utterances in its real
layout, real audio), planned through the profile, every job's nodes, tasks, GPUs, partition and
account as the cluster would get them; and a tiny run of the same study on the local cluster."""

import gzip
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import soundfile
import yaml

from asrscale.data.datadir import read_data_dir
from asrscale.decoding.lm import write_arpa
from helpers import LOCAL, ROOT, WITHOUT_ACCOUNTING, site_profile

pytestmark = pytest.mark.slow  # starts Snakemake, MPI ranks, SLURM or a browser

SUBSETS = {
    "train": "train-clean-100",
    "dev": "dev-clean",
    "test-clean": "test-clean",
    "test-other": "test-other",
}
LM = "3-gram.pruned.1e-7.arpa.gz"


@pytest.fixture(scope="module")
def librispeech(corpus, tmp_path_factory) -> Path:
    """LibriSpeech's layout: <subset>/<speaker>/<chapter>/<speaker>-<chapter>-<n>.flac beside
    <speaker>-<chapter>.trans.txt, the tiny corpus's audio and transcripts in it, in capitals as
    LibriSpeech's are; and a gzipped ARPA LM of the training transcripts, in capitals, as openslr
    ships LibriSpeech's (lm/3-gram.pruned.1e-7.arpa.gz)."""
    root = tmp_path_factory.mktemp("LibriSpeech")
    texts = []
    for offset, (subset, name) in enumerate(
        SUBSETS.items()
    ):  # test-other: the tiny test set again, other speakers
        data = read_data_dir(corpus / "data" / subset.split("-")[0])
        for index, utt in enumerate(sorted(data.text)):
            speaker, chapter = 100 + 10 * offset + index % 4, 200 + index % 2
            folder = root / name / str(speaker) / str(chapter)
            folder.mkdir(parents=True, exist_ok=True)
            new = f"{speaker}-{chapter}-{index:04d}"
            audio, rate = soundfile.read(data.wav[utt])
            soundfile.write(folder / f"{new}.flac", audio, rate)
            with (folder / f"{speaker}-{chapter}.trans.txt").open("a") as listing:
                listing.write(f"{new} {data.text[utt].upper()}\n")
            if subset == "train":
                texts.append(data.text[utt].upper())
    (root / "lm").mkdir()
    write_arpa(root / "lm" / "3-gram.arpa", texts, 3)
    with (
        open(root / "lm" / "3-gram.arpa", "rb") as plain,
        gzip.open(root / "lm" / LM, "wb") as packed,
    ):
        packed.write(plain.read())
    (root / "lm" / "3-gram.arpa").unlink()
    return root


def paths(librispeech: Path, folder: Path) -> Path:
    """A user's file over the study: where their LibriSpeech is."""

    def source(subset: str) -> list[dict]:
        return [{"format": "librispeech", "path": str(librispeech / SUBSETS[subset])}]

    mine = {
        "corpus": {
            "subsets": {
                "train": source("train"),
                "dev": source("dev"),
                "test": {"clean": source("test-clean"), "other": source("test-other")},
            }
        },
        "decode": {"lm": str(librispeech / "lm" / LM)},
    }
    (folder / "my-paths.yaml").write_text(yaml.safe_dump(mine))
    return folder / "my-paths.yaml"


def planned_jobs(output: str) -> list[dict]:
    """Every job of a dry run: its rule, wildcards and resources."""
    jobs = []
    for block in re.split(r"\n(?=rule \w+:)", output):
        rule = re.match(r"rule (\w+):", block)
        if not rule:
            continue
        fields = {
            key: dict(item.split("=", 1) for item in value.split(", ") if "=" in item)
            for key, value in re.findall(r"^\s+(wildcards|resources): (.*)$", block, re.MULTILINE)
        }
        jobs.append(
            {"rule": rule.group(1), **fields.get("wildcards", {}), **fields.get("resources", {})}
        )
    return jobs


def dry_run(librispeech: Path, tmp_path: Path, **changes) -> tuple[str, list[dict]]:
    """The LibriSpeech study planned through a site profile (`changes` over the shipped one)."""
    profile = site_profile(tmp_path, **changes)
    command = [
        sys.executable,
        "-m",
        "snakemake",
        "--profile",
        str(profile),
        "--directory",
        str(tmp_path),
        "--configfile",
        ROOT / "config.yaml",
        ROOT / "studies" / "librispeech.yaml",
        paths(librispeech, tmp_path),
        "-n",
    ]
    result = subprocess.run(
        list(map(str, command)), cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result.stdout, planned_jobs(result.stdout)


SITE = {
    "default-resources": {"slurm_account": "myproject", "slurm_partition": "cpu"},
    "set-resources": {
        "train": {"slurm_partition": "gpu"},
        "train_rung": {"slurm_partition": "gpu"},
        "log_probs": {"slurm_partition": "gpu"},
        "calibrate": {"slurm_partition": "gpu"},
    },
}


def test_the_librispeech_study_plans_each_job_as_a_users_profile_and_the_run_say(
    librispeech, tmp_path
):
    """The site's settings are the user's profile's: their account on every job, CPU stages on
    their CPU partition, training, calibration and decoding on their GPU partition. The rules set
    only what the run decides: a run of P ranks takes ceil(P / 8) nodes of its ranks and a GPU a
    rank, starts them with the srun the dry run shows, and has the time its plan gives it."""
    printed, jobs = dry_run(librispeech, tmp_path, **SITE)
    assert all(job["slurm_account"] == "myproject" for job in jobs if "slurm_account" in job)
    trains = [job for job in jobs if job["rule"] == "train"]
    assert len(trains) == 18  # SEQ, 4 algorithms at 2, 4, 8 and 16 learners, H-ADPSGD at 16
    for job in trains:
        learners = int(job["learners"])
        nodes = -(-learners // 8)
        assert (job["slurm_partition"], int(job["nodes"])) == ("gpu", nodes), job
        assert job["gres"] == f"gpu:{learners // nodes}", job
        assert job.get("tasks_per_node") == (str(learners // nodes) if learners > 1 else None), job
    # one task a node first clears what killed ranks of the job left (a requeued job's); a rank's
    # cores are the profile's set-threads, as in the real run (the profile's `cores` caps them
    # alike)
    srun = (
        r"\{ srun --mpi=none --ntasks=2 --ntasks-per-node=1 python -m asrscale clear-shared-memory"
        r" && srun --mpi=pmi2 --ntasks=16 --ntasks-per-node=8 --cpus-per-task=4 python -m asrscale "
        r"train"
    )
    assert re.search(srun, printed)
    assert "mpiexec" not in printed
    # a training job's time limit is its plan's upper edge (h100, 30 epochs at most, half again as
    # margin, a quarter hour to start): SEQ's 705 s an epoch (one learner: no miss applies), SSGD at
    # 16's 48 s at most 2× as its band (the model's misses of figures bound by arithmetic)
    runtime = {(job["algorithm"], int(job["learners"])): int(job["runtime"]) for job in trains}
    assert runtime["seq", 1] == pytest.approx(705 * 30 * 1.5 / 60 + 15, rel=0.01)
    assert 48 * 30 * 1.5 / 60 * 1.5 + 15 < runtime["ssgd", 16] < 48 * 30 * 1.5 / 60 * 2.1 + 15
    # a run's log-probabilities on a GPU, its beam search on the CPU partition with none
    log_probs = [job for job in jobs if job["rule"] == "log_probs"]
    assert len(log_probs) == 18 and all(
        (job["slurm_partition"], job["gres"]) == ("gpu", "gpu:1") for job in log_probs
    )
    decodes = [job for job in jobs if job["rule"] == "decode"]
    assert len(decodes) == 18 and all(
        job["slurm_partition"] == "cpu" and "gres" not in job for job in decodes
    )
    cpu_stages = [
        job for job in jobs if job["rule"] in ("import_subset", "features", "shard", "tokens")
    ]
    assert {job["rule"] for job in cpu_stages} == {"import_subset", "features", "shard", "tokens"}
    assert all(job["slurm_partition"] == "cpu" and "gres" not in job for job in cpu_stages)
    assert (
        sum(job["rule"] == "features" for job in jobs) == 4 * 32
    )  # train, dev, test-clean, test-other


def test_a_site_profile_overrides_a_training_jobs_planned_time(librispeech, tmp_path):
    _, jobs = dry_run(
        librispeech, tmp_path, **{**SITE, "set-resources": {"train": {"runtime": 99}}}
    )
    assert {job["runtime"] for job in jobs if job["rule"] == "train"} == {"99"}


def test_the_lm_in_capitals_is_folded_and_one_of_another_corpus_stops_before_training(
    librispeech, tmp_path
):
    """LibriSpeech's own LM (capitals, gzipped) against its transcripts lowercased on import: its
    words folded as they are, the dev set's out-of-vocabulary rate what it truly is (the tiny LM
    knows the training words alone); an LM that shares no word with the transcripts stops the study
    at its LM, with an error naming decode.lm, before any run trains."""
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(TINY))
    run = [
        "--cores",
        "2",
        "--directory",
        tmp_path,
        "--configfile",
        ROOT / "config.yaml",
        ROOT / "studies" / "librispeech.yaml",
        paths(librispeech, tmp_path),
        tmp_path / "tiny.yaml",
    ]
    lm = Path("results") / "librispeech-100" / "lm" / "words.arpa"
    snakemake = [sys.executable, "-m", "snakemake", "--snakefile", ROOT / "Snakefile"]
    made = subprocess.run(
        list(map(str, [*snakemake, lm, *run])), capture_output=True, text=True, timeout=900
    )
    lm = tmp_path / lm
    assert made.returncode == 0, made.stdout[-3000:] + made.stderr[-3000:]
    from asrscale.decoding.lm import vocabulary

    words = set(vocabulary(lm))
    dev = read_data_dir(tmp_path / "results" / "librispeech-100" / "data" / "dev").text.values()
    truly = [w for text in dev for w in text.split()]
    assert words and all(w == w.lower() for w in words)  # folded as the transcripts were
    said = (tmp_path / "logs" / "librispeech-100" / "language-model.log").read_text()
    oov = sum(w not in words for w in truly) / len(truly)
    assert f"dev out-of-vocabulary rate {100 * oov:.2f}%" in said and oov < 0.5
    other = tmp_path / "other.arpa"
    write_arpa(other, ["NOTHING SHARED HERE", "ANOTHER CORPUS ENTIRELY"], 3)
    (tmp_path / "other.yaml").write_text(yaml.safe_dump({"decode": {"lm": str(other)}}))
    stopped = subprocess.run(
        list(map(str, [*snakemake, *run, tmp_path / "other.yaml"])),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert stopped.returncode != 0
    said = (tmp_path / "logs" / "librispeech-100" / "language-model.log").read_text()
    assert (
        f"decode.lm: {other}: 100.0% of the dev transcripts' words are not in its lexicon" in said
    )
    assert not list((tmp_path / "results").rglob("model.pt"))  # no run trained


TINY = {  # the same study at the size of a test: one epoch of a small model, SEQ and SSGD at 2
    "features": {"jobs": 1},
    "model": {"layers": 1, "units": 32},
    "train": {"epochs": 1, "batch_size": 4, "checkpoint_steps": 0, "log_interval": 5},
    "study": {"learners": [2], "runs": [{"algorithm": "seq"}, {"algorithm": "ssgd"}]},
    # the fixture's LM knows the tiny training text alone: 28% of the dev words are not in it
    "decode": {"lm_weights": [0.5], "word_bonuses": [0.0], "max_lm_oov_rate": 0.5},
}


def test_the_librispeech_study_runs_tiny_on_the_local_cluster(cluster, librispeech, tmp_path):
    """Every job a SLURM job of the local cluster, through a site profile sized for it (a core and
    a GB a rank); the report rendered here."""
    profile = site_profile(tmp_path, **LOCAL)
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(TINY))
    command = [
        sys.executable,
        "-m",
        "snakemake",
        "--profile",
        str(profile),
        "--directory",
        str(tmp_path),
        "--configfile",
        ROOT / "config.yaml",
        ROOT / "studies" / "librispeech.yaml",
        paths(librispeech, tmp_path),
        tmp_path / "tiny.yaml",
        *WITHOUT_ACCOUNTING,
    ]
    result = subprocess.run(
        list(map(str, command)), cwd=ROOT, capture_output=True, text=True, timeout=1800
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-6000:]
    report = (tmp_path / "reports" / "librispeech.html").read_text()
    assert "SEQ (the baseline)" in report and "LibriSpeech" in report
    # both test sets decoded, scored and reported; the claims pool them
    assert "SEQ's WER on test-clean" in report and "SEQ's WER on test-other" in report
    runs = pd.read_csv(
        tmp_path / "results" / "librispeech-100" / "studies" / "librispeech" / "runs.tsv", sep="\t"
    )
    assert runs[["wer_test-clean", "wer_test-other", "wer"]].notna().all(axis=None)
    (log,) = (tmp_path / ".snakemake" / "log").glob("*.snakemake.log")
    submitted = set(
        re.findall(
            r"submitted with SLURM jobid \d+ \(log: \S+/slurm_logs/rule_(\w+)/", log.read_text()
        )
    )
    assert {"import_subset", "features", "train", "decode"} <= submitted
    shutil.rmtree(tmp_path / "results", ignore_errors=True)


def test_the_smoke_study_keeps_a_few_speakers_and_two_small_runs(librispeech, tmp_path):
    """studies/librispeech-smoke.yaml over the study and a user's paths: each subset's first
    speakers alone, SEQ and SSGD at 2, one epoch; the user's paths kept."""
    from snakemake.utils import update_config

    from asrscale.config.study import Study

    config = {}
    for file in (
        ROOT / "config.yaml",
        ROOT / "studies" / "librispeech.yaml",
        paths(librispeech, tmp_path),
        ROOT / "studies" / "librispeech-smoke.yaml",
    ):
        update_config(config, yaml.safe_load(Path(file).read_text()))
    study = Study(config)
    assert (
        study.stage_settings("import-train")["speakers"] == 4
        and study.stage_settings("import-dev")["speakers"] == 2
    )
    assert study.stage_settings("import-train")["sources"][0]["path"] == str(
        librispeech / SUBSETS["train"]
    )
    assert (
        study.test_sets == ["test-clean", "test-other"]
        and study.stage_settings("import-test-other")["speakers"] == 2
    )
    assert sorted((r.algorithm, r.learners) for r in study.runs()) == [("seq", 1), ("ssgd", 2)]
    assert study.config["train"]["epochs"] == 1
