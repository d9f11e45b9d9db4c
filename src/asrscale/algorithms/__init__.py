"""Training algorithms: one module each, behind the narrow `Algorithm` interface in `base`."""

from asrscale.algorithms.adpsgd import DecentralizedSGD
from asrscale.algorithms.asgd import AsynchronousSGD
from asrscale.algorithms.base import Algorithm
from asrscale.algorithms.hadpsgd import HierarchicalDecentralizedSGD
from asrscale.algorithms.kavg import KStepAveraging
from asrscale.algorithms.ma import ModelAveraging
from asrscale.algorithms.seq import Sequential
from asrscale.algorithms.ssgd import SynchronousSGD

ALGORITHMS: dict[str, type[Algorithm]] = {
    cls.name: cls
    for cls in (
        Sequential, SynchronousSGD, AsynchronousSGD, KStepAveraging, ModelAveraging, DecentralizedSGD,
        HierarchicalDecentralizedSGD,
    )
}  # fmt: skip


def algorithm_class(name: str) -> type[Algorithm]:
    if name not in ALGORITHMS:
        raise ValueError(f"unknown algorithm {name!r}; known: {sorted(ALGORITHMS)}")
    return ALGORITHMS[name]


def make_algorithm(name: str, layout, options: dict | None = None) -> Algorithm:
    return algorithm_class(name)(layout, **(options or {}))
