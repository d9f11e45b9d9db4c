"""What a study needs of the machine it runs on, without torch: its CPU's arithmetic on one code
path (`pin`), whether its calibration may keep a busy machine's rates (`BUSY_MACHINE`), and its
wall time scaled to this machine's speed (`wall_time_here`).

The same bits on any machine (study.cpu_arithmetic). PyTorch's CPU kernels follow the processor,
and each code path sums in an order of its own. ATen's vectorised kernels (softmax, the clip's
norm, the optimizer's steps) are built for several instruction sets, and the widest the CPU has is
chosen (AVX-512, else AVX2). oneDNN, which computes the LSTM, compiles its kernels for the widest
instruction set it finds. MKL, which computes the other matrix products, picks a path by processor,
and on a processor not Intel's runs a path of its own whatever branch is asked for, but its
compatible one. Two machines then round differently, and training grows the difference, an
asynchronous algorithm's the most. `pin` sets, before any arithmetic, one path that every x86
processor with AVX2 takes alike: ATEN_CPU_CAPABILITY=avx2, ONEDNN_MAX_CPU_ISA=AVX2 and
MKL_CBWR=COMPATIBLE (MKL's SSE2 path, the one it keeps the same on every vendor's processor).
"native" leaves each library the machine's fastest. A processor without AVX2, or not x86, stays
native: AVX2 forced there would stop the process at its first such instruction. A GPU's kernels
are its own."""

import os
from pathlib import Path

from asrscale.progress import clock

SETTINGS = ("avx2", "native")
#: the environment variables that carry study.cpu_arithmetic to every job (and its MPI ranks), and
#: study.busy_machine to its calibration: changing either reruns nothing
ARITHMETIC = "ASRSCALE_CPU_ARITHMETIC"
BUSY_MACHINE = "ASRSCALE_BUSY_MACHINE"
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
    environment's ARITHMETIC, else "avx2"); returns the setting in effect ("native" where the
    processor cannot take the pinned path). Each library reads its variable when it first
    computes, so this comes before any arithmetic (`described` records what took effect)."""
    setting = setting or os.environ.get(ARITHMETIC, "avx2")
    if setting not in SETTINGS:
        raise ValueError(
            f"{ARITHMETIC} (study.cpu_arithmetic) is one of {SETTINGS}, not {setting!r}"
        )
    if setting == "avx2" and has_avx2():
        os.environ.update(PINNED)
    else:
        setting = "native"
    os.environ[ARITHMETIC] = setting
    return setting


def described() -> dict:
    """The arithmetic in effect, for a run's record: the setting, its variables and the kernels
    ATen chose."""
    import torch

    return {
        "setting": os.environ.get(ARITHMETIC, "native"),
        **{name: os.environ.get(name) for name in PINNED},
        "aten": torch.backends.cpu.get_cpu_capability(),
    }


def speed(rate: float) -> str:
    """A machine's speed (the calibration's `machine_rate`), in words."""
    return f"this machine: {rate:,.0f} frames/s on one thread (the default BLSTM at batch 32)"


def wall_time_here(wall_time: dict | None, rate: float) -> str:
    """What a study's wall time (study.wall_time: its minutes on a machine whose speed on the
    calibration's reference workload was `frames_per_s`) comes to on a machine of `rate`, in
    words."""
    said = speed(rate)
    if wall_time is None:
        return f"{said}; the study states no wall time to scale (study.wall_time)"
    there, measured = wall_time["minutes"] * 60, wall_time["frames_per_s"]
    return (
        f"{said}, {rate / measured:.2f} times the {measured:,.0f} at which the study took "
        f"{clock(there)}: about {clock(there * measured / rate)} here"
    )


def said_of(calibration: dict, wall_time: dict | None) -> str:
    """A study's wall time at the speed its calibration timed (`wall_time_here`), and what that
    speed rests on."""
    if "machine_rate" not in calibration:
        return "this machine's speed: its calibration predates it (delete it to time it again)"
    said = wall_time_here(wall_time, calibration["machine_rate"])
    if calibration.get("busy"):
        said += f" (timed on a busy machine, {calibration['busy']}: alone it may run faster)"
    return said
