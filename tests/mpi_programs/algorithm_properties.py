"""Run under mpiexec: `algorithm_properties.py CORPUS CASE [ALGORITHM]` asserts, on every rank,
one defining property of an algorithm on real data. Prints "CASE holds" on success."""

import itertools
import json
import os
import signal
import sys
import time
from pathlib import Path

import torch
from mpi4py import MPI

from asrscale.config.sections import ModelConfig
from asrscale.data.batches import Subset
from asrscale.data.shard import read_shard
from asrscale.data.tokens import Tokens
from asrscale.models import build_model
from asrscale.training.algorithms import make_algorithm
from asrscale.training.learner import Learner, make_optimizer
from asrscale.worlds.mpi import MPIWorld
from conftest import build

corpus, case = Path(sys.argv[1]), sys.argv[2]
TRANSPORT = os.environ.get(
    "ASRSCALE_TEST_TRANSPORT", "auto"
)  # mpi.transport of the worlds made here
torch.set_num_threads(1)
tokens = Tokens.read(corpus / "tokens.txt")
train_set = Subset(
    corpus / "data" / "train",
    corpus / "feats" / "train",
    corpus / "feats" / "train",
    "global",
    tokens,
)
utts = sorted(read_shard(corpus / "shards" / "P1", 0, 1))
batches = [train_set.collate(utts[i : i + 4]) for i in range(0, 48, 4)]
STEPS = 3


def fresh_learner(name="learner"):
    """A learner in the configuration the studies run: SGD with momentum, its gradient clipped."""
    torch.manual_seed(0)
    model = build_model(build(ModelConfig, "model", layers=1, units=16), 40, len(tokens))
    return Learner(model, make_optimizer("sgd", 0.9, model), 1.0, name)


def train(
    world,
    algorithm,
    options=None,
    batch_of=lambda rank, step: batches[(rank + 3 * step) % len(batches)],
):
    """STEPS steps of `algorithm`; returns the learner (None on a server rank) and the algorithm."""
    learner = fresh_learner()
    chosen = make_algorithm(algorithm, world.layout, options)
    if world.serving:
        world.run(chosen.serve(learner, checkpoint=lambda step: None, roll_back=lambda: None))
        return None, chosen.records
    world.run(chosen.start(learner))
    world.run(chosen.plan(sum(b.frames for b in batches) / len(batches)))
    for step in range(STEPS):
        world.run(chosen.step(learner, batch_of(world.layout.rank, step), 0.05))
    return learner, chosen


def flat(learner):
    return torch.cat([t.detach().reshape(-1) for t in learner.state])


if case == "matches_seq_with_one_learner":
    algorithm, options = sys.argv[3], json.loads(sys.argv[4]) if len(sys.argv) > 4 else None
    world = MPIWorld(transport=TRANSPORT, servers=1 if algorithm == "asgd" else 0)
    learner, chosen = train(world, algorithm, options)
    if learner is not None:
        world.run(chosen.finish(learner))
        seq, _ = train(MPIWorld(MPI.COMM_SELF), "seq")
        assert torch.equal(flat(learner), flat(seq)), (
            f"{algorithm} with one learner differs from seq"
        )

elif case == "kavg_k1_matches_ssgd":
    world = MPIWorld(transport=TRANSPORT)
    kavg, _ = train(world, "kavg", {"period": 1})
    # each learner's gradient clipped, as KAVG's local steps clip (overlapped SSGD clips the
    # average)
    ssgd, _ = train(world, "ssgd", {"overlap": False})
    torch.testing.assert_close(flat(kavg), flat(ssgd), atol=1e-6, rtol=1e-5)

elif case == "kavg_averages_every_k":
    world = MPIWorld(transport=TRANSPORT)
    learner, _ = train(world, "kavg", {"period": STEPS})
    mine, first = flat(learner), flat(learner).clone()
    world.groups["learners"].Bcast(first.numpy(), root=0)
    assert torch.equal(mine, first), "replicas differ right after an averaging"

elif case == "adpsgd_keeps_the_mean_and_ends":
    world = MPIWorld(transport=TRANSPORT)
    learners = world.groups["learners"]
    learner, chosen = fresh_learner(), make_algorithm("adpsgd", world.layout)
    noise = torch.Generator().manual_seed(world.rank)
    with torch.no_grad():  # a different model on every learner, then steps that only average (lr 0)
        for t in learner.state:
            t.add_(torch.randn(t.shape, generator=noise))

    def mean_and_spread():
        mine = flat(learner)
        mean = mine.clone()
        learners.Allreduce(MPI.IN_PLACE, mean.numpy())
        mean /= world.size
        return mean, learners.allreduce(float(((mine - mean) ** 2).sum()))

    mean_before, spread_before = mean_and_spread()
    for step in range(4 * world.size):
        world.run(chosen.step(learner, batches[step % len(batches)], lr=0.0))
    world.run(chosen.epoch_done(learner))  # the passive learners have answered every averaging
    mean_after, spread_after = mean_and_spread()
    torch.testing.assert_close(mean_after, mean_before, atol=1e-5, rtol=1e-5)
    assert spread_after < spread_before / 4, (
        f"pairwise averaging did not mix: {spread_before} -> {spread_after}"
    )

