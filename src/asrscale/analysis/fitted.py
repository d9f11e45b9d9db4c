"""The cost model's fit as `asrscale fit-cost-model` recorded it (src/asrscale/worlds/fitted.yaml):
the record, the digest of the published figures it was made on, and the band a modelled run
carries, read without the replays that made them (asrscale.analysis.fit), so that gathering a
study's runs and its report load no torch."""

import hashlib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import yaml

from asrscale.worlds.costmodel import FITTED

PUBLISHED = resources.files("asrscale.analysis") / "published.yaml"
TOLERANCE = 0.25  # a modelled speedup within 25% of a published one agrees with it


@dataclass(frozen=True)
class Band:
    """What a modelled run's time outside its arithmetic may be, as factors on the model's: the
    structural error (`structural`: the held-out figures' factors, with 1) and each parameter's
    spread over the fits with a system held out, against the fit of every system (`parameters`:
    name -> (lowest, highest) value over the fitted one)."""

    structural: tuple[float, float]
    parameters: dict

    @classmethod
    def fitted(cls) -> "Band":
        stated = fitted_record()["band"]
        return cls(tuple(stated["structural"]), {name: tuple(edges) for name, edges in stated["parameters"].items()})

    def factors(self, transports: set[str], gossip: bool) -> tuple[float, float]:
        """The factors on a run's time outside its arithmetic, over its links' `transports` (time
        falls as a share rises) and, for gossip, what serving an exchange costs (it grows with it)."""
        low, high = 1.0, 1.0
        for transport in sorted(transports - {"measured"}):
            lowest, highest = self.parameters[f"shares.{transport}"]
            low, high = min(low, 1 / highest), max(high, 1 / lowest)
        if gossip:
            lowest, highest = self.parameters["serving"]
            low, high = min(low, lowest), max(high, highest)
        return low * self.structural[0], high * self.structural[1]

    def of(self, speedup: float, outside_share: float, transports: set[str], gossip: bool) -> tuple[float, float]:
        """The band of a modelled `speedup` whose run spent `outside_share` of its modelled time
        outside its arithmetic (its baseline's time taken as modelled)."""
        low, high = self.factors(transports, gossip)
        return speedup / (1 - outside_share + outside_share * high), speedup / (1 - outside_share + outside_share * low)


def fitted_record() -> dict:
    """What `asrscale fit-cost-model` wrote: the parameters with their priors and evidence, each
    figure's predictions in and out of sample, both structures' validations, the time tables, the
    band and the check of two starts (fitted.yaml)."""
    return yaml.safe_load(FITTED.read_text())


def digest(path: Path = PUBLISHED) -> str:
    """What a fit was made on: published.yaml's sha256 (a changed file needs a new fit)."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]
