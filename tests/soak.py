"""soak -- the 4 x 10 stitching workload for many iterations with
allocation churn, watching that nothing grows (docs/RELIABILITY.md, "Soak").

    gpumem tests/soak.py [--iterations N] [--report-every K] [--seed S]
                         [--statm FILE]

Each iteration runs the stitching workload's loop body (the kernel on
each of the 4 partitions, the 4 partial updates copied back, the stitching on the host,
the update copied to every device) and allocates and frees one array of a
random size between 1 KiB and 64 MiB on one of the devices.  The update
is reset to its initial value every 32 iterations (the workload's
stitching doubles it each iteration and would overflow float32), and the
state just before each reset is compared with the same arithmetic done in
NumPy, so a wrong number fails the run too.

It prints device memory in use, the pools' reserve and the process's
resident set at the start (after a warm-up), at every report and at the
end, and exits 1 when memory in use does not come back to its starting
value, when the reserve grows past the largest churn size plus the
workload, or when the resident set grows by more than 32 MiB; 0
otherwise.  Each of the three checks ends in a line as gmtest prints its
cases': "ok   NAME", "FAIL NAME: why", or "SKIP NAME: why" (the resident
set where FILE, by default /proc/self/statm, cannot be read: not Linux,
no /proc).  The test suite runs it briefly on both backends; the long run
is recorded in docs/RELIABILITY.md.
"""

import argparse
import os
import sys
import time

import numpy as np

import gpumem

PARTITIONS = 4
IMAGES = 40
RESET_EVERY = 32
CHURN_MIN = 1 << 10
CHURN_MAX = 64 << 20
RSS_GROWTH_MAX = 32 << 20


def rss_bytes(statm_path):
    """The process's resident set read from STATM_PATH (Linux's
    /proc/self/statm), or None where it cannot be read."""
    try:
        with open(statm_path) as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def shown(nbytes):
    return "?" if nbytes is None else str(nbytes)


def books(devices):
    """(bytes in use, bytes reserved) summed over DEVICES."""
    used = reserved = 0
    for d in devices:
        stats = gpumem.memory_stats(d)
        used += stats["allocated_bytes"]
        reserved += stats["reserved_bytes"]
    return used, reserved


def expected_update(stat, initial, steps):
    """The update after STEPS iterations from INITIAL, in NumPy."""
    update = initial.copy()
    partial = np.empty((PARTITIONS, 4), np.float32)
    for _ in range(steps):
        for i in range(PARTITIONS):
            partial[i] = (stat[i] + update.astype(np.float64)
                          ).astype(np.float32)
        update[:] = partial[:, 0] + partial[:, 1] + partial[:, 2] \
            - partial[:, 3]
    return update


