"""The harness shared by bench_gpumem.py and bench_cupy.py: arguments,
statistics, the result format, sizes and the workload's host side.

The timed loops themselves live in each implementation's file, written
as a user of that library would write them, so that no layer of this
module sits inside a measurement; bench/benchdriver.py runs the figures
both measure the same way around those files' timed bodies.  raw.cu
writes the same records.

Result format: one JSON object a line,

    {"impl": "gpumem", "figure": "launch", "case": "async",
     "timer": "wall" | "event", "median_s": ..., "q1_s": ..., "q3_s": ...,
     "min_s": ..., "n": ..., "bytes": ..., "traffic": ..., "note": "...",
     "at_s": ...}

where the times are seconds per operation, BYTES the size of one
transfer, TRAFFIC the bytes a bandwidth counts (0 for figures that
are not bandwidths) and AT_S the seconds from the Results object's
making to the figure's last sample (raw.cu's records have none): a slow
stretch that a process's figures share at the same time, whatever their
size, is the machine's, not the size's.  A figure that fails writes {"figure": "error",
"case": FIGURE, "note": MESSAGE} and the run goes on; the program then
exits with status 1.  One {"figure": "meta", ...} record says what ran.
"""

import argparse
import json
import sys
import time
import traceback

import numpy as np

KIB, MIB, GIB = 1 << 10, 1 << 20, 1 << 30

# Buffers a bandwidth figure rotates among, at most.
MAX_SLOTS = 64
# Workload iterations between resets of the update: the stitching
# doubles it every iteration (float32 overflows after about 128).  The
# reset is outside the timed region.
RESET_EVERY = 64
# Adaptive repetitions of a sweep point: about this many seconds.
POINT_SECONDS = 0.12
COPY_CASES = ("pinned_h2d", "pinned_d2h", "pageable_h2d", "pageable_d2h")
# The sweep's cases: the four host copies and copy() device to device.
SWEEP_CASES = COPY_CASES + ("d2d",)
FIGURES = ("launch", "alloc", "copy16", "copy256", "sweep", "d2d",
           "algo_bw", "algo_sweep", "loop_sweep", "workload", "graph",
           "seed_rate",
           "multigpu", "staging")
INITIAL_UPDATE = (0.125, 0.25, 0.375, 0.5)


def parse_args(argv, prog):
    parser = argparse.ArgumentParser(
        prog=prog, description="The benchmark suite's figures "
        "(bench/NOTES.md); one JSON record a line.")
    parser.add_argument("figures", nargs="*", metavar="FIGURE",
                        help="any of %s, or all (default)"
                        % " ".join(FIGURES))
    parser.add_argument("--quick", action="store_true",
                        help="tiny sizes and few repetitions (a smoke test)")
    parser.add_argument("--out", metavar="FILE",
                        help="write the records here (default: stdout)")
    parser.add_argument("--log2n", type=int, default=None,
                        help="images per partition of the large workload "
                        "(2^N; default 28, 12 with --quick)")
    parser.add_argument("--sweep-max", type=int, default=None,
                        help="largest copy of the sweep in bytes "
                        "(default 1 GiB, 1 MiB with --quick)")
    parser.add_argument("--gpumem", default=None, metavar="PROGRAM",
                        help="the gpumem program, for running "
                        "scripts/stitching.py in the loop sweep")
    args = parser.parse_args(argv)
    chosen = set()
    for name in args.figures:
        if name == "all":
            chosen.update(FIGURES)
        elif name in FIGURES:
            chosen.add(name)
        else:
            parser.error(f"unknown figure {name!r}")
    args.figures = chosen or set(FIGURES)
    if args.log2n is None:
        args.log2n = 12 if args.quick else 28
    if not 2 <= args.log2n <= 31:
        parser.error("--log2n must be 2 .. 31")
    if args.sweep_max is None:
        args.sweep_max = MIB if args.quick else GIB
    if args.sweep_max < 4 * KIB:
        parser.error("--sweep-max must be at least 4096")
    return args


