"""An interim report of a study that runs for days: its report over the runs finished so far (each
run's record and every test set's scores written), marked as interim in its title, beside the
final one. A run not yet finished is absent from it, as from a study that never had it; a sweep's
point whose run is absent is left out. Nothing here is kept: the tables are gathered into a
temporary folder, the page alone written."""

import tempfile
from pathlib import Path

from asrscale.analysis.gather import gather_runs
from asrscale.analysis.report import make_report
from asrscale.config import paths
from asrscale.config.sections import GatherStage, ReportStage, read_settings_of
from asrscale.errors import UserError


def finished(run: dict, test_sets: list[str]) -> bool:
    folder = Path(run["run"])
    scored = all((folder / name / "scores.json").is_file() for name in test_sets)
    return scored and (folder / "run.json").is_file()


def interim_report(study: Path, out: Path) -> str:
    """The report of the study folder `study` (results/<corpus>/studies/<study>) over its finished
    runs, into `out`; returns what it says of them ("12 of 40 runs finished")."""
    study = Path(study)
    gather = read_settings_of(GatherStage, study / "settings" / "gather.json")
    report = read_settings_of(ReportStage, study / "settings" / "report.json")
    runs = [run for run in gather.runs if finished(run, gather.test_sets)]
    if not runs:
        raise UserError(f"{study}: no run has finished yet (its run.json and every scores.json)")
    if not (study / "lm.json").is_file():
        raise UserError(f"{study / 'lm.json'}: not written yet (the LM's statistics come first)")
    folders = {run["run"] for run in runs}
    tunings = [tuning for tuning in gather.tunings if Path(tuning["file"]).is_file()]
    said = f"{len(folders)} of {len({run['run'] for run in gather.runs})} runs finished"
    with tempfile.TemporaryDirectory() as folder:
        tables = Path(folder)
        sweeps = [point for point in gather.sweeps if _sweep_run_in(point, runs)]
        gather_runs(runs, sweeps, gather.test_sets, tables, gather.convergence, tunings)
        make_report(
            [tables / f"{name}.tsv" for name in paths.TABLES],
            study / "lm.json",
            Path(paths.PUBLISHED_SPEEDUPS),
            tables / "figures",
            f"INTERIM, {said}: {report.title}",
            out,
            [],
            report.config,
        )
    return said


def _sweep_run_in(point: dict, runs: list[dict]) -> bool:
    """Whether a sweep's point has its run among `runs` (its folder names its world and learners:
    asrscale.config.paths.RUN)."""
    cluster = "/runs/mpi/" if point["world"] == "mpi" else "/runs/sim-"
    return any(
        run["algorithm"] == point["algorithm"]
        and run["variant"] == point["variant"]
        and cluster in run["run"]
        and f"/P{point['learners']}/" in run["run"]
        for run in runs
    )
