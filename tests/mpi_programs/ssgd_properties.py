"""Run under mpiexec with 2 ranks: SSGD's defining properties, asserted on every rank.

1. One SSGD step over P ranks equals one SEQ step on the concatenated minibatch.
2. After several steps every replica is identical.
3. The allreduce overlapped with the backward pass, in one bucket or many, gives the model of the
   allreduce after it to float rounding; with a clip that binds, it clips the average, so that a
   step is still SEQ's on the concatenated minibatch.
"""

import sys
from pathlib import Path

import torch
from mpi4py import MPI

from asrscale.config.sections import ModelConfig
from asrscale.data.batches import Subset
from asrscale.data.shard import read_shard
from asrscale.data.tokens import Tokens
from asrscale.models import build_model
from asrscale.training.algorithms import make_algorithm
from asrscale.training.learner import Learner
from asrscale.worlds.mpi import MPIWorld
from conftest import build

corpus = Path(sys.argv[1])
torch.set_num_threads(1)
world, alone = MPIWorld(), MPIWorld(MPI.COMM_SELF)
tokens = Tokens.read(corpus / "tokens.txt")
train_set = Subset(
    corpus / "data" / "train",
    corpus / "feats" / "train",
    corpus / "feats" / "train",
    "global",
    tokens,
)
utts = sorted(read_shard(corpus / "shards" / "P1", 0, 1))
groups = [utts[i : i + 4] for i in range(0, 8 * world.size, 4)]


def fresh(world, algorithm, options=None, clip=0.0):
    torch.manual_seed(0)
    model = build_model(build(ModelConfig, "model", layers=1, units=16), 40, len(tokens))
    learner = Learner(
        model, torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9), clip, algorithm
    )
    return learner, make_algorithm(algorithm, world.layout, options)


# 1. gradients and one step: SSGD on P ranks against SEQ on the concatenated batch
ssgd, sync = fresh(world, "ssgd")
world.run(sync.start(ssgd))
world.run(sync.step(ssgd, train_set.collate(groups[world.rank]), lr=0.1))
seq, single = fresh(alone, "seq")
alone.run(seq.backward(train_set.collate([u for g in groups[: world.size] for u in g])))
for name, p, q in zip(dict(ssgd.model.named_parameters()), ssgd.parameters, seq.parameters):
    torch.testing.assert_close(p.grad, q.grad, atol=1e-6, rtol=1e-4, msg=f"gradient of {name}")
alone.run(seq.update(0.1))
for name, p, q in zip(dict(ssgd.model.named_parameters()), ssgd.parameters, seq.parameters):
    torch.testing.assert_close(p, q, atol=1e-6, rtol=1e-5, msg=f"parameter {name} after one step")

# 2. replicas stay identical, to the bit, over several steps on different data
learner, sync = fresh(world, "ssgd")
world.run(sync.start(learner))
for step in range(4):
    world.run(
        sync.step(learner, train_set.collate(groups[(world.rank + step) % len(groups)]), lr=0.1)
    )
mine = torch.cat([p.detach().reshape(-1) for p in learner.parameters])
rank0 = mine.clone()
MPI.COMM_WORLD.Bcast(rank0.numpy(), root=0)
assert torch.equal(mine, rank0), (
    f"rank {world.rank} replica differs from rank 0 by {(mine - rank0).abs().max()}"
)


# 3. overlapped in one bucket or in buckets of a parameter or two, against the allreduce after
def trained(options, clip=0.0):
    learner, sync = fresh(world, "ssgd", options, clip)
    world.run(sync.start(learner))
    for step in range(3):
        world.run(
            sync.step(learner, train_set.collate(groups[(world.rank + step) % len(groups)]), lr=0.1)
        )
    return torch.cat([p.detach().reshape(-1) for p in learner.parameters])


after = trained({"overlap": False})
for bucket_mb in (25.0, 0.01):
    overlapped = trained({"overlap": True, "bucket_mb": bucket_mb})
    torch.testing.assert_close(
        overlapped, after, atol=1e-6, rtol=1e-5, msg=f"overlapped in {bucket_mb} MB buckets"
    )
clipped, _ = fresh(world, "ssgd", {"bucket_mb": 0.01}, clip=0.05)
world.run(_.start(clipped))
world.run(_.step(clipped, train_set.collate(groups[world.rank]), lr=0.1))
seq, _ = fresh(alone, "seq", clip=0.05)
alone.run(seq.backward(train_set.collate([u for g in groups[: world.size] for u in g])))
alone.run(seq.update(0.1))
for name, p, q in zip(dict(clipped.model.named_parameters()), clipped.parameters, seq.parameters):
    torch.testing.assert_close(
        p, q, atol=1e-6, rtol=1e-5, msg=f"parameter {name} after a clipped step"
    )
print(f"rank {world.rank}: ssgd properties hold", flush=True)
