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
  algo       a cupy.RawKernel made from the kernel in kernels/algo.cu
             itself (its device code, read from the file at start),
             launched with the shape gpumem's launcher chooses and, as
             the launcher does, a scratch area per stream whose counter
             the kernel's last block sets back to 0.  The algo_bw figure
             also times what a CuPy user would write without it,
             images.mean(dtype=cupy.float64) and one ElementwiseKernel
             (case "2^28_mean").
"""

import functools
import os
import re
import sys
import time

import numpy as np

import benchlib as bl
from benchlib import MIB
from benchdriver import Driver

try:
    import cupy as cp
    import cupyx
except ImportError as exc:            # no CuPy here: nothing to measure
    print(f"bench_cupy.py: CuPy is not importable ({exc})", file=sys.stderr)
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
ALGO_SEED_CU = os.path.join(HERE, os.pardir, "kernels", "algo_seed.cu")
ALGO_CU = os.path.join(HERE, os.pardir, "kernels", "algo.cu")

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


def algo_source(path=ALGO_CU):
    """The device code of kernels/algo.cu as NVRTC source: everything
    between the includes and the launcher's scratch table, the kernel
    extern "C", the fixed-width integer types spelled for NVRTC."""
    with open(path) as f:
        text = f.read()
    start = text.rfind("#include")
    start = text.index("\n", start) + 1
    end = min(k for k in (text.find("\n/* The streams' scratch areas"),
                          text.find("\ncudaError_t\ngm_kernel_algo"))
              if k >= 0)
    body = text[start:end]
    if "algo_kernel" not in body:
        raise RuntimeError(f"{path}: no algo_kernel before the launcher")
    body = re.sub(r"static\s+__global__", 'extern "C" __global__', body)
    return ("typedef long long int64_t;\n"
            "typedef unsigned long long uint64_t;\n"
            "typedef unsigned long long uintptr_t;\n"
            "#define INT32_MAX 2147483647\n" + body)


class AlgoLauncher:
    """kernels/algo.cu's launcher in CuPy: the launcher's shape for the
    size, one scratch area per stream (zeroed once; the kernel's last
    block sets its counter back to 0), no scratch for one block."""

    def __init__(self, sm_count):
        self.kernel = cp.RawKernel(algo_source(), "algo_kernel")
        self.sm_count = sm_count
        self.scratch = {}

    def __call__(self, images, update, partial, n):
        blocks, threads = bl.algo_shape(n, self.sm_count)
        null = np.uint64(0)
        if blocks == 1:
            extra = (null, null)
        else:
            key = (cp.cuda.Device().id, cp.cuda.get_current_stream().ptr)
            area = self.scratch.get(key)
            if area is None or area.size - 1 < blocks:
                area = cp.zeros(1 + max(blocks, 1024), cp.uint64)
                self.scratch[key] = area
            extra = (area[:1], area[1:].view(cp.float64))
        self.kernel((blocks,), (threads,),
                    (images, update, partial, np.int64(n)) + extra)


class Cupy:
    """The timed bodies of the shared figures (bench/benchdriver.py), as
    a CuPy user writes them: ndarray.set / get(out=) and
    cudaDeviceSynchronize for the host copies;
    MemoryPointer.copy_from_device_async and kernels in a stream, CUDA
    events around them, for the device's own figures."""

    name = "cupy"
    notes = {
        "host_copy": "ndarray.set / get(out=) + cudaDeviceSynchronize; ",
        "pinned": "cupyx.empty_pinned",
        "sweep_d2d": "MemoryPointer.copy_from_device_async in a stream, "
                     "events; read + write",
        "d2d": "MemoryPointer.copy_from_device_async in a stream, 4 "
               "sources rotated; read + write",
        "algo_bw": "RawKernel of kernels/algo.cu in a stream, launcher's "
                   "shape, 4 inputs rotated; bytes read",
        "algo_sweep": "RawKernel of kernels/algo.cu in a stream; bytes "
                      "read",
        "algo_sweep_d2d": "copy_from_device_async in a stream; read + "
                          "write",
    }

    def __init__(self, sm_count):
        self.stream = cp.cuda.Stream()
        self.start, self.end = cp.cuda.Event(), cp.cuda.Event()
        self.seed_kernel = cp.RawKernel(algo_seed_source(),
                                        "algo_seed_kernel")
        launcher = AlgoLauncher(sm_count)

        def algo(images, update, partial, n=None):
            launcher(images, update, partial,
                     images.size if n is None else n)

        self.algo = algo

    def event_time(self, fn, index):
        start, end, stream = self.start, self.end, self.stream
        start.record(stream)
        with stream:
            fn(index)
        end.record(stream)
        end.synchronize()
        return cp.cuda.get_elapsed_time(start, end) / 1e3

    def empty(self, count):
        return cp.empty(count, cp.float32)

    def to_device(self, host):
        return cp.asarray(host)

    def pinned_empty(self, count):
        return cupyx.empty_pinned(count, np.float32)

    def upload(self, dev, host):
        dev.set(host)
        cp.cuda.runtime.deviceSynchronize()

    def download(self, dev):
        return dev.get()

    def partition(self, block, p):
        part = cp.empty(block.size, cp.float32)
        part.set(block)
        part *= np.float32(2.0 ** p)          # exact
        return part

    def settle(self):
        cp.cuda.runtime.deviceSynchronize()

    def host_copy(self, h2d, dviews, hviews):
        pc = time.perf_counter
        device_sync = cp.cuda.runtime.deviceSynchronize

        def once(j):
            t0 = pc()
            if h2d:
                dviews[j].set(hviews[j])
            else:
                dviews[j].get(out=hviews[j])
            device_sync()
            return pc() - t0

        return once

    def d2d_pairs(self, pairs, nbytes):
        stream = self.stream

        def copy(j):
            src, dst = pairs[j % len(pairs)]
            dst.data.copy_from_device_async(src.data, nbytes, stream)

        return copy

    def d2d_from(self, dst, sources, nbytes):
        stream, k = self.stream, len(sources)

        def copy(j):
            dst.data.copy_from_device_async(sources[j % k].data, nbytes,
                                            stream)

        return copy

    def algo_from(self, sources, update, partial, n):
        algo, k = self.algo, len(sources)

        def run(j):
            algo(sources[j % k], update, partial, n)

        return run

    def seed_call(self, images, update, partial, n):
        seed_kernel = self.seed_kernel
        kargs = (images, update, partial, np.int64(n))

        def run(i):
            seed_kernel((1,), (1,), kargs)

        return run


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
    lib = Cupy(props["multiProcessorCount"])
    stream, event_time, algo = lib.stream, lib.event_time, lib.algo
    seed_kernel = lib.seed_kernel
    device_sync = cp.cuda.runtime.deviceSynchronize
    empty_kernel = cp.RawKernel(EMPTY_SOURCE, "empty_kernel")
    finish = cp.ElementwiseKernel(
        "float64 mean, float32 update", "float32 partial",
        "partial = (float) (mean + (double) update)", "gm_bench_algo_finish")
    driver = Driver(lib, args, results, data)
    partitions = driver.partitions

    def algo_mean(images, update, partial):
        finish(images.mean(dtype=cp.float64), update, partial)

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

    def algo_bw():
        """The driver's algo_bw, then what a CuPy user would write without
        the RawKernel: images.mean(dtype=float64) and one
        ElementwiseKernel, on the same data."""
        parts, update, partial, reps, want = driver.algo_bw()
        n = data.n

        def run_mean(i):
            algo_mean(parts[i % 4], update, partial)

        for i in range(3):
            event_time(run_mean, i)
        times = [event_time(run_mean, i) for i in range(reps)]
        results.emit("algo_bw", "2^28_mean", "event", times, n * 4, n * 4,
                     note="images.mean(dtype=float64) + ElementwiseKernel "
                     "in a stream, 4 inputs rotated; bytes read")
        bl.check_close(partial.get(), want, 1e-5, "algo_bw (mean)")

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
                      "RawKernel of kernels/algo.cu, get(out=), set()")

    def loop_sweep():
        parts = partitions()
        update = np.empty(4, np.float32)
        partial = np.empty((4, 4), np.float32)
        gpu_update = cp.empty(4, cp.float32)
        gpu_partial = [cp.empty(4, cp.float32) for _ in range(4)]
        stitching = bl.stitching
        for m in bl.loop_counts(args.log2n):
            counts = bl.split_counts(m)
            images = [parts[i][:counts[i]] for i in range(4)]
            times = []
            begin = pc()
            for r in range(2010):
                if r % bl.RESET_EVERY == 0:
                    update[:] = bl.INITIAL_UPDATE
                    gpu_update.set(update)
                    current.synchronize()
                t0 = pc()
                for i in range(4):
                    algo(images[i], gpu_update, gpu_partial[i], counts[i])
                    gpu_partial[i].get(out=partial[i])
                stitching(update, partial)
                gpu_update.set(update)
                if r >= 10:
                    times.append(pc() - t0)
                if len(times) >= 20 and pc() - begin > bl.POINT_SECONDS:
                    break
            results.emit("loop_sweep", f"cupy_{m}", "wall", times, m * 4,
                         note="RawKernel of kernels/algo.cu, get(out=), "
                         "set(), serial")

    def multigpu():
        """Peer copies between every ordered pair of devices (up to 16;
        256 MiB, peer access enabled as CuPy allows) and the stitching workload's
        loop on 1, 2 and all devices, serial and concurrent (a stream
        per device, get() into pinned memory asynchronously, one wait
        per device)."""
        ndev = cp.cuda.runtime.getDeviceCount()
        if ndev < 2:
            print(f"cupy: multigpu: {ndev} device, skipped", file=sys.stderr)
            return
        nbytes = MIB if args.quick else 256 * MIB
        peers = range(min(ndev, 16))
        pairs = [(a, b) for a in peers for b in peers if a != b]
        for d, e in pairs:
            with cp.cuda.Device(d):
                try:
                    if cp.cuda.runtime.deviceCanAccessPeer(d, e):
                        cp.cuda.runtime.deviceEnablePeerAccess(e)
                except cp.cuda.runtime.CUDARuntimeError as exc:
                    print(f"cupy: peer access {d} -> {e}: {exc}",
                          file=sys.stderr)
        bufs = []
        for d in peers:
            with cp.cuda.Device(d):
                bufs.append(cp.zeros(nbytes // 4, cp.float32))
        reps = 5 if args.quick else 20
        for src, dst in pairs:
            with cp.cuda.Device(src):
                s = cp.cuda.Stream(non_blocking=True)
                e0, e1 = cp.cuda.Event(), cp.cuda.Event()
                times = []
                for r in range(-3, reps):
                    e0.record(s)
                    bufs[dst].data.copy_from_device_async(bufs[src].data,
                                                          nbytes, s)
                    e1.record(s)
                    e1.synchronize()
                    if r >= 0:
                        times.append(cp.cuda.get_elapsed_time(e0, e1) / 1e3)
            results.emit("multigpu", f"peer_{src}_{dst}", "event", times,
                         nbytes, nbytes, note="copy_from_device_async "
                         "between devices, 256 MiB, events")
        del bufs
        parts = partitions()
        whole = data.n
        sets = bl.multigpu_sets(ndev)
        copies = {}
        for nd in sets:
            for i in range(4):
                d = i % nd
                if d and (d, i) not in copies:
                    with cp.cuda.Device(d):
                        copies[(d, i)] = cp.empty(whole, cp.float32)
                        copies[(d, i)].data.copy_from_device(parts[i].data,
                                                             whole * 4)
        streams = {}
        for d in range(max(sets)):
            with cp.cuda.Device(d):
                streams[d] = cp.cuda.Stream(non_blocking=True)
        pinned_partial = cupyx.empty_pinned((4, 4), np.float32)
        for label, n in (("4x10", 10), ("4x2^28", whole)):
            for nd in sets:
                devs = [i % nd for i in range(4)]
                images = [parts[i] if devs[i] == 0 else copies[(devs[i], i)]
                          for i in range(4)]
                gpu_update, gpu_partial = {}, []
                for d in sorted(set(devs)):
                    with cp.cuda.Device(d):
                        gpu_update[d] = cp.empty(4, cp.float32)
                for i in range(4):
                    with cp.cuda.Device(devs[i]):
                        gpu_partial.append(cp.empty(4, cp.float32))
                update = np.empty(4, np.float32)
                partial = np.empty((4, 4), np.float32)
                for concurrent in (False, True):
                    times = []
                    begin = pc()
                    for r in range(2010):
                        if r % bl.RESET_EVERY == 0:
                            update[:] = bl.INITIAL_UPDATE
                            for d in gpu_update:
                                streams[d].synchronize()
                            for d, mem in gpu_update.items():
                                with cp.cuda.Device(d):
                                    mem.set(update)
                                    cp.cuda.runtime.deviceSynchronize()
                        t0 = pc()
                        if not concurrent:
                            for i in range(4):
                                with cp.cuda.Device(devs[i]):
                                    algo(images[i], gpu_update[devs[i]],
                                         gpu_partial[i], n)
                                    gpu_partial[i].get(out=partial[i])
                            bl.stitching(update, partial)
                            for d, mem in gpu_update.items():
                                with cp.cuda.Device(d):
                                    mem.set(update)
                        else:
                            for i in range(4):
                                d = devs[i]
                                with cp.cuda.Device(d), streams[d]:
                                    algo(images[i], gpu_update[d],
                                         gpu_partial[i], n)
                                    cp.cuda.runtime.memcpyAsync(
                                        pinned_partial[i].ctypes.data,
                                        gpu_partial[i].data.ptr, 16,
                                        cp.cuda.runtime.
                                        memcpyDeviceToHost,
                                        streams[d].ptr)
                            for d in gpu_update:
                                streams[d].synchronize()
                            partial[:] = pinned_partial
                            bl.stitching(update, partial)
                            for d, mem in gpu_update.items():
                                with cp.cuda.Device(d), streams[d]:
                                    mem.set(update, stream=streams[d])
                        if r >= 10:
                            times.append(pc() - t0)
                        if len(times) >= 20 and pc() - begin > \
                                2 * bl.POINT_SECONDS:
                            break
                    for d in gpu_update:
                        streams[d].synchronize()
                    kind = "concurrent" if concurrent else "serial"
                    results.emit("multigpu", f"loop_{label}_{nd}gpu_{kind}",
                                 "wall", times, note="RawKernel of "
                                 f"kernels/algo.cu, devices {devs}, {kind}")

    return results.run(args, {
        "launch": launch, "alloc": alloc, "copy16": copy16,
        "copy256": driver.copy256, "sweep": driver.sweep, "d2d": driver.d2d,
        "algo_bw": algo_bw, "algo_sweep": driver.algo_sweep,
        "loop_sweep": loop_sweep, "workload": workload,
        "seed_rate": driver.seed_rate, "multigpu": multigpu})


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
