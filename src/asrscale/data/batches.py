"""Batches of normalised features and CTC targets, built by a background thread ahead of compute."""

import os
import random
import sys
import threading
from collections import deque
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

import kaldiio
import numpy as np
import torch

from asrscale.data.datadir import read_table
from asrscale.data.features import Normaliser, read_frame_counts
from asrscale.data.tokens import Tokens

# utterances whose lengths differ by less than this share trade places in a learner's length order
# at random each epoch: each epoch's batches differ, and pad at most about this much more
LENGTH_JITTER = 0.1


@dataclass
class Batch:
    features: torch.Tensor  # (batch, time, dim), zero-padded
    lengths: torch.Tensor  # (batch,) frames
    targets: torch.Tensor  # concatenated token ids
    target_lengths: torch.Tensor  # (batch,)
    utts: list[str]

    @property
    def frames(self) -> int:
        return int(self.lengths.sum())

    def to(self, device: torch.device) -> "Batch":
        if self.features.device == device:
            return self
        moved = {
            k: v.to(device, non_blocking=True)
            for k, v in vars(self).items()
            if isinstance(v, torch.Tensor)
        }
        return replace(self, **moved)


class Subset:
    """The features, transcripts and frame counts of one subset (train, dev or test)."""

    def __init__(
        self, data_dir: Path, feats_dir: Path, train_feats_dir: Path, cmvn: str, tokens: Tokens
    ):
        self.text = read_table(Path(data_dir) / "text")
        self.frames = read_frame_counts(feats_dir)
        self.tokens = tokens
        self._reader = kaldiio.load_scp(
            str(Path(feats_dir) / "feats.scp"), max_cache_fd=8
        )  # ark files stay open
        self.utt2spk = read_table(Path(data_dir) / "utt2spk")
        self._normalise = Normaliser(
            cmvn, Path(train_feats_dir) / "cmvn.npz", Path(feats_dir) / "cmvn.npz", self.utt2spk
        )

    def collate(self, utts: list[str]) -> Batch:
        feats = [self._normalise(u, self._reader[u]) for u in utts]
        padded = np.zeros((len(feats), max(len(f) for f in feats), feats[0].shape[1]), np.float32)
        for i, f in enumerate(feats):
            padded[i, : len(f)] = f
        targets = [self.tokens.encode(self.text[u]) for u in utts]
        return Batch(
            torch.from_numpy(padded),
            torch.tensor([len(f) for f in feats]),
            torch.tensor([t for ts in targets for t in ts], dtype=torch.long),
            torch.tensor([len(ts) for ts in targets]),
            list(utts),
        )

    def batches(
        self,
        utts: list[str],
        batch_size: int,
        seed: int | None,
        count: int | None = None,
        learner: int = 0,
        order: str = "like-lengths",
    ) -> list[list[str]]:
        """Utterances grouped into batches of similar length (little padding).

        With a seed (training): a learner's utterances sorted by length, those within
        `LENGTH_JITTER` of each other in an order of their own (drawn from the seed and `learner`:
        each epoch mixes its batches anew), cut into batches, taken in an order drawn from the seed
        alone (`order` "like-lengths": the same for every learner of a run, so that at every step
        each learner takes the batch from the same place in its own distribution of lengths, and
        learners computed as one, asrscale.training.fused.learners, pad little to the round's
        longest) or from the seed and `learner` ("own": a step's learners take batches of different
        lengths). SEQ, learner 0, follows the same rule. Without a seed: sorted by length
        (evaluation). With `count`, exactly `count` batches whose sizes differ by at most one (every
        utterance once)."""
        if seed is None:
            ordered = sorted(utts, key=lambda u: (self.frames[u], u))
        else:
            mixing = random.Random(f"{seed}/{learner}")
            jittered = {
                u: self.frames[u] * (1 + LENGTH_JITTER * (mixing.random() - 0.5))
                for u in sorted(utts)
            }
            ordered = sorted(jittered, key=jittered.get)
        if count is None:
            groups = [ordered[i : i + batch_size] for i in range(0, len(ordered), batch_size)]
        else:
            bounds = [len(ordered) * i // count for i in range(count + 1)]
            groups = [ordered[a:b] for a, b in zip(bounds, bounds[1:])]
        if seed is not None:
            random.Random(
                seed if order == "like-lengths" or learner == 0 else f"{seed}/{learner}"
            ).shuffle(groups)
        return groups


def batch_loader() -> ThreadPoolExecutor:
    """The thread that builds batches ahead for every learner of this process, in the order they
    are asked for (`Prefetcher`). One thread: a subset's reader shares its open ark files, so two
    threads reading one subset would interleave their seeks. It yields the cores to the learners'
    compute threads: with all cores computing, a loader at equal priority stalls a whole parallel
    operation whenever it runs; it is never starved, since a learner that waits for a batch
    leaves its cores idle."""
    return ThreadPoolExecutor(1, thread_name_prefix="asrscale-loader", initializer=_yield_cores)


def _yield_cores() -> None:
    if sys.platform == "linux":  # where a thread has a priority of its own
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 10)


class Prefetcher:
    """A learner's batches, each of the next `depth` built ahead on `loader` (`batch_loader`)
    while the learner computes; with depth 0 built in the learner's thread (to measure what
    overlap saves). Reading and padding release the GIL in NumPy and file I/O, so the overlap is
    real. A loading error is raised where the learner takes that batch."""

    def __init__(self, subset: Subset, groups: list[list[str]], depth: int, loader: Executor):
        self._collate, self._groups, self._depth, self._loader = (
            subset.collate,
            iter(groups),
            depth,
            loader,
        )
        self._ahead: deque[Future | None] = deque(self._submit() for _ in range(depth))

    def _submit(self) -> Future | None:
        group = next(self._groups, None)
        return None if group is None else self._loader.submit(self._collate, group)

    def __iter__(self):
        if self._depth == 0:
            yield from map(self._collate, self._groups)
            return
        while (ahead := self._ahead.popleft()) is not None:
            self._ahead.append(self._submit())
            yield ahead.result()

    def close(self):
        """Batches not yet built are not built (one being built is dropped when done)."""
        for ahead in self._ahead:
            if ahead is not None:
                ahead.cancel()