def main(argv):
    parser = argparse.ArgumentParser(prog="gpumem tests/soak.py")
    parser.add_argument("--iterations", type=int, default=1000000)
    parser.add_argument("--report-every", type=int, default=100000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--statm", default="/proc/self/statm",
                        help="where the resident set is read")
    args = parser.parse_args(argv)
    rng = np.random.default_rng(args.seed)

    ndev = gpumem.device_count()
    devices = [i % ndev for i in range(PARTITIONS)]
    used_devices = sorted(set(devices))
    parts = np.array_split(np.arange(IMAGES), PARTITIONS)
    stat = [part.astype(np.float64).mean() for part in parts]
    initial = rng.random(4).astype(np.float32)
    want = expected_update(stat, initial, RESET_EVERY)

    update = initial.copy()
    partial = np.empty((PARTITIONS, 4), np.float32)
    gpu_update = {d: gpumem.alloc_gpu_memory(4, device=d)
                  for d in used_devices}
    gpu_images = [gpumem.alloc_gpu_memory(len(p), device=devices[i])
                  for i, p in enumerate(parts)]
    gpu_partial = [gpumem.alloc_gpu_memory(4, device=devices[i])
                   for i in range(PARTITIONS)]
    for i, p in enumerate(parts):
        gpumem.copy_to_gpu(p, gpu_images[i], len(p))

    # Churn sizes, log-uniform from 1 KiB to 64 MiB, drawn in advance.
    churn = np.exp(rng.uniform(np.log(CHURN_MIN), np.log(CHURN_MAX),
                               size=4096)).astype(np.int64)

    def iteration(k):
        nonlocal update
        if k % RESET_EVERY == 0:
            if k > 0 and not np.allclose(update, want, rtol=1e-5, atol=0):
                raise AssertionError(f"iteration {k}: update {update} "
                                     f"!= NumPy's {want}")
            update = initial.copy()
            for mem in gpu_update.values():
                gpumem.copy_to_gpu(update, mem, 4)
        for i in range(PARTITIONS):
            gpumem.kernels.algo(gpu_images[i], gpu_update[devices[i]],
                                gpu_partial[i], len(parts[i]))
            gpumem.copy_from_gpu(gpu_partial[i], partial[i], 4)
        update[:] = partial[:, 0] + partial[:, 1] + partial[:, 2] \
            - partial[:, 3]
        for mem in gpu_update.values():
            gpumem.copy_to_gpu(update, mem, 4)
        scratch = gpumem.empty(int(churn[k % len(churn)]), "uint8",
                               device=k % ndev)
        scratch.free()

    # Warm-up: the pools reach their working size, NumPy its caches.
    for k in range(min(2000, args.iterations)):
        iteration(k)
    used0, reserved0 = books(used_devices)
    rss0 = rss_bytes(args.statm)
    print(f"backend {gpumem.backend}, {ndev} device(s), {args.iterations} "
          f"iterations")
    print(f"{'iteration':>10} {'in use':>12} {'reserved':>14} "
          f"{'RSS':>14} {'us/iter':>9}")
    print(f"{'start':>10} {used0:12d} {reserved0:14d} {shown(rss0):>14}")
    start = time.perf_counter()
    last = start
    last_k = 0
    for k in range(args.iterations):
        iteration(k)
        if (k + 1) % args.report_every == 0 or k + 1 == args.iterations:
            now = time.perf_counter()
            used, reserved = books(used_devices)
            per = (now - last) / (k + 1 - last_k) * 1e6
            print(f"{k + 1:10d} {used:12d} {reserved:14d} "
                  f"{shown(rss_bytes(args.statm)):>14} {per:9.1f}",
                  flush=True)
            last, last_k = now, k + 1
    used, reserved = books(used_devices)
    rss = rss_bytes(args.statm)
    print(f"{'end':>10} {used:12d} {reserved:14d} {shown(rss):>14}")
    reserve_bound = reserved0 + ndev * CHURN_MAX * 2
    checks = [
        ("memory_in_use", used == used0,
         f"memory in use went from {used0} to {used} bytes"),
        ("pool_reserve", reserved <= reserve_bound,
         f"pool reserve grew from {reserved0} to {reserved}"),
    ]
    if rss0 is None or rss is None:
        checks.append(("resident_set", None, f"{args.statm} cannot be read "
                       "here: the resident set is not checked"))
    else:
        checks.append(("resident_set", rss - rss0 <= RSS_GROWTH_MAX,
                       f"resident set grew by {rss - rss0} bytes"))
    failures = []
    for name, ok, why in checks:
        if ok is None:
            print(f"SKIP {name}: {why}")
        elif ok:
            print(f"ok   {name}")
        else:
            print(f"FAIL {name}: {why}")
            print("soak: FAILED:", why, file=sys.stderr)
            failures.append(why)
    if not failures:
        unchecked = [name for name, ok, _ in checks if ok is None]
        print(f"soak: flat over {args.iterations} iterations "
              f"({time.perf_counter() - start:.1f} s)"
              + (f"; not checked: {', '.join(unchecked)}" if unchecked
                 else ""))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
