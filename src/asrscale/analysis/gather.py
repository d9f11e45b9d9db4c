"""A study's runs gathered from their folders into tables (runs.tsv, epochs.tsv, the ASGD servers'
staleness, the ADPSGD pairings, the LM decodes' word confusions, each learner's time split, the
sweeps' points, each trained run's word errors per test utterance), with each run's speedups and
time to target."""

import json
from pathlib import Path

import pandas as pd

from asrscale.analysis.measures import KEYS, assess
from asrscale.config.algorithms import GRIDDED
from asrscale.costmodel.fitted import Band, bound_by
from asrscale.worlds.timing import CATEGORIES

SPLIT_COLUMNS = [f"{c}_s" for c in CATEGORIES]


def compute_basis(world_record: dict) -> str:
    """What a simulated run's compute times rest on."""
    compute = world_record["hardware"].get("compute")
    if compute is None:
        calibration = world_record.get("calibration", {})
        said = [calibration.get("device_name", "cpu")]
        if calibration.get("spread"):  # (older calibrations timed each rate once)
            said.append(f"repeats at most {max(calibration['spread'].values()):.2f}× apart")
        said += calibration.get("slower_with_more_threads", [])
        if calibration.get("busy"):  # kept by study.busy_machine: go-on
            said.append(f"calibrated on a busy machine: {calibration['busy']}")
        return f"this machine's calibrated rates ({'; '.join(said)})"
    speed = compute.get("relative_speed", 1.0)
    assumed = f" × {speed:g} (assumed)" if speed != 1.0 else ""
    return f"compute measured on {compute['measured_on']}{assumed}"


def training_rule(train: dict, rate: dict) -> str:
    """What a run trained with, in a few words: the optimizer, the rate, how it was scaled (the run
    record's `learning_rate`: the rule's scale at its P, the algorithm's factor) and its
    schedule."""
    scale, factor = rate["scale"], rate.get("factor", 1.0)  # records before BMUF's factor have none
    optimizer = f"SGD, momentum {train['momentum']:g}" if train["optimizer"] == "sgd" else "Adam"
    warmup = (
        f", warm-up {train['warmup_epochs']:g} epochs"
        if train["warmup_epochs"] and scale != 1
        else ""
    )
    if train["schedule"] == "newbob":
        schedule = f", newbob, {train['epochs']} epochs at most"
    else:
        decay = f", ×{train['lr_decay']:g} an epoch" if train["lr_decay"] != 1 else ""
        schedule = f"{decay}, {train['epochs']} epochs"
    clip = f", clip {train['clip_grad_norm']:g}" if train["clip_grad_norm"] else ""
    filtered = f" × {factor:.3g} (the algorithm's own)" if factor != 1 else ""
    return (
        f"{optimizer}, lr {train['lr']:g}{filtered} × {scale:g} "
        f"({train['lr_scaling']}){warmup}{schedule}{clip}"
    )


def _run_tables(algorithm: str, variant: str, run: Path, test_sets: list[str]):
    record = json.loads((run / "run.json").read_text())
    metrics = pd.read_csv(run / "metrics.tsv", sep="\t")
    keys = {
        "algorithm": algorithm,
        "variant": variant,
        "learners": record["learners"],
        "seed": record["seed"],
    }
    epochs = metrics[metrics.kind == "epoch"].assign(**keys, run=str(run))
    split = metrics[metrics.kind == "interval"][SPLIT_COLUMNS].sum()
    environment, train = record["environment"], record["train"]
    world_record = record.get("world", {"kind": "mpi"})
    last = (
        epochs.iloc[-1] if len(epochs) else pd.Series(float("nan"), ["time_s"])
    )  # diverged in its first epoch
    best = epochs[epochs.epoch == record["best_epoch"]]
    scored, confusions, utterances = _scores(run, test_sets)
    outside = 1 - split["compute_s"] / split.sum()  # of its time: what the fitted parameters set
    row = {
        **keys,
        **scored,
        "train_s": last.time_s,
        "frames_per_s": epochs.frames.sum() / epochs.wall_s.sum(),
        "best_dev_loss": best.dev_loss.iloc[0]
        if len(best)
        else float("nan"),  # of the model decoded
        "best_dev_ter": best.dev_ter.iloc[0] if len(best) else float("nan"),
        "best_epoch": record["best_epoch"],
        "stopped": record["stopped"] or "",
        "stopped_by": _stopped_by(record),
        "schedule": train["schedule"],
        "best_by": train.get(
            "best_by", "dev_loss"
        ),  # the measure that chose its model (runs before it: loss)
        **{f"{c}_share": split[f"{c}_s"] / split.sum() for c in CATEGORIES},
        "outside_share": outside,
        "bound_by": _bound(world_record, outside, record["learners"]),
        "epochs": len(epochs),
        # the training set's hours of speech: an epoch's frames at the features' shift
        "train_hours": epochs.frames.iloc[0] * record["features"]["shift_ms"] / 1000 / 3600
        if len(epochs)
        else 0.0,
        "global_batch": record["global_batch"],
        **_noise(epochs, record["global_batch"]),
        "lr": train["lr"],
        "peak_lr": record["learning_rate"]["peak"],
        "optimizer": train["optimizer"],
        "momentum": train["momentum"] if train["optimizer"] == "sgd" else None,
        "training_rule": training_rule(train, record["learning_rate"]),
        "parameters": record["parameters"],
        "threads_per_learner": record["threads_per_learner"],
        "device": record["device"].split(":")[
            0
        ],  # cpu or cuda: a speed claim is decided on GPUs only
        **_timing(world_record, environment, record.get("exchanges")),
        **_environment(environment),
        "trained_as": record["algorithm"],
        "options": json.dumps(record.get("options", {}), sort_keys=True),
        "diverged": _divergence(record.get("diverged")),
        "run": str(run),
    }
    return (
        row,
        epochs,
        confusions.assign(**keys),
        _learners(metrics, world_record, keys),
        utterances,
    )


