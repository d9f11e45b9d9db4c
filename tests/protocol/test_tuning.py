"""One tuning protocol for every configuration (asrscale.protocol.tuning, study.tuning): each
configuration's grid, the choice by the best dev loss, the edge said, the chosen run adopted."""

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from asrscale.analysis.gather import tuning_state
from asrscale.config.runs import Run
from asrscale.config.study import TUNED, Study
from asrscale.errors import ConfigError, UserError
from asrscale.protocol.tuning import Halving, adopt, choose, halve, point, tune
from helpers import TIMES, merged, same_models, simulate


def tuned_study(**tuning) -> Study:
    config = merged()
    config["study"] |= {"seeds": [1, 2, 3], "tuning": tuning}
    return Study(config)


def test_each_configuration_is_tuned_once_over_one_grid_and_seq_over_its_batches_too():
    """The default study tuned: SEQ over 3 rates at 2 batches, every other configuration (as
    trained: KAVG alone is SEQ's, H-ADPSGD at 4 in a node of 8 SSGD's) over the 3 rates."""
    study = tuned_study(lr_factors=[2, 0.5, 1], seq_batch_sizes=[8, 32])
    tunings = study.tunings()
    assert len(tunings) == len({(t.algorithm, t.learners) for t in tunings}) == 9
    assert all(t.variant == TUNED and t.seed == 1 for t in tunings)
    seq = Run("simulated", "seq", TUNED, 1, 1)
    assert study.trained_as(Run("simulated", "kavg", "default", 1, 2)) == Run(
        "simulated", "seq", TUNED, 1, 2
    )
    assert [run.variant for run in study.grid(seq)] == [
        f"train.batch_size={batch},train.lr={lr}"
        for batch in (8, 32)
        for lr in (0.0015, 0.003, 0.006)
    ]
    kavg = Run("simulated", "kavg", TUNED, 4, 1)
    assert [study.run_settings(run)["train"]["lr"] for run in study.grid(kavg)] == [
        0.0015,
        0.003,
        0.006,
    ]
    assert {study.run_settings(run)["train"]["batch_size"] for run in study.grid(kavg)} == {32}
    # a tuned run's settings are its grid's choice, and the chosen grid run's own at the tuning seed
    chosen = {"lr": 0.006, "batch_size": 32}
    assert study.run_settings(replace_seed(kavg, 1), chosen) == study.run_settings(
        study.grid(kavg)[2]
    )
    assert study.run_settings(replace_seed(kavg, 2), chosen)["train"]["lr"] == 0.006
    # every run trained once: 6 + 8 × 3 grid runs, and 2 more seeds of each of the 9 configurations
    assert len(study.trained()) == 6 + 8 * 3 + 9 * 2
    assert study.folder(Run("simulated", "kavg", "default", 4, 2)).endswith("/kavg/tuned/P4/seed2")


def replace_seed(run: Run, seed: int) -> Run:
    return Run(run.world, run.algorithm, run.variant, run.learners, seed)


def test_an_untuned_study_trains_its_runs_as_configured():
    study = Study(merged())
    assert not study.tuned and study.tunings() == []
    assert study.folder(Run("simulated", "kavg", "default", 4, 1)).endswith(
        "/kavg/default/P4/seed1"
    )


@pytest.mark.parametrize(
    "factors", [[0.5, 2], [0.5, 1, 1.5], [1, 2, 4], [0.25, 0.5, 0.75], [0.25, 0.5, 1]]
)
def test_a_grid_too_narrow_to_tell_a_best_rate_from_an_edge_is_named(factors):
    """Fewer than 3 rates, spanning less than 4×, or all on one side of the untuned rate (its
    largest the untuned rate itself too)."""
    said = (
        f"config: study.tuning.lr_factors: {factors}: at least 3 multiples of the untuned rate, "
        "some below 1 and some above, the largest at least 4 times the smallest (e.g. [0.5, 1, 2])"
    )
    with pytest.raises(ConfigError) as raised:
        tuned_study(lr_factors=factors)
    assert str(raised.value) == said


