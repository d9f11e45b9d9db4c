"""Target 5: feature extraction. The workflow's stage (the `features` jobs of one subset and the
`combine-features` that follows, each a one-thread process as Snakemake starts it) against a
plain single-process loop over python_speech_features' `logfbank` on the same files, in audio
seconds per wall second (x real time)."""

import subprocess
import sys
import time
from pathlib import Path

from asrscale.config import paths
from benchmarks.common import (
    ROOT,
    Bench,
    PreparedCorpus,
    child,
    child_main,
    median,
    one_thread_environment,
)

JOBS = (1, 2)


def plain_loop(wav_scp: Path) -> dict:
    """Seconds of audio, and wall seconds to read it and compute its log-mel filterbanks."""
    import python_speech_features as psf
    import soundfile

    settings = PreparedCorpus.of(Path.cwd()).seq.features  # a child runs in the corpus's folder
    window, shift = settings.window_ms / 1000, settings.shift_ms / 1000
    nfft = 1 << (int(window * settings.sample_rate) - 1).bit_length()
    audio_s = 0.0
    start = time.perf_counter()
    for line in wav_scp.read_text().splitlines():
        signal, rate = soundfile.read(line.split(maxsplit=1)[1])
        psf.logfbank(signal, rate, window, shift, settings.bins, nfft)
        audio_s += len(signal) / rate
    return {"audio_s": audio_s, "seconds": time.perf_counter() - start}


def workflow_stage(bench: Bench, data: Path, jobs: int) -> float:
    """Wall seconds of the stage with `jobs` extraction jobs at once, then the combination."""
    from asrscale.io import atomic_write_json

    out = bench.scratch(f"features-{jobs}")
    atomic_write_json(
        out / "settings.json", PreparedCorpus.of(bench.work).resolved.stage_settings("features")
    )
    stage = [sys.executable, "-m", "asrscale"]
    env = dict(one_thread_environment(), PYTHONPATH=str(ROOT / "src"))
    options = ["--settings", str(out / "settings.json"), "--data", str(data), "--parts", str(jobs)]
    start = time.perf_counter()
    parts = [
        subprocess.Popen(
            [*stage, "features", *options, "--part", str(part), "--out", out / f"part{part}"],
            env=env,
        )
        for part in range(jobs)
    ]
    if any(part.wait() for part in parts):
        raise RuntimeError("a feature extraction job failed")
    subprocess.run(
        [*stage, "combine-features", "--out", out, *[out / f"part{p}" for p in range(jobs)]],
        env=env,
        check=True,
    )
    return time.perf_counter() - start


def run(bench: Bench) -> None:
    data = bench.path(paths.DATA, subset="train")
    settings = PreparedCorpus.of(bench.work).seq.features
    if settings.kind != "fbank":
        raise ValueError("the plain loop computes config.yaml's default features: kind fbank")
    repetitions = 1 if bench.quick else 3
    loop, stage = [], {jobs: [] for jobs in JOBS}
    for _ in range(repetitions):
        measured = child(bench, "features", data / "wav.scp", env=one_thread_environment())
        audio_s = measured["audio_s"]
        loop.append(measured["seconds"])
        for jobs in JOBS:
            stage[jobs].append(workflow_stage(bench, data, jobs))
    loop_rate = audio_s / median(loop)
    for jobs in JOBS:
        rate = audio_s / median(stage[jobs])
        bench.add(
            "features",
            f"throughput, workflow stage with {jobs} job(s) / plain python_speech_features loop",
            rate / loop_rate,
            "x",
            ">= 1.8" if jobs == 2 else None,
            stage_s=stage[jobs],
            loop_s=loop,
            audio_s=audio_s,
        )
        bench.add(
            "features", f"workflow stage with {jobs} job(s), per core", rate / jobs, "x real time"
        )
    bench.add("features", "plain python_speech_features loop, one core", loop_rate, "x real time")
    bench.add(
        "features",
        "parallel efficiency, 2 jobs / (2 x 1 job)",
        median(stage[1]) / median(stage[2]) / 2,
        "",
    )


if __name__ == "__main__":
    child_main(plain_loop, wav_scp=Path)