def _noise(epochs: pd.DataFrame, global_batch: int) -> dict:
    """A run's gradient noise scale at its last epoch (asrscale.training.noise_scale: about the
    critical batch; NaN where the run did not measure it), and its global batch over it: above 1,
    the large-batch regime."""
    measured = "noise_scale" in epochs and len(epochs)
    scale = epochs.noise_scale.iloc[-1] if measured else float("nan")
    return {"noise_scale": scale, "batch_over_noise": global_batch / scale}


def _scores(run: Path, test_sets: list[str]) -> tuple[dict, pd.DataFrame, pd.DataFrame]:
    """A run's test scores, its test sets pooled (WER with the LM, as the studies scored, and
    greedily; CERs), each set's WERs where there are several; the LM decode's most frequent word
    errors; and every test utterance's word errors (`utt` named by its set where there are
    several)."""
    found = {name: json.loads((run / name / "scores.json").read_text()) for name in test_sets}
    words = {name: scores["lm"]["words"] for name, scores in found.items()}
    chars = {
        name: scores["lm"].get("chars", words[name]) for name, scores in found.items()
    }  # (older: by words)

    def pooled(decode: str, rate: str, weights: dict) -> float:
        return sum(found[n][decode][rate] * weights[n] for n in found) / sum(weights.values())

    first = found[test_sets[0]]["lm"]
    row = {
        "wer": pooled("lm", "wer", words),
        "cer": pooled("lm", "cer", chars),
        "greedy_wer": pooled("greedy", "wer", words),
        "greedy_cer": pooled("greedy", "cer", chars),
        "lm_weight": first["lm_weight"],
        "word_bonus": first["word_bonus"],
    }
    if len(test_sets) > 1:
        row |= {
            f"{decode}_{name}": found[name][key]["wer"]
            for name in test_sets
            for decode, key in (("wer", "lm"), ("greedy_wer", "greedy"))
        }
    confusions = pd.concat(
        [
            pd.DataFrame(scores["lm"]["confusions"], columns=["reference", "hypothesis", "count"])
            for scores in found.values()
        ]
    )
    confusions = confusions.groupby(["reference", "hypothesis"], dropna=False, as_index=False)[
        "count"
    ].sum()
    utterances = pd.concat(
        [
            pd.read_csv(
                run / name / "utterances.tsv",
                sep="\t",
                dtype={"utt": str, "speaker": str},
                keep_default_na=False,
            ).assign(test_set=name, run=str(run))
            for name in test_sets
        ]
    )
    if len(test_sets) > 1:
        utterances = utterances.assign(utt=utterances.test_set + "/" + utterances.utt)
        if "speaker" in utterances:
            utterances = utterances.assign(speaker=utterances.test_set + "/" + utterances.speaker)
    return row, confusions.sort_values("count", ascending=False, kind="stable"), utterances


