"""On a real GPU (skipped without CUDA): every algorithm trains there in both worlds, through the
workflow, and the synchronous ones give the CPU's model. TF32 is off (NVIDIA_TF32_OVERRIDE=0)
wherever a result is compared with the CPU's."""

import json
import os
import subprocess
import sys
from dataclasses import asdict

import pandas as pd
import pytest
import torch

from asrscale.training.fused.cells import best_cell
from asrscale.training.fused.learners import fused_forward
from asrscale.training.fused.recurrence import EAGER, GraphedLoops
from helpers import (
    FUSED_CONFIGS,
    MPI_WORLD,
    ROOT,
    corpus_arguments,
    learners_and_batch,
    mpiexec,
    recomputed_wer,
    run_config,
    run_snakemake,
    stack,
    train_command,
)

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]
EVERY = {"seq", "ssgd", "asgd", "kavg", "ma", "adpsgd", "hadpsgd"}


def test_the_tiny_study_trains_every_algorithm_on_the_gpu_in_both_worlds(tmp_path, monkeypatch):
    monkeypatch.setenv("NVIDIA_TF32_OVERRIDE", "0")
    tiny, gpu = ROOT / "studies" / "quick.yaml", ROOT / "tests" / "fixtures" / "gpu.yaml"
    run_snakemake(tmp_path, configfile=[tiny, gpu])
    study = tmp_path / "results" / "tiny" / "studies" / "tiny"
    runs = pd.read_csv(study / "runs.tsv", sep="\t")
    print(runs[["world", "algorithm", "learners", "wer", "best_dev_loss", "train_s"]].to_string())
    assert {(w, a) for w, a in zip(runs.world, runs.algorithm)} == {
        (w, a) for w in ("simulated", "mpi") for a in EVERY
    }
    assert runs.best_dev_loss.notna().all()
    test_set = tmp_path / "results" / "tiny" / "data" / "test"
    for run in runs.itertuples():
        assert json.loads((tmp_path / run.run / "run.json").read_text())["device"].startswith(
            "cuda"
        )
        # scored against the test set's own text, recomputed here
        assert run.wer == pytest.approx(recomputed_wer(tmp_path / run.run / "test", test_set)), (
            run.run
        )
    calibration = json.loads((study / "calibration.json").read_text())
    assert calibration["device"] == "cuda" and calibration["gpus"] >= 1
    # the same computation in both worlds (GPU CTC sums in a nondeterministic order: not bit for
    # bit)
    seq = runs[runs.algorithm == "seq"].set_index("world").best_dev_loss
    assert seq["simulated"] == pytest.approx(seq["mpi"], rel=1e-3)


@pytest.mark.parametrize("algorithm", ["ssgd", "kavg", "ma"])
def test_synchronous_algorithms_on_the_gpu_give_the_cpus_model(
    corpus, tmp_path, monkeypatch, algorithm
):
    monkeypatch.setenv("NVIDIA_TF32_OVERRIDE", "0")  # for the ranks mpiexec starts
    models = {}
    for device in ("cpu", "cuda"):
        out = tmp_path / device
        world = dict(
            MPI_WORLD, timeout_s=60
        )  # a rank that hangs ends the job with the request it waits in
        command = train_command(
            corpus,
            out,
            corpus / "shards" / "P2",
            algorithm,
            world=world,
            epochs=1,
            optimizer="sgd",
            lr=0.05,
            device=device,
        )
        mpiexec(2, *command)
        models[device] = torch.load(out / "model.pt", weights_only=False)["model"]
        assert json.loads((out / "run.json").read_text())["device"].startswith(device)
    for name, cpu in models["cpu"].items():
        torch.testing.assert_close(models["cuda"][name], cpu, atol=1e-4, rtol=1e-4, msg=name)


def test_the_gradient_noise_is_measured_on_the_gpu_as_on_the_cpu(corpus, tmp_path, monkeypatch):
    """asrscale.training.noise_scale on the GPU path: the same draws, the same estimates on 2 ranks
    sharing the measurement (GPU CTC sums in a nondeterministic order, and |G|² is a difference of
    two norms: within 1%)."""
    monkeypatch.setenv("NVIDIA_TF32_OVERRIDE", "0")
    often = {"share": 0.5, "batch_size": 4, "batches": 2, "smoothing": 0.5}
    found = {}
    for device in ("cpu", "cuda"):
        out = tmp_path / device
        command = train_command(
            corpus,
            out,
            corpus / "shards" / "P2",
            "ssgd",
            epochs=1,
            optimizer="sgd",
            lr=0.05,
            device=device,
            noise_scale=often,
        )
        mpiexec(2, *command)
        metrics = pd.read_csv(out / "metrics.tsv", sep="\t")
        found[device] = metrics[metrics.kind == "epoch"][["gradient_sq", "noise_trace"]]
    assert (found["cuda"] > 0).all().all()
    pd.testing.assert_frame_equal(found["cuda"], found["cpu"], rtol=1e-2)


