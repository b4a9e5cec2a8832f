"""Plain arrays shared by reference (issue 40's targets; docs/sharing.md),
the sharing section of make bench.

    gpumem bench/plain_share.py [--mib N] [--cycles N]

- write: a spawned child writes into the parent's plain gpumem.zeros
  array passed through multiprocessing (a copy from a private array of
  its own, events around it); the parent checks every element and
  writes the same way into its own array.  Target: the child's GB/s at
  0.95x or better of the parent's.
- cycles: CYCLES plain arrays made, shared and sent to a child that
  opens and closes each through the share server, one at a time; the
  parent's device free memory, open descriptors and sharing_stats()
  before and after.  Target: where they started.
"""

import argparse
import multiprocessing as mp
import os
import sys

import numpy as np

import gpumem

# The suite's copy timing (bench/sharing_ipc.py), for both sides.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sharing_ipc import copy_gbs  # noqa: E402


def writer(x):
    src = gpumem.to_device(np.arange(x.size, dtype=np.float32))
    rate = copy_gbs(src, dst=x)
    gpumem.synchronize()
    return rate


def opener(conn):
    while True:
        handle = conn.recv()
        if handle is None:
            return
        opened = gpumem.open_shared(handle)
        del opened
        conn.send(True)


def drained(limit=10.0):
    """sharing_stats() once no block is left, or after LIMIT seconds: a
    lease ends when the share server sees its connection close."""
    import time
    end = time.monotonic() + limit
    while gpumem.sharing_stats()["blocks"] and time.monotonic() < end:
        time.sleep(0.01)
    return gpumem.sharing_stats()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=1024)
    parser.add_argument("--cycles", type=int, default=10000)
    args = parser.parse_args()
    n = args.mib * (1 << 20) // 4
    ctx = mp.get_context("spawn")

    shared = gpumem.zeros((n,), "float32")
    with ctx.Pool(1) as pool:
        child = pool.apply(writer, (shared,))
    whole = bool((shared.copy_to_host()
                  == np.arange(n, dtype=np.float32)).all())
    own = copy_gbs(gpumem.to_device(np.arange(n, dtype=np.float32)),
                   dst=gpumem.empty((n,), "float32"))
    print(f"write: parent {own:.0f} GB/s, child into the parent's array "
          f"{child:.0f} GB/s, ratio {child / own:.3f} (target >= 0.95); "
          f"every element seen by the parent: {whole}")
    del shared

    left, right = ctx.Pipe()
    proc = ctx.Process(target=opener, args=(right,))
    proc.start()
    warm = gpumem.zeros((256,), "uint8")
    left.send(gpumem.share(warm))
    left.recv()
    del warm
    gpumem.synchronize()
    stats_before = drained()
    gpumem.empty_cache()    # the pool's idle memory, not what is in use
    free_before = gpumem.Device(0).mem_info()[0]
    fds_before = len(os.listdir("/proc/self/fd"))
    for _ in range(args.cycles):
        a = gpumem.zeros((256,), "uint8")
        left.send(gpumem.share(a))
        left.recv()
        del a
    # Device memory and descriptors while the child still runs, as
    # before the cycles: its exit frees its own CUDA context (some 500
    # MiB), which is not the parent's memory coming back.
    gpumem.synchronize()
    drained()
    gpumem.empty_cache()
    free_after = gpumem.Device(0).mem_info()[0]
    fds_after = len(os.listdir("/proc/self/fd"))
    left.send(None)
    proc.join(60)
    stats_after = drained()
    print(f"cycles: {args.cycles} plain arrays shared, opened and closed by "
          f"a child; device free memory {free_before} -> {free_after} "
          f"({free_after - free_before:+d}); descriptors {fds_before} -> "
          f"{fds_after}; sharing_stats {stats_before} -> {stats_after}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
