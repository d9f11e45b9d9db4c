"""The cost model's fit as `asrscale fit-cost-model` recorded it
(src/asrscale/worlds/fitted.yaml): the record, the digest of the published figures it was made
on, and the band a modelled run carries, read without the replays that made them
(asrscale.costmodel.fit), so that gathering a study's runs and its report load no torch."""

import hashlib
import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import yaml

from asrscale.worlds.clock import FITTED

PUBLISHED = resources.files("asrscale.costmodel") / "published.yaml"
#: whose passive learners serve exchanges (the fit's `serving` parameter): their band depends on it
#: too
GOSSIP = ("adpsgd", "hadpsgd")
TOLERANCE = 0.25  # a modelled speedup within 25% of a published one agrees with it


#: what bounds a run's time, by which its band takes the model's misses of the published figures
#: bound the same way: one learner's is its arithmetic against SEQ's, both measured (no held-out
#: figure is of one learner, nor does any miss apply); else its arithmetic (most of its time
#: computing), else the links it crosses
BOUNDS = ("one learner", "arithmetic", "links inside a node", "links between nodes")


def bound_by(outside_share: float, spans_nodes: bool, learners: int) -> str:
    """What bounds a run's time: one learner's; its arithmetic where that is most of it; its
    links."""
    if learners == 1:
        return "one learner"
    if outside_share < 0.5:
        return "arithmetic"
    return "links between nodes" if spans_nodes else "links inside a node"


@dataclass(frozen=True)
class Band:
    """What a modelled speedup may be, as factors on the model's. Two things the model does not
    know: each parameter's spread over the fits with a system held out, against the fit of every
    system (`parameters`: name -> (lowest, highest) value over the fitted one), which moves the
    run's time outside its arithmetic; and the model's structural error, its held-out misses
    (modelled / published speedup) of the comparable figures bound as the run is (`structural`:
    bound -> (lowest, highest), with 1; `evidence`: bound -> the figures). The band is the wider
    of the two, so that it is narrow only where held-out figures of its kind say the model is
    right; a kind no figure is of takes every figure's misses."""

    structural: dict
    evidence: dict
    parameters: dict

    @classmethod
    def fitted(cls) -> "Band":
        stated = fitted_record()["band"]
        return cls(
            {bound: tuple(kind["misses"]) for bound, kind in stated["structural"].items()},
            {bound: kind["figures"] for bound, kind in stated["structural"].items()},
            {name: tuple(edges) for name, edges in stated["parameters"].items()},
        )

    def factors(self, transports: set[str], gossip: bool) -> tuple[float, float]:
        """The factors on a run's time outside its arithmetic, over its links' `transports` (time
        falls as a share rises) and, for gossip, what serving an exchange costs (it grows with
        it)."""
        low, high = 1.0, 1.0
        for transport in sorted(transports - {"measured"}):
            lowest, highest = self.parameters[f"shares.{transport}"]
            low, high = min(low, 1 / highest), max(high, 1 / lowest)
        if gossip:
            lowest, highest = self.parameters["serving"]
            low, high = min(low, lowest), max(high, highest)
        return low, high

    def misses(self, bound: str) -> tuple[float, float]:
        """The model's held-out misses of the figures bound as `bound` (every figure's where none
        is)."""
        if bound == "one learner":
            return 1.0, 1.0
        if bound in self.structural:
            return self.structural[bound]
        return min(low for low, _ in self.structural.values()), max(
            high for _, high in self.structural.values()
        )

    def rests_on(self, bound: str) -> str:
        """What a run's band rests on, in words."""
        if bound == "one learner":
            return (
                "one learner: its arithmetic against SEQ's, both measured; the parameters' "
                "spread alone"
            )
        low, high = self.misses(bound)
        figures = self.evidence.get(bound)
        held_out = (
            f"held-out figures also bound by {bound} ({'; '.join(figures)})"
            if figures
            else (f"every held-out figure (none is bound by {bound})")
        )
        return f"bound by {bound}: the model's misses of {held_out}, {low:.2f}-{high:.2f}×"

    def of(
        self, speedup: float, outside_share: float, transports: set[str], gossip: bool, bound: str
    ) -> tuple[float, float]:
        """The band of a modelled `speedup` whose run spent `outside_share` of its modelled time
        outside its arithmetic (its baseline's time taken as modelled), its time `bound` as
        `bound_by` says."""
        low, high = self.factors(transports, gossip)
        by_parameters = (
            speedup / (1 - outside_share + outside_share * high),
            speedup / (1 - outside_share + outside_share * low),
        )
        lowest, highest = self.misses(bound)
        return min(by_parameters[0], speedup / highest), max(by_parameters[1], speedup / lowest)


def fitted_record() -> dict:
    """What `asrscale fit-cost-model` wrote: the parameters with their priors and evidence, each
    figure's predictions in and out of sample, both structures' validations, the time tables, the
    band and the check of two starts (fitted.yaml)."""
    return yaml.safe_load(FITTED.read_text())


def digest(path: Path = PUBLISHED) -> str:
    """What a fit was made on: the sha256 of published.yaml's figures (a changed figure needs a new
    fit; a changed comment does not)."""
    figures = json.dumps(yaml.safe_load(Path(path).read_text()), sort_keys=True)
    return hashlib.sha256(figures.encode()).hexdigest()[:16]
