"""The one table of training algorithms: what the study resolver and the workflow need to know of
each (its world ranks, whether one learner is SEQ's computation, its options with their
defaults), and the class that trains it, named here and loaded only when training
(`asrscale.training.algorithms.make_algorithm`), so that reading a configuration loads no torch.

The schema (schema.yaml) documents each option and bounds its values; tests/test_config.py
checks that it names exactly these algorithms and options, and that every default here is valid
by it."""

from dataclasses import dataclass, field

from asrscale.errors import ConfigError


@dataclass(frozen=True)
class AlgorithmSpec:
    name: str  # as config.yaml's study.runs and algorithms: name it
    implementation: str  # "<module>.<class>" under asrscale.training.algorithms
    options: dict = field(default_factory=dict)  # option -> default (config.yaml algorithms.<name>)
    #: world ranks that serve rather than learn (ASGD's parameter server)
    servers: int = 0
    #: with one learner, exactly SEQ's computation at SEQ's cost (no exchange happens), so a study
    #: trains SEQ once and reports its run for this algorithm too (tests/test_mpi.py checks it)
    alone_is_seq: bool = False
    #: with all its learners in one node, exactly this algorithm's computation, so a study trains
    #: that one and reports its run for this algorithm too (tests/test_sim.py checks it)
    in_one_node_is: str | None = None


#: what an averaging algorithm's averaging makes common: the model and the optimizer's state (the
#: study's one policy), or "model": the weights alone, as the studies averaged
AVERAGING = {"averages": "model_and_optimizer"}

ALGORITHMS: dict[str, AlgorithmSpec] = {
    spec.name: spec
    for spec in (
        AlgorithmSpec("seq", "seq.Sequential"),
        AlgorithmSpec("ssgd", "ssgd.SynchronousSGD", alone_is_seq=True),
        AlgorithmSpec("asgd", "asgd.AsynchronousSGD", {"staleness_lr": False, "max_staleness": None}, servers=1),
        AlgorithmSpec("kavg", "kavg.KStepAveraging",
                      {"period": 8, "period_policy": "fixed", "reference_learners": 4, "plateau": 0.01, **AVERAGING},
                      alone_is_seq=True),
        AlgorithmSpec("ma", "ma.ModelAveraging",
                      {"frames_per_job": 400_000, "natural_gradient": True, "max_param_change": 2.0, **AVERAGING,
                       "reduce": "allreduce"}),
        AlgorithmSpec("adpsgd", "adpsgd.DecentralizedSGD", {"graph": "ring", **AVERAGING}, alone_is_seq=True),
        # one node is one super learner: its gradients allreduced every step, no gossip
        AlgorithmSpec("hadpsgd", "hadpsgd.HierarchicalDecentralizedSGD", {"graph": "ring", **AVERAGING},
                      alone_is_seq=True, in_one_node_is="ssgd"),
    )
}  # fmt: skip


def algorithm_spec(name: str) -> AlgorithmSpec:
    if name not in ALGORITHMS:
        raise ConfigError(f"unknown algorithm {name!r}; known: {sorted(ALGORITHMS)}")
    return ALGORITHMS[name]
