"""The benchmark suite's figures through gpumem (bench/NOTES.md).

    gpumem bench/bench_gpumem.py [--quick] [--out FILE] [FIGURE]...

Each timed loop is what a script would write.  The "empty kernel" is
the cheapest registered kernel call: gpumem.kernels.saxpy(0, 0.0, x, x)
with n = 0 on a 1-element array, which checks its arguments and launches
saxpy's kernel <<<1, 256>>> to return at once (stream= for the
asynchronous variant; without it the call waits for the device, as
every gpumem call without a stream does).  Copies without stream= are
synchronous; pageable memory is ordinary NumPy arrays, pinned memory
gpumem.pinned_empty.  The workload is scripts/stitching.py's loop.
Runs on the host backend too (--backend=host), for a smoke test with
--quick.
"""

import sys
import time

import numpy as np

import gpumem
import benchlib as bl
from benchlib import MIB


def main(argv):
    args = bl.parse_args(argv, "gpumem bench/bench_gpumem.py")
    results = bl.Results("gpumem", args.out)
    device = gpumem.Device(0)
    results.meta(backend=gpumem.backend, device=device.name,
                 version=getattr(gpumem, "__version__", "?"),
                 numpy=np.__version__, python=sys.version.split()[0],
                 quick=args.quick, log2n=args.log2n)
    data = bl.WorkloadData(args.log2n)
    pc = time.perf_counter
    stream = gpumem.Stream()
    start, end = gpumem.Event(), gpumem.Event()
    state = {}

    def event_time(fn, index):
        start.record(stream)
        fn(index)
        end.record(stream)
        end.synchronize()
        return start.elapsed_ms(end) / 1e3

    def launch():
        saxpy = gpumem.kernels.saxpy
        x = gpumem.to_device(np.ones(1, np.float32))
        batch, reps = (100, 5) if args.quick else (1000, 30)
        sync_reps = 200 if args.quick else 5000
        for _ in range(2 * batch):
            saxpy(0, 0.0, x, x, stream=stream)
        stream.synchronize()
        times = []
        for _ in range(reps):
            t0 = pc()
            for _ in range(batch):
                saxpy(0, 0.0, x, x, stream=stream)
            stream.synchronize()
            times.append((pc() - t0) / batch)
        results.emit("launch", "async", "wall", times,
                     note="kernels.saxpy(0, 0.0, x, x, stream=s) x "
                     f"{batch}, then s.synchronize(); per launch")
        for _ in range(100):
            saxpy(0, 0.0, x, x)
        times = []
        for _ in range(sync_reps):
            t0 = pc()
            saxpy(0, 0.0, x, x)
            times.append(pc() - t0)
        results.emit("launch", "sync", "wall", times,
                     note="kernels.saxpy(0, 0.0, x, x): launch and wait")

    def alloc():
        empty = gpumem.empty
        n = MIB // 4
        reps = 200 if args.quick else 20000
        for _ in range(100):
            empty(n).free()
        times = []
        for _ in range(reps):
            t0 = pc()
            a = empty(n)
            a.free()
            times.append(pc() - t0)
        gpumem.synchronize()
        results.emit("alloc_free", "pool", "wall", times, MIB,
                     note="a = gpumem.empty(262144); a.free()")

    def copy16():
        host = bl.random_block(4, seed=2)
        back = np.empty(4, np.float32)
        dev = gpumem.empty(4)
        reps = 200 if args.quick else 10000
        for case in ("h2d", "d2h"):
            times = []
            for r in range(-100, reps):
                t0 = pc()
                if case == "h2d":
                    gpumem.copy_to_gpu(host, dev, 4)
                else:
                    gpumem.copy_from_gpu(dev, back, 4)
                if r >= 0:
                    times.append(pc() - t0)
            results.emit("copy16", case, "wall", times, 16, 16,
                         note="copy_to_gpu / copy_from_gpu, 4 float32, "
                         "NumPy (pageable) host array")
        if not np.array_equal(host, back):
            raise AssertionError("copy16: the data came back changed")

    def arenas():
        if "arenas" not in state:
            nbytes = bl.arena_bytes(args)
            count = nbytes // 4
            print(f"gpumem: arenas: 3 x {nbytes // MIB} MiB", file=sys.stderr)
            pageable = np.empty(count, np.float32)
            bl.fill_tiled(pageable, data.block)
            pinned = gpumem.pinned_empty(count, "float32")
            pinned[:] = pageable
            dev = gpumem.empty(count)
            gpumem.copy(dev, pinned)
            state["arenas"] = (nbytes, pageable, pinned, dev)
        return state["arenas"]

    def copy_point(figure, size, reps):
        nbytes, pageable, pinned, dev = arenas()
        n = size // 4
        offsets = bl.slots(nbytes, size)
        dviews = [dev[o:o + n] for o in offsets]
        for case in bl.COPY_CASES:
            host = pinned if case.startswith("pinned") else pageable
            hviews = [host[o:o + n] for o in offsets]
            h2d = case.endswith("h2d")

            def once(j):
                t0 = pc()
                if h2d:
                    gpumem.copy(dviews[j], hviews[j])
                else:
                    gpumem.copy(hviews[j], dviews[j])
                gpumem.synchronize()
                return pc() - t0

            once(0)
            one = once(1 % len(offsets))
            count = reps or bl.adaptive_reps(one)
            times = [once(r % len(offsets)) for r in range(count)]
            results.emit(figure, case, "wall", times, size, size,
                         note="gpumem.copy (synchronous) + "
                         "gpumem.synchronize(); " +
                         ("pinned_empty" if case.startswith("pinned")
                          else "NumPy array"))

    def copy256():
        size = bl.copy256_bytes(args)
        copy_point("copy256", size, 5 if args.quick else 30)
        nbytes, pageable, pinned, dev = arenas()
        n = size // 4
        gpumem.copy(dev[:n], pinned[:n])
        back = np.empty(n, np.float32)
        gpumem.copy(back, dev[:n])
        if not np.array_equal(back, pinned[:n]):
            raise AssertionError("copy256: the data came back changed")

    def sweep():
        for size in bl.sweep_sizes(args.sweep_max):
            copy_point("sweep", size, 3 if args.quick else 0)

    def partitions():
        if "parts" not in state:
            n = data.n
            print(f"gpumem: partitions: 4 x {n * 4 // MIB} MiB",
                  file=sys.stderr)
            parts = []
            for p in range(4):
                part = gpumem.empty(n)
                gpumem.copy(part, data.block)
                for _ in range(p):
                    gpumem.kernels.saxpy(n, 1.0, part, part)   # doubles
                parts.append(part)
            state["parts"] = parts
            state["copy_dst"] = gpumem.empty(n)
        return state["parts"]

    def d2d():
        parts = partitions()
        dst = state["copy_dst"]
        reps = 5 if args.quick else 20

        def copy(i):
            gpumem.copy(dst, parts[i % 4], stream=stream)

        for i in range(3):
            event_time(copy, i)
        times = [event_time(copy, i) for i in range(reps)]
        nbytes = data.n * 4
        results.emit("d2d", "1GiB", "event", times, nbytes, 2 * nbytes,
                     note="gpumem.copy(dst, src, stream=s), 4 sources "
                     "rotated; read + write")

    def algo_bw():
        parts = partitions()
        update_host = bl.random_block(4, seed=3)
        update = gpumem.to_device(update_host)
        partial = gpumem.empty(4)
        reps = 5 if args.quick else 20
        algo = gpumem.kernels.algo
        n = data.n

        def run(i):
            algo(parts[i % 4], update, partial, n, stream=stream)

        for i in range(3):
            event_time(run, i)
        times = [event_time(run, i) for i in range(reps)]
        results.emit("algo_bw", "2^28", "event", times, n * 4, n * 4,
                     note="kernels.algo(..., stream=s), 4 inputs rotated; "
                     "bytes read")
        last = (reps - 1) % 4
        want = (data.means()[last]
                + update_host.astype(np.float64)).astype(np.float32)
        bl.check_close(partial.copy_to_host(), want, 1e-5, "algo_bw")

    def workload_loop(case, kernel_name, images, n, iters, stats, note):
        kernel = getattr(gpumem.kernels, kernel_name)
        update = np.empty(4, np.float32)
        partial = np.empty((4, 4), np.float32)
        gpu_update = gpumem.alloc_gpu_memory(4)
        gpu_partial = [gpumem.alloc_gpu_memory(4) for _ in range(4)]
        stitching = bl.stitching
        warm = max(10, iters // 10)
        times = []
        for r in range(-warm, iters):
            if (r + warm) % bl.RESET_EVERY == 0:
                update[:] = bl.INITIAL_UPDATE
                gpumem.copy_to_gpu(update, gpu_update, 4)
            t0 = pc()
            for i in range(4):
                kernel(images[i], gpu_update, gpu_partial[i], n)
                gpumem.copy_from_gpu(gpu_partial[i], partial[i], 4)
            stitching(update, partial)
            gpumem.copy_to_gpu(update, gpu_update, 4)
            if r >= 0:
                times.append(pc() - t0)
        results.emit("workload", case, "wall", times, note=note)
        update[:] = bl.INITIAL_UPDATE
        gpumem.copy_to_gpu(update, gpu_update, 4)
        for _ in range(3):
            for i in range(4):
                kernel(images[i], gpu_update, gpu_partial[i], n)
                gpumem.copy_from_gpu(gpu_partial[i], partial[i], 4)
            stitching(update, partial)
            gpumem.copy_to_gpu(update, gpu_update, 4)
        want = bl.reference_updates(stats, 3, kernel_name)
        bl.check_close(update, want, 1e-5 if kernel_name == "algo" else 1e-6,
                       f"workload {case}")

    def workload():
        small = []
        for part in data.small:
            mem = gpumem.alloc_gpu_memory(10)
            gpumem.copy_to_gpu(part, mem, 10)
            small.append(mem)
        workload_loop("seed_4x10", "algo_seed", small, 10,
                      200 if args.quick else 3000, data.small_last,
                      "kernels.algo_seed, scripts/stitching.py's loop")
        workload_loop("algo_4x2^28", "algo", partitions(), data.n,
                      20 if args.quick else 200, data.means(),
                      "kernels.algo, scripts/stitching.py's loop")

    def seed_rate():
        parts = partitions()
        n = min(data.n, 1 << 18)
        update = gpumem.zeros(4)
        partial = gpumem.empty(4)

        def run(i):
            gpumem.kernels.algo_seed(parts[0], update, partial, n,
                                     stream=stream)

        event_time(run, 0)
        times = [event_time(run, i) for i in range(3)]
        results.emit("seed_rate", "2^18", "event", times, n * 4,
                     note=f"one algo_seed call on {n} images")

    return results.run(args, {
        "launch": launch, "alloc": alloc, "copy16": copy16,
        "copy256": copy256, "sweep": sweep, "d2d": d2d, "algo_bw": algo_bw,
        "workload": workload, "seed_rate": seed_rate})


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
