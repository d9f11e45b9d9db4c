"""Training algorithms: one module each, behind the narrow `Algorithm` interface in `base`."""

from asrscale.algorithms.base import Algorithm
from asrscale.algorithms.seq import Sequential
from asrscale.algorithms.ssgd import SynchronousSGD

ALGORITHMS: dict[str, type[Algorithm]] = {cls.name: cls for cls in (Sequential, SynchronousSGD)}


def make_algorithm(name: str, comm, options: dict | None = None) -> Algorithm:
    if name not in ALGORITHMS:
        raise ValueError(f"unknown algorithm {name!r}; known: {sorted(ALGORITHMS)}")
    return ALGORITHMS[name](comm, **(options or {}))
