"""Where time goes: a learner's (compute, communication, staging: the copies of what it
communicates between its GPU and host memory where MPI is not CUDA-aware, data wait and idle),
and a process's (`WallTimes`: the learners' arithmetic and the work around it)."""

import time
from collections.abc import Callable
from contextlib import contextmanager

CATEGORIES = ("compute", "communication", "staging", "data_wait", "idle")


class TimeSplit:
    """Accumulates seconds per category; `idle` is whatever the interval spent outside the others
    (barriers, logging, checkpoints), so the four always add up to the wall time.

    `now` reads the clock: real time in the MPI world, the learner's virtual time in a
    simulation."""

    def __init__(
        self, now: Callable[[], float] = time.perf_counter, categories: tuple[str, ...] = CATEGORIES
    ):
        self.now, self.categories = now, categories
        self.reset()

    def reset(self):
        self.start = self.now()
        self.seconds = dict.fromkeys(self.categories, 0.0)

    @contextmanager
    def measure(self, category: str):
        begin = self.now()
        try:
            yield
        finally:
            self.seconds[category] += self.now() - begin

    def add(self, category: str, seconds: float) -> None:
        self.seconds[category] += seconds

    def snapshot(self) -> dict[str, float]:
        wall = self.now() - self.start
        split = dict(self.seconds)
        split["idle"] += max(0.0, wall - sum(split.values()))
        return {"wall_s": wall, **{f"{k}_s": v for k, v in split.items()}}


class WallTimes(TimeSplit):
    """Where this process's wall time went, by phase: building the learners (`start`: models and
    optimizers; the first optimizer also imports torch's compiler stack, about 1.7 s on a CPU), the
    learners' arithmetic (gradients, updates, preconditionings, alone or fused), their exchanges
    (collectives, gossip, messages), dev evaluation, the gradient noise measurement (`noise`),
    checkpoints, waiting for batches, consensus models; the rest is the trainer's and the world's
    own bookkeeping. A real clock in either world (a simulated world's learners share this
    process): how much a run costs beyond its learners' arithmetic. Phases do not nest."""

    PHASES = (
        "start",
        "arithmetic",
        "exchanges",
        "evaluation",
        "noise",
        "checkpoints",
        "batches",
        "consensus",
    )

    def __init__(self):
        super().__init__(time.perf_counter, self.PHASES)
        self.exchanged_bytes = (
            0  # what real ranks' exchanges sent and received (a simulated world's are modelled)
        )

    def summary(self) -> dict[str, float]:
        """Seconds by phase since the start, the rest as "other", and the "total"."""
        total = self.now() - self.start
        return {**self.seconds, "other": total - sum(self.seconds.values()), "total": total}
