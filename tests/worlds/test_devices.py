"""Device placement, checked without a GPU: on the `meta` device every tensor has a device but no
values, so a tensor made on the CPU and mixed with the model's (the first thing that fails on a
GPU) is an error here too. What reads a value (a loss, CTC, a message header) cannot run there;
everything else an algorithm does with its tensors can."""

import numpy as np
import pytest
import torch

from asrscale.config.algorithms import ALGORITHMS
from asrscale.data.batches import Batch
from asrscale.models import build_model
from asrscale.training.algorithms import make_algorithm
from asrscale.training.fused.learners import fused_forward, fusers
from asrscale.training.learner import Learner, make_optimizer
from asrscale.training.natural_gradient import NaturalGradient, Recorder
from asrscale.worlds import ops
from asrscale.worlds.devices import resolve_device
from asrscale.worlds.mpi import choose_transport
from helpers import model_config

META = torch.device("meta")
CONFIGS = [
    model_config(units=16),
    model_config(units=16, bidirectional=False),
    model_config(kind="dnn", units=16),
]


@pytest.mark.parametrize("config", CONFIGS, ids=["blstm", "lstm", "dnn"])
def test_the_models_forward_keeps_to_the_models_device(config):
    model = build_model(config, 40, 12).to(META)
    log_probs, lengths = model(
        torch.empty(2, 30, 40, device=META), torch.empty(2, dtype=torch.long, device=META)
    )
    assert log_probs.device == lengths.device == META and log_probs.shape == (2, 10, 12)


class MetaLearner(Learner):
    """A learner on the meta device: gradients of a stand-in loss (CTC has no meta kernel); with a
    recorder (NG-SGD), through the recording forward pass."""

    def backward(self, batch, recorder=None):
        for parameter in self.parameters:
            parameter.grad = torch.zeros_like(parameter)
        if recorder is not None:
            params = {name: p.unsqueeze(0) for name, p in self.model.named_parameters()}
            features, lengths = (
                torch.empty(1, 2, 30, 40, device=META),
                torch.empty(1, 2, dtype=torch.long, device=META),
            )
            fused_forward(self.model.config, params, features, lengths, recorder)[
                0
            ].sum().backward()
        yield ops.Compute(0.0, batch.frames)
        return 0.0


class ValueRead(Exception):
    """The algorithm reads a value that a meta tensor does not have, other than by `item` or
    `tolist` (`values_read_as`)."""


def values_read_as(monkeypatch, headers: list[list[float]] = ()) -> None:
    """A world without values answers a meta tensor's `item()` with 0 (ASGD's learner reads the
    version of the server's reply) and its `tolist()` with `headers` in turn (the requests ASGD's
    server reads), so that the program goes on to its every request."""
    real_item, real_tolist, scripted = torch.Tensor.item, torch.Tensor.tolist, iter(headers)
    monkeypatch.setattr(torch.Tensor, "item", lambda self: 0 if self.is_meta else real_item(self))
    monkeypatch.setattr(
        torch.Tensor, "tolist", lambda self: next(scripted) if self.is_meta else real_tolist(self)
    )


def answer(request):
    """A world without values: every tensor a request carries is flattened into one buffer, as
    both worlds do (where mixed devices fail), and nothing is communicated."""
    for field in ("tensors", "send", "receive"):
        if isinstance(getattr(request, field, None), list):
            ops.flatten(getattr(request, field))
    if isinstance(
        request, (ops.Update, ops.Precondition)
    ):  # both ways a world does it (no values: twice is harmless)
        request.alone()
        fusers(META)[type(request)]([request.job])
    if isinstance(request, ops.Reduce):
        return np.asarray(request.values, dtype=np.float64)
    if isinstance(request, ops.Receive):
        return 0, None
    return request


def drive(program):
    result = None
    while True:
        try:
            request = program.send(result)
        except StopIteration as done:
            return done.value
        except (NotImplementedError, RuntimeError) as error:
            if "meta" in str(error) and ("item" in str(error) or "data" in str(error)):
                raise ValueRead from error
            raise
        result = answer(request)