def _timing(world_record: dict, environment: dict, exchanges: dict | None) -> dict:
    """How a run was timed, as the runs table's columns: measured on real ranks (with what its
    exchanges went by, and the rate learner 0's achieved, waits for peers included), or modelled on
    a hardware profile (with the transports of its links, its stragglers, and what its compute
    rests on)."""
    if world_record["kind"] != "simulated":
        rate = (
            exchanges["bytes"] * 8 / exchanges["seconds"] / 1e9
            if exchanges and exchanges["seconds"]
            else None
        )
        return {
            "world": world_record["kind"],
            "hardware": environment["hostname"],
            "stragglers": "",
            "transports": world_record.get("transport", ""),
            "exchange_gbps": rate,
            "speedup_kind": "measured",
            "compute_basis": "measured",
        }
    stragglers = world_record["hardware"].get("stragglers", {})
    name = world_record["hardware"]["name"]
    return {
        "world": "simulated",
        "hardware": name,
        "speedup_kind": f"modelled on {name}",
        "exchange_gbps": None,
        "transports": ",".join(sorted(transports(world_record["hardware"], world_record["ranks"]))),
        "stragglers": ", ".join(
            f"learner {rank} ×{factor:g}" for rank, factor in stragglers.items()
        ),
        "compute_basis": compute_basis(world_record),
    }


def _bound(world_record: dict, outside_share: float, learners: int) -> str:
    """What bounds a modelled run's time (asrscale.costmodel.fitted.bound_by; blank where
    measured)."""
    if world_record["kind"] != "simulated":
        return ""
    spans_nodes = world_record["ranks"] > world_record["hardware"]["learners_per_node"]
    return bound_by(outside_share, spans_nodes, learners)


def transports(hardware: dict, ranks: int) -> set[str]:
    """The transports of the links a modelled run of `ranks` (learners and servers) crossed on its
    profile."""
    used = set()
    if ranks > 1:
        used.add(hardware["node_link"]["transport"])
    if ranks > hardware["learners_per_node"]:
        used.add(hardware["network_link"]["transport"])
    if hardware.get("host_staging") and ranks > 1:
        used.add(hardware["host_staging"]["link"]["transport"])
    return used


def _environment(environment: dict) -> dict:
    """Where a run ran (asrscale.provenance), as the runs table's columns."""
    return {
        "cpu": environment["cpu"],
        "cores": environment["cpu_count"],
        "gpu": environment["gpu"] or "none",
        "hostname": environment["hostname"],
        "torch": environment["packages"]["torch"],
        "mpi": environment["mpi"],
        "commit": environment["commit"] or "unknown",
    }


def _learners(metrics: pd.DataFrame, world_record: dict, keys: dict) -> pd.DataFrame:
    """Each learner's time split over the run, and its slowdown where the hardware profile makes
    it a straggler (`stragglers:`)."""
    stragglers = {
        int(rank): factor
        for rank, factor in world_record.get("hardware", {}).get("stragglers", {}).items()
    }
    learners = (
        metrics[metrics.kind == "interval"].groupby("rank")[SPLIT_COLUMNS].sum().reset_index()
    )
    slowdown = learners["rank"].map(lambda rank: stragglers.get(rank, 1.0))
    return learners.assign(**keys, world=world_record["kind"], slowdown=slowdown)


def _stopped_by(record: dict) -> str:
    """What ended a run: "schedule" (its own stop) or "budget" (train.epochs). A run recorded before
    runs said it stopped by its schedule only with newbob's stop (its other reason then, a floor
    of the rate, is no stop of nnet1's)."""
    if "stopped_by" in record:
        return record["stopped_by"] or ""
    return (
        "schedule" if (record["stopped"] or "").startswith("halving, an epoch gained") else "budget"
    )


def _divergence(diverged: dict | None) -> str:
    """Where and why a run diverged, in a few words ("" where it did not)."""
    return (
        f"epoch {diverged['epoch']}, step {diverged['step']}: {diverged['reason']}"
        if diverged
        else ""
    )


def _records(rows: list[dict], name: str, columns: list[str]) -> pd.DataFrame:
    """One run-level record file (`name` in a run's folder) of every run that wrote one, keyed."""
    found = [(row, Path(row["run"]) / name) for row in rows if (Path(row["run"]) / name).is_file()]
    return pd.concat(
        [pd.read_csv(path, sep="\t").assign(**{k: row[k] for k in KEYS}) for row, path in found]
        or [pd.DataFrame(columns=KEYS + columns)]
    )


