"""Target 6: how many gradient updates ASGD's parameter server absorbs (the `asgd` algorithm's
own server and learner code on real MPI ranks, default model) with 1, 2, 4 and 8 workers.

Flat out, workers push a ready gradient as soon as the server's reply arrives: the server's
capacity. Paced, each worker's gradient takes as long as one default training step on this
machine (it sleeps, as a learner waiting for its GPU leaves its core free): the server keeps up
when the update rate grows with the workers, P times the one-worker rate.
"""

import time
from pathlib import Path

from benchmarks.common import Bench, PreparedCorpus, child, child_main

WORKERS = (1, 2, 4, 8)


def step_seconds(work: Path) -> float:
    """One default training step (forward, backward, update) on this machine, median of 5."""
    import torch

    from asrscale.training.learner import Learner, make_optimizer
    from asrscale.worlds.ops import run_alone

    study = PreparedCorpus.of(work)
    train_set, model, train = study.subset("train"), study.build_model(), study.seq.train
    batch = train_set.collate(sorted(train_set.frames)[: train.batch_size])
    learner = Learner(
        model, make_optimizer(train.optimizer, train.momentum, model), train.clip_grad_norm, "step"
    )
    torch.set_flush_denormal(True)
    times = []
    for _ in range(6):
        start = time.perf_counter()
        run_alone(learner.backward(batch))
        run_alone(learner.update(train.lr))
        times.append(time.perf_counter() - start)
    return sorted(times[1:])[2]


def run(bench: Bench) -> None:
    step_s = step_seconds(bench.work)
    bench.add(
        "asgd",
        "one default training step on this machine (a paced worker's gradient)",
        1000 * step_s,
        "ms",
    )
    total = 40 if bench.quick else 600
    workers_counts = WORKERS[:2] if bench.quick else WORKERS
    flat, paced = {}, {}
    for workers in workers_counts:
        flat[workers] = child(
            bench, "asgd_server", bench.work, -(-total // workers), 0.0, ranks=workers + 1
        )
        paced_updates = 3 if bench.quick else 30
        paced[workers] = child(
            bench, "asgd_server", bench.work, paced_updates, step_s, ranks=workers + 1
        )
    for workers in workers_counts:
        capacity, demand = flat[workers]["updates_per_s"], workers / step_s
        bench.add(
            "asgd",
            f"server capacity with {workers} worker(s) pushing flat out",
            capacity,
            "updates/s",
            against_one_worker=capacity / flat[1]["updates_per_s"],
        )
        bench.add(
            "asgd",
            f"capacity / demand of {workers} worker(s) taking one step per update",
            capacity / demand,
            "x",
        )
        scaling = paced[workers]["updates_per_s"] / (workers * paced[1]["updates_per_s"])
        target = ">= 0.9" if workers < 8 else None
        bench.add(
            "asgd",
            f"paced update rate with {workers} worker(s) / ({workers} x the 1-worker rate)",
            scaling,
            "",
            target,
            updates_per_s=paced[workers]["updates_per_s"],
            mean_staleness=paced[workers]["mean_staleness"],
        )


def measure(work: Path, updates: int, pace_s: float) -> dict | None:
    """One rank's part: rank 0 serves and returns the rate it absorbed updates at."""
    import torch
    from mpi4py import MPI

    from asrscale.training.algorithms import make_algorithm
    from asrscale.training.learner import Learner, make_optimizer
    from asrscale.worlds import ops
    from asrscale.worlds.mpi import MPIWorld

    class ReadyLearner(Learner):
        """A learner whose gradient is ready after `pace_s` seconds that leave the core free."""

        def backward(self, batch):
            time.sleep(pace_s)
            yield ops.Compute(pace_s)
            return 0.0

    study = PreparedCorpus.of(work)
    train_config = study.seq.train
    torch.set_num_threads(1)
    torch.manual_seed(1)
    world = MPIWorld(servers=1, name="asgd benchmark")
    model = study.build_model()
    algorithm = make_algorithm("asgd", world.layout, {})
    learner_class = Learner if world.serving else ReadyLearner
    optimizer = make_optimizer(train_config.optimizer, train_config.momentum, model)
    learner = learner_class(model, optimizer, train_config.clip_grad_norm, "asgd")
    for parameter in learner.parameters:
        parameter.grad = 1e-3 * torch.randn_like(parameter)

    def work_loop():
        yield from algorithm.start(learner)
        for _ in range(updates):
            yield from algorithm.step(learner, None, train_config.lr)
        yield from algorithm.finish(learner)

    MPI.COMM_WORLD.Barrier()
    start = time.perf_counter()
    if not world.serving:
        world.run(work_loop())
        return None
    world.run(algorithm.serve(learner, checkpoint=lambda step: None, roll_back=lambda: None))
    records = algorithm.records
    seconds = time.perf_counter() - start
    return {
        "updates_per_s": len(records) / seconds,
        "mean_staleness": sum(r[3] for r in records) / len(records),
    }


if __name__ == "__main__":
    child_main(measure, work=Path, updates=int, pace_s=float)
