"""The stitching workload through gpumem with the devices working at the same
time (gpumem.concurrent()), for the multi-GPU section of the benchmark
(bench/NOTES.md, "Devices at the same time").

    gpumem bench/multigpu_gpumem.py [--quick] [--log2n N] [--out FILE]

Records (benchlib's format, impl "gpumem", figure "multigpu"):
loop_4x10_{D}gpu_concurrent and loop_4x2^28_{D}gpu_concurrent for D = 1,
2 and all devices (partitions on devices i % D), the counterparts of raw
C's concurrent loop (one stream per device, one wait per iteration, the
update sent back asynchronously).  The timed loop is scripts/stitching.py's
as it now runs: kernels and copies queued in a block, block.wait(), the
stitching on the host, the update's copies queued.  Needs 2 devices;
exits 77 with fewer (the host backend's simulated devices run it too, for
a smoke test with --quick).
"""

import sys
import time

import numpy as np

import gpumem
import benchlib as bl


def main(argv):
    # Its one figure is multigpu, named or not.
    args = bl.parse_args([a for a in argv if a not in ("multigpu", "all")],
                         "gpumem bench/multigpu_gpumem.py")
    ndev = gpumem.device_count()
    if ndev < 2:
        print(f"multigpu_gpumem: {ndev} device: needs 2", file=sys.stderr)
        return 77
    results = bl.Results("gpumem", args.out)
    results.meta(backend=gpumem.backend, device=gpumem.Device(0).name,
                 devices=ndev, numpy=np.__version__, quick=args.quick,
                 log2n=args.log2n, script="multigpu_gpumem.py")
    pc = time.perf_counter
    whole = 1 << args.log2n
    sets = bl.multigpu_sets(ndev)
    block = bl.random_block(whole)
    # Partition i = 2^i x block on every device that runs it.
    parts = {}
    for nd in sets:
        for i in range(4):
            d = i % nd
            if (d, i) not in parts:
                parts[(d, i)] = gpumem.to_device(block * np.float32(2.0 ** i),
                                                 device=d)
    del block
    small = {(d, i): gpumem.to_device(
        np.arange(10 * i, 10 * i + 10, dtype=np.float32), device=d)
        for (d, i) in parts}
    kernel = gpumem.kernels.algo
    iters_max = (20, 200) if args.quick else (2000, 150)

    def loop(label, n, images, nd, most):
        devs = [i % nd for i in range(4)]
        gpu_update = {d: gpumem.alloc_gpu_memory(4, device=d)
                      for d in sorted(set(devs))}
        gpu_partial = [gpumem.alloc_gpu_memory(4, device=devs[i])
                       for i in range(4)]
        update = np.empty(4, np.float32)
        partial = np.empty((4, 4), np.float32)
        times = []
        begin = pc()
        with gpumem.concurrent() as devices_at_once:
            for r in range(most + 10):
                if r % bl.RESET_EVERY == 0:
                    update[:] = bl.INITIAL_UPDATE
                    for mem in gpu_update.values():
                        gpumem.copy_to_gpu(update, mem, 4)
                t0 = pc()
                for i in range(4):
                    kernel(images[i], gpu_update[devs[i]], gpu_partial[i], n)
                    gpumem.copy_from_gpu(gpu_partial[i], partial[i], 4)
                devices_at_once.wait()
                bl.stitching(update, partial)
                for mem in gpu_update.values():
                    gpumem.copy_to_gpu(update, mem, 4)
                if r >= 10:
                    times.append(pc() - t0)
                if len(times) >= 20 and pc() - begin > 2 * bl.POINT_SECONDS:
                    break
        results.emit("multigpu", f"loop_{label}_{nd}gpu_concurrent", "wall",
                     times, note="stitching.py's loop in gpumem.concurrent()"
                     f", one wait per iteration, partitions on devices {devs}")

    def figure():
        for label, size_index in (("4x10", 0), ("4x2^28", 1)):
            for nd in sets:
                if size_index == 0:
                    images = [small[(i % nd, i)] for i in range(4)]
                    n = 10
                else:
                    images = [parts[(i % nd, i)] for i in range(4)]
                    n = whole
                loop(label, n, images, nd, iters_max[size_index])

    args.figures = {"multigpu"}
    return results.run(args, {"multigpu": figure}) or 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
