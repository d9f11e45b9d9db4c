"""`asrscale <stage>`: the commands the workflow's rules call, one per stage. A stage's settings
come from the file `--settings` names, which the workflow writes from the configuration
(`asrscale.config.study`); paths come on the command line."""

import argparse
import faulthandler
import os
import sys
from pathlib import Path

from asrscale import machine
from asrscale.config.sections import read_settings_of
from asrscale.errors import UserError
from asrscale.io import read_settings


def synth(args):
    from asrscale.config.sections import SyntheticConfig
    from asrscale.data.corpus.synthetic import synthesise_part

    config = read_settings_of(SyntheticConfig, args.settings)
    for subset, data in synthesise_part(config, args.part, args.parts, args.out / "audio").items():
        data.write(args.out / subset)


def import_data(args):
    from asrscale.config.sections import ImportStage
    from asrscale.data.corpus.sources import import_subset

    settings = read_settings_of(ImportStage, args.settings)
    data = import_subset(settings.sources, settings.importing, args.out)
    print(f"imported {len(data.text)} utterances of {len(data.spk2utt)} speakers into {args.out}")


def combine_data(args):
    from asrscale.data.datadir import DataDir, read_data_dir

    combined = DataDir()
    for folder in args.parts:
        combined.merge(read_data_dir(folder))
    combined.write(args.out)


def tokens(args):
    from asrscale.data.datadir import read_table
    from asrscale.data.tokens import Tokens

    Tokens.from_texts(read_table(args.data / "text").values()).write(args.out)


def language_model(args):
    from asrscale.config.sections import LanguageModelStage
    from asrscale.data.corpus.sources import normalise
    from asrscale.data.datadir import read_table
    from asrscale.data.tokens import Tokens
    from asrscale.decoding.lm import check_lexicon, fold_arpa, write_arpa

    settings = read_settings_of(LanguageModelStage, args.settings)
    if settings.source == "train":
        write_arpa(args.out, list(read_table(args.data / "text").values()), settings.order)
    else:
        folded = fold_arpa(
            Path(settings.source), args.out, lambda word: normalise(word, settings.text)
        )
        print(
            f"{settings.source}: {folded['words']:,} words folded as the transcripts are; "
            f"{folded['left_out']:,} "
            f"n-grams left out (a word that folds to none or several), {folded['merged']:,} merged "
            "into another (words that fold to one: the first listed kept)"
        )
    tokens = Tokens.read(args.tokens)
    found = check_lexicon(
        args.out,
        settings.source,
        lambda word: all(c in tokens for c in word),
        list(read_table(args.dev_data / "text").values()),
        None if settings.source == "train" else settings.max_oov_rate,
    )
    print(
        f"lexicon: {found['lexicon']:,} words; dev out-of-vocabulary rate "
        f"{100 * found['dev_oov_rate']:.2f}%"
    )


def lm_statistics(args):
    from asrscale.data.datadir import read_table
    from asrscale.decoding.lm import report
    from asrscale.io import atomic_write_json

    def texts(folder: Path) -> list[str]:
        return list(read_table(folder / "text").values())

    evaluated = {"dev": texts(args.dev_data)} | {
        Path(folder).name: texts(folder) for folder in args.test_data
    }
    atomic_write_json(args.out, report(args.lm, texts(args.train_data), evaluated))


def features(args):
    from asrscale.config.sections import FeatureStage
    from asrscale.data.datadir import read_data_dir
    from asrscale.data.features import FeatureCache, extract_part

    settings = read_settings_of(FeatureStage, args.settings)
    extract_part(
        read_data_dir(args.data),
        settings.features,
        args.part,
        args.parts,
        args.out,
        settings.bad_input,
        args.cache and FeatureCache(args.cache),
    )


def combine_features(args):
    from asrscale.data.features import combine_parts

    combine_parts(args.parts, args.out)


def shard(args):
    from asrscale.data.features import read_frame_counts
    from asrscale.data.shard import write_shards

    write_shards(read_frame_counts(args.feats), args.learners, args.out)


