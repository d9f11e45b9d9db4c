"""`asrscale <stage>`: the commands the workflow's rules call, one per stage."""

import argparse
import json
import sys
from pathlib import Path


def _json(text: str) -> dict:
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise argparse.ArgumentTypeError(f"not JSON: {error}") from None


def synth(args):
    from asrscale.data.corpus.synthetic import SyntheticConfig, synthesise_part

    config = SyntheticConfig(**args.config)
    for subset, data in synthesise_part(config, args.part, args.parts, args.out / "audio").items():
        data.write(args.out / subset)


def import_data(args):
    from asrscale.data.badinput import BadInputPolicy
    from asrscale.data.corpus.sources import ImportSettings, TextNormalisation, import_subset
    from asrscale.data.features import FeatureConfig

    parts = (FeatureConfig, "features"), (TextNormalisation, "text"), (BadInputPolicy, "bad_input")
    settings = ImportSettings(*(kind(**args.settings.get(key, {})) for kind, key in parts))
    data = import_subset(args.sources, settings, args.out)
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


def features(args):
    from asrscale.data.badinput import BadInputPolicy
    from asrscale.data.datadir import read_data_dir
    from asrscale.data.features import FeatureCache, FeatureConfig, extract_part

    data, config, cache = (
        read_data_dir(args.data),
        FeatureConfig(**args.config),
        args.cache and FeatureCache(args.cache),
    )
    extract_part(data, config, args.part, args.parts, args.out, BadInputPolicy(**args.bad_input), cache)


def combine_features(args):
    from asrscale.data.features import combine_parts

    combine_parts(args.parts, args.out)


def shard(args):
    from asrscale.data.features import read_frame_counts
    from asrscale.data.shard import write_shards

    write_shards(read_frame_counts(args.feats), args.learners, args.out)


def calibrate(args):
    import yaml

    from asrscale.data.batches import Subset
    from asrscale.data.features import FeatureConfig
    from asrscale.data.tokens import Tokens
    from asrscale.io import atomic_write_json
    from asrscale.provenance import environment
    from asrscale.training.loop import TrainConfig
    from asrscale.training.models import ModelConfig
    from asrscale.worlds.costmodel import calibrate, measured_compute

    config, feature_config = TrainConfig(**args.train), FeatureConfig(**args.features)
    train_set = Subset.of(args.data, args.feats, "train", feature_config.cmvn, Tokens.read(args.tokens))
    calibration = calibrate(config, ModelConfig(**args.model), feature_config, train_set)
    calibration["environment"] = environment()
    atomic_write_json(args.out, calibration)
    print(json.dumps(calibration["by_threads"], indent=1))
    profile = {"device": "dedicated", "compute": measured_compute(calibration, calibration["environment"])}
    print(f"A profile of learners with a {calibration['device_name']} each (config.yaml hardware.<name>):")
    print(yaml.safe_dump(profile, sort_keys=False, width=120))


def _world(args, config):
    """The simulated world when a hardware profile is given, else this rank's MPI world."""
    from asrscale.training.algorithms import algorithm_class

    servers = algorithm_class(config.algorithm).servers
    learners_per_node = config.options.get("learners_per_node")
    if args.hardware:
        from asrscale.worlds.costmodel import CostModel, Hardware
        from asrscale.worlds.simulated import SimWorld

        settings = dict(args.hardware)
        hardware = Hardware.from_config(settings.pop("name"), settings)
        costs = CostModel(hardware, json.loads(args.calibration.read_text()), seed=config.seed)
        return SimWorld(args.learners, costs, servers, learners_per_node, config.prefetch, config.algorithm,
                        config.device)  # fmt: skip
    from asrscale.worlds.mpi import MPIWorld

    return MPIWorld(servers=servers, learners_per_node=learners_per_node, timeout_s=args.timeout,
                    name=config.algorithm, collectives=args.collectives, device=config.device)  # fmt: skip


def train(args):
    from asrscale.data.features import FeatureConfig
    from asrscale.training.loop import RunPaths, TrainConfig, train
    from asrscale.training.models import ModelConfig

    config = TrainConfig(**args.train)
    world = _world(args, config)
    paths = RunPaths(args.data, args.feats, args.shards, args.tokens, args.out)
    try:
        train(config, ModelConfig(**args.model), FeatureConfig(**args.features), paths, world)
    except BaseException as error:
        print(f"asrscale train: {world.label}: {type(error).__name__}: {error}", file=sys.stderr, flush=True)
        world.abort(1)
        raise


def decode(args):
    from asrscale.decoding.decode import decode_subset

    scores = decode_subset(args.model, args.data, args.feats, args.train_feats, args.out, device=args.device)
    print(json.dumps(scores))


