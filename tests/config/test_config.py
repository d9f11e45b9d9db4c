"""The configuration package: read without torch, and its one table of algorithms, the schema and
the corpus formats agreeing with one another."""

import inspect
import subprocess
import sys

import jsonschema
import pytest

from asrscale.config.algorithms import ALGORITHMS, algorithm_spec
from asrscale.config.schema import MINIMAL, SCHEMA, validate
from asrscale.data.corpus.formats import FORMATS
from asrscale.errors import ConfigError
from asrscale.training.algorithms import make_algorithm
from asrscale.worlds.ops import Layout
from helpers import ROOT


def test_reading_a_configuration_loads_no_torch_numpy_or_soundfile():
    """Snakemake's own process resolves the study: it must not pay for torch (seconds, and a GPU
    driver's start-up on a login node), nor for the audio stack the corpus formats use."""
    program = (
        "import sys, yaml\nfrom asrscale.config import algorithms, paths, schema, sections\nfrom "
        "asrscale.config.study import Study\nstudy = "
        "Study(yaml.safe_load(open('config.yaml')))\n[study.run_settings(run) for run in "
        "study.runs()]\nheavy = {'torch', 'numpy', 'soundfile', "
        "'python_speech_features'}\nprint(sorted({name.split('.')[0] for name in sys.modules} & "
        "heavy))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, cwd=ROOT, check=True
    )
    assert result.stdout.strip() == "[]"


def test_the_schema_takes_the_algorithms_and_their_options_from_the_table():
    properties = SCHEMA["properties"]
    study = properties["study"]["properties"]
    for where in ("runs", "sweeps"):
        assert study[where]["items"]["properties"]["algorithm"] == {"$ref": "#/$defs/algorithm"}
    assert SCHEMA["$defs"]["algorithm"]["enum"] == list(ALGORITHMS)
    options = properties["algorithms"]["properties"]
    assert list(options) == list(ALGORITHMS)
    for name, spec in ALGORITHMS.items():
        assert sorted(options[name]["properties"]) == sorted(spec.options), name
        for option, default in spec.options.items():
            jsonschema.validate(
                default, options[name]["properties"][option]
            )  # the default is a valid value
            assert options[name]["properties"][option]["description"], (name, option)


def test_a_configurations_bad_option_is_named_as_the_run_would_name_it():
    config = {**MINIMAL, "algorithms": {"kavg": {"period": 0}}}
    with pytest.raises(
        ConfigError, match="config: algorithms.kavg.period: 0 is less than the minimum of 1"
    ):
        validate(config)
    with pytest.raises(
        ConfigError, match="^algorithms.kavg.period: 0 is less than the minimum of 1"
    ):
        algorithm_spec("kavg").resolve({"period": 0})


def test_the_schema_names_exactly_the_corpus_formats_of_the_registry():
    source = SCHEMA["$defs"]["sources"]["items"]["properties"]
    assert source["format"]["enum"] == list(FORMATS)


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
def test_every_algorithm_is_made_from_its_table_entry_whose_options_have_no_second_default(name):
    spec = algorithm_spec(name)
    made = make_algorithm(
        name, Layout(rank=0, size=1 if name == "seq" else 4, servers=spec.servers)
    )
    assert made.name == name
    parameters = inspect.signature(type(made)).parameters
    assert list(parameters) == ["layout", *spec.options]
    assert all(p.default is inspect.Parameter.empty for p in parameters.values())


def test_an_unknown_algorithm_is_an_error_naming_the_known_ones():
    with pytest.raises(ConfigError, match=r"unknown algorithm 'nope'; known: \['adpsgd'"):
        algorithm_spec("nope")