def test_batch_sizes_without_rates_are_named():
    with pytest.raises(ConfigError) as raised:
        tuned_study(seq_batch_sizes=[8, 32])
    assert str(raised.value) == (
        "config: study.tuning.seq_batch_sizes: SEQ is tuned over its batch sizes beside the "
        "rates of study.tuning.lr_factors, and none is given"
    )


def test_a_grid_is_of_its_own_rate_at_the_tuning_seed_and_its_files_name_its_world():
    """An entry's own train.lr is its grid's centre; a grid trains at the first of study.seeds,
    whichever seed of the configuration asks; a run on MPI ranks is tuned and halved under mpi/."""
    config = merged()
    config["study"] |= {
        "seeds": [1, 2],
        "tuning": {"lr_factors": [0.5, 1, 2], "halving": {"epoch": 2, "keep": 1}},
        "runs": [{"algorithm": "seq"}, {"algorithm": "ssgd", "world": "mpi", "train": {"lr": 0.1}}],
    }
    study = Study(config)
    ssgd = Run("mpi", "ssgd", TUNED, 4, 2)
    assert [(run.variant, run.seed) for run in study.grid(ssgd)] == [
        ("train.lr=0.05", 1),
        ("train.lr=0.1", 1),
        ("train.lr=0.2", 1),
    ]
    assert study.tuning_file(ssgd).endswith("/tuning/mpi/ssgd/P4.json")
    assert study.halving_file(ssgd).endswith("/tuning/mpi/ssgd/P4.halving.json")
    # an entry's own epochs bound its rung
    config["study"]["runs"][1]["train"] = {"lr": 0.1, "epochs": 2}
    with pytest.raises(ConfigError) as raised:
        Study(config)
    assert str(raised.value) == (
        "config: study.tuning.halving.epoch: 2: before the last of ssgd's 2 epochs "
        "(train.epochs), or it stops nothing"
    )


def grid_point(lr: float, loss: float | None, batch: int = 32, diverged=None, momentum=0.9) -> dict:
    return {
        "run": f"lr{lr}-b{batch}-m{momentum}",
        "lr": lr,
        "batch_size": batch,
        "momentum": momentum,
        "best_dev_loss": loss,
        "by": "dev_loss",
        "score": loss,
        "diverged": diverged,
    }


def test_the_lowest_dev_loss_chooses_and_a_choice_at_an_edge_is_said():
    inside = choose([grid_point(0.001, 2.0), grid_point(0.002, 1.5), grid_point(0.004, 1.7)])
    assert (
        inside["chosen"] == {"batch_size": 32, "momentum": 0.9, "lr": 0.002}
        and inside["at_edge"] is None
    )
    assert [p["chosen"] for p in inside["grid"]] == [False, True, False] and inside[
        "run"
    ] == "lr0.002-b32-m0.9"
    assert (
        choose([grid_point(0.001, 1.4), grid_point(0.002, 1.5), grid_point(0.004, 1.7)])["at_edge"]
        == "lowest"
    )
    assert (
        choose([grid_point(0.001, 2.0), grid_point(0.002, 1.5), grid_point(0.004, 1.4)])["at_edge"]
        == "highest"
    )
    # a diverged rate is never chosen, and the highest that trained is not the grid's edge
    past = choose(
        [
            grid_point(0.001, 2.0),
            grid_point(0.002, 1.5),
            grid_point(0.004, None, diverged="nan loss"),
        ]
    )
    assert past["chosen"]["lr"] == 0.002 and past["at_edge"] is None
    # SEQ over two batches: the edge is of the chosen batch's rates; equal losses take the lower
    # rate
    seq = choose(
        [
            grid_point(0.001, 1.9, 8),
            grid_point(0.002, 1.2, 8),
            grid_point(0.004, 1.3, 8),
            grid_point(0.001, 1.5),
            grid_point(0.002, 1.2),
            grid_point(0.004, 1.6),
        ]
    )
    assert (
        seq["chosen"] == {"batch_size": 8, "momentum": 0.9, "lr": 0.002} and seq["at_edge"] is None
    )


