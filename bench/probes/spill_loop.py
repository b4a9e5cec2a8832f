"""The stitching loop on one device with images that do not fit it
(docs/memory.md, "Spilling"): four partitions whose images total RATIO
times the memory limit, spilling on, each iteration running algo over
every partition; with --prefetch each partition is brought back before
its kernel.  Prints the time per iteration beside the bound of the bus:
the bytes of the partitions that do not fit, brought back once per
iteration, over the page-locked upload bandwidth measured in the same
process.  Checks every partial update against NumPy.

    gpumem bench/probes/spill_loop.py [--gib-per-partition G] [--ratio R]
                               [--iterations K] [--prefetch]
"""

import argparse
import statistics
import sys
import time

import numpy as np

import gpumem


def upload_bandwidth(nbytes):
    """Median bytes per second of a page-locked upload of NBYTES."""
    host = gpumem.pinned_empty(nbytes // 4, "float32")
    dev = gpumem.empty(nbytes // 4, "float32")
    times = []
    for _ in range(5):
        start = time.perf_counter()
        gpumem.copy_to_gpu(host, dev, nbytes // 4)
        times.append(time.perf_counter() - start)
    dev.free()
    del host
    return nbytes / statistics.median(times)


def main(argv):
    parser = argparse.ArgumentParser(prog="gpumem bench/probes/spill_loop.py")
    parser.add_argument("--gib-per-partition", type=float, default=1.0)
    parser.add_argument("--ratio", type=float, default=1.5)
    parser.add_argument("--iterations", type=int, default=5)
    parser.add_argument("--prefetch", action="store_true")
    args = parser.parse_args(argv)
    n = int(args.gib_per_partition * (1 << 30)) // 4
    nbytes = 4 * n
    total = 4 * nbytes
    bandwidth = upload_bandwidth(nbytes)
    rng = np.random.default_rng(7)
    host_images = [rng.random(n, dtype=np.float32) for _ in range(4)]
    expected = [float(np.mean(h, dtype=np.float64)) for h in host_images]
    update = gpumem.to_device(np.zeros(4, np.float32))
    partial = [gpumem.zeros(4) for _ in range(4)]
    used = gpumem.memory_stats()["allocated_bytes"]
    limit = used + int(total / args.ratio)
    gpumem.set_spill(True)
    gpumem.set_memory_limit(limit)
    images = [gpumem.to_device(h) for h in host_images]
    fit = max(0, min(4, int((limit - used) // nbytes)))
    out = np.empty(4, np.float32)
    times = []
    for _ in range(args.iterations):
        start = time.perf_counter()
        for p in range(4):
            if args.prefetch:
                images[p].prefetch(0)
            gpumem.kernels.algo(images[p], update, partial[p], n)
            gpumem.copy_from_gpu(partial[p], out, 4)
            if not np.allclose(out, expected[p], rtol=1e-4):
                print(f"partition {p}: {out} != {expected[p]}")
                return 1
        times.append(time.perf_counter() - start)
    stats = gpumem.memory_stats()
    moved = (4 - fit) * nbytes
    bound = moved / bandwidth
    median = statistics.median(times[1:] or times)
    print(f"spill loop: 4 x {nbytes / 2**30:.2f} GiB images, {args.ratio}x "
          f"the limit ({limit / 2**30:.2f} GiB), {fit} partitions fit; "
          f"prefetch {'on' if args.prefetch else 'off'}")
    print(f"  per iteration {median * 1e3:.1f} ms (median of "
          f"{len(times) - 1 or 1}); bus bound {bound * 1e3:.1f} ms "
          f"({moved / 2**30:.2f} GiB up at {bandwidth / 1e9:.1f} GB/s "
          f"page-locked) -> {median / bound if bound else float('nan'):.2f}x"
          " the bound")
    print(f"  spills {stats['spills']} ({stats['spills_without_copy']} "
          f"without a copy; {stats['spill_bytes'] / 2**30:.1f} "
          f"GiB copied, {stats['spill_seconds']:.2f} s), returns "
          f"{stats['returns']}"
          f" ({stats['return_bytes'] / 2**30:.1f} GiB, "
          f"{stats['return_seconds']:.2f} s); results equal NumPy's")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
