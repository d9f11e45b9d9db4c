"""A configuration file read as YAML, a typo named by its file, line and column (Snakemake's own
message for config.yaml names neither)."""

from pathlib import Path

import yaml

from asrscale.config.schema import merged
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


def _mark_of(path: Path, key: tuple) -> yaml.Mark | None:
    """Where in `path` `key` (a path of mapping keys and list indices) is set; None where the file
    does not set it."""
    node, mark = yaml.compose(Path(path).read_text()), None
    for part in key:
        if isinstance(node, yaml.MappingNode):
            found = [(k, v) for k, v in node.value if k.value == str(part)]
            if not found:
                return None
            key_node, node = found[-1]
            mark = key_node.start_mark
        elif (
            isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value)
        ):
            node = node.value[part]
            mark = node.start_mark
        else:
            return None
    return mark


def where_set(files: list[Path | str], key: tuple) -> str | None:
    """ "<file>, line <n>, column <m>" of the last of `files` (each over the ones before, as
    Snakemake merges them) that sets `key`; None where none does."""
    for path in reversed([Path(file) for file in files]):
        if path.is_file() and (mark := _mark_of(path, tuple(key))) is not None:
            return f"{path}, line {mark.line + 1}, column {mark.column + 1}"
    return None


def named_in_files(error: ConfigError, files: list[Path | str]) -> ConfigError:
    """`error` with the file and line that set its key, where one of `files` does."""
    where = where_set(files, error.key) if error.key else None
    if where is None:
        return error
    return ConfigError(f"config: {where}: {str(error).removeprefix('config: ')}", key=error.key)


def read_config_files(files: list[Path | str]) -> dict:
    """The configuration of `files`, each read by `read_config_file` (a typo named by its file,
    line and column) and merged over the ones before, as Snakemake merges --configfile files."""
    config: dict = {}
    for file in files:
        config = merged(config, read_config_file(file))
    return config


def profile_file(profile: str | Path) -> Path:
    """A Snakemake profile's config.yaml: `profile` a folder, or a name Snakemake looks up in
    ~/.config/snakemake/ and /etc/xdg/snakemake/."""
    for folder in (
        Path(profile),
        Path.home() / ".config" / "snakemake" / str(profile),
        Path("/etc/xdg/snakemake") / str(profile),
    ):
        if (folder / "config.yaml").is_file():
            return folder / "config.yaml"
    raise ConfigError(f"--profile {profile}: no config.yaml there, nor in a profile of that name")


def _as_mapping(resources) -> dict:
    """A profile's resources, given as a mapping or as Snakemake's `name=value` strings."""
    if isinstance(resources, dict):
        return resources
    return dict(str(item).split("=", 1) for item in resources or [] if "=" in str(item))


def profile_resources(profile: dict) -> tuple[dict, dict]:
    """A profile's default-resources, and its set-resources by rule."""
    by_rule = profile.get("set-resources") or {}
    if not isinstance(by_rule, dict):  # ["rule:name=value", ...]
        pairs = [str(item).split(":", 1) for item in by_rule if ":" in str(item)]
        by_rule = {}
        for rule, setting in pairs:
            by_rule.setdefault(rule, []).append(setting)
    return _as_mapping(profile.get("default-resources")), {
        rule: _as_mapping(resources) for rule, resources in by_rule.items()
    }
