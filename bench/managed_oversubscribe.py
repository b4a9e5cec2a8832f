"""The stitching loop on managed images totalling 1.5x device 0's memory
(issue 51): with a prefetch of each partition before its kernel, and,
for the record, with page faults only; the result checked against the
same algorithm in NumPy.

    GPUMEM_BENCH_OVERSUBSCRIBE=1 gpumem bench/managed_oversubscribe.py \\
        [--factor 1.5] [--partitions 4] [--iterations 3] [--json FILE]
        [--markdown FILE]

Runs only with GPUMEM_BENCH_OVERSUBSCRIBE=1 (exit 77 otherwise): asking
a device for more managed memory than it has can stall it for minutes
where the driver or the machine handles it badly, so it is never part of
a run by accident.  The images are made on the device, not copied from
a host array (the host could not hold both): partition p's first half
is filled with p + 1 and its second half with 0.5 * (p + 1), so that
its mean is known exactly and a page lost or moved wrongly changes it.
The images are advised read_mostly, so that a page the device drops
needs no copy back.

Prints, per mode, the median iteration after the first, the bytes that
must move each iteration (every partition comes in once: a cyclic pass
over more than fits defeats any cache), the PCIe bound (those bytes over
the pinned host-to-device bandwidth measured in the same run), the
ratio to it (target with prefetch: <= 1.3), and the check's verdict;
--markdown appends them to the report's table (bench/run.sh's
managed.md) as "- ... **met**" lines.
Exit status 1 when a result differs from NumPy's.
"""

import argparse
import json
import os
import statistics
import sys
import time

import numpy as np

import gpumem

GiB = 1 << 30


def pinned_h2d_gbs(nbytes=GiB):
    pinned = gpumem.pinned_empty(nbytes, "uint8")
    pinned[:] = 1
    device = gpumem.empty(nbytes, "uint8")
    times = []
    for _ in range(5):
        start = time.perf_counter()
        gpumem.copy_to_gpu(pinned, device, nbytes)
        times.append(time.perf_counter() - start)
    device.free()
    return nbytes / statistics.median(times) / 1e9


def make_images(total_elements, partitions):
    """PARTITIONS managed arrays of float32 images on device 0, filled on
    the device, and each one's exact mean."""
    sizes = [total_elements // partitions
             + (1 if p < total_elements % partitions else 0)
             for p in range(partitions)]
    images, means = [], []
    for p, n in enumerate(sizes):
        a = gpumem.empty(n, "float32", memory="managed")
        half = n // 2
        a[:half].fill(p + 1.0)
        a[half:].fill(0.5 * (p + 1.0))
        a.advise(read_mostly=True)
        images.append(a)
        means.append((half * (p + 1.0) + (n - half) * 0.5 * (p + 1.0)) / n)
        print(f"partition {p}: {n * 4 / GiB:.1f} GiB made", flush=True)
    return images, means


def reference(means, update, iterations):
    """scripts/stitching.py's algorithm in NumPy, from each partition's
    mean (the algo kernel's mean, in double, rounded once to float)."""
    update = update.copy()
    partial = np.empty((len(means), 4), np.float32)
    for _ in range(iterations):
        for i, mean in enumerate(means):
            partial[i] = (mean + update.astype(np.float64)).astype(np.float32)
        update[:] = partial[:, 0] + partial[:, 1] + partial[:, 2] \
            - partial[:, 3]
    return update