def calibrate(args):
    import json
    import shutil

    import yaml

    from asrscale.config.sections import CalibrationStage
    from asrscale.costmodel.calibration import calibrate, measured_compute
    from asrscale.data.batches import Subset
    from asrscale.data.tokens import Tokens
    from asrscale.io import atomic_write_json
    from asrscale.protocol.twins import twin_calibration
    from asrscale.provenance import environment

    if twin := twin_calibration(args.settings, args.out):
        shutil.copyfile(twin, args.out)
        print(
            f"calibration: {twin}'s, of the same settings on this machine (asrscale.protocol.twins)"
        )
        return
    settings = read_settings_of(CalibrationStage, args.settings)
    train_set = Subset(
        args.train_data, args.train_feats, args.train_feats, settings.cmvn, Tokens.read(args.tokens)
    )
    when_busy = os.environ.get(machine.BUSY_MACHINE, "refuse")  # study.busy_machine
    calibration = calibrate(
        settings.train, settings.model, settings.features, train_set, when_busy=when_busy
    )
    calibration["environment"] = environment()
    atomic_write_json(args.out, calibration)
    print(json.dumps(calibration["by_threads"], indent=1))
    print(machine.speed(calibration["machine_rate"]))
    profile = {
        "device": "dedicated",
        "compute": measured_compute(calibration, calibration["environment"]),
    }
    print(
        f"A profile of learners with a {calibration['device_name']} each (your config's "
        "hardware.<name>):"
    )
    print(yaml.safe_dump(profile, sort_keys=False, width=120))


def train(args):
    from asrscale.protocol.tuning import Halving
    from asrscale.protocol.twins import take, twin_run
    from asrscale.training.run import RunPaths, run_settings_file

    paths = RunPaths(
        args.train_data,
        args.dev_data,
        args.train_feats,
        args.dev_feats,
        args.shards,
        args.tokens,
        args.out,
    )
    if args.rung and args.halving:
        raise UserError(
            "asrscale train: --rung trains to the rung, --halving on from it: one of them"
        )
    halving = None  # the whole run
    if args.rung:
        halving = Halving.at_rung(args.rung)
    elif args.halving:
        halving = Halving.decided(args.halving, args.out)
    # a simulated run trained to its end by another study (asrscale.protocol.twins); MPI runs train
    if (
        halving is None
        and args.calibration
        and (twin := twin_run(args.out, args.settings, args.calibration))
    ):
        take(twin, args.out)
        print(
            f"asrscale train: {args.out}: trained in {twin}, of the same settings and calibration"
        )
        return
    run_settings_file(read_settings(args.settings), paths, args.calibration, args.cores, halving)


def log_probs(args):
    from asrscale.config.sections import DecodeSettings
    from asrscale.decoding.log_probs import write_log_probs

    if len(args.data) != len(args.feats):
        raise UserError("--data and --feats name the same subsets, one feature dir a data dir")
    subsets = {Path(data).name: (data, feats) for data, feats in zip(args.data, args.feats)}
    device = read_settings_of(DecodeSettings, args.settings).device
    write_log_probs(args.model, subsets, args.train_feats, device, args.out)


def decode(args):
    import json

    from asrscale.config.sections import DecodeSettings
    from asrscale.decoding.decode import decode_run

    settings = read_settings_of(DecodeSettings, args.settings)
    scores = decode_run(args.log_probs, args.test_sets, args.lm, settings, args.processes, args.out)
    print(
        json.dumps(
            {
                name: {decode: found[decode]["wer"] for decode in ("lm", "greedy")}
                for name, found in scores.items()
            }
        )
    )


def clear_shared_memory(args):
    import socket

    from asrscale.worlds.shared_memory import clear

    if not args.job:
        raise UserError("runs inside a SLURM job: SLURM_JOB_ID is unset and --job not given")
    for path in clear(args.job):
        print(
            f"removed {path} on {socket.gethostname()}: MPI shared memory that a killed attempt of "
            "SLURM job "
            f"{args.job} left"
        )


def tune(args):
    from asrscale.protocol.tuning import tune as choose_in_grid

    choose_in_grid(args.runs, args.out)


def halve(args):
    from asrscale.protocol.tuning import halve as decide

    decide(args.settings, args.rungs, args.out)


def adopt(args):
    from asrscale.protocol.tuning import adopt as adopt_chosen

    adopt_chosen(args.choice, args.settings, args.out)


def gather(args):
    from asrscale.analysis.gather import gather_runs
    from asrscale.config.sections import GatherStage

    settings = read_settings_of(GatherStage, args.settings)
    gather_runs(
        settings.runs,
        settings.sweeps,
        settings.test_sets,
        args.out,
        settings.convergence,
        settings.tunings,
    )