def median_seconds(fn, repeats=5):
    """The median of REPEATS timings of FN (complete on return), for the
    scripts that time a whole step (managed.py, spill.py)."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def figure_table(figures):
    """The markdown table of FIGURES (a dict) the sections' own scripts
    write into the report (managed.py, spill.py): the numbers only,
    floats to three places."""
    lines = ["| figure | value |", "| --- | ---: |"]
    for key, value in figures.items():
        if isinstance(value, float):
            lines.append(f"| {key} | {value:.3f} |")
        elif isinstance(value, int) and not isinstance(value, bool):
            lines.append(f"| {key} | {value} |")
    return lines


def quantile(ordered, p):
    """The P-quantile of the sorted list ORDERED, linearly interpolated
    (as raw.cu computes it)."""
    pos = (len(ordered) - 1) * p
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


class Results:
    """Writes the records of implementation IMPL to PATH (None: stdout)
    and a line of progress for each to standard error."""

    def __init__(self, impl, path):
        self.impl = impl
        self.file = open(path, "w") if path else sys.stdout
        self.failed = []
        self.start = time.perf_counter()

    def _write(self, record):
        self.file.write(json.dumps(record) + "\n")
        self.file.flush()

    def meta(self, **fields):
        self._write(dict(impl=self.impl, figure="meta", **fields))

    def emit(self, figure, case, timer, samples, nbytes=0, traffic=0,
             note=""):
        ordered = sorted(samples)
        median = quantile(ordered, 0.5)
        self._write(dict(
            impl=self.impl, figure=figure, case=case, timer=timer,
            median_s=median, q1_s=quantile(ordered, 0.25),
            q3_s=quantile(ordered, 0.75), min_s=ordered[0], n=len(ordered),
            bytes=nbytes, traffic=traffic, note=note,
            at_s=round(time.perf_counter() - self.start, 4)))
        line = f"{self.impl}: {figure:10s} {case:24s} {median * 1e6:10.3f} us"
        if traffic:
            line += f"  {traffic / median / 1e9:8.2f} GB/s"
        print(line, file=sys.stderr, flush=True)

    def run(self, args, table):
        """Runs every figure of TABLE (name -> function of no arguments)
        that ARGS chose, in TABLE's order; a failure is recorded and the
        next figure runs.  Returns the exit status."""
        for name, fn in table.items():
            if name not in args.figures:
                continue
            start = time.perf_counter()
            try:
                fn()
            except Exception as exc:   # record it and go on
                traceback.print_exc()
                self.failed.append(name)
                self._write(dict(impl=self.impl, figure="error", case=name,
                                 note=f"{type(exc).__name__}: {exc}"))
            print(f"{self.impl}: {name}: {time.perf_counter() - start:.1f} s",
                  file=sys.stderr, flush=True)
        if self.file is not sys.stdout:
            self.file.close()
        if self.failed:
            print(f"{self.impl}: FAILED: {' '.join(self.failed)}",
                  file=sys.stderr)
            return 1
        return 0


def adaptive_reps(one, lo=5, hi=200):
    """Repetitions that take about POINT_SECONDS when one takes ONE s."""
    if one <= 0:
        return hi
    return max(lo, min(hi, int(POINT_SECONDS / one)))


def sweep_sizes(max_bytes):
    """1 KiB, 2 KiB, ... up to MAX_BYTES: powers of 2."""
    sizes = []
    size = KIB
    while size <= max_bytes:
        sizes.append(size)
        size *= 2
    return sizes


def algo_sizes(log2n):
    """Floats per algo call in the algo sweep: 2^10 .. 2^LOG2N."""
    return [1 << k for k in range(10, log2n + 1)]


def algo_slot(log2n, n, j):
    """(partition, element offset) of place J for an algo call on N
    floats: up to 64 places, 16 spread over each of the 4 partitions of
    2^LOG2N floats (as raw.cu's algo_slot)."""
    whole = 1 << log2n
    per = min(whole // n, 16)
    return j % 4, ((j // 4) % per) * (whole // per // 4 * 4)


def loop_counts(log2n):
    """Image counts of the loop sweep: 40, 400, ... decades apart, then
    4 x 2^LOG2N (2^30 in a full run)."""
    most = 4 << log2n
    counts = []
    m = 40
    while m < most:
        counts.append(m)
        m *= 10
    return counts + [most]


def split_counts(m):
    """np.array_split's partition sizes for M images in 4."""
    return [m // 4 + (1 if i < m % 4 else 0) for i in range(4)]


def algo_shape(n, sm_count, max_threads=1024):
    """kernels/algo.cu's launcher's own shape: (blocks, threads)."""
    if n <= 1 << 16:
        return 1, min(1024, max_threads)
    threads = min(256, max_threads)
    return min(4 * sm_count, -(-n // (threads * 32))), threads


def multigpu_sets(devices):
    """Device counts the multi-GPU loops run on: 1, 2 and all."""
    return [1, 2] + ([min(devices, 16)] if devices > 2 else [])


def arena_bytes(args):
    """The size of each copy arena: twice the largest copy."""
    largest = args.sweep_max if args.quick else max(args.sweep_max, 256 * MIB)
    return 2 * largest


def copy256_bytes(args):
    return MIB if args.quick else 256 * MIB


def slots(arena, size):
    """Element offsets (float32) of the places a copy of SIZE bytes
    rotates among in an arena of ARENA bytes: up to MAX_SLOTS, spread
    evenly."""
    count = min(MAX_SLOTS, arena // size)
    stride = arena // count
    return [j * stride // 4 for j in range(count)]


def random_block(n, seed=1):
    """N float32 values in [0.5, 1.5): fresh, never zero."""
    block = np.random.default_rng(seed).random(n, dtype=np.float32)
    block += np.float32(0.5)
    return block


def fill_tiled(dst, block):
    """Fills the 1-D array DST with repeats of BLOCK."""
    for start in range(0, dst.size, block.size):
        piece = min(block.size, dst.size - start)
        dst[start:start + piece] = block[:piece]


def stitching(update, partial):
    """update[i] = p[i][0] + p[i][1] + p[i][2] - p[i][3], in place (the
    workload's stitching, as scripts/stitching.py writes it)."""
    p = partial
    update[:] = p[:, 0] + p[:, 1] + p[:, 2] - p[:, 3]


def reference_updates(stats, iterations, kernel):
    """The update after ITERATIONS iterations from INITIAL_UPDATE, on the
    host: STATS[i] is partition i's mean (algo, float64) or its last
    image (algo_seed, float32)."""
    update = np.array(INITIAL_UPDATE, np.float32)
    partial = np.empty((4, 4), np.float32)
    for _ in range(iterations):
        for i in range(4):
            if kernel == "algo":
                partial[i] = (np.float64(stats[i])
                              + update.astype(np.float64)).astype(np.float32)
            else:
                partial[i] = np.float32(stats[i]) + update
        stitching(update, partial)
    return update


def check_close(got, want, rel, what):
    got = np.asarray(got, np.float64)
    want = np.asarray(want, np.float64)
    scale = np.maximum(np.abs(want), 1.0)
    if not np.all(np.abs(got - want) <= rel * scale):
        raise AssertionError(f"{what}: got {got}, expected {want}")


class WorkloadData:
    """The host side of the workload: the 4 x 10 images (0 .. 39, as the
    stitching workload's np.arange(40) split in 4) and the block the 4 x 2^LOG2N
    partitions are made from (partition i = 2^i x block, exactly)."""

    def __init__(self, log2n):
        self.small = [np.arange(10 * i, 10 * i + 10, dtype=np.float32)
                      for i in range(4)]
        self.small_last = [float(part[-1]) for part in self.small]
        self.n = 1 << log2n
        self._block = None

    @property
    def block(self):
        if self._block is None:
            self._block = random_block(self.n)
        return self._block

    def means(self):
        base = float(np.sum(self.block, dtype=np.float64)) / self.n
        return [base * 2.0 ** i for i in range(4)]
