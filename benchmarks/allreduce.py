"""Target 4: asrscale's allreduce (the MPI world's, over mpi4py) of a buffer the size of the
default model against torch.distributed's gloo allreduce of the same buffer on the same ranks;
and the bandwidth it achieves against a memory copy of that size.

Both average in place (sum, then divide by the ranks), alternating repetition by repetition.
Bus bandwidth is the ring convention, 2(n-1)/n bytes moved per byte reduced, so that it compares
with a copy's bytes per second.
"""

import socket
import time

from benchmarks.common import Bench, PreparedCorpus, child, child_main, median

RANKS = (2, 4)


def model_elements(bench: Bench) -> int:
    return sum(p.numel() for p in PreparedCorpus.of(bench.work).build_model().parameters())


def copy_seconds(elements: int, iterations: int) -> float:
    import torch

    torch.set_num_threads(1)
    source, target = torch.randn(elements), torch.empty(elements)
    times = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(iterations):
            target.copy_(source)
        times.append((time.perf_counter() - start) / iterations)
    return median(times)


def run(bench: Bench) -> None:
    elements = model_elements(bench)
    iterations = 20 if bench.quick else 300
    nbytes = 4 * elements
    copy_gbps = nbytes / copy_seconds(elements, iterations) / 1e9
    for ranks in RANKS:
        figures = child(bench, "allreduce", elements, iterations, bench.repetitions, ranks=ranks)
        asrscale_s, gloo_s = median(figures["asrscale_s"]), median(figures["gloo_s"])
        bus_gbps = 2 * (ranks - 1) / ranks * nbytes / asrscale_s / 1e9
        bench.add(
            "allreduce",
            f"speed, asrscale (mpi4py) / gloo, {ranks} ranks, {nbytes / 1e6:.1f} MB",
            gloo_s / asrscale_s,
            "x",
            ">= 1.0",
            asrscale_ms=1000 * asrscale_s,
            gloo_ms=1000 * gloo_s,
        )
        bench.add(
            "allreduce",
            f"bus bandwidth / memory copy bandwidth, {ranks} ranks",
            bus_gbps / copy_gbps,
            "x",
            bus_gbps=bus_gbps,
            copy_gbps=copy_gbps,
        )


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def measure(elements: int, iterations: int, repetitions: int) -> dict | None:
    """One rank's part; rank 0 returns the times."""
    import torch
    import torch.distributed as dist
    from mpi4py import MPI

    from asrscale.worlds import ops
    from asrscale.worlds.mpi import MPIWorld

    torch.set_num_threads(1)
    world, comm = MPIWorld(), MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    port = comm.bcast(_free_port() if rank == 0 else None, root=0)
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=size
    )
    buffer = torch.full((elements,), float(rank))

    def asrscale_mean():
        world.execute(ops.Allreduce([buffer], "learners"))

    def gloo_mean():
        dist.all_reduce(buffer)
        buffer.div_(size)

    asrscale_mean()
    if not torch.allclose(buffer, torch.full_like(buffer, (size - 1) / 2)):
        raise AssertionError("asrscale's allreduce did not average")

    def timed(average) -> float:
        comm.Barrier()
        start = time.perf_counter()
        for _ in range(iterations):
            average()
        comm.Barrier()
        return (time.perf_counter() - start) / iterations

    timed(gloo_mean)  # warm-up: gloo's first calls set up its pairs
    times = {"asrscale_s": [], "gloo_s": []}
    for _ in range(repetitions):
        times["asrscale_s"].append(timed(asrscale_mean))
        times["gloo_s"].append(timed(gloo_mean))
    dist.destroy_process_group()
    return times if rank == 0 else None


if __name__ == "__main__":
    child_main(measure, elements=int, iterations=int, repetitions=int)