def tuning_state(choice_file: str | None) -> str:
    """How a run's settings were chosen (study.tuning), from its configuration's choice: "not
    tuned", "tuned over <its grid>" or "tuned at the edge (its <lowest|highest> rate) of <its
    grid>", the grid its rates and, where it held more than one, its momenta and batch sizes."""
    if choice_file is None:
        return "not tuned"
    choice = json.loads(Path(choice_file).read_text())
    rates = sorted({point["lr"] for point in choice["grid"]})
    grid = [f"rates {rates[0]:.3g}-{rates[-1]:.3g}"]
    for key, name in (("momentum", "momenta"), ("batch_size", "batch sizes")):
        if len(values := sorted({point[key] for point in choice["grid"]})) > 1:
            grid.append(f"{name} {', '.join(f'{value:g}' for value in values)}")
    over = " and ".join(grid)
    return (
        f"tuned at the edge (its {choice['at_edge']} rate) of {over}"
        if choice["at_edge"]
        else f"tuned over {over}"
    )


def tuning_table(tunings: list[dict]) -> pd.DataFrame:
    """Every point of every tuned configuration's grid (`tunings`: {algorithm, learners, world,
    file}), with its outcome and whether it was chosen."""
    columns = [
        "algorithm",
        "learners",
        "world",
        "lr",
        "batch_size",
        "momentum",
        *GRIDDED,  # the options a grid also spans (BMUF's η and ζ)
        "best_dev_loss",
        "by",
        "score",
        "diverged",
        "stopped_early",
        "chosen",
        "at_edge",
        "rung_score",
    ]
    rows = [
        {key: tuning[key] for key in ("algorithm", "learners", "world")}
        | {"stopped_early": False}
        | point
        | {"at_edge": choice["at_edge"]}
        for tuning in tunings
        if (choice := json.loads(Path(tuning["file"]).read_text()))
        for point in choice["grid"]
    ]
    return pd.DataFrame(rows, columns=[*columns, "run"])


def gather_runs(
    runs: list[dict],
    sweeps: list[dict],
    test_sets: list[str],
    out_dir: Path,
    rule: dict,
    tunings: list[dict] = (),
) -> None:
    """`runs`: {algorithm, variant, run, tuning}: the folder of each run, what it stands for (SEQ's
    run stands for algorithms that are SEQ with one learner) and its tuning's choice file (or None).
    `sweeps`: the points of each sweep. `rule`: when a run has converged (report.target_dev_loss and
    plateau_max_dev_ter); `test_sets`: the test sets every run was scored on; `tunings`:
    each tuned configuration's grid (`tuning_table`). Modelled speedups carry their runs' bands
    (asrscale.costmodel.fitted.Band)."""
    rows, *tables = zip(
        *(_run_tables(r["algorithm"], r["variant"], Path(r["run"]), test_sets) for r in runs)
    )
    rows = [row | {"tuning": tuning_state(r.get("tuning"))} for row, r in zip(rows, runs)]
    epochs, confusions, learners, utterances = map(pd.concat, tables)
    table = assess(pd.DataFrame(rows), epochs, rule, Band.fitted())
    out_dir.mkdir(parents=True, exist_ok=True)
    table.to_csv(out_dir / "runs.tsv", sep="\t", index=False)
    epochs.to_csv(out_dir / "epochs.tsv", sep="\t", index=False)
    # every gradient an ASGD server applied, with its staleness; every pairing of ADPSGD learners
    _records(rows, "server.tsv", ["staleness"]).to_csv(
        out_dir / "staleness.tsv", sep="\t", index=False
    )
    confusions.to_csv(out_dir / "confusions.tsv", sep="\t", index=False)
    learners.to_csv(out_dir / "learners.tsv", sep="\t", index=False)
    _records(rows, "exchanges.tsv", ["rank", "peer"]).to_csv(
        out_dir / "exchanges.tsv", sep="\t", index=False
    )
    # a run reported under several names (SEQ's under every algorithm that is SEQ alone) once
    utterances.drop_duplicates(["run", "utt"]).to_csv(
        out_dir / "utterances.tsv", sep="\t", index=False
    )
    tuning_table(list(tunings)).to_csv(out_dir / "tuning.tsv", sep="\t", index=False)
    points = pd.DataFrame(
        sweeps, columns=["sweep", "algorithm", "learners", "value", "variant", "world"]
    )
    points.assign(value=points.value.map(json.dumps)).to_csv(
        out_dir / "sweeps.tsv", sep="\t", index=False
    )
