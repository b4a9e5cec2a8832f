"""free() from another thread while a collective uses the array
(py-comm.c holds it: gmpy_array_hold).  Run by tests/gm-mpi-test.sh as
`mpirun -n 2 gpumem test_comm_inflight.py`.

Rank 0 starts the collective in a thread; the other ranks join it half a
second later, so rank 0's thread waits inside MPI, without the GIL, with
the array's memory handed to MPI (or to its staging).  Meanwhile rank 0's
main thread frees the array.  The collective must complete with the data
the array held (the other ranks check the result), rank 0 must not crash
(the host backend's 8 MiB buffers are unmapped when released: a write
after the release is a segfault), the array is refused afterwards, and
its memory goes back when the collective ends.

Also: a collective sees the work queued before it on a gpumem.Stream
(the ordering rule of calls without stream=).
"""

import gc
import threading
import time

import numpy as np

import gmtest
from gmtest import raises

import gpumem

comm = getattr(gpumem, "comm", None)
if comm is None:
    gmtest.skip_file("gpumem was built without MPI")
if comm.size < 2:
    gmtest.skip_file("needs an MPI job of 2 or more ranks (mpirun -n 2)")

RANK, SIZE = comm.rank, comm.size
N = (8 << 20) // 4


def allocated():
    # Less the collectives' windows: where the ranks share one GPU, each
    # rank keeps its own window (a shared block) and opens its peers'
    # (imported blocks) between calls (src/comm/comm-windows.c), booked
    # like any memory.
    gc.collect()
    stats = gpumem.memory_stats()
    return (stats["allocated_bytes"] - stats["shared_bytes"]
            - stats["imported_bytes"])


def books():
    """The books beside a failed comparison of allocated()."""
    gc.collect()
    stats = gpumem.memory_stats()
    return {k: v for k, v in stats.items()
            if k.endswith("_bytes") or k.endswith("_count")}


def start_late():
    """The other ranks join the collective after rank 0 is inside it."""
    if RANK != 0:
        time.sleep(0.5)


def race(name, collective, a):
    """On rank 0: runs COLLECTIVE(a) in a thread and frees A meanwhile;
    elsewhere runs it late.  Returns what the collective returned."""
    if RANK != 0:
        start_late()
        return collective(a)
    outcome = []

    def body():
        try:
            outcome.append(collective(a))
        except BaseException as exc:
            outcome.append(exc)
    thread = threading.Thread(target=body)
    thread.start()
    time.sleep(0.2)
    a.free()
    thread.join()
    assert len(outcome) == 1 and not isinstance(outcome[0], BaseException), \
        f"{name}: {outcome}"
    raises(ValueError, a.copy_to_host)
    return outcome[0]


@gmtest.case
def free_during_allreduce():
    base = allocated()
    values = np.full(N, RANK + 1, np.float32)
    a = gpumem.to_device(values)
    race("allreduce", comm.allreduce, a)
    if RANK != 0:
        want = SIZE * (SIZE + 1) / 2
        got = a.copy_to_host()
        assert (got == want).all(), (got[:4], want)
    del a
    assert allocated() == base, (allocated(), base, books())
    comm.barrier()


@gmtest.case
def free_during_bcast():
    base = allocated()
    a = gpumem.to_device(np.full(N, 7 if RANK == 0 else RANK, np.int32))
    race("bcast", comm.bcast, a)
    if RANK != 0:
        assert (a.copy_to_host() == 7).all()
    del a
    assert allocated() == base, (allocated(), base, books())
    comm.barrier()


@gmtest.case
def free_during_gather():
    base = allocated()
    a = gpumem.to_device(np.full(N, RANK, np.int16))
    result = race("gather", lambda x: comm.gather(x, root=1), a)
    if RANK == 1:
        got = result.copy_to_host()
        assert all((got[r] == r).all() for r in range(SIZE))
    del a, result
    assert allocated() == base, (allocated(), base, books())
    comm.barrier()


@gmtest.case
def collectives_see_stream_work():
    # Ordering: a collective (no stream=) sees the work queued before it
    # on a gpumem.Stream, through MPI's staging or directly, and work
    # queued after it sees its result.
    n = (64 << 20) // 4
    x = gpumem.to_device(np.ones(n, np.float32))
    y = gpumem.zeros(n)
    s = gpumem.Stream()
    for _ in range(40):
        gpumem.kernels.saxpy(n, 1.0, x, y, stream=s)
    comm.allreduce(y)
    gpumem.kernels.saxpy(n, 1.0, x, y, stream=s)
    s.synchronize()
    got = y.copy_to_host()
    want = 40.0 * SIZE + 1
    assert (got == want).all(), (got.min(), got.max(), want)
    comm.barrier()


gmtest.main()
