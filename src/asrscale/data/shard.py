"""Split the training set into P shards balanced by frame count, one manifest per shard."""

from pathlib import Path

from asrscale.io import atomic_write_text


def balance(frames: dict[str, int], shards: int) -> list[list[str]]:
    """Longest utterance first onto the lightest shard (LPT): within one utterance of balance."""
    if shards < 1:
        raise ValueError(f"a sharding needs at least one shard, not {shards}")
    loads, members = [0] * shards, [[] for _ in range(shards)]
    for utt in sorted(frames, key=lambda u: (-frames[u], u)):
        lightest = min(range(shards), key=lambda r: (loads[r], r))
        loads[lightest] += frames[utt]
        members[lightest].append(utt)
    return [sorted(m) for m in members]


def write_shards(frames: dict[str, int], shards: int, out_dir: Path) -> None:
    for rank, utts in enumerate(balance(frames, shards)):
        atomic_write_text(
            Path(out_dir) / f"shard{rank}.tsv", "".join(f"{u}\t{frames[u]}\n" for u in utts)
        )


def read_shard(folder: Path, rank: int, learners: int) -> list[str]:
    """Learner `rank`'s utterances, from a folder that must hold one shard per learner: one of
    another sharding (a mis-wired rule) would train on part of the data, or on some of it twice."""
    found = len(list(Path(folder).glob("shard*.tsv")))
    if found != learners:
        raise ValueError(
            f"{folder} holds {found} shards, not one per learner of this run ({learners})"
        )
    path = Path(folder) / f"shard{rank}.tsv"
    return [line.split("\t", 1)[0] for line in path.read_text().splitlines() if line]
