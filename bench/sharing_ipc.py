"""Sharing device memory between processes (docs/sharing.md): what a
consumer pays.  Prints one line per figure, the median of its repeats.

    gpumem bench/sharing_ipc.py [--mib N] [--loops N]

- bandwidth: a 1 GiB shared array copied into a private one, by the
  producer itself and by a spawned child that opened the handle (the
  same gpumem.copy, events around it; target: the child at 0.95x or
  better of the producer);
- open: re-opening a handle this process has opened before (target
  under 50 us);
- leak: LOOPS shares, opens and closes of one array, and the device's
  free memory before and after (target: where it started).
"""

import argparse
import multiprocessing as mp
import statistics
import sys
import time

import gpumem


def copy_gbs(src, repeats=20, dst=None):
    """GB/s (bytes read + written) of gpumem.copy from SRC into DST (by
    default a new private array), timed with events on a stream: the
    median of REPEATS copies after three."""
    if dst is None:
        dst = gpumem.empty(src.shape, src.dtype)
    stream = gpumem.Stream()
    start, end = gpumem.Event(), gpumem.Event()
    for _ in range(3):
        gpumem.copy(dst, src, stream=stream)
    stream.synchronize()
    rates = []
    for _ in range(repeats):
        start.record(stream)
        gpumem.copy(dst, src, stream=stream)
        end.record(stream)
        end.synchronize()
        rates.append(2 * src.nbytes / (start.elapsed_ms(end) * 1e-3) / 1e9)
    return statistics.median(rates)


def child(handle, out):
    shared = gpumem.open_shared(handle)
    rate = copy_gbs(shared)
    times = []
    for _ in range(200):
        t = time.perf_counter()
        again = gpumem.open_shared(handle)
        times.append(time.perf_counter() - t)
        del again
    out.put((rate, statistics.median(times) * 1e6))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=1024)
    parser.add_argument("--loops", type=int, default=10000)
    args = parser.parse_args()
    n = args.mib << 18                                  # float32s
    shared = gpumem.shared_empty((n,), "float32")
    shared.fill(1.0)
    own = copy_gbs(shared)
    handle = gpumem.share(shared)
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    proc = ctx.Process(target=child, args=(handle, out))
    proc.start()
    rate, open_us = out.get(timeout=300)
    proc.join(60)
    print(f"bandwidth: producer {own:.0f} GB/s, child {rate:.0f} GB/s, "
          f"ratio {rate / own:.3f} (target >= 0.95)")
    print(f"open of a seen handle: {open_us:.1f} us (target < 50 us)")

    small = gpumem.shared_empty((1 << 20,), "float32")
    gpumem.synchronize()
    free_before, _ = gpumem.Device(0).mem_info()
    for _ in range(args.loops):
        h = gpumem.share(small)
        opened = gpumem.open_shared(h)
        del opened
    gpumem.synchronize()
    free_after, _ = gpumem.Device(0).mem_info()
    print(f"leak: {args.loops} shares, opens and closes; device free "
          f"memory {free_before} -> {free_after} bytes "
          f"({free_after - free_before:+d})")


if __name__ == "__main__":
    sys.exit(main())