def test_momenta_cross_every_grid_and_the_edge_is_of_the_chosen_momentums_rates():
    """study.tuning.momenta: every configuration's rates at each momentum (SEQ's at each batch too);
    a choice inside its momentum's rates is inside, whatever the other momenta's rates are."""
    config = merged()
    config["train"] |= {"optimizer": "sgd"}
    config["study"] |= {
        "tuning": {"lr_factors": [0.5, 1, 2], "momenta": [0, 0.9], "seq_batch_sizes": [8, 32]}
    }
    study = Study(config)
    seq, kavg = Run("simulated", "seq", TUNED, 1, 1), Run("simulated", "kavg", TUNED, 4, 1)
    assert [run.variant for run in study.grid(seq)][:4] == [
        f"train.batch_size=8,train.momentum={momentum},train.lr={lr}"
        for momentum, lr in ((0, 0.0015), (0, 0.003), (0, 0.006), (0.9, 0.0015))
    ]
    assert len(study.grid(seq)) == 12
    assert [
        (s["train"]["momentum"], s["train"]["lr"])
        for s in map(study.run_settings, study.grid(kavg))
    ] == [(0, 0.0015), (0, 0.003), (0, 0.006), (0.9, 0.0015), (0.9, 0.003), (0.9, 0.006)]
    grid = [
        grid_point(lr, loss, momentum=0) for lr, loss in ((0.001, 2.0), (0.002, 1.4), (0.004, 1.6))
    ]
    grid += [grid_point(lr, loss) for lr, loss in ((0.002, 1.8), (0.004, 1.7), (0.008, 1.9))]
    choice = choose(grid)
    assert (
        choice["chosen"] == {"batch_size": 32, "momentum": 0, "lr": 0.002}
        and choice["at_edge"] is None
    )
    # the lowest rate of momentum 0.9's line, where momentum 0 had a lower one: at the edge
    assert choose(grid[:3] + [grid_point(0.002, 1.3)] + grid[4:])["at_edge"] == "lowest"


def test_bmufs_block_momenta_cross_its_grid_alone_and_its_choice_is_its_option():
    """study.tuning.block_momenta: BMUF's rates at each η (its option, algorithms.bmuf), no other
    configuration's; a tuned run takes the chosen η as an option, as the chosen grid run trained;
    the edge is of the chosen η's rates."""
    study = tuned_study(lr_factors=[0.5, 1, 2], block_momenta=[0.5, 0.75])
    bmuf, kavg = Run("simulated", "bmuf", TUNED, 4, 1), Run("simulated", "kavg", TUNED, 4, 1)
    assert [run.variant for run in study.grid(bmuf)] == [
        f"train.lr={lr},block_momentum={eta}"
        for eta in (0.5, 0.75)
        for lr in (0.0015, 0.003, 0.006)
    ]
    assert [run.variant for run in study.grid(kavg)] == [
        f"train.lr={lr}" for lr in (0.0015, 0.003, 0.006)
    ]
    settings = study.run_settings(study.grid(bmuf)[4])
    assert settings["options"]["block_momentum"] == 0.75 and settings["train"]["lr"] == 0.003
    chosen = {"lr": 0.003, "batch_size": 32, "momentum": 0.9, "block_momentum": 0.75}
    assert study.run_settings(replace_seed(bmuf, 1), chosen) == settings
    tuned = study.run_settings(replace_seed(bmuf, 2), chosen)
    assert tuned["options"]["block_momentum"] == 0.75 and "block_momentum" not in tuned["train"]
    grid = [
        grid_point(lr, loss) | {"block_momentum": 0.5}
        for lr, loss in ((0.001, 2.0), (0.002, 1.9), (0.004, 1.8))
    ]
    grid += [
        grid_point(lr, loss) | {"block_momentum": 0.75}
        for lr, loss in ((0.002, 1.7), (0.004, 1.5), (0.008, 1.6))
    ]
    choice = choose(grid)
    assert choice["chosen"] == chosen | {"lr": 0.004} and choice["at_edge"] is None
    assert choose(grid[:3] + [grid_point(0.008, 1.4) | {"block_momentum": 0.5}])["at_edge"] == (
        "highest"
    )


