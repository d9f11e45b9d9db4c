"""A run trained once across studies (asrscale.protocol.twins): a study takes another study's
finished run of the same settings and calibration, linked, instead of training it again; and a
calibration of the same settings made on this machine."""

import json
import socket
from pathlib import Path

from asrscale.cli import main
from asrscale.protocol.twins import take, twin_calibration, twin_run
from asrscale.provenance import cpu_model

RUN = Path("runs/sim-x/seq/default/P1/seed1")


def study(
    root: Path,
    name: str,
    settings: str = '{"seed": 1}',
    calibration: str = '{"rate": 1}',
    record: dict | None = None,
) -> Path:
    """A study of corpus `c` with one run of these settings on this calibration, finished with
    `record` as its run.json (none: not finished)."""
    folder = root / "results" / "c" / "studies" / name
    (folder / RUN).mkdir(parents=True)
    (folder / RUN / "settings.json").write_text(settings)
    (folder / "calibration.json").write_text(calibration)
    if record is not None:
        (folder / RUN / "run.json").write_text(json.dumps(record))
        (folder / RUN / "model.pt").write_bytes(b"weights")
        (folder / RUN / "metrics.tsv").write_text("kind\tepoch\n")
    return folder


def test_a_run_of_the_same_settings_and_calibration_finished_by_another_study_is_its_twin(tmp_path):
    first = study(tmp_path, "a", record={"stopped_by": "budget"})
    second = study(tmp_path, "b")
    assert (
        twin_run(second / RUN, second / RUN / "settings.json", second / "calibration.json")
        == first / RUN
    )


def test_no_twin_of_other_settings_another_calibration_an_unfinished_run_or_one_its_grid_stopped(
    tmp_path,
):
    study(tmp_path, "a", settings='{"seed": 2}', record={"stopped_by": "budget"})
    study(tmp_path, "b", calibration='{"rate": 2}', record={"stopped_by": "budget"})
    study(tmp_path, "c")  # still training
    study(tmp_path, "d", record={"stopped_by": "halving"})  # its grid stopped it at the rung
    mine = study(tmp_path, "e")
    assert twin_run(mine / RUN, mine / RUN / "settings.json", mine / "calibration.json") is None
    alone = tmp_path / "run"  # a run trained outside a study's folders has no twin to look for
    assert twin_run(alone, mine / RUN / "settings.json", mine / "calibration.json") is None


def test_a_twins_outputs_are_linked_and_its_record_says_where_it_was_trained(tmp_path):
    first = study(tmp_path, "a", record={"stopped_by": "budget", "best_epoch": 7})
    second = study(tmp_path, "b")
    take(first / RUN, second / RUN)
    assert (second / RUN / "model.pt").read_bytes() == b"weights"
    assert (second / RUN / "model.pt").stat().st_ino == (first / RUN / "model.pt").stat().st_ino
    assert json.loads((second / RUN / "run.json").read_text()) == {
        "stopped_by": "budget",
        "best_epoch": 7,
        "trained_in": str(first / RUN),
    }
    assert json.loads((first / RUN / "run.json").read_text()) == {
        "stopped_by": "budget",
        "best_epoch": 7,
    }


def test_asrscale_train_takes_a_twin_instead_of_training(tmp_path, capfd):
    """The data's paths are never read: the run is taken before anything trains."""
    first = study(tmp_path, "a", record={"stopped_by": "schedule"})
    second = study(tmp_path, "b")
    absent = str(tmp_path / "absent")
    main(
        [
            "train",
            "--settings",
            str(second / RUN / "settings.json"),
            "--train-data",
            absent,
            "--dev-data",
            absent,
            "--train-feats",
            absent,
            "--dev-feats",
            absent,
            "--shards",
            absent,
            "--tokens",
            absent,
            "--out",
            str(second / RUN),
            "--calibration",
            str(second / "calibration.json"),
            "--cores",
            "1",
        ]
    )
    assert json.loads((second / RUN / "run.json").read_text())["trained_in"] == str(first / RUN)
    assert f"trained in {first / RUN}" in capfd.readouterr().out


def test_a_calibration_of_the_same_settings_on_this_machine_is_taken_and_not_another_machines(
    tmp_path,
):
    made = {"environment": {"hostname": socket.gethostname(), "cpu": cpu_model()}}
    here = study(tmp_path, "a", calibration=json.dumps(made))
    (here / "settings").mkdir()
    (here / "settings" / "calibrate.json").write_text('{"model": 1}')
    mine = tmp_path / "results" / "c" / "studies" / "b"
    (mine / "settings").mkdir(parents=True)
    (mine / "settings" / "calibrate.json").write_text('{"model": 1}')
    assert (
        twin_calibration(mine / "settings" / "calibrate.json", mine / "calibration.json")
        == here / "calibration.json"
    )
    (here / "calibration.json").write_text(
        json.dumps({"environment": {"hostname": "elsewhere", "cpu": cpu_model()}})
    )
    assert twin_calibration(mine / "settings" / "calibrate.json", mine / "calibration.json") is None