@pytest.mark.slow
@pytest.mark.parametrize("algorithm", sorted(ALGORITHMS))
def test_every_algorithms_requests_keep_to_the_learners_device(algorithm, monkeypatch):
    """Two learners' worth of one learner's program: start, steps with every exchange, consensus."""
    values_read_as(monkeypatch)
    size = 1 if algorithm == "seq" else 2
    for rank in range(size):  # ADPSGD: a passive learner, then an active one
        layout = ops.Layout(rank=rank, size=size, node_size=size)
        model = build_model(model_config(units=8), 40, 12).to(META)
        learner = MetaLearner(model, make_optimizer("adam", 0.9, model), 5.0, "meta")
        chosen = make_algorithm(algorithm, layout, {"period": 1} if algorithm == "kavg" else {})
        lengths = torch.tensor([30, 24])
        batch = Batch(
            torch.zeros(2, 30, 40),
            lengths,
            torch.tensor([1, 2, 3]),
            torch.tensor([2, 1]),
            ["a", "b"],
        )
        drive(chosen.start(learner))
        drive(chosen.plan(50.0))
        for _ in range(3):
            drive(chosen.step(learner, batch, 1e-3))
        drive(chosen.epoch_done(learner))
        drive(chosen.consensus(learner))


def test_asgds_server_keeps_to_the_learners_device(monkeypatch):
    """ASGD's server on the meta device: a gradient applied, a pull, a checkpoint's save and a
    roll-back answered, then its one learner done."""
    from asrscale.training.algorithms.asgd import DONE, GRADIENT, PULL, ROLL_BACK, SAVE

    values_read_as(
        monkeypatch,
        [[GRADIENT, 0, 1e-3], [PULL, 1, 0], [SAVE, 1, 4], [ROLL_BACK, 1, 0], [DONE, 1, 0]],
    )
    model = build_model(model_config(units=8), 40, 12).to(META)
    server = MetaLearner(model, make_optimizer("adam", 0.9, model), 5.0, "meta")
    asgd = make_algorithm("asgd", ops.Layout(rank=0, size=1, servers=1))
    saved, rolled_back = [], []
    drive(asgd.serve(server, checkpoint=saved.append, roll_back=lambda: rolled_back.append(True)))
    # (version pulled, version once applied, staleness, applied) of the one gradient
    assert (
        [record[1:] for record in asgd.records] == [(0, 1, 0, True)]
        and saved == [4]
        and rolled_back == [True]
    )


def test_natural_gradient_keeps_to_the_parameters_device():
    weight, bias = (
        torch.nn.Parameter(torch.empty(6, 5, device=META)),
        torch.nn.Parameter(torch.empty(6, device=META)),
    )
    for parameter in (weight, bias):
        parameter.grad = torch.zeros_like(parameter)
    natural_gradient = NaturalGradient({"w": weight}, {"w": bias}, rank_in=2, rank_out=3)
    recorder = Recorder()
    recorder.record = {"w": (torch.empty(40, 5, device=META), torch.empty(40, 6, device=META))}
    for _ in range(12):  # refreshes included
        natural_gradient.precondition(recorder)
    assert weight.grad.device == bias.grad.device == META


def test_auto_collectives_never_pick_nccl_for_ranks_that_share_a_gpu():
    assert choose_transport("auto", ["gpu-a", "gpu-b"], mpi_cuda=False) == "torch"
    assert choose_transport("auto", ["gpu-a", "gpu-a"], mpi_cuda=False) == "mpi"
    assert choose_transport("auto", [None, None], mpi_cuda=None) == "mpi"
    assert choose_transport("auto", ["gpu-a", None], mpi_cuda=None) == "mpi"
    assert choose_transport("torch", [None, None], mpi_cuda=None) == "torch"  # Gloo between CPUs
    with pytest.raises(ValueError, match="3 ranks share 2 GPU.*set mpi.transport to auto or mpi"):
        choose_transport("torch", ["gpu-a", "gpu-a", "gpu-b"], mpi_cuda=None)
    with pytest.raises(ValueError, match="cuda-aware-mpi, but this MPI .* takes no GPU buffers"):
        choose_transport("cuda-aware-mpi", ["gpu-a"], mpi_cuda=False)
    assert choose_transport("cuda-aware-mpi", ["gpu-a"], mpi_cuda=None) == "cuda-aware-mpi"


def test_a_device_that_is_not_there_is_named():
    with pytest.raises(ValueError, match="train.device must be one of"):
        resolve_device("tpu")
    if not torch.cuda.is_available():
        with pytest.raises(
            ValueError, match="train.device is cuda, but torch finds no CUDA device here"
        ):
            resolve_device("cuda")
        assert resolve_device("auto") == torch.device("cpu")