def test_a_bmuf_grid_runs_records_name_its_eta_at_the_rung_and_at_the_end(tmp_path):
    """A grid run's point names the options its grid tunes (BMUF's η and ζ), from run.json and
    rung.json alike (what the halving and the choice compare it by), not its other options."""
    from types import SimpleNamespace

    from asrscale.protocol.tuning import write_rung

    write_run(tmp_path / "a", 0.003, 1.25)
    record = json.loads((tmp_path / "a" / "run.json").read_text())
    options = {"period": 4, "block_momentum": 0.75, "block_lr": 1.0}
    (tmp_path / "a" / "run.json").write_text(json.dumps(record | {"options": options}))
    found = point(tmp_path / "a")
    assert (found["block_momentum"], found["block_lr"]) == (0.75, 1.0) and "period" not in found
    train = SimpleNamespace(**record["train"])
    progress = SimpleNamespace(best={"dev_loss": 1.5, "dev_ter": 0.3}, diverged=None, stopped=None)
    write_rung(tmp_path / "a", SimpleNamespace(train=train, options=options), progress, 3)
    rung = json.loads((tmp_path / "a" / "rung.json").read_text())
    assert rung["options"] == {"block_momentum": 0.75, "block_lr": 1.0}


@pytest.mark.parametrize(
    "tuning, runs, said",
    [
        (
            {"block_momenta": [0.5, 0.75]},
            None,
            "config: study.tuning.block_momenta: tunes algorithms.bmuf.block_momentum beside "
            "the rates of study.tuning.lr_factors, and none is given",
        ),
        (
            {"lr_factors": [0.5, 1, 2], "block_lrs": [0.5, 1]},
            [{"algorithm": "seq"}, {"algorithm": "kavg"}],
            "config: study.tuning.block_lrs: tunes algorithms.bmuf.block_lr and no entry of "
            "study.runs is bmuf",
        ),
    ],
)
def test_a_grid_of_bmufs_options_that_tunes_nothing_is_named(tuning, runs, said):
    config = merged()
    config["study"] |= {"tuning": tuning} | ({"runs": runs} if runs else {})
    with pytest.raises(ConfigError) as raised:
        Study(config)
    assert str(raised.value) == said


def test_momenta_under_adam_are_named():
    config = merged()
    config["study"] |= {"tuning": {"lr_factors": [0.5, 1, 2], "momenta": [0, 0.9]}}
    with pytest.raises(ConfigError) as raised:
        Study(config)
    assert str(raised.value) == (
        "config: study.tuning.momenta: tunes train.momentum, which only train.optimizer sgd "
        "has, and seq trains with adam"
    )


def test_a_grid_that_diverged_everywhere_stops_with_its_rates():
    with pytest.raises(
        UserError,
        match=r"every run of the grid diverged \(lr 0.001 \(batch 32\): nan loss, lr 0.002",
    ):
        choose(
            [
                grid_point(0.001, None, diverged="nan loss"),
                grid_point(0.002, None, diverged="inf loss"),
            ]
        )


def write_run(
    folder, lr: float, loss: float, diverged=None, settings=None, ter=0.2, by="dev_loss"
) -> None:
    folder.mkdir(parents=True)
    (folder / "checkpoints").mkdir()  # a finished run's state: not the tuned run's to link
    record = {
        "train": {"lr": lr, "batch_size": 8, "momentum": 0.9, "best_by": by},
        "best_dev_loss": loss,
        "best_dev_ter": ter,
        "diverged": diverged,
        "stopped_by": "budget",
    }
    (folder / "run.json").write_text(json.dumps(record))
    (folder / "settings.json").write_text(json.dumps(settings or {"train": {"lr": lr}}))
    (folder / "model.pt").write_bytes(b"weights")
    (folder / "metrics.tsv").write_text("kind\n")