def test_transport_auto_takes_mpi_where_ranks_share_a_gpu(corpus, tmp_path):
    if torch.cuda.device_count() > 1:
        pytest.skip("every rank can have a GPU of its own here")
    mpiexec(
        2,
        *train_command(corpus, tmp_path, corpus / "shards" / "P2", "ssgd", epochs=1, device="cuda"),
    )
    assert json.loads((tmp_path / "run.json").read_text())["world"]["transport"] == "mpi"
    nccl = dict(MPI_WORLD, transport="torch")
    command = train_command(
        corpus,
        tmp_path / "nccl",
        corpus / "shards" / "P2",
        "ssgd",
        world=nccl,
        epochs=1,
        device="cuda",
    )
    result = mpiexec(2, *command, check=False)
    assert (
        result.returncode != 0
        and "NCCL needs a GPU per rank: set mpi.transport to auto or mpi" in result.stderr
    )


@pytest.mark.parametrize(
    "algorithm, ranks",
    [("ssgd", 2), ("kavg", 2), ("ma", 2), ("adpsgd", 2), ("hadpsgd", 2), ("asgd", 3)],
)
def test_every_algorithm_exchanges_over_nccl_where_each_rank_has_a_gpu(
    corpus, tmp_path, algorithm, ranks
):
    """One transport for every algorithm (mpi.transport auto): NCCL for averaging, gossip and a
    server's messages alike, its rate printed (learner 0's bytes over its exchanges' time)."""
    if torch.cuda.device_count() < ranks:
        pytest.skip(f"needs {ranks} GPUs, one a rank")
    world = dict(MPI_WORLD, timeout_s=120, node_size=1 if algorithm == "hadpsgd" else None)
    mpiexec(
        ranks,
        *train_command(
            corpus,
            tmp_path,
            corpus / "shards" / "P2",
            algorithm,
            world=world,
            epochs=1,
            device="cuda",
        ),
    )
    record = json.loads((tmp_path / "run.json").read_text())
    exchanges = record["exchanges"]
    print(
        f"{algorithm}: {exchanges['bytes'] * 8 / exchanges['seconds'] / 1e9:.2f} Gb/s over "
        f"{record['world']}"
    )
    assert record["world"]["transport"] == "nccl" and exchanges["bytes"] > 0


def test_calibration_times_the_gpu_and_prints_a_dedicated_profile(corpus, tmp_path):
    run = run_config(device="cuda")
    settings = tmp_path / "calibrate.json"
    settings.write_text(
        json.dumps(
            {
                "train": asdict(run.train),
                "model": asdict(run.model),
                "features": asdict(run.features),
                "cmvn": run.cmvn,
            }
        )
    )
    command = [
        sys.executable,
        "-m",
        "asrscale",
        "calibrate",
        "--settings",
        settings,
        *corpus_arguments(corpus, "train"),
        "--tokens",
        corpus / "tokens.txt",
        "--out",
        tmp_path / "calibration.json",
    ]
    result = subprocess.run(
        list(map(str, command)),
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ, PYTHONPATH=str(ROOT / "src")),
    )
    assert result.returncode == 0, result.stderr
    calibration = json.loads((tmp_path / "calibration.json").read_text())
    assert (
        calibration["device"] == "cuda"
        and list(calibration["by_threads"].values())[0]["frames_per_s"] > 0
    )
    assert (
        "device: dedicated" in result.stdout
        and "measured_on:" in result.stdout
        and "by_size:" in result.stdout
    )


def test_cuda_graphs_replay_the_fused_recurrence_as_computed_eagerly():
    """The simulated world's loops on a GPU (CUDA graphs of Triton's cells) against torch's eager
    ones."""
    config, loops = FUSED_CONFIGS[0], GraphedLoops(best_cell(torch.device("cuda")))
    for round in range(
        3
    ):  # a shape's first computation is eager, its second captured, the rest replayed
        models, features, lengths = learners_and_batch(config)
        models = [model.float().cuda() for model in models]
        features, lengths = (features + round).float().cuda(), lengths.cuda()
        outputs, gradients = [], []
        for each in (EAGER, loops):
            stacked = stack(models)
            log_probs, _ = fused_forward(config, stacked, features, lengths, loops=each)
            log_probs.sum().backward()
            outputs.append(log_probs.detach())
            gradients.append({name: tensor.grad for name, tensor in stacked.items()})
        torch.testing.assert_close(outputs[1], outputs[0], rtol=1e-5, atol=1e-6)
        for name, gradient in gradients[0].items():
            torch.testing.assert_close(gradients[1][name], gradient, rtol=1e-4, atol=1e-5, msg=name)
    assert len(loops.forward.graphs) == len(loops.backward.graphs) == 1