def fit_cost_model(args):
    import pandas as pd

    from asrscale.costmodel.fit import fit_cost_model
    from asrscale.worlds.clock import FITTED

    fitted = fit_cost_model(args.out, args.workers)
    print(
        pd.DataFrame(fitted["parameters"])[["name", "fitted", "prior", "held_out"]].to_string(
            index=False
        )
    )
    columns = [
        "study",
        "learners",
        "in_fit",
        "published",
        "fitted",
        "held_out",
        "ratio",
        "bound_by",
    ]
    print(pd.DataFrame(fitted["figures"])[columns].to_string(index=False))
    print(pd.DataFrame(fitted["time_tables"]).to_string(index=False))
    for structure, found in fitted["structures"].items():
        print(
            f"{structure}: {found['within_tolerance']} of {found['judged']} figures in the fit "
            "within 25% held out, "
            f"RMS log miss {found['rms_log_miss']}"
        )
    print(
        f"kept {fitted['structure']!r}; band {fitted['band']}; two starts {fitted['starts']}; "
        f"{fitted['seconds']} s; "
        f"written to {args.out or FITTED}"
    )


def replay_published(args):
    from asrscale.costmodel.replayed import replayed_table
    from asrscale.io import atomic_write_text

    table = replayed_table(args.figures)
    atomic_write_text(args.out, table.to_csv(sep="\t", index=False))
    print(
        table[
            ["study", "learners", "published", "fitted", "held_out", "ratio", "agrees_at"]
        ].to_string(index=False)
    )


def plan(args):
    from snakemake.utils import update_config

    from asrscale.config.files import read_config_file
    from asrscale.config.study import Study
    from asrscale.costmodel.plan import plan as price
    from asrscale.io import atomic_write_text

    config = {}
    for file in args.configfile:  # each over the ones before, as Snakemake merges them
        update_config(config, read_config_file(file))
    study = Study(config)
    found = price(study, args.hardware)
    table, size = found.runs, found.size
    if args.out:
        atomic_write_text(args.out, table.to_csv(sep="\t", index=False))
    shown = table.assign(
        epoch=[
            f"{amount(s)} s ({amount(lo)}-{amount(hi)})"
            for s, lo, hi in zip(table.epoch_s, table.epoch_s_low, table.epoch_s_high)
        ],
        device_hours_for_epochs=[
            f"{amount(h, 2)} ({amount(lo, 2)}-{amount(hi, 2)})"
            for h, lo, hi in zip(
                table.device_hours, table.device_hours_low, table.device_hours_high
            )
        ],
    )
    print(
        f"{found.study} on {args.hardware}: {size.utterances:,} training utterances, "
        f"{size.hours:,.1f} hours "
        f"({size.source})"
    )
    print(
        shown[
            [
                "algorithm",
                "variant",
                "learners",
                "seed",
                "ranks",
                "epoch",
                "epochs",
                "device_hours_for_epochs",
            ]
        ].to_string(index=False)
    )
    print(
        f"training in all: {amount(table.device_hours.sum(), 1)} device-hours "
        f"({amount(table.device_hours_low.sum(), 1)}-{amount(table.device_hours_high.sum(), 1)}) "
        "for every epoch each run may take"
        + ("; newbob usually stops its runs earlier" if (table.schedule == "newbob").any() else "")
    )
    if found.carried:
        print(found.carried)
    others = found.others
    print(
        "\nbeside training, at the rates measured on a 2-core CPU, each band its stage's misses on "
        "the studies run since (asrscale.costmodel.plan):"
    )
    print(
        others.assign(
            **{
                hours: [
                    f"{amount(h, decimals)} ({amount(lo, decimals)}-{amount(hi, decimals)})"
                    for h, lo, hi in zip(
                        others[hours], others[f"{hours}_low"], others[f"{hours}_high"]
                    )
                ]
                for hours, decimals in (("cpu_hours", 2), ("device_hours", 3))
            }
        )[["stage", "jobs", "cpu_hours", "device_hours", "rests_on"]].to_string(index=False)
    )
    edges = ("", "_low", "_high")
    device = [
        table[f"device_hours{edge}"].sum() + others[f"device_hours{edge}"].sum() for edge in edges
    ]
    cpu = [others[f"cpu_hours{edge}"].sum() for edge in edges]
    print(
        f"the whole study: {amount(device[0], 1)} device-hours "
        f"({amount(device[1], 1)}-{amount(device[2], 1)}) "
        f"and {amount(cpu[0], 1)} CPU-hours ({amount(cpu[1], 1)}-{amount(cpu[2], 1)})"
    )
    print_regimes(study.corpus, found.runs)
    if args.pilot:
        print_prediction(study, found.runs, args.pilot)
    print_what_it_decides(study, size.utterances)
    print_wall_time(study.config["study"]["wall_time"])


