"""Small file helpers shared by every stage: a killed job never leaves a file that looks
complete."""

import json
import os
import shutil
import tempfile
from pathlib import Path


def atomic_write_text(path: Path, text: str) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(
        "w", dir=path.parent, delete=False, prefix=f".{path.name}."
    ) as tmp:
        tmp.write(text)
    os.chmod(tmp.name, 0o644)
    os.replace(tmp.name, path)


def atomic_torch_save(value, path: Path) -> None:
    import torch  # here, not at the top: the corpus and feature jobs never load torch

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    torch.save(value, tmp)
    os.replace(tmp, path)


def atomic_write_json(path: Path, value) -> None:
    atomic_write_text(path, json.dumps(value, indent=2, sort_keys=True, default=str) + "\n")


def read_settings(path: Path) -> dict:
    """A settings file the workflow wrote (`asrscale.config.study`)."""
    try:
        return json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise ValueError(f"{path}: not a settings file the workflow wrote ({error})") from None


def link_outputs(run: Path, folder: Path) -> None:
    """Every file `run` wrote but its settings (the taker's own, the same) into `folder`,
    hard-linked (trained once, stored once), copied where the file system has no hard links."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in sorted(
        path.name for path in run.iterdir() if path.is_file() and path.name != "settings.json"
    ):
        target = folder / name
        target.unlink(missing_ok=True)
        try:
            os.link(run / name, target)
        except OSError:
            shutil.copy2(run / name, target)
