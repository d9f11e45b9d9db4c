"""Errors that users cause and can fix: a configuration, their data, how a job was launched. Each
is one line that names the key, the file and line, or the setting, and what was expected;
`asrscale <stage>` prints it and exits non-zero, with no traceback. Any other exception is a bug
of ours, and keeps its traceback."""


class UserError(ValueError):
    """Something the user can fix (a value they gave), said in one line."""


class ConfigError(UserError):
    """A configuration the schema does not allow, or whose keys disagree; `key`, where one key is
    wrong, its path (as `key_of` takes it), so that the file and line that set it can be named."""

    def __init__(self, message: str, key=()):
        super().__init__(message)
        self.key = tuple(key)


def key_of(path) -> str:
    """A configuration's key as every error names it: `study.runs[2].algorithm`, a list's items by
    their index."""
    return "".join(
        f"[{part}]" if isinstance(part, int) else f".{part}" for part in path
    ).removeprefix(".")
