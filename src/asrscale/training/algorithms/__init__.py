"""Training algorithms: one module each, behind the narrow `Algorithm` interface in `base`; the
table of them, with their options' defaults, is `asrscale.config.algorithms`."""

import importlib

from asrscale.config.algorithms import algorithm_spec
from asrscale.training.algorithms.base import Algorithm


def make_algorithm(name: str, layout, options: dict | None = None) -> Algorithm:
    """Algorithm `name` of a learner (or server) at `layout`: its class as the table names it, its
    options the table's defaults with `options` over them, checked by the table's rows."""
    spec = algorithm_spec(name)
    module, cls = spec.implementation.rsplit(".", 1)
    implementation = getattr(importlib.import_module(f"{__name__}.{module}"), cls)
    return implementation(layout, **spec.resolve(options))
