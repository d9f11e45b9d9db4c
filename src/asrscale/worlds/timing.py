"""Where a learner's time goes: compute, communication, data wait and idle."""

import time
from collections.abc import Callable
from contextlib import contextmanager

CATEGORIES = ("compute", "communication", "data_wait", "idle")


class TimeSplit:
    """Accumulates seconds per category; `idle` is whatever the interval spent outside the others
    (barriers, logging, checkpoints), so the four always add up to the wall time.

    `now` reads the clock: real time in the MPI world, the learner's virtual time in a simulation."""

    def __init__(self, now: Callable[[], float] = time.perf_counter):
        self.now = now
        self.reset()

    def reset(self):
        self.start = self.now()
        self.seconds = dict.fromkeys(CATEGORIES, 0.0)

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
