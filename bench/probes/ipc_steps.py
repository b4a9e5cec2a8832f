"""Probe: what a step of the shared windows' collectives costs when
several ranks use one GPU (bench/NOTES.md, "One GPU, several ranks").

    mpirun -n 2 gpumem bench/probes/ipc_steps.py

Times, as medians of 9 batches of 50, from rank 0: an MPI barrier; a
1 KiB device copy and a fill kernel on rank 0 alone (the others wait in
the barrier) and on every rank at once; a synchronize with nothing
queued; and allreduce of 1 KiB through gpumem.comm.
"""

import statistics
import time

import numpy as np

import gpumem

comm = gpumem.comm
rank = comm.rank
src = gpumem.zeros(256)
dst = gpumem.empty(256)
host = np.empty(256, np.float32)


def timed(step, everyone):
    def batch():
        comm.barrier()
        start = time.perf_counter()
        for _ in range(50):
            if everyone or rank == 0:
                step()
        took = (time.perf_counter() - start) / 50
        comm.barrier()
        return took
    batch()
    return statistics.median(batch() for _ in range(9)) * 1e6


rows = [
    ("barrier", timed(comm.barrier, True)),
    ("copy 1 KiB, rank 0 alone", timed(lambda: gpumem.copy(dst, src),
                                       False)),
    ("copy 1 KiB, every rank", timed(lambda: gpumem.copy(dst, src), True)),
    ("copy 1 KiB to host, every rank", timed(lambda: gpumem.copy(host, dst),
                                             True)),
    ("fill 1 KiB, rank 0 alone", timed(lambda: dst.fill(1), False)),
    ("fill 1 KiB, every rank", timed(lambda: dst.fill(1), True)),
    ("synchronize, nothing queued", timed(gpumem.synchronize, True)),
    ("allreduce 1 KiB", timed(lambda: comm.allreduce(dst), True)),
]
if rank == 0:
    print(f"# {comm.size} ranks, engine {comm.backend}")
    for name, us in rows:
        print(f"{name:32s} {us:9.1f} us")
