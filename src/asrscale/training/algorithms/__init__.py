"""Training algorithms: one module each, behind the narrow `Algorithm` interface in `base`."""

from asrscale.errors import ConfigError
from asrscale.training.algorithms.adpsgd import DecentralizedSGD
from asrscale.training.algorithms.asgd import AsynchronousSGD
from asrscale.training.algorithms.base import Algorithm
from asrscale.training.algorithms.hadpsgd import HierarchicalDecentralizedSGD
from asrscale.training.algorithms.kavg import KStepAveraging
from asrscale.training.algorithms.ma import ModelAveraging
from asrscale.training.algorithms.seq import Sequential
from asrscale.training.algorithms.ssgd import SynchronousSGD

ALGORITHMS: dict[str, type[Algorithm]] = {
    cls.name: cls
    for cls in (
        Sequential, SynchronousSGD, AsynchronousSGD, KStepAveraging, ModelAveraging, DecentralizedSGD,
        HierarchicalDecentralizedSGD,
    )
}  # fmt: skip


def algorithm_class(name: str) -> type[Algorithm]:
    if name not in ALGORITHMS:
        raise ConfigError(f"unknown algorithm {name!r}; known: {sorted(ALGORITHMS)}")
    return ALGORITHMS[name]


def make_algorithm(name: str, layout, options: dict | None = None) -> Algorithm:
    return algorithm_class(name)(layout, **(options or {}))