def test_a_grid_runs_record_is_its_point_and_the_chosen_run_is_adopted_whole(tmp_path):
    write_run(tmp_path / "a", 0.003, 1.25)
    write_run(tmp_path / "b", 0.006, math.nan)
    assert point(tmp_path / "a") == grid_point(0.003, 1.25, 8) | {
        "run": str(tmp_path / "a"),
        "stopped_early": False,
        "rung_score": None,
    }
    rung = json.loads((tmp_path / "a" / "run.json").read_text()) | {"best_dev_loss": 1.5}
    (tmp_path / "a" / "rung.json").write_text(json.dumps(rung))
    assert point(tmp_path / "a")["rung_score"] == 1.5  # what a halving compared it by
    assert point(tmp_path / "b")["best_dev_loss"] is None and point(tmp_path / "b")["score"] is None
    (tmp_path / "choice.json").write_text(json.dumps({"run": str(tmp_path / "a")}))
    (tmp_path / "tuned.json").write_text(json.dumps({"train": {"lr": 0.003}}))
    adopt(tmp_path / "choice.json", tmp_path / "tuned.json", tmp_path / "tuned")
    assert (tmp_path / "tuned" / "model.pt").read_bytes() == b"weights"
    assert (tmp_path / "tuned" / "run.json").read_text() == (
        tmp_path / "a" / "run.json"
    ).read_text()
    (tmp_path / "other.json").write_text(json.dumps({"train": {"lr": 0.006}}))
    with pytest.raises(
        UserError, match="was not trained with the settings of .*other.json: rerun its tuning"
    ):
        adopt(tmp_path / "choice.json", tmp_path / "other.json", tmp_path / "tuned")


def test_a_tuning_writes_its_choice_and_says_an_edge(tmp_path, capsys):
    for lr, loss in ((0.003, 1.5), (0.006, 1.25), (0.012, 1.4)):
        write_run(tmp_path / f"lr{lr}", lr, loss)
    runs = [tmp_path / f"lr{lr}" for lr in (0.003, 0.006, 0.012)]
    choice = tune(runs, tmp_path / "inside.json")
    assert json.loads((tmp_path / "inside.json").read_text()) == choice
    assert choice["chosen"] == {"batch_size": 8, "momentum": 0.9, "lr": 0.006} and choice[
        "run"
    ] == str(runs[1])
    assert capsys.readouterr().out == f"tuning: chose lr 0.006, batch 8, momentum 0.9 ({runs[1]})\n"
    tune(runs[:2], tmp_path / "edge.json")
    assert json.loads((tmp_path / "edge.json").read_text())["at_edge"] == "highest"
    said = (
        f"tuning: chose lr 0.006, batch 8, momentum 0.9 ({runs[1]}), the highest rate of its "
        "grid: tuned at the edge"
    )
    assert capsys.readouterr().out == said + "\n"


def test_a_grid_tuned_by_dev_ter_chooses_and_halves_by_it_and_shows_its_dev_loss(tmp_path):
    """train.best_by: dev_ter: the run of lowest TER is chosen though another's dev loss is lower,
    and a halving keeps by TER too; a run's score is its measure's, its dev loss kept to be
    shown."""
    for lr, loss, ter in ((0.003, 1.1, 0.31), (0.006, 1.3, 0.24), (0.012, 1.2, 0.27)):
        write_run(tmp_path / f"lr{lr}", lr, loss, ter=ter, by="dev_ter")
    runs = [tmp_path / f"lr{lr}" for lr in (0.003, 0.006, 0.012)]
    expected = {
        "run": "x",
        "lr": 0.006,
        "batch_size": 8,
        "momentum": 0.9,
        "best_dev_loss": 1.3,
        "by": "dev_ter",
        "score": 0.24,
        "diverged": None,
        "stopped_early": False,
        "rung_score": None,
    }
    assert point(runs[1]) | {"run": "x"} == expected
    assert tune(runs, tmp_path / "choice.json")["chosen"]["lr"] == 0.006
    (tmp_path / "halving.json").write_text(json.dumps({"epoch": 1, "keep": 1}))
    files = []
    for name, lr, loss, ter in (
        ("a", 0.003, 1.1, 0.31),
        ("b", 0.006, 1.3, 0.24),
        ("c", 0.012, 1.0, None),
    ):
        files.append(tmp_path / f"{name}.json")
        files[-1].write_text(json.dumps(rung_record(name, lr, loss, ter=ter, by="dev_ter")))
    assert halve(tmp_path / "halving.json", files, tmp_path / "decision.json")["kept"] == ["b"]


