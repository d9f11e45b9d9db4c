"""A run trained once, across studies too. Two studies of one corpus that train a run with the
same settings (its settings.json to the byte: the algorithm and its options, train, model, features,
world and seed; the data, shards and tokens are the corpus's) and, where simulated, on the same
calibration (the modelled clock rests on it) train the same model: the second takes the first's
outputs, linked, rather than training again, and its run.json says where they were trained
(`trained_in`). A run is taken whole only: one the other study finished, not stopped by its grid's
halving, for a run of this study that trains to its end (a halved grid's rung trains; the runs a
grid keeps go on from it and take a twin's whole run, which their rung began).

For the clocks of two studies to be one, their calibration is taken the same way: a study whose
calibration settings are another's of the corpus, on the same machine (host and processor), takes
that calibration instead of timing the machine again."""

import json
import socket
from pathlib import Path

from asrscale.config import paths
from asrscale.io import atomic_write_json, link_outputs
from asrscale.provenance import cpu_model

CALIBRATION_SETTINGS = (
    "settings/calibrate.json"  # a study's, beside its calibration.json (paths.CALIBRATION)
)
RUN_DEPTH = paths.RUN.removeprefix(paths.STUDY).count("/")  # a run's folder below its study's


def _same_bytes(one: Path, other: Path) -> bool:
    return one.is_file() and other.is_file() and one.read_bytes() == other.read_bytes()


def _studies(study: Path) -> list[Path]:
    """The corpus's other studies (`study`: results/<corpus>/studies/<name>), in order of name."""
    return sorted(
        folder for folder in study.parent.iterdir() if folder.is_dir() and folder != study
    )


def twin_calibration(settings: Path, out: Path) -> Path | None:
    """Another study's calibration of the same settings made on this machine, for a study's
    calibration (`out`: results/<corpus>/studies/<name>/calibration.json), or None."""
    if Path(out).parent.parent.name != "studies":
        return None  # not a study's calibration (one made outside the workflow)
    hostname, cpu = socket.gethostname(), cpu_model()
    for study in _studies(out.parent):
        found = study / out.name
        if _same_bytes(study / CALIBRATION_SETTINGS, settings) and found.is_file():
            made = json.loads(found.read_text())["environment"]
            if (made["hostname"], made["cpu"]) == (hostname, cpu):
                return found
    return None


def twin_run(out: Path, settings: Path, calibration: Path | None) -> Path | None:
    """Another study's finished run of the same settings (and calibration, where simulated) for the
    run in `out`
    (results/<corpus>/studies/<name>/runs/<cluster>/<algorithm>/<variant>/P<n>/seed<s>), or None."""
    parts = Path(out).parts
    if len(parts) < RUN_DEPTH + 2 or (parts[-RUN_DEPTH - 2], parts[-RUN_DEPTH]) != (
        "studies",
        "runs",
    ):
        return None  # not a study's run folder (a run trained outside the workflow)
    for other in _studies(out.parents[RUN_DEPTH - 1]):
        if calibration is not None and not _same_bytes(other / calibration.name, calibration):
            continue
        for folder in sorted(other.glob("/".join("*" * RUN_DEPTH))):
            record = folder / "run.json"
            if (
                _same_bytes(folder / "settings.json", settings)
                and record.is_file()
                and json.loads(record.read_text()).get("stopped_by") != "halving"
            ):
                return folder
    return None


def take(twin: Path, out: Path) -> None:
    """`twin`'s outputs as the run's in `out`: every file it wrote but its settings (the run's
    own, the same), linked, and its run.json saying where it was trained."""
    link_outputs(twin, out)
    record = json.loads((twin / "run.json").read_text())
    (out / "run.json").unlink()  # the link, not the twin's record
    atomic_write_json(out / "run.json", record | {"trained_in": str(twin)})