def print_what_it_decides(study, utterances: int) -> None:
    """Which claims' halves the planned study can decide, and where it may end under-trained."""
    from asrscale.analysis.decidable import decidable, recorded_gains, under_trained_risks

    print_decidable(decidable(study, utterances))
    records = sorted(path.parent for path in Path("records").glob("*/record.json"))  # a checkout's
    print_risks(under_trained_risks(study, utterances, recorded_gains(records)))


def print_wall_time(wall_time: dict | None) -> None:
    """A laptop study's wall time (study.wall_time) at this machine's speed, timed now."""
    from asrscale.costmodel.calibration import machine_rate

    if wall_time is not None:
        print(f"\nits wall time: {machine.wall_time_here(wall_time, machine_rate())}")


def print_risks(risks: list[str]) -> None:
    """Where the planned study may end under-trained (asrscale.analysis.decidable)."""
    if risks:
        print(
            "\nit may leave its runs under-trained (by its schedule, and by the recorded studies):"
        )
        print("\n".join(f"  {risk}" for risk in risks))


def print_regimes(corpus: str, runs) -> None:
    """The corpus's gradient noise scale where a run of it has measured it (SEQ's at its last
    epoch, in each study whose runs are gathered), beside each configuration's global batch:
    which comparisons will lie in the large-batch regime (asrscale.analysis.regime)."""
    import math
    import statistics

    from asrscale.analysis.regime import of_corpus, regime

    found = of_corpus(corpus)
    if not found:
        print(
            f"\nno run of corpus {corpus} has measured its gradient noise scale yet (each run "
            "measures it: train.noise_scale); a study's report and a plan made after it say it"
        )
        return
    print("\n" + "; ".join(f"in {study}, {scale.said()}" for study, scale in found.items()))
    scale = statistics.median(s.value for s in found.values())
    configurations = runs.drop_duplicates(["algorithm", "learners", "global_batch"])
    for run in configurations.itertuples():
        where = regime(run.global_batch, scale) if math.isfinite(scale) else "no regime said"
        print(f"  {run.algorithm} at {run.learners}: global batch {run.global_batch:,} ({where})")


def print_prediction(study, priced, folder: Path) -> None:
    """Each planned configuration's time to the accuracy SEQ reaches, predicted from a pilot
    (asrscale.analysis.predict), with what it assumes; loudly where the pilot is another's."""
    from asrscale.analysis.predict import (
        configurations_of,
        differences,
        own_penalties,
        predict,
        read_pilot,
        seq_epochs,
        soonest,
        standing_records,
    )

    pilot = read_pilot(folder)
    configurations = configurations_of(priced)
    seq = configurations[configurations.algorithm == "seq"].iloc[0]
    warning = differences(pilot, study.corpus, seq)
    penalties = own_penalties(standing_records(Path("records")))  # a checkout's
    table = predict(configurations, pilot, penalties)
    print(f"\ntime to accuracy, predicted from {pilot.said()}")
    if warning:
        print(
            "WARNING: this pilot is not this study's SEQ: "
            + "; ".join(warning)
            + ". Every prediction below rests on its statistics; run studies/pilot.yaml over this "
            "study for its own."
        )
    epochs, why = seq_epochs(int(seq.budget), pilot)
    print(
        f"the target: the dev TER SEQ reaches in {epochs} epochs ({why}); each configuration's "
        "epochs below are to that target"
    )
    print(_prediction_shown(table).to_string(index=False))
    print("soonest to the target, " + "; ".join(soonest(table)))
    print(
        "assumed: the steps model (McCandlish et al. 2018), a global batch B needing "
        f"(1 + B/B_noise) / (1 + {seq.global_batch}/B_noise) times SEQ's epochs, B_noise the "
        "pilot's (its band the noise scale's range over its last epochs); each epoch as priced "
        "above, with its band; each algorithm's own penalty beyond its batch as the recorded "
        "studies' SSGD controls measured it on the built-in corpus (records/), else as SSGD at "
        "its batch"
    )
    beyond = table[table.epochs > table.budget]
    for row in beyond.itertuples():
        if row.epochs != float("inf"):
            print(
                f"  {row.algorithm} at {row.learners}: {row.epochs:.0f} epochs, beyond the "
                f"{row.budget} it is given: its runs would end short of the target"
            )
    if warning:
        print(f"WARNING (again): the pilot is another setting's: {'; '.join(warning)}")


