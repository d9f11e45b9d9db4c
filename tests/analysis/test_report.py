"""The report's tables (the whole page: tests/workflow/test_workflow.py)."""

import json

from asrscale.analysis.gather import tuning_table
from asrscale.analysis.report import tuned


def choice_file(path, points: list[dict], chosen: int) -> dict:
    """A grid as asrscale.protocol.tuning writes it: its points, `chosen` the one chosen."""
    grid = [
        {"batch_size": 8, "momentum": 0.9, "by": "dev_ter", "diverged": None}
        | point
        | {"chosen": index == chosen}
        for index, point in enumerate(points)
    ]
    path.write_text(json.dumps({"grid": grid, "at_edge": None}))
    return {"algorithm": path.stem, "learners": 16, "world": "simulated", "file": str(path)}


def test_the_tuning_table_names_bmufs_block_momenta_and_its_choice(tmp_path):
    """BMUF's grid spans η (block_momentum) beside its rates: the table lists the values and the
    chosen one; a grid of rates alone lists none."""
    bmuf = [
        {"lr": lr, "block_momentum": eta, "score": score}
        for lr, eta, score in [(0.5, 0.875, 0.31), (0.5, 0.9375, 0.27), (1.0, 0.875, 0.33)]
    ]
    kavg = [{"lr": lr, "score": score} for lr, score in [(0.5, 0.30), (1.0, 0.32)]]
    table = tuning_table(
        [choice_file(tmp_path / "bmuf", bmuf, 1), choice_file(tmp_path / "kavg", kavg, 0)]
    )
    rows = {row["configuration"]: row for row in tuned(table)}
    filtered, averaged = rows["BMUF P=16, simulated"], rows["KAVG P=16, simulated"]
    assert filtered["options"] == "block_momentum 0.875, 0.9375"
    assert filtered["chosen"] == "lr 0.5, batch 8, block_momentum 0.9375"
    assert averaged["options"] == "none" and averaged["chosen"] == "lr 0.5, batch 8"