def test_the_adopted_run_is_linked_once_and_copied_where_links_fail(tmp_path, monkeypatch):
    """Adopted into a folder not yet made, and again on a rerun; its settings stay its own file
    (the tuned run's, checked equal), the chosen run's checkpoints stay where they are; on a file
    system without hard links the files are copied."""
    write_run(tmp_path / "a", 0.003, 1.25)
    (tmp_path / "choice.json").write_text(json.dumps({"run": str(tmp_path / "a")}))
    tuned = tmp_path / "runs" / "tuned" / "seed1"
    settings = tmp_path / "tuned.json"
    settings.write_text(json.dumps({"train": {"lr": 0.003}}))
    tuned.parent.mkdir(parents=True)
    for _ in range(2):
        adopt(tmp_path / "choice.json", settings, tuned)
    assert sorted(path.name for path in tuned.iterdir()) == ["metrics.tsv", "model.pt", "run.json"]
    assert (tuned / "model.pt").samefile(tmp_path / "a" / "model.pt")
    (tuned / "settings.json").write_text(settings.read_text())  # as the workflow writes it
    adopt(tmp_path / "choice.json", settings, tuned)
    assert not (tuned / "settings.json").samefile(tmp_path / "a" / "settings.json")

    def no_links(source, target):
        raise OSError("hard links not supported")

    monkeypatch.setattr("os.link", no_links)
    copied = tmp_path / "elsewhere" / "tuned"
    adopt(tmp_path / "choice.json", settings, copied)
    assert (copied / "model.pt").read_bytes() == b"weights" and not (copied / "model.pt").samefile(
        tmp_path / "a" / "model.pt"
    )
    assert (copied / "run.json").read_text() == (tmp_path / "a" / "run.json").read_text()


def rung_record(
    run: str, lr: float, loss: float | None, diverged=None, ter=None, by="dev_loss"
) -> dict:
    return {
        "run": run,
        "epoch": 1,
        "train": {"lr": lr, "batch_size": 8, "momentum": 0.9, "best_by": by},
        "best_dev_loss": loss,
        "best_dev_ter": ter,
        "diverged": diverged,
        "stopped": None,
    }


def test_a_grid_halved_keeps_its_lowest_dev_losses_so_far_and_a_diverged_run_last(tmp_path, capsys):
    (tmp_path / "halving.json").write_text(json.dumps({"epoch": 1, "keep": 2}))
    rungs = {
        "a": (0.001, 2.0, None),
        "b": (0.002, 1.5, None),
        "c": (0.004, None, "nan loss"),
        "d": (0.008, 1.7, None),
    }
    for name, (lr, loss, diverged) in rungs.items():
        (tmp_path / f"{name}.json").write_text(json.dumps(rung_record(name, lr, loss, diverged)))
    files = [tmp_path / f"{name}.json" for name in rungs]
    decision = halve(tmp_path / "halving.json", files, tmp_path / "decision.json")
    assert json.loads((tmp_path / "decision.json").read_text()) == decision
    assert (decision["kept"], decision["stopped"], decision["keep"]) == (["b", "d"], ["a", "c"], 2)
    assert [p["run"] for p in decision["rungs"]] == ["b", "d", "a", "c"] and decision["epoch"] == 1
    assert capsys.readouterr().out == "halving after epoch 1: 2 of 4 go on; stopped: a, c\n"
    # each run's part in it: a kept one goes on to its end, a stopped one ends at the rung
    assert Halving.decided(tmp_path / "decision.json", Path("b")) is None
    assert Halving.decided(tmp_path / "decision.json", Path("./a")) == Halving(1, rung=False)
    with pytest.raises(
        UserError, match=r"decision.json decides nothing of e: it is another grid's"
    ):
        Halving.decided(tmp_path / "decision.json", Path("e"))
    # the rung of the halving's settings; a grid whose every run goes on stops none
    assert Halving.at_rung(tmp_path / "halving.json") == Halving(1, rung=True)
    assert halve(tmp_path / "halving.json", files[:2], tmp_path / "all.json")["stopped"] == []
    assert capsys.readouterr().out == "halving after epoch 1: 2 of 2 go on; stopped: none\n"