def _prediction_shown(table):
    import pandas as pd

    def band(value, low, high, decimals=1):
        if value == float("inf"):
            return "never"
        return f"{amount(value, decimals)} ({amount(low, decimals)}-{amount(high, decimals)})"

    return pd.DataFrame(
        {
            "algorithm": table.algorithm,
            "learners": table.learners,
            "global_batch": table.global_batch,
            "epochs": [band(*v) for v in zip(table.epochs, table.epochs_low, table.epochs_high)],
            "wall_hours": [
                band(*(x / 3600 for x in v), 2)
                for v in zip(table.time_s, table.time_s_low, table.time_s_high)
            ],
            "device_hours": [
                band(*v, 2)
                for v in zip(table.device_hours, table.device_hours_low, table.device_hours_high)
            ],
            "speedup": [f"{s:.2f}×" if s > 0 else "–" for s in table.speedup],
            "own penalty beyond its global batch": table.penalty,
        }
    )


def check(args):
    from asrscale import jobs
    from asrscale.config.files import (
        named_in_files,
        profile_file,
        profile_resources,
        read_config_file,
        read_config_files,
    )
    from asrscale.errors import ConfigError
    from asrscale.inputs import checked_study

    try:
        study = checked_study(read_config_files(args.configfile))
    except ConfigError as error:
        raise named_in_files(error, args.configfile) from None
    print(
        f"{' '.join(map(str, args.configfile))}: every key and path checked; study {study.name}, "
        f"{len(study.runs())} runs"
    )
    if args.profile:
        path = profile_file(args.profile)
        defaults, by_rule = profile_resources(read_config_file(path))
        warning = jobs.on_gpus(study.config) and jobs.partition_warning(
            by_rule, defaults.get("slurm_partition")
        )
        print(
            f"warning: {path}: {warning}"
            if warning
            else f"{path}: every GPU job's partition agrees"
        )


def amount(value: float, decimals: int = 0) -> str:
    """A price as a plan prints it: to `decimals` places where they leave two significant figures,
    else to three, so that a small study's seconds and hours read as more than zero."""
    return (
        f"{value:,.{decimals}f}" if value >= 10 ** (1 - decimals) or value == 0 else f"{value:.3g}"
    )


def print_decidable(decides):
    """Which claims' halves the planned study can decide, and why it cannot decide the others."""
    both = decides.speedups.nunique() > 1  # a study of both worlds decides each kind apart
    named = [
        f"{half.claim} ({half.half}{', ' + half.speedups if both else ''})"
        for half in decides.itertuples()
    ]
    can = [name for name, ok in zip(named, decides.can_decide) if ok]
    print(
        f"\nit can decide {len(can)} of the {len(decides)} claims' halves, if their runs converge:"
    )
    print("\n".join(f"  {name}" for name in can) or "  none")
    print("it cannot decide the others, whatever its runs measure:")
    for name, row in zip(named, decides.itertuples()):
        if not row.can_decide:
            print(f"  {name}: {row.why_not}")


def backtest(args):
    from asrscale.analysis.convergence import BOUND_FACTOR, EXCEEDANCES, NOISE
    from asrscale.analysis.records import backtest_records

    found = backtest_records(args.records)
    print(f"{found['curves']} curves in {len(args.records)} records")
    for measure, noise in found["noise"].items():
        print(
            f"{measure}: one epoch's noise {100 * noise:.2f}% (in use {100 * NOISE[measure]:.2f}%)"
        )
    for name in ("in_use", "smallest"):
        test = found[name]
        print(
            f"bound factor {test.factor:g} ({name.replace('_', ' ')}): {test.exceedances} "
            f"exceedances in {test.cuts} cut points ({100 * test.share:.2f}%; at most "
            f"{100 * EXCEEDANCES:g}%)"
        )
    if found["smallest"].factor != BOUND_FACTOR:
        raise UserError(f"the bound's constant in use ({BOUND_FACTOR:g}) is not the back-test's")


def validate_prediction(args):
    from asrscale.analysis.predict import read_pilot, standing_records, validation

    pilot = read_pilot(args.pilot)
    table = validation(standing_records(args.records), pilot.noise, args.margins)
    print(f"the steps model on {args.records}'s standing records, from {pilot.said()}")
    print(table.round(2).to_string(index=False))


