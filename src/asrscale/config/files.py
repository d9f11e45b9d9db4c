"""A configuration file read as YAML, a typo named by its file, line and column (Snakemake's own
message for config.yaml names neither)."""

from pathlib import Path

import yaml

from asrscale.errors import ConfigError


def read_config_file(path: Path | str) -> dict:
    """The settings of a YAML (or JSON) configuration file: {} where it is empty."""
    try:
        return yaml.safe_load(Path(path).read_text()) or {}
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        where = f"{path}, line {mark.line + 1}, column {mark.column + 1}" if mark else str(path)
        problem = "; ".join(part for part in (error.context, error.problem) if part)
        raise ConfigError(f"config: {where}: not valid YAML: {problem}") from None