def test_a_run_stopped_by_halving_is_never_chosen_and_its_record_says_so(tmp_path):
    write_run(tmp_path / "stopped", 0.002, 1.1)
    record = json.loads((tmp_path / "stopped" / "run.json").read_text())
    (tmp_path / "stopped" / "run.json").write_text(json.dumps(record | {"stopped_by": "halving"}))
    stopped = point(tmp_path / "stopped")
    assert stopped["stopped_early"] and stopped["best_dev_loss"] == 1.1
    choice = choose([grid_point(0.001, 1.5), stopped, grid_point(0.004, 1.3)])
    assert choice["chosen"]["lr"] == 0.004 and choice["at_edge"] == "highest"


@pytest.mark.parametrize(
    ("halving", "said"),
    [
        (
            {"epoch": 1},
            r"halving: \{'epoch': 1\}: both an epoch and how many to keep \(e\.g\. \{epoch: 3, "
            r"keep: 2\}\)$",
        ),
        (
            {"epoch": 1, "keep": 3},
            r"study\.tuning\.halving\.keep: 3: fewer than the grid's 3 rates",
        ),
        (
            {"epoch": 6, "keep": 2},
            r"study\.tuning\.halving\.epoch: 6: before the last of seq's 6 epochs",
        ),
    ],
)
def test_a_halving_that_would_stop_nothing_is_named(halving, said):
    with pytest.raises(ConfigError, match=said):
        tuned_study(lr_factors=[0.5, 1, 2], halving=halving)
    assert tuned_study(halving={"epoch": 1, "keep": 2}).halving == {}  # untuned: no grid to halve


def test_every_grid_run_is_halved_but_one_the_study_also_reports():
    """The default study tuned and halved, with a sweep of SSGD's rate whose points are grid
    runs."""
    config = merged()
    config["study"] |= {
        "tuning": {"lr_factors": [0.5, 1, 2], "halving": {"epoch": 2, "keep": 1}},
        "sweeps": [
            {"algorithm": "ssgd", "learners": 4, "vary": "train.lr", "values": [0.0015, 0.012]}
        ],
    }
    study = Study(config)
    ssgd = Run("simulated", "ssgd", TUNED, 4, 1)
    grid = study.grid(ssgd)
    assert (
        study.halved_runs(ssgd) == grid[1:] and study.halved_grid(grid[0]) is None
    )  # the sweep's point
    assert all(
        study.halved_grid(run) == tuned
        for tuned in study.tunings()
        for run in study.halved_runs(tuned)
    )
    assert (
        study.halved_grid(Run("simulated", "ssgd", TUNED, 4, 2)) is None
    )  # a tuned run's other seed
    assert study.halving_file(ssgd).endswith("/tuning/sim-zhang19b-v100/ssgd/P4.halving.json")
    assert study.stage_settings("halving") == {"epoch": 2, "keep": 1}


@pytest.mark.slow
@pytest.mark.parametrize("algorithm", ["ssgd", "asgd"])
def test_a_halved_run_goes_on_from_its_rung_to_the_unhalved_model_or_stops_there(
    corpus, tmp_path, algorithm
):
    """4 simulated learners halved after epoch 1 of 2: a kept run ends as an unhalved one, no row
    lost or twice (ASGD's server too; its order follows the clock, which restarts, so its model
    may differ), a stopped one at its rung's model, its record saying why."""
    whole, whole_metrics = simulate(corpus, tmp_path / "whole", algorithm, 4, False, epochs=2)
    for name in ("kept", "stopped"):
        at_rung = simulate(
            corpus, tmp_path / name, algorithm, 4, False, halving=Halving(1, rung=True), epochs=2
        )
        assert at_rung == (None, None) and not (tmp_path / name / "model.pt").exists()
    rung = json.loads((tmp_path / "kept" / "rung.json").read_text())
    first = whole_metrics[(whole_metrics.kind == "epoch") & (whole_metrics.epoch == 1)]
    assert (
        rung["epoch"] == 1 and rung["train"]["lr"] == 3e-3 and rung["run"] == str(tmp_path / "kept")
    )
    assert rung["diverged"] is None and rung["stopped"] is None
    assert rung["best_dev_loss"] == pytest.approx(first.dev_loss.item(), abs=1e-5)
    kept, metrics = simulate(corpus, tmp_path / "kept", algorithm, 4, False, epochs=2)
    key = ["kind", "epoch", "step", "rank"]
    assert not metrics.duplicated(key).any() and metrics[key].equals(whole_metrics[key])
    if algorithm == "ssgd":
        assert same_models(whole, kept)
        assert metrics.drop(columns=TIMES).equals(whole_metrics.drop(columns=TIMES))
    halved = Halving(1, rung=False)
    _, metrics = simulate(
        corpus, tmp_path / "stopped", algorithm, 4, False, halving=halved, epochs=2
    )
    record = json.loads((tmp_path / "stopped" / "run.json").read_text())
    assert (
        record["stopped_by"] == "halving"
        and record["best_epoch"] == 1
        and "after epoch 1" in record["stopped"]
    )
    assert metrics[metrics.kind == "epoch"].epoch.tolist() == [1]