def results(args):
    from asrscale.analysis.summary import render
    from asrscale.io import atomic_write_text

    atomic_write_text(args.out, render(args.records))


def screenshot(args):
    from asrscale.analysis.screenshot import capture

    capture(args.report, args.out)


def report(args):
    from asrscale.analysis.report import make_report
    from asrscale.config.sections import ReportStage

    settings = read_settings_of(ReportStage, args.settings)
    make_report(
        args.tables,
        args.lm_statistics,
        args.published_speedups,
        args.figures,
        settings.title,
        args.out,
        args.skipped,
        settings.config,
    )


def study_results(args):
    from asrscale.analysis.results import results_markdown
    from asrscale.analysis.tables import load
    from asrscale.config.sections import ReportStage
    from asrscale.io import atomic_write_text

    settings = read_settings_of(ReportStage, args.settings)
    atomic_write_text(
        args.out, results_markdown(load(args.tables), settings.config, settings.title)
    )


def interim(args):
    from asrscale.analysis.interim import interim_report

    said = interim_report(
        args.study, args.out or Path("reports") / f"{args.study.name}.interim.html"
    )
    print(f"an interim report: {said}")


def record(args):
    from asrscale.analysis.records import write_record

    write_record(
        args.tables,
        args.lm_statistics,
        args.published_speedups,
        args.skipped,
        args.settings,
        args.out,
    )


def rerender(args):
    from asrscale.analysis.records import rerender as render_again

    render_again(args.record, args.out, args.figures)


PATH = {"type": Path, "required": True}
SETTINGS = ("--settings", {"type": Path, "required": True, "help": "the stage's settings file"})
TABLES = (
    "--tables",
    {"type": Path, "nargs": "+", "required": True, "help": "the study's gathered tables"},
)
SKIPPED = (
    "--skipped",
    {
        "type": Path,
        "nargs": "*",
        "default": [],
        "help": "folders whose skipped.tsv lists the utterances left out",
    },
)
PART = [("--part", {"type": int, "default": 0}), ("--parts", {"type": int, "default": 1})]


def paths(*names: str) -> list:
    """Required path arguments --<name>."""
    return [(f"--{name}", PATH) for name in names]


