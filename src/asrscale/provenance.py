"""What a run records about where and how it ran, so that any number can be traced and rerun."""

import importlib.metadata
import os
import platform
import socket
import subprocess
from pathlib import Path

from asrscale import machine

PACKAGES = (
    "asrscale",
    "torch",
    "numpy",
    "mpi4py",
    "mpich",
    "kaldiio",
    "python_speech_features",
    "jiwer",
    "snakemake",
)


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def gpu_model() -> str | None:
    import torch

    return torch.cuda.get_device_name() if torch.cuda.is_available() else None


def git_commit() -> str | None:
    try:
        return subprocess.run(
            ["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5, check=True
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None


def available_cores() -> int:
    """The cores this process may run on: a SLURM job's or a cpuset's, not the whole machine's."""
    return len(os.sched_getaffinity(0)) or 1


def environment() -> dict:
    from mpi4py import MPI

    return {
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpu": cpu_model(),
        "cpu_count": os.cpu_count(),
        "gpu": gpu_model(),
        "cpu_arithmetic": machine.described(),
        "mpi": " ".join(MPI.Get_library_version().split()[:3]),
        "packages": {p: _version(p) for p in PACKAGES},
        "commit": git_commit(),
    }
