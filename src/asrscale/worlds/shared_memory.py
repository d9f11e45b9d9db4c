"""The shared memory MPICH's killed ranks leave behind, removed before a SLURM job's ranks start.

MPICH 4 (the PyPI wheels') gives the ranks of a node one POSIX shared-memory segment,
/dev/shm/mpich_shm_<id>_<node> (and mpich_vci_<id>_<node>), named by the 32-bit FNV-1a hash
of its process manager's key-value space, which `srun --mpi=pmi2` names "<job id>.<step id>".
Ranks that are killed (preempted, past their time limit, cancelled) never unlink it. A job that
SLURM requeues keeps its id and numbers its steps from 0 again, so its new ranks open the killed
attempt's segment, take it for one a sibling has just made, and fail in MPI_Init ("Message
truncated" in UCX's first allgather) or hang until the time limit. So before a job's ranks start,
one task a node removes that job's segments which no process maps (docs/slurm.md).
"""

import re
from pathlib import Path

SHARED_MEMORY = Path("/dev/shm")
SEGMENT = re.compile(r"mpich_[a-z]+_([0-9a-f]+)_\d+")
#: the steps of a job whose segments are looked for (a training job runs two an attempt)
STEPS = 1000


def fnv1a(text: str) -> int:
    """The 32-bit FNV-1a hash, MPICH's (uthash's HASH_FNV)."""
    digest = 2166136261
    for byte in text.encode():
        digest = ((digest ^ byte) * 16777619) & 0xFFFFFFFF
    return digest


def segment_id(job_id: str, step: int) -> str:
    """The id in the names of job step `job_id`.`step`'s segments: the hash of its PMI key-value
    space."""
    return f"{fnv1a(f'{job_id}.{step}'):x}"


def mapped() -> set[Path]:
    """The files some process of this machine maps (those whose maps this user may read)."""
    paths = set()
    for maps in Path("/proc").glob("[0-9]*/maps"):
        try:
            text = maps.read_text()
        except OSError:  # gone meanwhile, or another user's
            continue
        for line in text.splitlines():
            fields = line.split(maxsplit=5)  # address, permissions, offset, device, inode, path
            if len(fields) == 6:
                paths.add(Path(fields[5]))
    return paths


def stale_segments(job_id: str, folder: Path = SHARED_MEMORY) -> list[Path]:
    """The segments in `folder` of job `job_id`'s steps that no process maps: a killed attempt's."""
    ids = {segment_id(job_id, step) for step in range(STEPS)}
    candidates = [
        path
        for path in sorted(folder.glob("mpich_*"))
        if (match := SEGMENT.fullmatch(path.name)) and match.group(1) in ids
    ]
    in_use = mapped() if candidates else set()
    return [path for path in candidates if path not in in_use]


def clear(job_id: str, folder: Path = SHARED_MEMORY) -> list[Path]:
    """Remove job `job_id`'s stale segments in `folder`; the ones removed."""
    removed = []
    for path in stale_segments(job_id, folder):
        path.unlink(missing_ok=True)
        removed.append(path)
    return removed
