"""Where a small synchronous copy's microseconds go (issue 55's misses:
page-locked copies of 4-128 KiB at 0.72-0.74x raw C, pageable ones
below 1 MiB at 0.73x, the 16-byte copy to the device at 1.21-1.50x):
gpumem.copy against the CUDA recipes of the same copy, timed from C
(bench/probes/smallcopy_split.c, built here against the toolkit's
libcudart) in this very process, on the same gpumem buffers, the
recipes and gpumem.copy in rotation, ROUNDS rounds, the median of the
rounds' medians.  Not part of make bench:

    gpumem bench/probes/smallcopy_split.py [--rounds N] [--reps N]

Columns (microseconds a copy): raw = cudaMemcpy + cudaDeviceSynchronize
with the direction named (make bench's sweep), memcpy = that cudaMemcpy
alone, gm-recipe = gpumem's CUDA calls for the kind of memory
(page-locked: cudaMemcpyAsync on the legacy stream + cudaStreamSynchronize;
pageable up to 64 KiB: the pointer query, the bounce buffer, the same
queued copy and wait; pageable above: cudaMemcpy +
cudaStreamSynchronize), kind = the page-locked recipe with the direction
named instead of cudaMemcpyDefault, queried = the page-locked recipe
with the pointer query first, spin = the queued copy waited for by
polling, own-stream = the queued copy on a non-blocking stream, query =
cudaPointerGetAttributes alone, copy = gpumem.copy.  copy - gm-recipe is
gpumem's path above its CUDA calls (Python, the argument checks, the
ordering); gm-recipe - raw is the recipe's own difference.  CUDA_HOME
(default /usr/local/cuda) names the toolkit; CC the compiler.
"""

import argparse
import ctypes
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

import gpumem

HERE = os.path.dirname(os.path.abspath(__file__))
KIB = 1 << 10
SMALL_MAX = 64 * KIB            # GM_SMALL_MAX, src/cuda/cuda-staging.h
SIZES = (16, 4 * KIB, 8 * KIB, 16 * KIB, 32 * KIB, 64 * KIB, 128 * KIB)
# The recipes of smallcopy_split.c, in its enum's order.
(RAW, MEMCPY, GM_PINNED, QUERIED, SPIN, OWN, GM_SMALL, MEMCPY_SSYNC, QUERY,
 GM_PINNED_KIND) = range(10)


def build():
    cuda = os.environ.get("CUDA_HOME", "/usr/local/cuda")
    work = tempfile.mkdtemp(prefix="gpumem-smallcopy.")
    out = os.path.join(work, "smallcopy_split.so")
    subprocess.run([os.environ.get("CC", "cc"), "-O2", "-std=c11",
                    "-shared", "-fPIC", "-I" + os.path.join(cuda, "include"),
                    os.path.join(HERE, "smallcopy_split.c"), "-o", out,
                    "-L" + os.path.join(cuda, "lib64"), "-lcudart",
                    "-Wl,-rpath," + os.path.join(cuda, "lib64")],
                   check=True)
    lib = ctypes.CDLL(out)
    lib.sc_time.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p,
                            ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                            ctypes.POINTER(ctypes.c_double)]
    lib.sc_init.argtypes = [ctypes.c_size_t]
    err = lib.sc_init(SMALL_MAX)
    if err:
        sys.exit(f"smallcopy_split: sc_init: CUDA error {err}")
    return lib


def c_time(lib, recipe, dst, src, n, to_device, reps):
    median = ctypes.c_double()
    err = lib.sc_time(recipe, dst, src, n, int(to_device), reps,
                      ctypes.byref(median))
    if err:
        raise RuntimeError(f"recipe {recipe}: CUDA error {err}")
    return median.value


def copy_time(dst, src, reps):
    """The median wall time of gpumem.copy(dst, src), microseconds."""
    for _ in range(100):
        gpumem.copy(dst, src)
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        gpumem.copy(dst, src)
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e6


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--reps", type=int, default=2000)
    args = parser.parse_args()
    if gpumem.backend != "cuda":
        print("smallcopy_split: needs the cuda backend", file=sys.stderr)
        return 77
    lib = build()
    count = max(SIZES) // 4
    dev = gpumem.empty((count,), "float32")
    hosts = {"pinned": gpumem.pinned_empty((count,), "float32"),
             "pageable": np.ones(count, np.float32)}
    hosts["pinned"][:] = 1.0
    names = ("raw", "memcpy", "gm-recipe", "kind", "queried", "spin",
             "own-stream", "query", "copy")
    print(f"microseconds a copy, medians of {args.rounds} rounds of "
          f"{args.reps}; copy = gpumem.copy")
    print("| host | direction | bytes | " + " | ".join(names)
          + " | copy - gm-recipe | gm-recipe - raw |")
    print("| --- | --- | ---: |" + " ---: |" * (len(names) + 2))
    for kind, host in hosts.items():
        for n in SIZES:
            for to_device in (True, False):
                hv, dv = host[:n // 4], dev[:n // 4]
                hp, dp = host.ctypes.data, dev.ptr
                dst, src = (dp, hp) if to_device else (hp, dp)
                if kind == "pinned":
                    gm = GM_PINNED
                elif n <= SMALL_MAX:
                    gm = GM_SMALL
                else:
                    gm = MEMCPY_SSYNC
                recipes = {"raw": RAW, "memcpy": MEMCPY, "gm-recipe": gm,
                           "kind": GM_PINNED_KIND, "queried": QUERIED,
                           "spin": SPIN, "own-stream": OWN, "query": QUERY}
                if kind == "pageable":
                    for name in ("kind", "queried", "spin", "own-stream"):
                        recipes.pop(name)
                got = {name: [] for name in names}
                for _ in range(args.rounds):
                    for name, recipe in recipes.items():
                        got[name].append(c_time(lib, recipe, dst, src, n,
                                                to_device, args.reps))
                    got["copy"].append(copy_time(dv, hv, args.reps)
                                       if to_device else
                                       copy_time(hv, dv, args.reps))
                med = {k: statistics.median(v) if v else None
                       for k, v in got.items()}
                cells = ["—" if med[k] is None else f"{med[k]:.2f}"
                         for k in names]
                print(f"| {kind} | {'h2d' if to_device else 'd2h'} | {n} | "
                      + " | ".join(cells)
                      + f" | {med['copy'] - med['gm-recipe']:+.2f}"
                      f" | {med['gm-recipe'] - med['raw']:+.2f} |",
                      flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
