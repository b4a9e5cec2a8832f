"""The figures of issue 51 for managed memory and pinned host memory
(src/cuda/cuda-managed.c, src/python/py-managed.c; docs/memory.md).

    gpumem bench/managed.py [--quick] [--json FILE] [--markdown FILE]

In one process, on device 0:

- alloc: gpumem.empty + free of 1 MiB, device memory and then managed
  memory (memory='managed'), in microseconds (the median of 9 batches);
  target: managed <= 1.3x device.
- pinned: gpumem.pinned_empty of 1 MiB and its release, in microseconds,
  with CuPy's PinnedMemoryPool beside it where CuPy imports; target:
  <= 2 us.
- prefetch: 1 GiB of managed memory prefetched to the device and back to
  the host, in GB/s each way, beside cudaMemcpy from and to pinned memory
  (gpumem.copy_to_gpu / copy_from_gpu of a pinned_empty buffer, which are
  cudaMemcpyAsync on the legacy stream) and raw cudaMemPrefetchAsync
  through ctypes on the same managed block; target: prefetch >= 0.9x the
  pinned copy's bandwidth, each way.
- loop: the stitching loop (scripts/stitching.py's algo kernel, 4
  partitions on device 0) over 1 GiB of images in device memory and in
  managed memory, the median iteration after the first; target: managed
  <= 1.05x device.

Prints one line a figure and a verdict a target, and writes them as JSON
to --json and as the report's table (bench/report.py includes the run's
managed.md; its "- ... **met**" lines count among the run's verdicts)
to --markdown.  --quick shrinks every size (a smoke test; on the host
backend it runs without a GPU, and its verdicts mean nothing).  The
oversubscribed loop (1.5x the device's memory) is
bench/managed_oversubscribe.py, run apart.
"""

import argparse
import ctypes
import ctypes.util
import json
import statistics
import sys
import time

import numpy as np

import gpumem
from benchlib import figure_table, median_seconds

MiB = 1 << 20
GiB = 1 << 30


def per_call_us(fn, calls, batches=9, warm=200):
    """The median over BATCHES of FN's time per call, in microseconds."""
    for _ in range(warm):
        fn()
    gpumem.synchronize()
    times = []
    for _ in range(batches):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        times.append((time.perf_counter() - start) / calls * 1e6)
    gpumem.synchronize()
    return statistics.median(times)


def alloc_figures(calls):
    def device():
        gpumem.empty(MiB, "uint8").free()

    def managed():
        gpumem.empty(MiB, "uint8", memory="managed").free()

    return {"alloc_device_us": per_call_us(device, calls),
            "alloc_managed_us": per_call_us(managed, calls)}


def pinned_figures(calls):
    def ours():
        buf = gpumem.pinned_empty(MiB, "uint8")
        del buf

    figures = {"pinned_us": per_call_us(ours, calls, warm=20)}
    try:
        import cupy
    except ImportError:
        return figures
    cupy.cuda.set_pinned_memory_allocator(
        cupy.cuda.PinnedMemoryPool().malloc)

    def theirs():
        mem = cupy.cuda.alloc_pinned_memory(MiB)
        del mem

    figures["pinned_cupy_us"] = per_call_us(theirs, calls, warm=20)
    return figures


class RawPrefetch:
    """cudaMemPrefetchAsync called through ctypes, on the legacy stream,
    and cudaStreamSynchronize; None where libcudart cannot be opened."""

    class Location(ctypes.Structure):
        _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]

    def __init__(self):
        self.lib = None
        names = ["libcudart.so.13", ctypes.util.find_library("cudart"),
                 "/usr/local/cuda/lib64/libcudart.so.13"]
        for name in filter(None, names):
            try:
                self.lib = ctypes.CDLL(name)
                break
            except OSError:
                continue
        if self.lib is None:
            return
        self.lib.cudaMemPrefetchAsync.argtypes = [
            ctypes.c_void_p, ctypes.c_size_t, self.Location, ctypes.c_uint,
            ctypes.c_void_p]
        self.lib.cudaStreamSynchronize.argtypes = [ctypes.c_void_p]

    def __call__(self, ptr, nbytes, device):
        # cudaMemLocationTypeDevice 1, cudaMemLocationTypeHost 2;
        # cudaStreamLegacy is the handle 1.
        where = self.Location(2, 0) if device == "host" else \
            self.Location(1, device)
        err = self.lib.cudaMemPrefetchAsync(ptr, nbytes, where, 0, 1)
        err = err or self.lib.cudaStreamSynchronize(1)
        if err:
            raise RuntimeError(f"cudaMemPrefetchAsync: error {err}")


