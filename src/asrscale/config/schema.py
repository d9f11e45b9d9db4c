"""config.yaml's schema (schema.yaml, beside this module): every key documented and checked, with
its default (the algorithms' options excepted: their defaults are in `asrscale.config.algorithms`);
a wrong configuration is an error that names the key."""

import copy
import difflib
from importlib import resources

import jsonschema
import yaml

from asrscale.config.algorithms import ALGORITHMS
from asrscale.config.sections import CORPUS_FORMATS
from asrscale.errors import ConfigError, key_of


def _load() -> dict:
    """schema.yaml, with what has one place elsewhere spliced in: the algorithms and their options
    (the table of algorithms) and the corpus formats' names."""
    schema = yaml.safe_load(resources.files("asrscale.config").joinpath("schema.yaml").read_text())
    schema["$defs"]["algorithm"]["enum"] = list(ALGORITHMS)
    schema["properties"]["algorithms"]["properties"] = {
        name: spec.schema for name, spec in ALGORITHMS.items()
    }
    schema["$defs"]["sources"]["items"]["properties"]["format"]["enum"] = list(CORPUS_FORMATS)
    return schema


SCHEMA = _load()
# the least a configuration holds: every other setting has a default
MINIMAL = {"corpus": {"name": "defaults"}, "study": {"runs": [{"algorithm": "seq"}]}}


def _filling_defaults(validator_class):
    """A validator that puts each missing property's default in place before checking it."""
    check_properties = validator_class.VALIDATORS["properties"]

    def properties(validator, properties, instance, schema):
        if isinstance(instance, dict):
            for name, subschema in properties.items():
                if "default" in subschema:
                    instance.setdefault(name, copy.deepcopy(subschema["default"]))
        yield from check_properties(validator, properties, instance, schema)

    return jsonschema.validators.extend(validator_class, {"properties": properties})


VALIDATOR = _filling_defaults(jsonschema.Draft202012Validator)(SCHEMA)

PROFILE = "your SLURM profile's (docs/slurm.md)"
#: keys that moved, and where they are now
MOVED = {
    ("slurm", "account"): f"{PROFILE} default-resources: slurm_account",
    ("slurm", "partition"): f"{PROFILE} default-resources and set-resources: slurm_partition",
    ("slurm", "constraint"): f"{PROFILE} default-resources: constraint",
    ("slurm", "gpu_gres"): "train.device (cpu on CPU nodes; a GPU model: the profile's constraint)",
    ("slurm", "cpus_per_learner"): f"{PROFILE} set-threads: train",
    ("slurm", "mem_mb_per_learner"): f"{PROFILE} set-resources: train: mem_mb_per_cpu",
    ("slurm", "train_runtime_min"): f"{PROFILE} set-resources: train: runtime",
    ("slurm", "runtime_min"): f"{PROFILE} default-resources: runtime",
    ("slurm", "mem_mb"): f"{PROFILE} default-resources: mem_mb",
    ("slurm", "learners_per_node"): "slurm.ranks_per_node",
    ("study", "learners_per_node"): "study.node_size (the learners an algorithm treats as a node)",
    (
        "slurm",
        "launcher",
    ): f"the train rule's `launcher` resource: {PROFILE} set-resources: train: launcher",
    (
        "mpi",
        "launcher",
    ): "the train rule's `launcher` resource (snakemake --set-resources train:launcher=...)",
    (
        "mpi",
        "collectives",
    ): "mpi.transport (every algorithm's exchanges, gossip and a server's messages too)",
}


def _moved(config: dict) -> None:
    """A key that moved is named, with where it is now."""
    for (section, key), now in MOVED.items():
        if key in (config.get(section) or {}):
            raise ConfigError(f"config: {section}.{key} is no longer a setting here: it is {now}")


#: the built-in hardware profiles, which a configuration's `hardware:` adds to or changes key by key
PROFILES = yaml.safe_load(resources.files("asrscale.config").joinpath("profiles.yaml").read_text())


def merged(base: dict, over: dict) -> dict:
    """`over` merged into `base` key by key (a mapping into a mapping), as Snakemake merges a
    --configfile over config.yaml."""
    both = dict(base)
    for key, value in over.items():
        both[key] = (
            merged(base[key], value)
            if isinstance(value, dict) and isinstance(base.get(key), dict)
            else value
        )
    return both


def with_profiles(config: dict) -> dict:
    """`config` with the built-in hardware profiles under its own `hardware:`."""
    return {**config, "hardware": merged(PROFILES, config.get("hardware") or {})}


def _where_options_go(error: jsonschema.ValidationError) -> str:
    """An algorithm's option given on an entry of study.runs: where options go instead."""
    path, entry = list(error.absolute_path), error.instance
    if error.validator != "additionalProperties" or path[:2] != ["study", "runs"] or len(path) != 3:
        return ""
    spec = ALGORITHMS.get(entry.get("algorithm"))
    if not (options := sorted(set(entry) & set(spec.options if spec else ()))):
        return ""
    name, option = spec.name, options[0]
    return (
        f"; {', '.join(options)}: {name}'s options are set for all its runs under "
        f"algorithms.{name} (algorithms: {{{name}: {{{option}: ...}}}}), or varied by a sweep "
        f"(study.sweeps: {{algorithm: {name}, learners: ..., vary: {option}, values: [...]}}), not "
        f"on an entry"
    )


def _unknown_key(error: jsonschema.ValidationError) -> ConfigError | None:
    """A key the schema does not know, named with the nearest it knows."""
    known = error.schema.get("properties", {})
    if error.validator != "additionalProperties" or not isinstance(error.instance, dict):
        return None
    unknown = sorted(key for key in error.instance if key not in known)
    if not unknown or _where_options_go(error):
        return None
    path = [*error.absolute_path, unknown[0]]
    nearest = difflib.get_close_matches(str(unknown[0]), list(known), n=1, cutoff=0.6)
    said = f"did you mean {nearest[0]}?" if nearest else f"the keys here: {', '.join(known)}"
    return ConfigError(f"config: {key_of(path)}: not a setting ({said})", key=path)


def validate(config: dict) -> dict:
    """Check `config` against the schema, filling in every default (in place); returns it."""
    _moved(config)
    errors = sorted(
        VALIDATOR.iter_errors(config), key=lambda error: list(map(str, error.absolute_path))
    )
    if errors:
        first = errors[0]
        if unknown := _unknown_key(first):
            raise unknown
        where = key_of(first.absolute_path) or "(top level)"
        raise ConfigError(
            f"config: {where}: {first.message}{_where_options_go(first)}", key=first.absolute_path
        )
    return config


def profile_defaults(**changes) -> dict:
    """A hardware profile of the schema's defaults alone (a shared device, the schema's links), with
    `changes` over them."""
    return {
        **validate({**copy.deepcopy(MINIMAL), "hardware": {"defaults": {}}})["hardware"][
            "defaults"
        ],
        **changes,
    }
