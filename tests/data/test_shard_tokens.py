import pytest

from asrscale.data.shard import balance, read_shard
from asrscale.data.tokens import BLANK, Tokens


def test_shards_are_balanced_disjoint_and_deterministic():
    frames = {f"u{i}": 50 + (i * 37) % 300 for i in range(101)}
    for p in (1, 2, 3, 4, 7):
        shards = balance(frames, p)
        assert sorted(u for s in shards for u in s) == sorted(frames)
        loads = [sum(frames[u] for u in s) for s in shards]
        assert max(loads) - min(loads) <= max(frames.values())
        assert shards == balance(frames, p)
    with pytest.raises(ValueError):
        balance(frames, 0)


def test_shard_manifests(corpus):
    shards = [read_shard(corpus / "shards" / "P4", r, 4) for r in range(4)]
    assert len({u for s in shards for u in s}) == sum(len(s) for s in shards) == 96


def test_a_learner_refuses_a_shard_folder_of_another_learner_count(corpus):
    with pytest.raises(
        ValueError, match=r"P4 holds 4 shards, not one per learner of this run \(2\)"
    ):
        read_shard(corpus / "shards" / "P4", 0, 2)


def test_tokens_round_trip(tmp_path):
    tokens = Tokens.from_texts(["hello world", "bye"])
    assert tokens.symbols[0] == BLANK and len(tokens) == 1 + len(set("hello worldbye"))
    assert tokens.decode(tokens.encode("hello")) == "hello"
    assert tokens.encode("hé") == tokens.encode("h")
    tokens.write(tmp_path / "tokens.txt")
    assert Tokens.read(tmp_path / "tokens.txt").symbols == tokens.symbols
