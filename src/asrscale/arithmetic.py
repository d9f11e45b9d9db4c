"""Which code path this process's CPU arithmetic takes, so that a study computes the same bits on
any x86 machine with AVX2 (study.cpu_arithmetic, docs/internals.md "The same bits on any
machine").

PyTorch's CPU kernels follow the processor, and each code path sums in an order of its own. ATen's
vectorised kernels (softmax, the clip's norm, the optimizer's steps) are built for several
instruction sets, and the widest the CPU has is chosen (AVX-512, else AVX2). oneDNN, which computes
the LSTM, compiles its kernels for the widest instruction set it finds. MKL, which computes the
other matrix products, picks a path by processor, and on a processor not Intel's runs a path of its
own whatever branch is asked for, but its compatible one. Two machines then round differently, and
training grows the difference, an asynchronous algorithm's the most.

`pin` sets, before any arithmetic, one path that every x86 processor with AVX2 takes alike:
ATEN_CPU_CAPABILITY=avx2, ONEDNN_MAX_CPU_ISA=AVX2 and MKL_CBWR=COMPATIBLE (MKL's SSE2 path, the
one it keeps the same on every vendor's processor). "native" leaves each library the machine's
fastest. A processor without AVX2, or not x86, stays native: AVX2 forced there would stop the
process at its first such instruction. A GPU's kernels are its own."""

import os
from pathlib import Path

SETTINGS = ("avx2", "native")
#: the environment variable that carries study.cpu_arithmetic to every job (and its MPI ranks)
VARIABLE = "ASRSCALE_CPU_ARITHMETIC"
PINNED = {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_CBWR": "COMPATIBLE"}


def has_avx2(cpuinfo: Path = Path("/proc/cpuinfo")) -> bool:
    """Whether this processor is x86 with AVX2 and FMA (as Linux's /proc/cpuinfo says; where it
    says nothing, not known: no)."""
    try:
        text = cpuinfo.read_text()
    except OSError:
        return False
    flags = next((line for line in text.splitlines() if line.startswith("flags")), "")
    return {"avx2", "fma"} <= set(flags.partition(":")[2].split())


def pin(setting: str | None = None) -> str:
    """This process's arithmetic, and every process it starts, pinned to `setting` (by default the
    environment's VARIABLE, else "avx2"); returns the setting in effect ("native" where the
    processor cannot take the pinned path). Each library reads its variable when it first
    computes, so this comes before any arithmetic (`described` records what took effect)."""
    setting = setting or os.environ.get(VARIABLE, "avx2")
    if setting not in SETTINGS:
        raise ValueError(f"{VARIABLE} (study.cpu_arithmetic) is one of {SETTINGS}, not {setting!r}")
    if setting == "avx2" and has_avx2():
        os.environ.update(PINNED)
    else:
        setting = "native"
    os.environ[VARIABLE] = setting
    return setting


def described() -> dict:
    """The arithmetic in effect, for a run's record: the setting, its variables and the kernels
    ATen chose."""
    import torch

    return {
        "setting": os.environ.get(VARIABLE, "native"),
        **{name: os.environ.get(name) for name in PINNED},
        "aten": torch.backends.cpu.get_cpu_capability(),
    }
