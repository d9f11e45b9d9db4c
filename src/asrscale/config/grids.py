"""A study's tuning grids and their halving (study.tuning): the part of the study resolver
(`asrscale.config.study.Study`, which takes it in) that says which runs each configuration's
grid trains, which of them successive halving decides, and where their choices are written;
`asrscale.protocol.tuning` carries the protocol out.

A tuned study (study.tuning, `asrscale.protocol.tuning`) trains each configuration it reports (an
algorithm at a learner count, as it is trained) first at each point of its grid, at the tuning
seed (the first of study.seeds): variants "train.lr=<rate>" (SEQ's also with train.batch_size,
BMUF's also with the options its table row grids, "block_momentum=<η>"), a variant of several
settings joining them with commas. Its runs are then the "tuned" variant, whose
settings are those its grid chose; at the tuning seed that run is the chosen grid run itself."""

import itertools
import json
from dataclasses import replace

from asrscale.config import paths
from asrscale.config.algorithms import ALGORITHMS, algorithm_spec
from asrscale.config.runs import Run
from asrscale.errors import ConfigError

TUNED = "tuned"  # the variant of a tuned study's runs: their settings are those their grid chose


class Grids:
    """The tuning grids of a study (a mixin of `Study`: its config, runs, trained_as, at, cluster
    and _in_effect)."""

    @staticmethod
    def _check_tuning(tuning: dict) -> None:
        """A grid of at least 3 rates, below and above the untuned one, spanning at least 4×
        (Shallue et al. 2019 tune over a wider one; fewer cannot tell a best rate from an edge)."""
        factors = tuning["lr_factors"]
        if tuning["seq_batch_sizes"] and not factors:
            raise ConfigError(
                "config: study.tuning.seq_batch_sizes: SEQ is tuned over its batch sizes beside "
                "the rates of study.tuning.lr_factors, and none is given"
            )
        if factors and (
            len(factors) < 3
            or not min(factors) < 1 < max(factors)
            or max(factors) < 4 * min(factors)
        ):
            raise ConfigError(
                f"config: study.tuning.lr_factors: {factors}: at least 3 multiples of the untuned "
                "rate, some below 1 and some above, the largest at least 4 times the smallest "
                "(e.g. [0.5, 1, 2])"
            )
        halving = tuning["halving"]
        if halving and sorted(halving) != ["epoch", "keep"]:
            raise ConfigError(
                f"config: study.tuning.halving: {halving}: both an epoch and how many to keep "
                "(e.g. {epoch: 3, keep: 2})"
            )
        if halving and factors and halving["keep"] >= len(factors):
            raise ConfigError(
                f"config: study.tuning.halving.keep: {halving['keep']}: fewer than the grid's "
                f"{len(factors)} rates (study.tuning.lr_factors), or it halves nothing"
            )

    # tuning (study.tuning)
    @property
    def tuned(self) -> bool:
        return bool(self.config["study"]["tuning"]["lr_factors"])

    @property
    def tuning_seed(self) -> int:
        """The seed the grids train at: the first of study.seeds."""
        return self.config["study"]["seeds"][0]

    def tunings(self) -> list[Run]:
        """Every configuration a tuned study tunes: its tuned runs as trained, at the tuning
        seed."""
        tuned = [self.trained_as(replace(run, seed=self.tuning_seed)) for run in self.runs()]
        return list(dict.fromkeys(run for run in tuned if run.variant == TUNED))

    def grid(self, tuned: Run) -> list[Run]:
        """The grid of a configuration (`tunings`): its runs at each multiple of its untuned rate
        (SEQ's at each of study.tuning.seq_batch_sizes), at each of study.tuning.momenta, at each
        value of the options its algorithm grids (`_option_points`), at the tuning seed."""
        tuning = self.config["study"]["tuning"]
        lr = self._in_effect(tuned.algorithm, "train.lr")
        batches = tuning["seq_batch_sizes"] if tuned.algorithm == "seq" else []
        points = [
            ({"batch_size": batch} if batch else {})
            | ({"momentum": momentum} if momentum is not None else {})
            | {"lr": float(f"{lr * factor:.6g}")}
            for batch in batches or [None]
            for momentum in tuning["momenta"] or [None]
            for factor in sorted(tuning["lr_factors"])
        ]
        return [
            replace(tuned, variant=self.variant_of(point, options), seed=self.tuning_seed)
            for options in self._option_points(tuned.algorithm)
            for point in points
        ]

    def _option_points(self, algorithm: str) -> list[dict]:
        """Each combination of the values of the options `algorithm`'s grid tunes (its table row's
        `grids`, each a list of study.tuning: BMUF's η and ζ), or one of none."""
        tuning = self.config["study"]["tuning"]
        grids = algorithm_spec(algorithm).grids
        values = {option: tuning[key] for option, key in grids.items() if tuning[key]}
        return [dict(zip(values, point)) for point in itertools.product(*values.values())]

    def _check_option_grids(self) -> None:
        """An option's list in study.tuning (BMUF's η) tunes a configuration of the study beside
        its rates."""
        tuning = self.config["study"]["tuning"]
        algorithms = {entry["algorithm"] for entry in self.config["study"]["runs"]}
        for spec in ALGORITHMS.values():
            for option, key in spec.grids.items():
                if not tuning[key]:
                    continue
                if not tuning["lr_factors"]:
                    why = "beside the rates of study.tuning.lr_factors, and none is given"
                elif spec.name not in algorithms:
                    why = f"and no entry of study.runs is {spec.name}"
                else:
                    continue
                raise ConfigError(
                    f"config: study.tuning.{key}: tunes algorithms.{spec.name}.{option} {why}"
                )

    # successive halving (study.tuning.halving)
    @property
    def halving(self) -> dict:
        """study.tuning.halving: {epoch, keep}, or {} (every grid run trains to its end; an untuned
        study has no grid to halve)."""
        return self.config["study"]["tuning"]["halving"] if self.tuned else {}

    def _check_momenta(self) -> None:
        """Momenta are tuned where every configuration trains with SGD (Adam has none)."""
        if not self.config["study"]["tuning"]["momenta"]:
            return
        for algorithm in ["seq", *(entry["algorithm"] for entry in self.config["study"]["runs"])]:
            if (optimizer := self._in_effect(algorithm, "train.optimizer")) != "sgd":
                raise ConfigError(
                    f"config: study.tuning.momenta: tunes train.momentum, which only "
                    f"train.optimizer sgd has, and {algorithm} trains with {optimizer}"
                )

    def _check_halving(self) -> None:
        """The rung comes before every grid's last epoch: a run stopped there must have more to
        go."""
        for tuned in self.tunings() if self.halving else ():
            epochs = self._in_effect(tuned.algorithm, "train.epochs")
            if self.halving["epoch"] >= epochs:
                raise ConfigError(
                    f"config: study.tuning.halving.epoch: {self.halving['epoch']}: before the "
                    f"last of {tuned.algorithm}'s {epochs} epochs (train.epochs), or it stops "
                    "nothing"
                )

    def halved_grid(self, run: Run) -> "Run | None":
        """The configuration whose halved grid `run` (as trained) belongs to; None for a run that is
        no grid's, every run where halving is off, and a grid run the study also reports (it trains
        to its end)."""
        if not self.halving or self.trained_as(run) in self._reported():
            return None
        return next(
            (tuned for tuned in self.tunings() if run in self._grid_as_trained(tuned)), None
        )

    def halved_runs(self, tuned: Run) -> list[Run]:
        """A configuration's grid runs, as trained, that its halving decides."""
        return [run for run in self._grid_as_trained(tuned) if self.halved_grid(run) == tuned]

    def _grid_as_trained(self, tuned: Run) -> list[Run]:
        return [self.trained_as(run) for run in self.grid(tuned)]

    def _reported(self) -> set[Run]:
        """Every run the study reports, as trained."""
        return {self.trained_as(run) for run in self.runs()}

    def halving_file(self, tuned: Run) -> str:
        """Where a configuration's halving decision is written (beside its tuning's file)."""
        return self.at(
            paths.HALVING,
            cluster=self.cluster(tuned.world),
            algorithm=tuned.algorithm,
            learners=tuned.learners,
        )

    @staticmethod
    def variant_of(train: dict, options: dict | None = None) -> str:
        """The variant that changes these train settings and algorithm options:
        "train.<key>=<value as JSON>", then "<option>=<value as JSON>", comma-joined."""
        changes = [f"train.{key}={json.dumps(value)}" for key, value in train.items()]
        changes += [f"{key}={json.dumps(value)}" for key, value in (options or {}).items()]
        return ",".join(changes)

    def tuning_file(self, tuned: Run) -> str:
        """Where a configuration's grid and choice are written (paths.TUNING)."""
        return self.at(
            paths.TUNING,
            cluster=self.cluster(tuned.world),
            algorithm=tuned.algorithm,
            learners=tuned.learners,
        )
