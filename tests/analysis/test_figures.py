"""The report's figures keep each clock apart: a measured speedup and a modelled one are drawn,
ranked and fronted apart, never averaged (asrscale.analysis.figures)."""

import matplotlib

matplotlib.use("Agg")

import pandas as pd  # noqa: E402

from asrscale.analysis import figures  # noqa: E402

PALETTE = {"seq": "black", "ssgd": "tab:blue"}


def both_clocks() -> pd.DataFrame:
    """SSGD at 2 and 4 learners timed both ways (measured 1.5× and 3×, modelled 1.9× and 3.6×), and
    SEQ."""
    rows = [{"algorithm": "seq", "learners": 1, "kind": "measured", "speedup": 1.0, "wer": 0.20}]
    rows += [
        {"algorithm": "ssgd", "learners": p, "kind": kind, "speedup": x, "wer": wer}
        for kind, wer, at in (
            ("measured", 0.22, (1.5, 3.0)),
            ("modelled on h100", 0.21, (1.9, 3.6)),
        )
        for p, x in zip((2, 4), at)
    ]
    table = pd.DataFrame(rows).rename(columns={"kind": "speedup_kind", "speedup": "time_speedup"})
    modelled = table.speedup_kind.str.startswith("modelled")
    return table.assign(
        throughput_speedup=table.time_speedup,
        target_speedup=float("nan"),
        target_dev_loss=float("nan"),
        time_speedup_low=table.time_speedup.where(~modelled, 0.9 * table.time_speedup),
        time_speedup_high=table.time_speedup.where(~modelled, 1.1 * table.time_speedup),
        converged=True,
    )


def test_each_clock_is_its_own_line_of_speedups_against_learners():
    figure = figures.speedup_vs_learners(both_clocks(), PALETTE)
    points = {round(y, 3) for line in figure.axes[0].lines for y in line.get_ydata()}
    assert {1.5, 1.9, 3.0, 3.6} <= points and not {1.7, 3.3} & points  # no mean of the two clocks


def test_each_clock_is_its_own_point_and_its_own_pareto_front():
    axis = figures.accuracy_against_speedup(both_clocks(), PALETTE).axes[0]  # P=2
    points = {
        (container.lines[0].get_xdata()[0], container.get_label()) for container in axis.containers
    }
    assert points == {(1.5, "ssgd (measured)"), (1.9, "ssgd (modelled on h100)")}
    fronts = [
        line.get_label() for line in axis.lines if line.get_label().startswith("Pareto front")
    ]
    assert sorted(fronts) == ["Pareto front (measured)", "Pareto front (modelled on h100)"]


def test_a_speedup_beyond_p_is_said_and_on_no_pareto_front():
    """A modelled 19× at P=2 (as a busy calibration made one) beside the measured 1.5×: its point
    says it is beyond P, and the modelled clock has no front at P=2 (its only point is beyond)."""
    table = both_clocks()
    beyond = (table.learners == 2) & table.speedup_kind.str.startswith("modelled")
    table.loc[beyond, ["time_speedup", "time_speedup_low", "time_speedup_high"]] = [
        19.0,
        17.1,
        20.9,
    ]
    axis = figures.accuracy_against_speedup(table, PALETTE).axes[0]
    labels = {container.get_label() for container in axis.containers}
    assert labels == {"ssgd (measured)", "ssgd (modelled on h100, beyond P: ranked nowhere)"}
    fronts = [line for line in axis.lines if line.get_label().startswith("Pareto front")]
    assert [line.get_label() for line in fronts] == ["Pareto front (measured)"]
    assert list(fronts[0].get_xdata()) == [1.5]
