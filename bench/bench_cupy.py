"""The benchmark suite's figures through CuPy (bench/NOTES.md).

    python3 bench/bench_cupy.py [--quick] [--out FILE] [FIGURE]...

Each timed loop is what a CuPy user would write, the same loop as
bench_gpumem.py's.  The empty kernel is a cupy.RawKernel with saxpy's
parameters and an empty body, launched <<<1, 256>>> as gpumem's saxpy
with n = 0 is.  Host-to-device copies are ndarray.set (which CuPy
enqueues asynchronously on the current stream); where a figure asks for
a synchronous copy the loop synchronizes after it, as gpumem's and raw
C's figures do.  Pinned memory is cupyx.empty_pinned, pageable memory
ordinary NumPy arrays.

The workload's kernels:
  algo_seed  a cupy.RawKernel made from the kernel in
             kernels/algo_seed.cu itself (read from the file at start;
             int64_t spelled long long for NVRTC), launched <<<1, 1>>>;
  algo       CuPy-native: images.mean(dtype=cupy.float64), a CuPy
             reduction, then one ElementwiseKernel adding the update and
             rounding once to float32, as kernels/algo.cu does
             (partial_update[k] = (float) (mean + (double) update[k])).
"""

import functools
import os
import re
import sys
import time

import numpy as np

import benchlib as bl
from benchlib import MIB

try:
    import cupy as cp
    import cupyx
except ImportError as exc:            # no CuPy here: nothing to measure
    print(f"bench_cupy.py: CuPy is not importable ({exc})", file=sys.stderr)
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
ALGO_SEED_CU = os.path.join(HERE, os.pardir, "kernels", "algo_seed.cu")

EMPTY_SOURCE = r"""
extern "C" __global__ void
empty_kernel (long long n, float a, const float *x, float *y)
{
}
"""


def algo_seed_source(path=ALGO_SEED_CU):
    """The algo_seed kernel of kernels/algo_seed.cu as NVRTC source: the
    same parameters and body, extern "C" instead of static."""
    with open(path) as f:
        text = f.read()
    match = re.search(r"static\s+__global__\s+void\s+algo_seed_kernel\s*"
                      r"\((.*?)\)\s*(\{.*?\n\})", text, re.S)
    if match is None:
        raise RuntimeError(f"{path}: no 'static __global__ void "
                           "algo_seed_kernel (...) {...}' found")
    source = ('extern "C" __global__ void\nalgo_seed_kernel ('
              + match.group(1) + ')\n' + match.group(2) + '\n')
    return source.replace("int64_t", "long long")


