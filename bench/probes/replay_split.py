"""Where the replay of the 4 x 10 stitching graph spends its time (issue
55's miss: gpumem's replay 1.20-1.64x raw C's own graph, target 1.1x):
the bench's iteration recorded as gpumem.graph and parts of it recorded
as graphs of their own, each replayed in rotation, ROUNDS rounds of
REPS replays, the median of the rounds' medians (microseconds a
replay).  Not part of make bench:

    gpumem bench/probes/replay_split.py [--rounds N] [--reps N]
    bench/build/raw graph        # raw C's graph_replay of seed_4x10, beside it

The graphs: kernels = the four algo_seed kernels alone; upload = the
upload of the update (a NumPy array) and the kernels; full = the
bench's iteration (the upload, per partition a kernel and a download of
its 4 floats into NumPy); one-download = the same with the four
partials in one device array and one download of all 16 floats; full,
page-locked = full with the host arrays made by gpumem.pinned_empty.
upload - kernels is an upload's share of a replay, full - upload four
downloads', full - one-download what three more staged copies cost,
full - (full, page-locked) what pageable host arrays cost; the kernels
row against raw C's replay bounds what the launch and the wait cost.
"""

import argparse
import statistics
import sys
import time

import numpy as np

import gpumem

N = 10          # images per partition, as the bench's seed_4x10


def graphs(pinned_update, pinned_partial):
    """{name: replayable graph}, and the arrays they read and write."""
    rng = np.random.default_rng(7)
    images = []
    for _ in range(4):
        mem = gpumem.alloc_gpu_memory(N)
        gpumem.copy_to_gpu(rng.random(N, dtype=np.float32), mem, N)
        images.append(mem)
    kernel = gpumem.kernels.algo_seed
    update = np.full(4, 0.25, np.float32)
    partial = np.zeros((4, 4), np.float32)
    gpu_update = gpumem.alloc_gpu_memory(4)
    gpu_partial = [gpumem.alloc_gpu_memory(4) for _ in range(4)]
    gpu_all = gpumem.alloc_gpu_memory(16)
    gpumem.copy_to_gpu(update, gpu_update, 4)
    out = {}
    with gpumem.graph(name="kernels") as g:
        for i in range(4):
            kernel(images[i], gpu_update, gpu_partial[i], N)
    out["kernels"] = g
    with gpumem.graph(name="upload") as g:
        gpumem.copy_to_gpu(update, gpu_update, 4)
        for i in range(4):
            kernel(images[i], gpu_update, gpu_partial[i], N)
    out["upload"] = g
    with gpumem.graph(name="full") as g:
        gpumem.copy_to_gpu(update, gpu_update, 4)
        for i in range(4):
            kernel(images[i], gpu_update, gpu_partial[i], N)
            gpumem.copy_from_gpu(gpu_partial[i], partial[i], 4)
    out["full"] = g
    with gpumem.graph(name="one-download") as g:
        gpumem.copy_to_gpu(update, gpu_update, 4)
        for i in range(4):
            kernel(images[i], gpu_update, gpu_all[4 * i:4 * i + 4], N)
        gpumem.copy_from_gpu(gpu_all, partial.reshape(16), 16)
    out["one-download"] = g
    pinned_update[:] = update
    with gpumem.graph(name="full, page-locked") as g:
        gpumem.copy_to_gpu(pinned_update, gpu_update, 4)
        for i in range(4):
            kernel(images[i], gpu_update, gpu_partial[i], N)
            gpumem.copy_from_gpu(gpu_partial[i], pinned_partial[i], 4)
    out["full, page-locked"] = g
    keep = (images, gpu_update, gpu_partial, gpu_all, update, partial)
    return out, keep


def replay_us(g, reps):
    for _ in range(100):
        g()
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        g()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e6


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--reps", type=int, default=3000)
    args = parser.parse_args()
    if gpumem.backend != "cuda":
        print("replay_split: needs the cuda backend", file=sys.stderr)
        return 77
    pinned_update = gpumem.pinned_empty((4,), "float32")
    pinned_partial = gpumem.pinned_empty((4, 4), "float32")
    found, keep = graphs(pinned_update, pinned_partial)
    got = {name: [] for name in found}
    for _ in range(args.rounds):
        for name, g in found.items():
            got[name].append(replay_us(g, args.reps))
    med = {name: statistics.median(v) for name, v in got.items()}
    print(f"microseconds a replay, medians of {args.rounds} rounds of "
          f"{args.reps}")
    print("| graph | host copies | us | each round |")
    print("| --- | ---: | ---: | --- |")
    for name, g in found.items():
        print(f"| {name} | {g.host_copies} | {med[name]:.2f} | "
              + ", ".join(f"{x:.2f}" for x in got[name]) + " |")
    for a, b in (("upload", "kernels"), ("full", "upload"),
                 ("full", "one-download"), ("full", "full, page-locked")):
        print(f"{a} - {b}: {med[a] - med[b]:+.2f} us")
    del keep
    return 0


if __name__ == "__main__":
    sys.exit(main())
