import pytest
import torch

from asrscale.errors import ConfigError
from asrscale.training.algorithms import make_algorithm
from asrscale.training.algorithms.adpsgd import neighbours
from asrscale.worlds.ops import Layout


@pytest.mark.parametrize("graph", ["ring", "exponential"])
@pytest.mark.parametrize("size", range(1, 65))
def test_adpsgd_graphs_join_active_to_passive_learners_symmetrically_and_connect_every_learner(size, graph):
    links = {rank: neighbours(rank, size, graph) for rank in range(size)}
    for rank, peers in links.items():
        assert all(peer % 2 != rank % 2 and rank in links[peer] for peer in peers)
    reached, frontier = {0}, [0]  # every learner reaches every other along the graph
    while frontier:
        frontier = [peer for rank in frontier for peer in links[rank] if peer not in reached]
        reached.update(frontier)
    assert reached == set(range(size))
    if size > 2 and graph == "ring":
        assert all(len(peers) <= 2 for peers in links.values())


@pytest.mark.parametrize(
    "name, options, message",
    [
        ("kavg", {"period": 0}, "algorithms.kavg.period: 0 is less than the minimum of 1"),
        ("kavg", {"period_policy": "sometimes"}, r"algorithms.kavg.period_policy: 'sometimes' is not one of \['fixed'"),
        ("adpsgd", {"graph": "star"}, "algorithms.adpsgd.graph: 'star' is not one of"),
        ("hadpsgd", {"node_size": 2}, r"algorithms.hadpsgd: .*'node_size' was unexpected"),  # the study's
        ("asgd", {"max_staleness": -1}, "algorithms.asgd.max_staleness: -1 is less than the minimum of 0"),
        ("ma", {"reduce": "gather"}, "algorithms.ma.reduce: 'gather' is not one of"),
        ("ssgd", {"period": 2}, r"algorithms.ssgd: .*'period' was unexpected"),
    ],
)
def test_options_are_validated_eagerly_by_the_table_of_algorithms(name, options, message):
    with pytest.raises(ConfigError, match=message):
        make_algorithm(name, Layout(rank=0, size=4), options)


def test_kavg_period_policies():
    assert make_algorithm("kavg", Layout(0, 16), {"period": 8, "period_policy": "by_learners"}).period == 2
    assert make_algorithm("kavg", Layout(0, 2), {"period": 8, "period_policy": "by_learners"}).period == 16
    plateau = make_algorithm("kavg", Layout(0, 4), {"period": 8, "period_policy": "plateau", "plateau": 0.05})
    for dev_loss in (1.0, 0.5, 0.49):
        list(plateau.end_epoch(None, dev_loss))
    assert plateau.period == 4


def test_the_algorithms_that_are_seq_with_one_learner():
    # each is checked against SEQ with one learner on a real rank in test_mpi.py; ASGD (a server
    # round trip) and MA (natural gradient, capped change) cost or compute differently
    from asrscale.config.algorithms import ALGORITHMS

    assert {name for name, spec in ALGORITHMS.items() if spec.alone_is_seq} == {"ssgd", "kavg", "adpsgd", "hadpsgd"}


def test_asgd_messages_are_float32_on_the_wire():
    """A gradient push is the gradient and a 3-value header, all float32: a float64 header would
    promote the whole message and double the server's traffic on real ranks."""
    from torch import nn

    from asrscale.training.learner import Learner, make_optimizer
    from asrscale.worlds import ops

    model = nn.Linear(5, 3)
    learner = Learner(model, make_optimizer("sgd", 0.9, model), 0.0, "asgd")
    for parameter in learner.parameters:
        parameter.grad = torch.ones_like(parameter)
    asgd = make_algorithm("asgd", Layout(rank=0, size=2, servers=1))
    program = asgd._request(learner, 0, lr=0.1, payload=learner.gradients)
    push = next(program)
    assert isinstance(push, ops.Send) and push.to == 0
    wire = ops.flatten(push.tensors)
    assert wire.dtype == torch.float32 and wire.numel() * wire.element_size() == 4 * (5 * 3 + 3 + 3)


def test_the_consensus_is_measured_not_imposed_on_the_learners():
    """After an epoch the averaging algorithms evaluate the learners' average, and each learner
    goes on from its own model (no synchronisation the algorithm does not make itself)."""
    from asrscale.worlds import ops

    class Holder:
        def __init__(self, value):
            self.state = [torch.full((3,), float(value))]

    for name in ("kavg", "ma", "adpsgd", "hadpsgd"):
        learners = [Holder(rank) for rank in range(2)]
        programs = [make_algorithm(name, Layout(rank=rank, size=2, node_size=1, nodes=2)).consensus(learners[rank])
                    for rank in range(2)]  # fmt: skip
        requests = [next(program) for program in programs]
        assert all(isinstance(request, ops.Allreduce) for request in requests)
        average = sum(ops.flatten(r.tensors) for r in requests) / 2
        for request in requests:
            ops.unflatten(average, request.tensors)
        results = []
        for program in programs:
            with pytest.raises(StopIteration) as done:
                next(program)
            results.append(done.value.value)
        assert all(torch.equal(result[0], torch.full((3,), 0.5)) for result in results)
        assert [learner.state[0][0].item() for learner in learners] == [0.0, 1.0], name


@pytest.mark.parametrize("name", ["kavg", "ma", "adpsgd", "hadpsgd"])
def test_an_averaging_shares_the_model_and_the_optimizers_state_or_the_weights_alone(name):
    """What an averaging's requests carry: the model and Adam's two moments (3× the model's bytes),
    or with `averages: model` the weights alone, as the studies averaged."""
    from torch import nn

    from asrscale.training.learner import Learner, make_optimizer

    model = nn.Linear(5, 3)
    learner = Learner(model, make_optimizer("adam", 0.0, model), 0.0, name)
    weights = sum(t.numel() for t in learner.state)
    for averages, values in (("model_and_optimizer", 3 * weights), ("model", weights)):
        algorithm = make_algorithm(name, Layout(rank=1, size=2, node_size=1, nodes=2), {"averages": averages})
        assert sum(t.numel() for t in algorithm.shared(learner)) == values
    with pytest.raises(ConfigError, match=f"algorithms.{name}.averages: 'gradients' is not one of"):
        make_algorithm(name, Layout(rank=0, size=2), {"averages": "gradients"})
