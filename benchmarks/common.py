"""What the benchmarks share: the corpus they run on, the study's default settings, figures,
and child processes (each measurement that needs a clean process, MPI ranks or its own peak
memory runs in one)."""

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
CORPUS = "bench"


def simulated_learners(quick: bool) -> int:
    """How many learners the simulation's figures simulate: the studies' largest scale, 64; 8 when
    quick (the tests' run, whose tiny corpus gives 64 learners two or three utterances each)."""
    return 8 if quick else 64


@dataclass
class Bench:
    """A benchmark run: where its corpus lives and how hard to measure."""

    work: Path
    quick: bool
    config: dict  # the study configuration the corpus was made with: config.yaml's settings
    figures: list = field(default_factory=list)

    @property
    def repetitions(self) -> int:
        return 1 if self.quick else 5

    @property
    def learners(self) -> int:
        return simulated_learners(self.quick)

    def path(self, template: str, **fields) -> Path:
        """A path of the benchmarks' corpus and study (a template of asrscale.config.paths)."""
        return self.work / template.format(corpus=CORPUS, study=CORPUS, **fields)

    def scratch(self, name: str) -> Path:
        """An empty folder for one measurement."""
        folder = self.work / "scratch" / name
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        return folder

    def add(
        self,
        benchmark: str,
        name: str,
        value: float,
        unit: str = "",
        target: str | None = None,
        **details,
    ):
        """Record one figure; `target` is a comparison such as "<= 1.05" that the value must
        meet."""
        met = None
        if target is not None:
            op, bound = target.split()
            met = bool(value <= float(bound)) if op == "<=" else bool(value >= float(bound))
        row = {
            "benchmark": benchmark,
            "figure": name,
            "value": value,
            "unit": unit,
            "target": target,
            "met": met,
        }
        self.figures.append({**row, "details": details})
        shown = f"{value:.3g}" if isinstance(value, float) else value
        verdict = "" if met is None else "  (target met)" if met else "  (TARGET MISSED)"
        print(
            f"  {name}: {shown} {unit}{'  target ' + target if target else ''}{verdict}", flush=True
        )


def default_config() -> dict:
    return yaml.safe_load((ROOT / "config.yaml").read_text())


def corpus_config(quick: bool) -> dict:
    """config.yaml's study: its corpus, features, model and batch (a tiny corpus when quick)."""
    config = default_config()
    config["corpus"] = dict(config["corpus"], name=CORPUS)
    if quick:
        tiny = {"train": 160, "dev": 16, "test": 8}
        config["corpus"]["builtin"] = dict(config["corpus"]["builtin"], utterances=tiny)
    # its figures are wall times measured in one run, and its profile's clock takes no time of this
    # machine: a calibration on a busy machine stops nothing
    config["study"] = dict(config["study"], name=CORPUS, busy_machine="go-on")
    return config


def prepare(work: Path, quick: bool) -> Bench:
    """Make (or reuse) the corpus, its features, shards and this machine's calibration with the
    workflow's own rules."""
    work.mkdir(parents=True, exist_ok=True)
    config = corpus_config(quick)
    configfile = work / "config.yaml"
    configfile.write_text(yaml.safe_dump(config, sort_keys=False))
    from asrscale.config import paths

    targets = [
        template.format(corpus=CORPUS, study=CORPUS, subset=subset, learners=learners)
        for template in (
            paths.FEATURES,
            paths.LANGUAGE_MODEL,
            paths.TOKENS,
            paths.SHARDS,
            paths.CALIBRATION,
        )
        for subset in ("train", "dev", "test")
        for learners in (1, 4, simulated_learners(quick))  # 4: the default study's
    ]
    command = [
        sys.executable,
        "-m",
        "snakemake",
        "--snakefile",
        ROOT / "Snakefile",
        "--directory",
        work,
        "--configfile",
        configfile,
        "--cores",
        "2",
        *targets,
    ]
    result = subprocess.run(list(map(str, command)), capture_output=True, text=True)
    (work / "prepare.log").write_text(result.stdout + result.stderr)
    if result.returncode != 0:
        log = work / "prepare.log"
        raise RuntimeError(
            f"preparing the benchmark corpus failed; see {log}:\n{result.stderr[-3000:]}"
        )
    return Bench(work, quick, config)


def settings(work: Path) -> dict:
    """The configuration a prepared benchmark corpus was made with (for child processes)."""
    return yaml.safe_load((work / "config.yaml").read_text())


