"""Allocation + free of 1 MiB through each library's own allocator and
through gpumem's pool (gpumem.use_pool), per call in microseconds, over
several processes a side, each the median of its repeats: each side's
median and each process's, and the median of the ratios of the pairs
of processes that ran one after the other (bench/processes.py).

    gpumem bench/frameworks_alloc.py [--processes N] [--calls N]

Each (library, allocator) pair runs in fresh processes of its own, in
turn, since a library's allocator is chosen once a process.  Targets
(issue 29): PyTorch through gpumem at most 1.5x PyTorch's caching
allocator, CuPy at most 1.2x CuPy's MemoryPool, judged on the pairs'
ratio.  It says how CuPy's allocations read its current stream
(gpumem._frameworks.cupy_stream_read: through CuPy's C function, or
through Python).  CuPy also runs on CUDA's stream-ordered pool through
its own code (cupy.cuda.MemoryAsyncPool: cudaMallocFromPoolAsync and
cudaFreeAsync for each allocation, as gpumem's pool makes): the least
any allocator on CUDA's pool costs CuPy, beside its MemoryPool and
gpumem's pool.
bench/NOTES.md records the runs.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

from processes import paired_ratio

CHILD = r"""
import json, sys, time
import gpumem
library, mode, calls, repeats = sys.argv[-4], sys.argv[-3], int(sys.argv[-2]), int(sys.argv[-1])
if mode == "gpumem":
    gpumem.use_pool(library)
elif mode == "cuda_pool":
    import cupy
    cupy.cuda.set_allocator(cupy.cuda.MemoryAsyncPool().malloc)
nbytes = 1 << 20
if library == "torch":
    import torch
    def one():
        t = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
        del t
    sync = torch.cuda.synchronize
else:
    import cupy
    def one():
        c = cupy.empty(nbytes, dtype=cupy.uint8)
        del c
    sync = cupy.cuda.runtime.deviceSynchronize
for _ in range(1000):
    one()
sync()
samples = []
for _ in range(repeats):
    start = time.perf_counter()
    for _ in range(calls):
        one()
    samples.append((time.perf_counter() - start) / calls * 1e6)
sync()
samples.sort()
path = None
if mode == "gpumem" and library == "cupy":
    path = sys.modules["gpumem._frameworks"].cupy_stream_read
print(json.dumps([samples[len(samples) // 2], path]))
"""

TARGETS = {"torch": 1.5, "cupy": 1.2}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=5)
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--repeats", type=int, default=9)
    args = parser.parse_args()
    gpumem_program = os.environ.get("GPUMEM", "gpumem")
    results = {}
    paths = set()
    for library in ("torch", "cupy"):
        modes = ("own", "gpumem") + (("cuda_pool",) if library == "cupy"
                                     else ())
        for round_ in range(args.processes):
            for mode in modes:
                run = subprocess.run(
                    [gpumem_program, "-q", "-c", CHILD, library, mode,
                     str(args.calls), str(args.repeats)],
                    capture_output=True, text=True, timeout=300)
                if run.returncode != 0:
                    print(f"{library} {mode}: failed\n{run.stderr[-2000:]}")
                    break
                median, path = json.loads(run.stdout.strip().splitlines()[-1])
                results.setdefault((library, mode), []).append(median)
                if path is not None:
                    paths.add(path)
    for path in sorted(paths):
        print("CuPy on gpumem's pool: gpumem's allocator function in C, "
              f"the stream read through {path}\n")
    print("| library | own allocator (us) | gpumem's pool (us) | ratio of "
          "the pairs | ratio of the medians | target |")
    print("| --- | --- | --- | --- | --- | --- |")
    for library in ("torch", "cupy"):
        own = results.get((library, "own"))
        pool = results.get((library, "gpumem"))
        if not own or not pool:
            print(f"| {library} | n/a | n/a | n/a | n/a | "
                  f"{TARGETS[library]}x |")
            continue
        o, p = statistics.median(own), statistics.median(pool)
        ratio = paired_ratio(pool, own)
        verdict = "met" if ratio <= TARGETS[library] else "missed"
        print(f"| {library} | {o:.2f} ({', '.join(f'{x:.2f}' for x in own)})"
              f" | {p:.2f} ({', '.join(f'{x:.2f}' for x in pool)}) | "
              f"{ratio:.2f}x | {p / o:.2f}x | {TARGETS[library]}x: "
              f"{verdict} |")
    floor = results.get(("cupy", "cuda_pool"))
    own, pool = results.get(("cupy", "own")), results.get(("cupy", "gpumem"))
    if floor and own and pool:
        f = statistics.median(floor)
        print(f"\nCuPy on CUDA's pool through its own MemoryAsyncPool: "
              f"{f:.2f} us ({', '.join(f'{x:.2f}' for x in floor)}); "
              f"against its MemoryPool {paired_ratio(floor, own):.2f}x "
              f"(the pairs), gpumem's pool against it "
              f"{paired_ratio(pool, floor):.2f}x")

if __name__ == "__main__":
    sys.exit(main())
