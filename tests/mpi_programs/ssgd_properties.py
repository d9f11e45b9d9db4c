"""Run under mpiexec with 2 ranks: SSGD's defining properties, asserted on every rank.

1. One SSGD step over P ranks equals one SEQ step on the concatenated minibatch.
2. After several steps every replica is identical.
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
train_set = Subset(corpus / "data" / "train", corpus / "feats" / "train", corpus / "feats" / "train", "global", tokens)
utts = sorted(read_shard(corpus / "shards" / "P1", 0, 1))
groups = [utts[i : i + 4] for i in range(0, 8 * world.size, 4)]


def fresh(world, algorithm):
    torch.manual_seed(0)
    model = build_model(build(ModelConfig, "model", layers=1, units=16), 40, len(tokens))
    learner = Learner(model, torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9), 0, algorithm)
    return learner, make_algorithm(algorithm, world.layout)


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
    world.run(sync.step(learner, train_set.collate(groups[(world.rank + step) % len(groups)]), lr=0.1))
mine = torch.cat([p.detach().reshape(-1) for p in learner.parameters])
rank0 = mine.clone()
MPI.COMM_WORLD.Bcast(rank0.numpy(), root=0)
assert torch.equal(mine, rank0), f"rank {world.rank} replica differs from rank 0 by {(mine - rank0).abs().max()}"
print(f"rank {world.rank}: ssgd properties hold", flush=True)