#: every command of the CLI (the stages' and the tools'): its function (whose name, dashed, names
#: the command), what it does, its arguments (sections.STAGES are the stages with a settings file)
COMMANDS = [
    (synth, "synthesise one part of the built-in corpus", [SETTINGS, *PART, *paths("out")]),
    (
        import_data,
        "import one subset of your own corpus from its sources",
        [SETTINGS, *paths("out")],
    ),
    (combine_data, "merge data dirs", [*paths("out"), ("parts", {"type": Path, "nargs": "+"})]),
    (tokens, "the token set of a training text", paths("data", "out")),
    (
        language_model,
        "decoding's word n-gram LM as an ARPA file: estimated from the training text, or your own "
        "folded as the transcripts are; checked against the dev transcripts",
        [SETTINGS, *paths("data", "dev-data", "tokens", "out")],
    ),
    (
        lm_statistics,
        "the language model's perplexity, out-of-vocabulary rate and n-gram coverage on dev and "
        "test",
        [
            *paths("lm", "train-data", "dev-data", "out"),
            (
                "--test-data",
                {"type": Path, "nargs": "+", "required": True, "help": "each test set's data dir"},
            ),
        ],
    ),
    (
        features,
        "extract features of one part of a data dir",
        [
            SETTINGS,
            *paths("data"),
            *PART,
            *paths("out"),
            (
                "--cache",
                {"type": Path, "help": "reuse features computed before, one file per utterance"},
            ),
        ],
    ),
    (
        combine_features,
        "merge feature parts",
        [*paths("out"), ("parts", {"type": Path, "nargs": "+"})],
    ),
    (
        shard,
        "balanced shards for P learners",
        [*paths("feats"), ("--learners", {"type": int, "required": True}), *paths("out")],
    ),
    (
        calibrate,
        "time the model on this machine for the cost model of simulated runs",
        [SETTINGS, *paths("train-data", "train-feats", "tokens", "out")],
    ),
    (
        train,
        "train one run: one MPI rank per learner, or all learners simulated on a hardware profile",
        [
            SETTINGS,
            *paths("train-data", "dev-data", "train-feats", "dev-feats", "shards", "tokens", "out"),
            (
                "--calibration",
                {"type": Path, "help": "a simulated run: this machine's calibration"},
            ),
            (
                "--cores",
                {
                    "type": int,
                    "help": "a simulated run: the cores it computes with (default: all it may use)",
                },
            ),
            (
                "--rung",
                {
                    "type": Path,
                    "help": "a halved grid's run: to the rung these halving settings name",
                },
            ),
            (
                "--halving",
                {
                    "type": Path,
                    "help": "a halved grid's run: on from its rung as this decision says",
                },
            ),
        ],
    ),
    (
        log_probs,
        "a run's model on its dev and test sets, once: each utterance's log-probabilities and "
        "greedy hypothesis",
        [
            SETTINGS,
            *paths("model", "train-feats", "out"),
            (
                "--data",
                {"type": Path, "nargs": "+", "required": True, "help": "each subset's data dir"},
            ),
            (
                "--feats",
                {
                    "type": Path,
                    "nargs": "+",
                    "required": True,
                    "help": "each subset's features, in that order",
                },
            ),
        ],
    ),
    (
        decode,
        "decode the test sets greedily and with the LM (its weights chosen on dev) from their "
        "log-probabilities, the beam search over a pool of processes, and score both",
        [
            SETTINGS,
            *paths("log-probs", "lm"),
            (
                "--test-sets",
                {
                    "nargs": "+",
                    "required": True,
                    "help": "the test sets' names (test, test-<name>)",
                },
            ),
            ("--processes", {"type": int, "default": 1, "help": "the beam search's processes"}),
            (
                "--out",
                {
                    "type": Path,
                    "required": True,
                    "help": "the run's folder: each set's scores in <out>/<set>",
                },
            ),
        ],
    ),
    (
        tune,
        "choose a configuration's settings among its grid's runs by their best dev loss "
        "(study.tuning)",
        [
            *paths("out"),
            (
                "--runs",
                {"type": Path, "nargs": "+", "required": True, "help": "the grid's run folders"},
            ),
        ],
    ),
    (
        halve,
        "a grid halved at its rung: its runs of lowest dev loss so far go on, the others stop "
        "(study.tuning.halving)",
        [
            SETTINGS,
            *paths("out"),
            ("--rungs", {"type": Path, "nargs": "+", "required": True, "help": "its rung.json"}),
        ],
    ),
    (
        adopt,
        "the chosen grid run as its configuration's tuned run at the tuning seed (trained once)",
        [
            ("--choice", PATH),
            ("--settings", {**PATH, "help": "the tuned run's settings"}),
            *paths("out"),
        ],
    ),
    (
        clear_shared_memory,
        "remove the MPI shared memory that killed ranks of this SLURM job left on this machine, "
        "which its requeued ranks would take for their own",
        [
            (
                "--job",
                {
                    "default": os.environ.get("SLURM_JOB_ID"),
                    "help": "the job (default: $SLURM_JOB_ID)",
                },
            )
        ],
    ),
    (gather, "gather a study's runs into tables", [SETTINGS, *paths("out")]),
    (
        fit_cost_model,
        "fit the cost model's shared parameters over the studies' published figures, and check "
        "each figure out of sample",
        [
            (
                "--out",
                {
                    "type": Path,
                    "default": None,
                    "help": "default: the package's src/asrscale/worlds/fitted.yaml",
                },
            ),
            (
                "--workers",
                {"type": int, "default": 2, "help": "processes fitting the leave-one-out fits"},
            ),
        ],
    ),
    (
        replay_published,
        "replay the studies' published speedups on the cost model, each on its setup",
        [
            (
                "--figures",
                {
                    "type": Path,
                    "default": None,
                    "help": "figures in published.yaml's form (default: it)",
                },
            ),
            *paths("out"),
        ],
    ),
    (
        plan,
        "price a study before it is queued: each run's modelled epoch and device-hours "
        "on a profile",
        [
            (
                "--configfile",
                {
                    "type": Path,
                    "nargs": "+",
                    "default": [Path("config.yaml")],
                    "help": "config.yaml and the files over it, as given to snakemake (default: "
                    "config.yaml)",
                },
            ),
            (
                "--hardware",
                {"required": True, "help": "the profile to price it on (h100, or one of your own)"},
            ),
            ("--out", {"type": Path, "default": None, "help": "write the table as TSV"}),
            (
                "--pilot",
                {
                    "type": Path,
                    "default": None,
                    "help": "a pilot's results (results/<corpus>/studies/<pilot>) or record: "
                    "predict each configuration's time to accuracy (studies/pilot.yaml)",
                },
            ),
        ],
    ),
    (
        check,
        "check config.yaml and the files over it before Snakemake reads them: a typo by its file, "
        "line and column, an unknown key with the nearest one, every path; with --profile, a GPU "
        "job left without the GPU partition",
        [
            (
                "--configfile",
                {
                    "type": Path,
                    "nargs": "+",
                    "default": [Path("config.yaml")],
                    "help": "config.yaml and the files over it, as given to snakemake (default: "
                    "config.yaml)",
                },
            ),
            ("--profile", {"default": None, "help": "your SLURM profile: its folder or name"}),
        ],
    ),
    (
        screenshot,
        "the top of a report as a laptop shows it, as a PNG (headless Chromium)",
        paths("report", "out"),
    ),
    (
        record,
        "a study's record: the files of its report, gzipped, to keep in the repository "
        "(records/<study>)",
        [
            SETTINGS,
            *paths("lm-statistics", "published-speedups", "out"),
            TABLES,
            SKIPPED,
        ],
    ),
    (
        backtest,
        "the convergence rule's noise and bound measured again on recorded studies",
        [("records", {"type": Path, "nargs": "+", "help": "records/<study> folders"})],
    ),
    (
        validate_prediction,
        "the time-to-accuracy prediction's steps model against the recorded studies: each "
        "configuration's epochs to a target within a margin of SEQ's best dev TER, predicted from "
        "a pilot's noise scale and measured",
        [
            ("--pilot", {**PATH, "help": "a pilot's record or results folder"}),
            ("--records", {"type": Path, "default": Path("records"), "help": "default: records"}),
            (
                "--margins",
                {
                    "type": float,
                    "nargs": "+",
                    "default": [0.05, 0.25, 0.5],
                    "help": "targets, each a share above SEQ's best dev TER (default: 0.05 0.25 "
                    "0.5)",
                },
            ),
        ],
    ),
    (
        results,
        "RESULTS.md: what the recorded studies decide today (records/index.yaml)",
        [
            ("--records", {"type": Path, "default": Path("records"), "help": "default: records"}),
            ("--out", {"type": Path, "default": Path("RESULTS.md"), "help": "default: RESULTS.md"}),
        ],
    ),
    (
        rerender,
        "a recorded study's report and verdicts, made again from its record without training",
        [
            *paths("record", "out"),
            ("--figures", {"type": Path, "required": True, "help": "where its figures go"}),
        ],
    ),
    (
        interim,
        "a study's report over the runs finished so far, marked as interim (the workflow may "
        "still be running)",
        [
            ("--study", {**PATH, "help": "the study's folder: results/<corpus>/studies/<study>"}),
            (
                "--out",
                {"type": Path, "default": None, "help": "default: reports/<study>.interim.html"},
            ),
        ],
    ),
    (
        study_results,
        "a study's RESULTS.md: per test set, each algorithm's WER with the LM and greedily, with "
        "their intervals, and its speedup with what it rests on",
        [
            SETTINGS,
            *paths("out"),
            TABLES,
        ],
    ),
    (
        report,
        "render the HTML report",
        [
            SETTINGS,
            *paths("lm-statistics", "published-speedups", "figures", "out"),
            TABLES,
            SKIPPED,
        ],
    ),
]


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="asrscale", description=__doc__)
    commands = top.add_subparsers(dest="command", required=True)
    for function, help_text, arguments in COMMANDS:
        sub = commands.add_parser(function.__name__.replace("_", "-"), help=help_text)
        for name, kwargs in arguments:
            sub.add_argument(name, **kwargs)
        sub.set_defaults(run=function)
    return top


def main(argv=None):
    # a crash in native code (a signal: abort, segfault) prints every thread's Python stack into
    # the job's log, where otherwise a launcher reports only an exit code
    faulthandler.enable()
    machine.pin()  # before any arithmetic: study.cpu_arithmetic, as the workflow passes it
    args = parser().parse_args(argv)
    try:
        args.run(args)
    except UserError as error:  # one line; a traceback is for our bugs (asrscale.errors)
        sys.exit(f"asrscale {args.run.__name__.replace('_', '-')}: {error}")


if __name__ == "__main__":
    main()
