"""The preflight of a study before a cluster sees it: every config file parsed (a typo named by its
file, line and column), an unknown key named with the file and line that set it and the nearest
valid key, a GPU job whose partition differs from the other GPU jobs' warned of, and a dry run
through a SLURM profile showing each job's sbatch options."""

import subprocess
import sys

import pytest
import yaml

from asrscale.jobs import GPU_RULES, partition_warning
from helpers import ROOT, run_snakemake

pytestmark = pytest.mark.slow  # starts Snakemake, MPI ranks, SLURM or a browser


def check(*arguments, cwd=ROOT):
    return subprocess.run(
        [sys.executable, "-m", "asrscale", "check", *map(str, arguments)],
        capture_output=True,
        text=True,
        cwd=cwd,
    )


def test_a_yaml_typo_in_a_configfile_is_named_by_its_file_line_and_column(tmp_path):
    (tmp_path / "mine.yaml").write_text("train:\n  epochs: 2\n batch_size: 3\n")
    found = check("--configfile", "config.yaml", tmp_path / "mine.yaml")
    assert found.returncode != 0 and found.stderr.count("\n") == 1
    assert f"{tmp_path / 'mine.yaml'}, line 3, column 2: not valid YAML" in found.stderr
    assert check("--configfile", "config.yaml", "studies/quick.yaml").returncode == 0


def test_an_unknown_key_is_named_with_its_file_line_and_the_nearest_key(tmp_path):
    (tmp_path / "mine.yaml").write_text(
        "model: {units: 64}\ntrain:\n  epochs: 2\n  bacth_size: 3\n"
    )
    found = check("--configfile", "config.yaml", "studies/quick.yaml", tmp_path / "mine.yaml")
    assert found.stderr.strip() == (
        f"asrscale check: config: {tmp_path / 'mine.yaml'}, line 4, column 3: train.bacth_size: "
        "not a setting (did you mean batch_size?)"
    )
    (tmp_path / "mine.yaml").write_text("trian: {epochs: 2}\n")  # a section's name too
    found = check("--configfile", "config.yaml", tmp_path / "mine.yaml")
    assert "mine.yaml, line 1, column 1: trian: not a setting (did you mean train?)" in found.stderr


def test_the_workflow_names_the_configfile_and_line_of_an_unknown_key(tmp_path):
    """As a new user meets it: `snakemake --configfile` with a misspelt key stops naming their
    file and line, not the workflow's rule file."""
    (tmp_path / "mine.yaml").write_text("train:\n  bacth_size: 3\n")
    found = run_snakemake(
        tmp_path,
        "-n",
        configfile=[ROOT / "studies" / "quick.yaml", tmp_path / "mine.yaml"],
        check=False,
    )
    assert found.returncode != 0
    said = found.stdout + found.stderr
    assert f"{tmp_path / 'mine.yaml'}, line 2, column 3: train.bacth_size: not a setting" in said
    assert "did you mean batch_size?" in said


def _profile(folder, **partitions) -> str:
    """The shipped profile with the GPU rules' partitions set (rule -> partition)."""
    profile = yaml.safe_load((ROOT / "slurm" / "config.yaml").read_text())
    for rule, partition in partitions.items():
        profile["set-resources"].setdefault(rule, {})["slurm_partition"] = partition
    (folder / "config.yaml").write_text(yaml.safe_dump(profile))
    return str(folder)


def test_a_gpu_job_left_off_the_gpu_partition_is_warned_of(tmp_path):
    assert partition_warning({rule: {"slurm_partition": "gpu"} for rule in GPU_RULES}, "") is None
    assert partition_warning({}, "cpu") is None  # every job on the default partition: agreed
    said = partition_warning({"train": {"slurm_partition": "gpu"}}, "cpu")
    assert said.startswith("GPU jobs of train_rung, calibrate, log_probs go to 'cpu' partition")
    on_gpus = tmp_path / "gpus.yaml"
    on_gpus.write_text("train: {device: cuda}\n")
    # the shipped profile names the GPU partition once (an anchor): setting it there sets it for all
    shipped = (ROOT / "slurm" / "config.yaml").read_text().replace('&gpu ""', "&gpu gpu-a100")
    (tmp_path / "shipped").mkdir()
    (tmp_path / "shipped" / "config.yaml").write_text(shipped)
    found = check("--configfile", "config.yaml", on_gpus, "--profile", tmp_path / "shipped")
    assert "every GPU job's partition agrees" in found.stdout, found.stdout + found.stderr
    (tmp_path / "one").mkdir()
    one = _profile(tmp_path / "one", train="gpu", train_rung="gpu", calibrate="", log_probs="")
    found = check("--configfile", "config.yaml", on_gpus, "--profile", one)
    assert "warning: " in found.stdout and "GPU jobs of calibrate, log_probs go to" in found.stdout


@pytest.fixture(scope="module")
def dry_run(tmp_path_factory):
    """The tiny study on GPUs, dry-run through a profile that left calibrate off the GPU
    partition."""
    folder = tmp_path_factory.mktemp("dry")
    (folder / "profile").mkdir()
    profile = _profile(folder / "profile", train="gpu", train_rung="gpu", log_probs="gpu")
    (folder / "gpus.yaml").write_text("train: {device: cuda}\n")
    return run_snakemake(
        folder,
        "-n",
        "--profile",
        profile,
        "--slurm-status-command",
        "squeue",
        configfile=[ROOT / "studies" / "quick.yaml", folder / "gpus.yaml"],
    )


def test_a_dry_run_through_the_profile_shows_each_jobs_sbatch_options(dry_run):
    shown = [line for line in dry_run.stdout.splitlines() if line.startswith("Shell command: ")]
    decode = [line for line in shown if " python -m asrscale decode " in line]
    log_probs = [line for line in shown if " python -m asrscale log-probs " in line]
    # the beam search: CPUs alone, a process a core (the profile's 8, capped by --cores 2)
    assert decode and all(
        line.startswith("Shell command: : sbatch -t 120 --mem 16000 --ntasks=1 --cpus-per-task=2;")
        and "--processes 2 " in line
        for line in decode
    )
    assert log_probs and all(
        line.startswith("Shell command: : sbatch -p gpu -t 30 ") and "--gres=gpu:1" in line
        for line in log_probs
    )
    trained = [
        line for line in shown if "asrscale train " in line and "--ntasks-per-node=2" in line
    ]
    assert trained and all(": sbatch -p gpu -t " in line for line in trained)


def test_a_dry_run_warns_of_a_gpu_job_off_the_gpu_partition(dry_run):
    said = dry_run.stdout + dry_run.stderr
    assert "your SLURM profile: GPU jobs of calibrate go to the default partition" in said
