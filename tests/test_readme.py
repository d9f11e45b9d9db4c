"""What README.md and docs/ say of settings agrees with the configuration: every "`<key>` (default
<value>)" with the schema's default, every "config.yaml's `<key>: <value>`" with config.yaml."""

import copy
import re

import yaml

from asrscale.config.schema import MINIMAL, validate
from helpers import ROOT

KEY = r"[a-z_]+(?:\.[a-z_]+)+"
DEFAULT = re.compile(rf"`({KEY})`\s+\(default:?\s+`?([^`),;:]+)`?")
CONFIGURED = re.compile(rf"config\.yaml's\s+`({KEY}): ([^`]+)`")


def guides() -> str:
    return "\n".join(
        path.read_text() for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    )


def setting(config: dict, key: str):
    for part in key.split("."):
        config = config[part]
    return config


def test_the_defaults_the_readme_names_are_the_schemas():
    stated = DEFAULT.findall(guides())
    defaults = validate(copy.deepcopy(MINIMAL))
    assert len(stated) >= 4, stated
    for key, value in stated:
        assert yaml.safe_load(value) == setting(defaults, key), f"`{key}` (default {value})"


def test_the_settings_the_readme_says_config_yaml_has_are_its_own():
    stated = CONFIGURED.findall(guides())
    config = yaml.safe_load((ROOT / "config.yaml").read_text())
    assert len(stated) >= 3, stated
    for key, value in stated:
        assert yaml.safe_load(value) == setting(config, key), f"config.yaml's `{key}: {value}`"


def sentences(text: str) -> list[str]:
    """A guide's sentences: its text outside code blocks, tables, headings and images, each list
    item and paragraph apart."""
    text = re.sub(r"```.*?```", "", text, flags=re.DOTALL)
    kept = [line for line in text.splitlines() if not line.startswith(("|", "#", "!["))]
    blocks = re.split(r"\n\s*\n|\n(?=- )", "\n".join(kept))
    return [
        sentence
        for block in blocks
        for sentence in re.split(r"(?<=[.?!:])\s+", " ".join(block.split()))
        if sentence and "](#" not in sentence  # a list of links is no sentence
    ]


def test_the_readme_is_a_short_guide_with_its_two_commands_first():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 162
    first = readme.split("```bash\n")[1].split("```")[0]
    commands = [line for line in first.splitlines() if line and not line.startswith("#")]
    assert commands[0].endswith("snakemake --cores all")
    assert commands[1].endswith("pytest")
    long = [sentence for sentence in sentences(readme) if len(sentence.split()) > 25]
    assert not long, long
