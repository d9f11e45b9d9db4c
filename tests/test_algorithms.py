import pytest

from asrscale.training.algorithms import make_algorithm
from asrscale.training.algorithms.adpsgd import partner
from asrscale.worlds.ops import Layout


@pytest.mark.parametrize("graph", ["ring", "exponential"])
@pytest.mark.parametrize("size", range(1, 10))
def test_adpsgd_pairs_are_mutual_bipartite_and_rotate(size, graph):
    met = {rank: set() for rank in range(size)}
    for step in range(4 * size):
        for rank in range(size):
            peer = partner(rank, size, step, graph)
            if peer is None:
                continue
            assert partner(peer, size, step, graph) == rank and peer % 2 != rank % 2
            met[rank].add(peer)
        sitting_out = [r for r in range(size) if partner(r, size, step, graph) is None]
        assert len(sitting_out) == size % 2 if size > 1 else sitting_out == [0]
    if graph == "ring" and size > 1:
        assert all(met[r] == {p for p in range(size) if p % 2 != r % 2} for r in range(size))


@pytest.mark.parametrize(
    "name, options, message",
    [
        ("kavg", {"period": 0}, "period must be at least 1"),
        ("kavg", {"period_policy": "sometimes"}, "period_policy must be one of"),
        ("adpsgd", {"graph": "star"}, "graph must be one of"),
        ("hadpsgd", {"learners_per_node": 2}, "unexpected keyword argument .learners_per_node."),  # a world setting
        ("asgd", {"max_staleness": -1}, "max_staleness must be at least 0"),
        ("ssgd", {"period": 2}, "unexpected keyword argument 'period'"),
    ],
)
def test_options_are_validated_eagerly(name, options, message):
    with pytest.raises((ValueError, TypeError), match=message):
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
    from asrscale.training.algorithms import ALGORITHMS

    assert {name for name, cls in ALGORITHMS.items() if cls.alone_is_seq} == {"ssgd", "kavg", "adpsgd", "hadpsgd"}