elif case == "adpsgd_answers_while_its_peer_computes":
    # wait-free: the passive learner's world answers the active one's gossip while the passive
    # learner computes, told by an order of events, not by seconds. The passive learner logs on one
    # counter when its computation begins and ends and when each answer leaves; it tells the
    # active learner to go on once it has begun, and computes (gradients, outside any request to
    # its world) until the active one says it has had its averagings: every one it asked after
    # the go must have been answered inside the computation. (A bound of gradients ends the
    # computation where answers wait for it: they then fall after it, and the check fails.)
    GO, AVERAGED = 21, 22  # the two learners' own messages, beside the world's
    world = MPIWorld(transport=TRANSPORT)
    learner, adpsgd = fresh_learner(), make_algorithm("adpsgd", world.layout)
    (peer,) = adpsgd.neighbours
    order, answered, sent = itertools.count(), [], world.send

    def answer(flat, to, group, tag):
        answered.append(
            next(order)
        )  # before it leaves: it cannot have left after the active learner's word
        sent(flat, to, group, tag)

    if not adpsgd.active:
        world.send = answer  # what the passive learner's world sends is its answers
    world.run(adpsgd.step(learner, batches[0], lr=0.0))  # the passive learner begins answering
    if adpsgd.active:
        world.world.recv(source=peer, tag=GO)
        for step in range(1, 6):
            world.run(adpsgd.step(learner, batches[step], lr=0.0))
        world.world.send(len(adpsgd.exchanges), dest=peer, tag=AVERAGED)
        world.run(adpsgd.epoch_done(learner))
        assert len(adpsgd.exchanges) == 6, adpsgd.exchanges
    else:
        done, began = world.world.irecv(source=peer, tag=AVERAGED), next(order)
        world.world.send(None, dest=peer, tag=GO)
        for gradients in range(400):
            averaged, _ = done.test()
            if averaged:
                break
            learner.compute(batches[gradients % len(batches)])
        ended = next(order)
        world.run(adpsgd.epoch_done(learner))
        if not averaged:
            done.wait()
        within = [at for at in answered if began < at < ended]
        assert len(answered) == 6 and len(within) >= 5, (
            f"answers at {answered}, computing from {began} to {ended}"
        )

elif case == "asgd_applies_every_gradient_once":
    world = MPIWorld(transport=TRANSPORT, servers=1)
    learner, result = train(world, "asgd")
    if learner is not None:
        world.run(make_algorithm("asgd", world.layout).finish(learner))
    else:
        records, learners = result, world.layout.size
        assert len(records) == learners * STEPS, records
        assert all(applied for *_, applied in records)
        assert [applied_at for _, _, applied_at, _, _ in records] == list(
            range(1, len(records) + 1)
        )
        for index, (_, pulled, applied_at, staleness, _) in enumerate(records):
            assert staleness == index - pulled >= 0 and applied_at == index + 1
        assert sorted(who for who, *_ in records) == sorted(list(range(learners)) * STEPS)

elif case == "hadpsgd_keeps_nodes_identical":
    world = MPIWorld(transport=TRANSPORT, node_size=2)
    learner, chosen = train(world, "hadpsgd")
    world.run(
        chosen.epoch_done(learner)
    )  # the passive leaders have answered every averaging, and shared it
    mine, leader = flat(learner), flat(learner).clone()
    world.groups["node"].Bcast(leader.numpy(), root=0)
    assert torch.equal(mine, leader), "models inside a node differ"
    assert world.layout.nodes == (world.size + 1) // 2  # the last node may hold fewer learners

elif case in ("a_hanging_rank_ends_the_job", "a_dying_rank_ends_the_job"):
    world = MPIWorld(timeout_s=3, name="ssgd")
    learner, chosen = fresh_learner(), make_algorithm("ssgd", world.layout)
    world.run(chosen.step(learner, batches[world.rank], 0.05))
    if world.rank == 1:
        if case == "a_hanging_rank_ends_the_job":
            time.sleep(600)
        os.kill(os.getpid(), signal.SIGKILL)
    world.run(chosen.step(learner, batches[world.rank], 0.05))  # the others wait for rank 1 here

else:
    raise SystemExit(f"unknown case {case}")
print(f"{case} holds", flush=True)