def run_loop(images, update0, iterations, prefetch):
    update = update0.copy()
    nparts = len(images)
    gpu_update = gpumem.to_device(update)
    partial = [gpumem.zeros(4) for _ in images]
    host = np.empty((nparts, 4), np.float32)
    times = []
    for _ in range(iterations):
        start = time.perf_counter()
        for i, part in enumerate(images):
            if prefetch:
                part.prefetch(0)
            gpumem.kernels.algo(part, gpu_update, partial[i], part.size)
            gpumem.copy_from_gpu(partial[i], host[i], 4)
        update[:] = host[:, 0] + host[:, 1] + host[:, 2] - host[:, 3]
        gpumem.copy_to_gpu(update, gpu_update, 4)
        times.append(time.perf_counter() - start)
        print(f"{'prefetch' if prefetch else 'faults'}: iteration "
              f"{len(times)}: {times[-1]:.2f} s", flush=True)
    return update, times


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--factor", type=float, default=1.5,
                        help="images over the device's memory (1.5)")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--iterations", type=int, default=3,
                        help="iterations per mode (3; at least 2)")
    parser.add_argument("--json", help="write the figures here")
    parser.add_argument("--markdown", help="append the verdicts here")
    args = parser.parse_args()
    if os.environ.get("GPUMEM_BENCH_OVERSUBSCRIBE") != "1":
        print("SKIP: set GPUMEM_BENCH_OVERSUBSCRIBE=1 to ask the device "
              "for more managed memory than it has", file=sys.stderr)
        return 77
    if args.iterations < 2 or args.partitions < 1 or args.factor <= 0:
        parser.error("--iterations >= 2, --partitions >= 1, --factor > 0")
    total_memory = gpumem.Device(0).total_memory
    total_bytes = int(total_memory * args.factor) // 4 * 4
    bandwidth = pinned_h2d_gbs()
    print(f"device 0: {gpumem.Device(0).name}, {total_memory / GiB:.1f} GiB; "
          f"images {total_bytes / GiB:.1f} GiB in {args.partitions} "
          f"partitions; pinned H2D {bandwidth:.1f} GB/s", flush=True)
    images, means = make_images(total_bytes // 4, args.partitions)
    update0 = np.random.default_rng(0).random(4).astype(np.float32)
    expect = reference(means, update0, args.iterations)
    bound = total_bytes / (bandwidth * 1e9)
    figures = {"device": gpumem.Device(0).name,
               "device_bytes": total_memory, "image_bytes": total_bytes,
               "pinned_h2d_gbs": bandwidth, "pcie_bound_s": bound}
    status = 0
    for prefetch in (True, False):
        mode = "prefetch" if prefetch else "faults"
        update, times = run_loop(images, update0, args.iterations, prefetch)
        per_iteration = statistics.median(times[1:])
        scale = max(float(np.max(np.abs(expect))), 1.0)
        error = float(np.max(np.abs(update.astype(np.float64) - expect))) \
            / scale
        ok = error <= 1e-4
        status |= 0 if ok else 1
        figures[mode] = {"iteration_s": per_iteration,
                         "ratio_to_bound": per_iteration / bound,
                         "relative_error": error, "matches_numpy": ok}
        print(f"{mode}: {per_iteration:.2f} s per iteration (median after "
              f"the first), {per_iteration / bound:.2f}x the PCIe bound "
              f"of {bound:.2f} s{' (target <= 1.3)' if prefetch else ''}; "
              f"{'matches NumPy' if ok else 'DIFFERS from NumPy'} "
              f"(relative error {error:.2g})", flush=True)
    if args.json:
        with open(args.json, "w") as out:
            json.dump(figures, out, indent=1)
    if args.markdown:
        met = figures["prefetch"]["ratio_to_bound"] <= 1.3
        with open(args.markdown, "a") as out:
            out.write(
                f"- The loop on managed images of {args.factor}x the "
                f"device's memory with prefetch: "
                f"{figures['prefetch']['ratio_to_bound']:.2f}x the PCIe "
                f"bound of {bound:.2f} s (target <= 1.3x) "
                f"{'**met**' if met else '**not met**'}\n"
                f"- The same loop on page faults only: "
                f"{figures['faults']['ratio_to_bound']:.2f}x the PCIe bound "
                f"(for the record)\n"
                f"- Its results against NumPy: "
                f"{'equal' if status == 0 else 'DIFFERENT'} "
                f"{'**met**' if status == 0 else '**not met**'}\n")
    return status


if __name__ == "__main__":
    sys.exit(main())
