import pytest
import torch

from asrscale.data.batches import Prefetcher, Subset, batch_loader
from asrscale.data.shard import read_shard
from asrscale.data.tokens import Tokens
from asrscale.training.evaluation import share


@pytest.fixture
def train_set(corpus):
    tokens = Tokens.read(corpus / "tokens.txt")
    return Subset(
        corpus / "data" / "train",
        corpus / "feats" / "train",
        corpus / "feats" / "train",
        "global",
        tokens,
    )


def test_batches_are_deterministic_per_seed_and_cover_the_shard(train_set, corpus):
    utts = read_shard(corpus / "shards" / "P1", 0, 1)
    groups = train_set.batches(utts, 8, seed=5)
    assert groups == train_set.batches(utts, 8, seed=5) != train_set.batches(utts, 8, seed=6)
    assert sorted(u for g in groups for u in g) == sorted(utts)
    batch = train_set.collate(groups[0])
    assert batch.features.shape[0] == 8 and batch.features.shape[1] == max(batch.lengths)
    assert batch.target_lengths.sum() == len(batch.targets)
    assert batch.frames == sum(train_set.frames[u] for u in groups[0])
    # a fixed number of batches (every learner takes the same steps) still uses every utterance
    seven = train_set.batches(utts, 8, seed=5, count=7)
    assert len(seven) == 7 and sorted(u for g in seven for u in g) == sorted(utts)
    assert max(map(len, seven)) - min(map(len, seven)) <= 1


def test_learners_take_rounds_of_like_lengths_and_each_its_own_shard_once(train_set, corpus):
    """Every learner's batch of a step comes from the same place in its own order of lengths (the
    batch order is the seed's alone), each learner covers exactly its own shard every epoch, and
    utterances of nearly one length are mixed anew each epoch."""
    utts = sorted(read_shard(corpus / "shards" / "P1", 0, 1))[:48]
    shards = [utts[rank::4] for rank in range(4)]
    train_set.frames = {
        u: int(100 * 1.25**i) for i, u in enumerate(utts)
    }  # apart by more than the jitter
    epoch = [
        train_set.batches(shard, 4, seed=7, count=3, learner=rank)
        for rank, shard in enumerate(shards)
    ]
    for shard, groups in zip(shards, epoch):
        assert sorted(u for g in groups for u in g) == sorted(shard)

    def places(groups):  # the step at which each place in the length order is taken
        return sorted(range(3), key=lambda i: max(train_set.frames[u] for u in groups[i]))

    assert [places(groups) for groups in epoch] == [places(epoch[0])] * 4
    assert epoch[0] == train_set.batches(shards[0], 4, seed=7, count=3)  # learner 0 is SEQ's order
    later = [places(train_set.batches(shards[0], 4, seed=seed, count=3)) for seed in range(8, 12)]
    assert any(order != places(epoch[0]) for order in later)  # each epoch its own order
    # train.batch_order "own": the same batches, each learner in an order of its own (SEQ's the
    # same)
    own = [
        train_set.batches(shard, 4, seed=7, count=3, learner=rank, order="own")
        for rank, shard in enumerate(shards)
    ]
    assert [sorted(map(sorted, groups)) for groups in own] == [
        sorted(map(sorted, groups)) for groups in epoch
    ]
    assert own[0] == epoch[0] and len({tuple(places(groups)) for groups in own}) > 1
    train_set.frames = dict.fromkeys(utts, 300)
    mixed = [train_set.batches(utts, 8, seed=seed, count=6) for seed in (1, 2)]
    assert {frozenset(g) for g in mixed[0]} != {frozenset(g) for g in mixed[1]}


def test_prefetcher_yields_the_same_batches_as_inline_loading(train_set, corpus):
    groups = train_set.batches(read_shard(corpus / "shards" / "P1", 0, 1), 8, seed=1)
    with batch_loader() as loader:
        inline = list(Prefetcher(train_set, groups, 0, loader))
        # learners sharing the loader (a simulated world's), each taking a batch in turn
        learners = [Prefetcher(train_set, groups, depth, loader) for depth in (1, 3, 20)]
        taken = [list(batches) for batches in zip(*learners)]
    assert [b.utts for b in inline] == groups
    for ahead in zip(*taken):
        assert [b.utts for b in ahead] == groups
        assert all(torch.equal(a.features, b.features) for a, b in zip(ahead, inline))


def test_prefetcher_reraises_loading_errors_where_the_batch_is_taken(train_set, corpus):
    good = train_set.batches(read_shard(corpus / "shards" / "P1", 0, 1), 8, seed=1)[0]
    with batch_loader() as loader:
        batches = iter(Prefetcher(train_set, [good, ["no-such-utterance"]], 2, loader))
        assert next(batches).utts == good
        with pytest.raises(KeyError):
            next(batches)


def test_dev_shares_cover_the_set_once_in_runs_of_similar_length_and_even_frames():
    """Evaluation's split over learners: every utterance in one share, each share a run of the
    length order (so its batches pad little), shares within one utterance of equal frames."""
    frames = {f"u{i:03d}": 50 + (i * 37) % 400 for i in range(300)}
    for size in (1, 3, 16, 64):
        shares = [share(frames, rank, size) for rank in range(size)]
        assert sorted(u for s in shares for u in s) == sorted(frames)
        order = sorted(frames, key=lambda u: (frames[u], u))
        assert [u for s in shares for u in s] == order
        loads = [sum(frames[u] for u in s) for s in shares]
        assert max(loads) - min(loads) <= 2 * max(frames.values())
    assert share({}, 0, 4) == []


def test_the_dev_set_evaluated_at_once_is_the_sum_of_its_shares(corpus):
    """A simulated world's learner 0 evaluates the whole dev set in full batches where MPI ranks
    evaluate a share each: the same dev loss and token error rate."""
    import torch

    from asrscale.data.batches import Subset
    from asrscale.data.tokens import Tokens
    from asrscale.models import build_model
    from asrscale.training.evaluation import evaluate
    from asrscale.worlds.timing import WallTimes
    from helpers import model_config

    tokens = Tokens.read(corpus / "tokens.txt")
    dev = Subset(
        corpus / "data" / "dev",
        corpus / "feats" / "dev",
        corpus / "feats" / "train",
        "global",
        tokens,
    )
    torch.manual_seed(0)
    model = build_model(model_config(layers=1, units=16), 40, len(tokens))

    def totals(part):  # a learner's sums, before the world reduces them
        return next(evaluate(model, dev, part, WallTimes(), batch_size=4)).values

    whole = totals((0, 1))
    shares = [sum(column) for column in zip(*(totals((rank, 4)) for rank in range(4)))]
    assert whole[1:] == shares[1:] and whole[0] == pytest.approx(shares[0], rel=1e-6)
    assert totals(None) == [0.0, 0, 0, 0]