@dataclass(frozen=True)
class PreparedCorpus:
    """A prepared corpus and its study as the workflow resolves it (`asrscale.config.study`), for
    child processes: `seq` is SEQ's run as the study trains it."""

    work: Path
    resolved: object  # asrscale.config.study.Study
    seq: object  # asrscale.config.sections.RunConfig
    tokens: object  # Tokens

    @classmethod
    def of(cls, work: Path) -> "PreparedCorpus":
        from asrscale.config import paths
        from asrscale.config.runs import Run
        from asrscale.config.sections import RunConfig
        from asrscale.config.study import Study as Resolved
        from asrscale.data.tokens import Tokens

        resolved = Resolved(settings(work))
        seq = RunConfig.from_settings(
            resolved.run_settings(Run("simulated", "seq", "default", 1, 1))
        )
        return cls(Path(work), resolved, seq, Tokens.read(Path(work) / resolved.at(paths.TOKENS)))

    def settings_file(
        self,
        folder: Path,
        algorithm: str,
        learners: int,
        world: str = "simulated",
        fuse: str = "auto",
        **train,
    ) -> Path:
        """A run's settings file, as the workflow writes it, with `train` changes (a simulated
        world's learners fused as study.fuse_learners `fuse` has them)."""
        from asrscale.config.runs import Run
        from asrscale.io import atomic_write_json

        settings = self.resolved.run_settings(Run(world, algorithm, "default", learners, 1))
        settings["train"].update(train)
        if world == "simulated":
            settings["world"]["fuse_learners"] = fuse
        atomic_write_json(folder / "settings.json", settings)
        return folder / "settings.json"

    def path(self, template: str, **fields) -> Path:
        """A path of the prepared corpus and study (a template of asrscale.config.paths)."""
        return self.work / self.resolved.at(template, **fields)

    def subset(self, name: str):
        """A subset of the prepared corpus, normalised as training normalises it."""
        from asrscale.config import paths
        from asrscale.data.batches import Subset

        data, feats = self.path(paths.DATA, subset=name), self.path(paths.FEATURES, subset=name)
        return Subset(
            data, feats, self.path(paths.FEATURES, subset="train"), self.seq.cmvn, self.tokens
        )

    def train(self, settings: Path, learners: int, out: Path) -> float:
        """`asrscale train` of one run in this process, as the workflow starts it: its wall
        seconds."""
        from asrscale import cli
        from asrscale.config import paths

        argv = [
            "train",
            "--settings",
            settings,
            *self.corpus_arguments("train", "dev"),
            "--shards",
            self.path(paths.SHARDS, learners=learners),
            "--tokens",
            self.path(paths.TOKENS),
            "--out",
            out,
        ]
        if learners > 1:
            argv += ["--calibration", self.path(paths.CALIBRATION)]
        with Stopwatch() as watch:
            cli.main(list(map(str, argv)))
        return watch.seconds

    def corpus_arguments(self, *subsets: str) -> list:
        """`asrscale train`'s and `calibrate`'s arguments that name a subset's data dir and
        features."""
        from asrscale.config import paths

        return [
            argument
            for name in subsets
            for argument in (
                f"--{name}-data",
                self.path(paths.DATA, subset=name),
                f"--{name}-feats",
                self.path(paths.FEATURES, subset=name),
            )
        ]

    def build_model(self):
        from asrscale.models import build_model

        return build_model(self.seq.model, self.seq.features.dim, len(self.tokens))


def median(values) -> float:
    return float(statistics.median(values))


def peak_rss_mb() -> float:
    """This process's peak resident memory so far: Linux's VmHWM, which starts afresh in a new
    program (getrusage's ru_maxrss is kept across fork and exec, so a child would report its
    parent's peak where that is higher), else ru_maxrss."""
    status = Path("/proc/self/status")
    if status.exists():
        return (
            next(
                int(line.split()[1])
                for line in status.read_text().splitlines()
                if line.startswith("VmHWM")
            )
            / 1024
        )
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def one_thread_environment() -> dict:
    """The environment Snakemake gives a one-thread job: its numerical libraries use one thread."""
    variables = ("OMP", "GOTO", "OPENBLAS", "MKL", "NUMEXPR")
    return dict(
        os.environ, VECLIB_MAXIMUM_THREADS="1", **{f"{v}_NUM_THREADS": "1" for v in variables}
    )


def child(
    bench: Bench,
    module: str,
    *arguments,
    ranks: int = 0,
    env: dict | None = None,
    timeout: float = 900,
):
    """Run `python -m benchmarks.<module> <arguments>` (on `ranks` MPI ranks when given) in the
    corpus's folder, whose feature tables hold paths relative to it; it prints its figures as
    JSON on its last line of output."""
    command = [sys.executable, "-m", f"benchmarks.{module}", *map(str, arguments)]
    if ranks:
        launcher = shutil.which("mpiexec", path=str(Path(sys.executable).parent)) or "mpiexec"
        command = [launcher, "-n", str(ranks), *command]
    env = dict(env or os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "src")]))
    result = subprocess.run(
        command, cwd=bench.work, capture_output=True, text=True, timeout=timeout, env=env
    )
    if result.returncode != 0:
        raise RuntimeError(
            f"{' '.join(command)} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}"
        )
    return json.loads(result.stdout.strip().splitlines()[-1])


def report(payload: dict) -> None:
    """A child's figures, as the last line of its output."""
    print(json.dumps(payload), flush=True)


def child_main(measure, **arguments) -> None:
    """A child process's entry: its command-line arguments (name=type, in order) go to `measure`,
    and what that returns is reported (on MPI ranks, only rank 0 returns figures)."""
    parser = argparse.ArgumentParser()
    for name, kind in arguments.items():
        parser.add_argument(name, type=kind)
    figures = measure(**vars(parser.parse_args()))
    if figures is not None:
        report(figures)


class Stopwatch:
    def __enter__(self):
        self.start = time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.seconds = time.perf_counter() - self.start