def gather(args):
    from asrscale.analysis.report import gather_runs

    gather_runs(args.runs, args.sweeps, args.out, float(args.target_dev_loss) if args.target_dev_loss else None)


def report(args):
    from asrscale.analysis.report import render

    render(args.results, args.figures, args.title, args.out, args.skipped, args.config)


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="asrscale", description=__doc__)
    stages = top.add_subparsers(dest="stage", required=True)

    def stage(function, help_text, *arguments):
        sub = stages.add_parser(function.__name__.replace("_", "-"), help=help_text)
        for name, kwargs in arguments:
            sub.add_argument(name, **kwargs)
        sub.set_defaults(run=function)

    required_path = {"type": Path, "required": True}
    part = [("--part", {"type": int, "default": 0}), ("--parts", {"type": int, "default": 1})]
    stage(synth, "synthesise one part of the built-in corpus",
          ("--config", {"type": _json, "required": True}), *part, ("--out", required_path))  # fmt: skip
    stage(import_data, "import one subset of your own corpus from its sources",
          ("--sources", {"type": _json, "required": True, "help": "JSON list of {format, path, prefix}"}),
          ("--settings", {"type": _json, "default": {}}), ("--out", required_path))  # fmt: skip
    stage(combine_data, "merge data dirs", ("--out", required_path), ("parts", {"type": Path, "nargs": "+"}))
    stage(tokens, "the token set of a training text", ("--data", required_path), ("--out", required_path))
    stage(features, "extract features of one part of a data dir",
          ("--config", {"type": _json, "required": True}), ("--data", required_path), *part,
          ("--bad-input", {"type": _json, "default": {}}), ("--out", required_path),
          ("--cache", {"type": Path, "help": "reuse features computed before, one file per utterance"}))  # fmt: skip
    stage(combine_features, "merge feature parts", ("--out", required_path), ("parts", {"type": Path, "nargs": "+"}))
    learners = ("--learners", {"type": int, "required": True})
    stage(shard, "balanced shards for P learners", ("--feats", required_path), learners, ("--out", required_path))
    settings = [(f"--{k}", {"type": _json, "required": True}) for k in ("train", "model", "features")]
    stage(calibrate, "time the model on this machine for the cost model of simulated runs", *settings,
          *[(f"--{k}", required_path) for k in ("data", "feats", "tokens", "out")])  # fmt: skip
    stage(train, "train one run: one MPI rank per learner, or all learners simulated on a hardware profile",
          *settings, *[(f"--{k}", required_path) for k in ("data", "feats", "shards", "tokens", "out")],
          ("--timeout", {"type": float, "default": 600, "help": "MPI: seconds without progress end the job"}),
          ("--collectives", {"choices": ["auto", "mpi", "cuda-aware-mpi", "torch"], "default": "auto",
                             "help": "MPI: how models and gradients travel (see asrscale.worlds.mpi); auto: torch "
                                     "(NCCL) where every rank has a GPU of its own, else mpi"}),
          ("--hardware", {"type": _json, "help": "simulate on this hardware profile (JSON with its name)"}),
          ("--learners", {"type": int, "default": 1, "help": "simulated learners"}),
          ("--calibration", {"type": Path, "help": "simulate: this machine's calibration"}))  # fmt: skip
    stage(decode, "decode and score a subset",
          *[(f"--{k}", required_path) for k in ("model", "data", "feats", "train-feats", "out")],
          ("--device", {"choices": ["auto", "cpu", "cuda"], "default": "auto",
                        "help": "auto: a GPU where CUDA has one"}))  # fmt: skip
    runs = {"type": _json, "required": True, "help": "JSON list of {algorithm, variant, run}: what each run stands for"}
    sweeps = {"type": _json, "default": [], "help": "JSON list of {sweep, algorithm, learners, value, variant, world}"}
    stage(gather, "gather runs into one table", ("--out", required_path), ("--runs", runs), ("--sweeps", sweeps),
          ("--target-dev-loss", {"default": "", "help": "time to target: the dev loss to reach"}))  # fmt: skip
    stage(report, "render the HTML report",
          ("--results", required_path), ("--figures", required_path), ("--out", required_path),
          ("--title", {"default": "asrscale"}),
          ("--skipped", {"type": Path, "nargs": "*", "default": [], "help": "skipped-utterance reports"}),
          ("--config", {"type": _json, "default": {}, "help": "the study's configuration"}))  # fmt: skip
    return top


def main(argv=None):
    args = parser().parse_args(argv)
    args.run(args)


if __name__ == "__main__":
    main()