def prefetch_figures(nbytes):
    figures = {}
    pinned = gpumem.pinned_empty(nbytes, "uint8")
    pinned[:] = 1
    device = gpumem.empty(nbytes, "uint8")
    figures["pinned_h2d_gbs"] = nbytes / median_seconds(
        lambda: gpumem.copy_to_gpu(pinned, device, nbytes)) / 1e9
    figures["pinned_d2h_gbs"] = nbytes / median_seconds(
        lambda: gpumem.copy_from_gpu(device, pinned, nbytes)) / 1e9
    device.free()
    del pinned
    managed = gpumem.empty(nbytes, "uint8", memory="managed")
    np.asarray(managed)[:] = 1                 # the pages on the host

    def there_and_back(prefetch):
        to_device, to_host = [], []
        for _ in range(5):
            start = time.perf_counter()
            prefetch(0)
            middle = time.perf_counter()
            prefetch("host")
            to_device.append(middle - start)
            to_host.append(time.perf_counter() - middle)
        return (nbytes / statistics.median(to_device) / 1e9,
                nbytes / statistics.median(to_host) / 1e9)

    (figures["prefetch_h2d_gbs"],
     figures["prefetch_d2h_gbs"]) = there_and_back(managed.prefetch)
    raw = RawPrefetch()
    if gpumem.backend == "cuda" and raw.lib is not None:
        (figures["raw_prefetch_h2d_gbs"],
         figures["raw_prefetch_d2h_gbs"]) = there_and_back(
            lambda where: raw(managed.ptr, nbytes, where))
    managed.free()
    return figures


def loop_figures(nimages, iterations):
    """The median iteration after the first of the stitching loop over
    NIMAGES float32 images on device 0, device and managed memory."""
    parts = np.array_split(np.arange(nimages, dtype=np.float32), 4)
    figures = {}
    for memory in ("device", "managed"):
        images = [gpumem.to_device(p, memory=memory) for p in parts]
        update = gpumem.zeros(4)
        partial = [gpumem.zeros(4) for _ in parts]
        host = np.empty((4, 4), np.float32)
        times = []
        for _ in range(iterations + 1):
            start = time.perf_counter()
            for i, part in enumerate(images):
                gpumem.kernels.algo(part, update, partial[i], part.size)
                gpumem.copy_from_gpu(partial[i], host[i], 4)
            upd = host[:, 0] + host[:, 1] + host[:, 2] - host[:, 3]
            gpumem.copy_to_gpu(upd * 0, update, 4)    # stays finite
            times.append(time.perf_counter() - start)
        figures[f"loop_{memory}_us"] = statistics.median(times[1:]) * 1e6
        del images, partial
    return figures


def verdicts(f):
    rows = []

    def judge(name, ratio, target, sense):
        met = ratio <= target if sense == "<=" else ratio >= target
        rows.append({"target": name, "ratio": ratio,
                     "rule": f"{sense} {target}",
                     "verdict": "met" if met else "missed"})

    judge("managed alloc / device alloc",
          f["alloc_managed_us"] / f["alloc_device_us"], 1.3, "<=")
    rows.append({"target": "pinned_empty + release (us)",
                 "ratio": f["pinned_us"], "rule": "<= 2",
                 "verdict": "met" if f["pinned_us"] <= 2 else "missed"})
    judge("prefetch to device / pinned H2D",
          f["prefetch_h2d_gbs"] / f["pinned_h2d_gbs"], 0.9, ">=")
    judge("prefetch to host / pinned D2H",
          f["prefetch_d2h_gbs"] / f["pinned_d2h_gbs"], 0.9, ">=")
    judge("managed loop / device loop",
          f["loop_managed_us"] / f["loop_device_us"], 1.05, "<=")
    return rows


def markdown(figures, rows):
    """The report's table of FIGURES and the verdicts ROWS."""
    lines = ["# Managed and pinned memory (issue 51)", "",
             "bench/managed.py on device 0 "
             f"({figures['device']}, backend {figures['backend']}): "
             "medians; microseconds (us) and GB/s.", ""]
    lines += figure_table(figures)
    lines.append("")
    for row in rows:
        mark = "**met**" if row["verdict"] == "met" else "**not met**"
        lines.append(f"- {row['target']}: {row['ratio']:.3f} "
                     f"(target {row['rule']}) {mark}")
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="tiny sizes: a smoke test of the script")
    parser.add_argument("--json", help="write the figures here")
    parser.add_argument("--markdown", help="write the report's table here")
    args = parser.parse_args()
    calls = 100 if args.quick else 2000
    prefetch_bytes = 16 * MiB if args.quick else GiB
    nimages = (1 << 16) if args.quick else (1 << 28)
    figures = {"backend": gpumem.backend,
               "device": gpumem.Device(0).name}
    figures.update(alloc_figures(calls))
    figures.update(pinned_figures(calls // 10))
    figures.update(prefetch_figures(prefetch_bytes))
    figures.update(loop_figures(nimages, 5 if args.quick else 20))
    rows = verdicts(figures)
    for key, value in figures.items():
        print(f"{key:24} {value:.3f}" if isinstance(value, float)
              else f"{key:24} {value}")
    for row in rows:
        print(f"{row['target']:34} {row['ratio']:8.3f}  {row['rule']:7} "
              f"{row['verdict']}")
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"figures": figures, "verdicts": rows}, out, indent=1)
    if args.markdown:
        with open(args.markdown, "w") as out:
            out.write(markdown(figures, rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