@pytest.mark.parametrize(
    "grid, at_edge, said",
    [
        ([(0.3, 0.9, 8), (0.9, 0.9, 8), (2.7, 0.9, 8)], None, "tuned over rates 0.3-2.7"),
        (
            [(2.6973, 0.9, 32), (8.1, 0.9, 32), (24.3, 0.9, 8)],
            "highest",
            "tuned at the edge (its highest rate) of rates 2.7-24.3 and batch sizes 8, 32",
        ),
        (
            [(0.5, 0, 8), (0.5, 0.9, 8), (1.5, 0.5, 8)],
            "lowest",
            "tuned at the edge (its lowest rate) of rates 0.5-1.5 and momenta 0, 0.5, 0.9",
        ),
    ],
)
def test_a_runs_tuning_says_the_grid_its_rate_was_chosen_among(tmp_path, grid, at_edge, said):
    """The runs table's `tuning` (what a verdict quotes): its grid's range of rates, and its momenta
    and batch sizes where it held several, so that a reader can tell a narrow grid from a wide
    one."""
    choice = tmp_path / "P4.json"
    points = [{"lr": lr, "momentum": momentum, "batch_size": batch} for lr, momentum, batch in grid]
    choice.write_text(json.dumps({"at_edge": at_edge, "grid": points}))
    assert tuning_state(str(choice)) == said
    assert tuning_state(None) == "not tuned"


def test_a_choice_within_the_dev_sets_noise_of_another_is_said_to_rest_on_a_near_tie():
    """Dev TER's noise 0.29% an epoch: two runs within 2√2 of it (0.82%, relative) are a near tie.
    SSGD at 16's first grid chose 31.9% against 32.1% at the rung (0.6%): said; 31.9% against 33%
    is not; a halved grid without rung scores says nothing."""
    from asrscale.analysis.report import tuned

    grid = pd.DataFrame(
        {
            "algorithm": "ssgd",
            "learners": 16,
            "world": "simulated",
            "lr": [0.675, 2.025, 6.075],
            "batch_size": 8,
            "momentum": 0.9,
            "best_dev_loss": 1.0,
            "by": "dev_ter",
            "score": [0.321, 0.186, 0.5],
            "diverged": None,
            "stopped_early": [True, False, True],
            "chosen": [False, True, False],
            "at_edge": None,
            "rung_score": [0.321, 0.319, 0.5],
        }
    )
    assert tuned(grid)[0]["state"] == (
        "tuned; a near tie at the rung, within the dev set's noise: lr 0.675 0.321 against 0.319"
    )
    assert tuned(grid.assign(rung_score=[0.33, 0.319, 0.5]))[0]["state"] == "tuned"
    assert tuned(grid.drop(columns="rung_score"))[0]["state"] == "tuned"
    unhalved = grid.assign(stopped_early=False, score=[0.1870, 0.186, 0.5]).drop(
        columns="rung_score"
    )
    assert tuned(unhalved)[0]["state"].endswith("lr 0.675 0.187 against 0.186")
