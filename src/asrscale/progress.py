"""How far a long job has come, for a person watching it: the wall-clock time it has taken and an
estimate of the time left (from its rate so far), as a line in its log every `every` seconds, or a
bar redrawn in place on an interactive terminal."""

import sys
import time


def clock(seconds: float) -> str:
    """A duration as a person reads it: 45 s, 12 min 5 s, 3 h 20 min."""
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60} min"


def eta(elapsed: float, done: float, total: float) -> str:
    """The time left at the rate so far ("–" before anything is done)."""
    return clock(elapsed / done * (total - done)) if done else "–"


class Ticker:
    """Says how many of `total` items of `what` are done, with the wall time and the time left."""

    def __init__(self, what: str, total: int, every: float = 30.0, stream=None):
        self.what, self.total, self.every = what, total, every
        self.stream = stream or sys.stdout
        self.interactive = self.stream.isatty()
        self.began = self.last = time.monotonic()

    def __call__(self, done: int) -> None:
        now = time.monotonic()
        if done < self.total and now - self.last < (0.5 if self.interactive else self.every):
            return
        self.last, elapsed = now, now - self.began
        said = (
            f"{self.what}: {done:,}/{self.total:,} | {clock(elapsed)} | left "
            f"{eta(elapsed, done, self.total)}"
        )
        if self.interactive:
            filled = int(30 * done / max(self.total, 1))
            end = "\n" if done >= self.total else ""
            print(
                f"\r[{'#' * filled}{'.' * (30 - filled)}] {said}",
                end=end,
                file=self.stream,
                flush=True,
            )
        else:
            print(said, file=self.stream, flush=True)
