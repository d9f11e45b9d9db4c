"""One run a study trains: the resolver (`asrscale.config.study`) lists a study's runs, its grids
(`asrscale.config.grids`) add theirs, and every path of a run's outputs is named by these fields."""

from dataclasses import dataclass


@dataclass(frozen=True)
class Run:
    world: str  # "simulated" or "mpi"
    algorithm: str
    variant: str  # "default", or "<setting>=<value as JSON, a word as it is>"
    learners: int
    seed: int
