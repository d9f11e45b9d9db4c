"""Where a learner's time goes: compute, communication, data wait and idle."""

import time
from contextlib import contextmanager

CATEGORIES = ("compute", "communication", "data_wait", "idle")


class TimeSplit:
    """Accumulates seconds per category; `idle` is whatever the interval spent outside the others
    (barriers, logging, checkpoints), so the four always add up to the wall time."""

    def __init__(self):
        self.reset()

    def reset(self):
        self.start = time.perf_counter()
        self.seconds = dict.fromkeys(CATEGORIES, 0.0)

    @contextmanager
    def measure(self, category: str):
        begin = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[category] += time.perf_counter() - begin

    def add(self, category: str, seconds: float) -> None:
        self.seconds[category] += seconds

    def snapshot(self) -> dict[str, float]:
        wall = time.perf_counter() - self.start
        split = dict(self.seconds)
        split["idle"] += max(0.0, wall - sum(split.values()))
        return {"wall_s": wall, **{f"{k}_s": v for k, v in split.items()}}