def main(argv):
    args = bl.parse_args(argv, "python3 bench/bench_cupy.py")
    results = bl.Results("cupy", args.out)
    props = cp.cuda.runtime.getDeviceProperties(0)
    name = props["name"]
    results.meta(device=name.decode() if isinstance(name, bytes) else name,
                 version=cp.__version__, numpy=np.__version__,
                 python=sys.version.split()[0],
                 cuda_runtime=cp.cuda.runtime.runtimeGetVersion(),
                 cuda_driver=cp.cuda.runtime.driverGetVersion(),
                 accelerators=os.environ.get("CUPY_ACCELERATORS", "(default)"),
                 quick=args.quick, log2n=args.log2n)
    data = bl.WorkloadData(args.log2n)
    pc = time.perf_counter
    current = cp.cuda.get_current_stream()     # the null stream
    stream = cp.cuda.Stream()
    start, end = cp.cuda.Event(), cp.cuda.Event()
    device_sync = cp.cuda.runtime.deviceSynchronize
    empty_kernel = cp.RawKernel(EMPTY_SOURCE, "empty_kernel")
    seed_kernel = cp.RawKernel(algo_seed_source(), "algo_seed_kernel")
    finish = cp.ElementwiseKernel(
        "float64 mean, float32 update", "float32 partial",
        "partial = (float) (mean + (double) update)", "gm_bench_algo_finish")
    state = {}

    def algo(images, update, partial):
        finish(images.mean(dtype=cp.float64), update, partial)

    def event_time(fn, index):
        start.record(stream)
        with stream:
            fn(index)
        end.record(stream)
        end.synchronize()
        return cp.cuda.get_elapsed_time(start, end) / 1e3

    def launch():
        x = cp.ones(1, cp.float32)
        kargs = (np.int64(0), np.float32(0.0), x, x)
        grid, block = (1,), (256,)
        batch, reps = (100, 5) if args.quick else (1000, 30)
        sync_reps = 200 if args.quick else 5000
        with stream:
            for _ in range(2 * batch):
                empty_kernel(grid, block, kargs)
        stream.synchronize()
        times = []
        with stream:
            for _ in range(reps):
                t0 = pc()
                for _ in range(batch):
                    empty_kernel(grid, block, kargs)
                stream.synchronize()
                times.append((pc() - t0) / batch)
        results.emit("launch", "async", "wall", times,
                     note=f"RawKernel (empty) <<<1,256>>> x {batch} in a "
                     "stream, then stream.synchronize(); per launch")
        for _ in range(100):
            empty_kernel(grid, block, kargs)
            current.synchronize()
        times = []
        for _ in range(sync_reps):
            t0 = pc()
            empty_kernel(grid, block, kargs)
            current.synchronize()
            times.append(pc() - t0)
        results.emit("launch", "sync", "wall", times,
                     note="RawKernel (empty) <<<1,256>>> + "
                     "stream.synchronize()")

    def alloc():
        empty = cp.empty
        n = MIB // 4
        f32 = cp.float32
        reps = 200 if args.quick else 20000
        for _ in range(100):
            a = empty(n, f32)
            del a
        times = []
        for _ in range(reps):
            t0 = pc()
            a = empty(n, f32)
            del a
            times.append(pc() - t0)
        device_sync()
        results.emit("alloc_free", "pool", "wall", times, MIB,
                     note="a = cupy.empty(262144, float32); del a "
                     "(CuPy's memory pool)")

    def copy16():
        host = bl.random_block(4, seed=2)
        back = np.empty(4, np.float32)
        dev = cp.empty(4, cp.float32)
        reps = 200 if args.quick else 10000
        for case in ("h2d", "d2h"):
            times = []
            for r in range(-100, reps):
                t0 = pc()
                if case == "h2d":
                    dev.set(host)
                else:
                    dev.get(out=back)
                if r >= 0:
                    times.append(pc() - t0)
            results.emit("copy16", case, "wall", times, 16, 16,
                         note="ndarray.set / ndarray.get(out=), 4 float32, "
                         "NumPy (pageable) host array")
        if not np.array_equal(host, back):
            raise AssertionError("copy16: the data came back changed")

    def arenas():
        if "arenas" not in state:
            nbytes = bl.arena_bytes(args)
            count = nbytes // 4
            print(f"cupy: arenas: 3 x {nbytes // MIB} MiB", file=sys.stderr)
            pageable = np.empty(count, np.float32)
            bl.fill_tiled(pageable, data.block)
            pinned = cupyx.empty_pinned(count, np.float32)
            pinned[:] = pageable
            dev = cp.empty(count, cp.float32)
            dev.set(pinned)
            device_sync()
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
                    dviews[j].set(hviews[j])
                else:
                    dviews[j].get(out=hviews[j])
                device_sync()
                return pc() - t0

            once(0)
            one = once(1 % len(offsets))
            count = reps or bl.adaptive_reps(one)
            times = [once(r % len(offsets)) for r in range(count)]
            results.emit(figure, case, "wall", times, size, size,
                         note="ndarray.set / get(out=) + "
                         "cudaDeviceSynchronize; " +
                         ("cupyx.empty_pinned" if case.startswith("pinned")
                          else "NumPy array"))

    def copy256():
        size = bl.copy256_bytes(args)
        copy_point("copy256", size, 5 if args.quick else 30)
        nbytes, pageable, pinned, dev = arenas()
        n = size // 4
        dev[:n].set(pinned[:n])
        back = dev[:n].get()
        if not np.array_equal(back, pinned[:n]):
            raise AssertionError("copy256: the data came back changed")

    def sweep():
        for size in bl.sweep_sizes(args.sweep_max):
            copy_point("sweep", size, 3 if args.quick else 0)

    def partitions():
        if "parts" not in state:
            n = data.n
            print(f"cupy: partitions: 4 x {n * 4 // MIB} MiB", file=sys.stderr)
            parts = []
            for p in range(4):
                part = cp.empty(n, cp.float32)
                part.set(data.block)
                part *= np.float32(2.0 ** p)          # exact
                parts.append(part)
            state["parts"] = parts
            state["copy_dst"] = cp.empty(n, cp.float32)
            device_sync()
        return state["parts"]

    def d2d():
        parts = partitions()
        dst = state["copy_dst"]
        nbytes = data.n * 4
        reps = 5 if args.quick else 20

        def copy(i):
            dst.data.copy_from_device_async(parts[i % 4].data, nbytes, stream)

        for i in range(3):
            event_time(copy, i)
        times = [event_time(copy, i) for i in range(reps)]
        results.emit("d2d", "1GiB", "event", times, nbytes, 2 * nbytes,
                     note="MemoryPointer.copy_from_device_async in a "
                     "stream, 4 sources rotated; read + write")

    def algo_bw():
        parts = partitions()
        update_host = bl.random_block(4, seed=3)
        update = cp.asarray(update_host)
        partial = cp.empty(4, cp.float32)
        reps = 5 if args.quick else 20

        def run(i):
            algo(parts[i % 4], update, partial)

        for i in range(3):
            event_time(run, i)
        times = [event_time(run, i) for i in range(reps)]
        n = data.n
        results.emit("algo_bw", "2^28", "event", times, n * 4, n * 4,
                     note="images.mean(dtype=float64) + ElementwiseKernel "
                     "in a stream, 4 inputs rotated; bytes read")
        last = (reps - 1) % 4
        want = (data.means()[last]
                + update_host.astype(np.float64)).astype(np.float32)
        bl.check_close(partial.get(), want, 1e-5, "algo_bw")

    def workload_loop(case, kernel_name, images, n, iters, stats, note):
        update = np.empty(4, np.float32)
        partial = np.empty((4, 4), np.float32)
        gpu_update = cp.empty(4, cp.float32)
        gpu_partial = [cp.empty(4, cp.float32) for _ in range(4)]
        one = (1,)
        if kernel_name == "algo":
            calls = [functools.partial(algo, images[i], gpu_update,
                                       gpu_partial[i]) for i in range(4)]
        else:
            calls = [functools.partial(seed_kernel, one, one,
                                       (images[i], gpu_update, gpu_partial[i],
                                        np.int64(n))) for i in range(4)]
        stitching = bl.stitching
        warm = max(10, iters // 10)

        def iteration():
            for i in range(4):
                calls[i]()
                gpu_partial[i].get(out=partial[i])
            stitching(update, partial)
            gpu_update.set(update)

        times = []
        for r in range(-warm, iters):
            if (r + warm) % bl.RESET_EVERY == 0:
                update[:] = bl.INITIAL_UPDATE
                gpu_update.set(update)
                current.synchronize()
            t0 = pc()
            iteration()
            if r >= 0:
                times.append(pc() - t0)
        results.emit("workload", case, "wall", times, note=note)
        update[:] = bl.INITIAL_UPDATE
        gpu_update.set(update)
        for _ in range(3):
            iteration()
        want = bl.reference_updates(stats, 3, kernel_name)
        bl.check_close(update, want, 1e-5 if kernel_name == "algo" else 1e-6,
                       f"workload {case}")

    def workload():
        small = [cp.asarray(part) for part in data.small]
        workload_loop("seed_4x10", "algo_seed", small, 10,
                      200 if args.quick else 3000, data.small_last,
                      "RawKernel from kernels/algo_seed.cu <<<1,1>>>, "
                      "get(out=), set()")
        workload_loop("algo_4x2^28", "algo", partitions(), data.n,
                      20 if args.quick else 200, data.means(),
                      "images.mean(dtype=float64) + ElementwiseKernel, "
                      "get(out=), set()")

    def seed_rate():
        parts = partitions()
        n = min(data.n, 1 << 18)
        update = cp.zeros(4, cp.float32)
        partial = cp.empty(4, cp.float32)
        kargs = (parts[0], update, partial, np.int64(n))

        def run(i):
            seed_kernel((1,), (1,), kargs)

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
