"""The figures of issue 52 for spilling (src/core/spill.c; docs/memory.md,
"Spilling").

    gpumem bench/spill.py [--quick] [--raw FILE] [--json FILE]
                          [--markdown FILE]

In one process, on device 0.  The device's memory is emulated by a
memory limit (gpumem.set_memory_limit): a device cannot be given less
memory than it has, so the images of the loops total RATIO times the
limit, not the device.  Every loop is the stitching loop over 4
partitions of float32 images (algo over each partition, its partial
update copied to the host), spilling on, every partition sent to host
memory once before the iterations (its first trip, which takes host
memory for it, timed apart as *_first_trips_ms: raw C's images start
there), the mean of the iterations after the first (the order of the moves may repeat over several
iterations: over 4 partitions with room for 2 the least moves, Belady's,
are 3, 3 and 2 an iteration, and a median would count 3 for each; 6
iterations hold whole periods of 2 and 3; the median is a figure too); the limit is the bytes in use before the images plus their
total over RATIO, so floor(4 / RATIO) partitions fit.

- clean: the images only read, RATIO 1.5 and 2.5; target: <= 1.25x
  the bus's bound, the partitions that do not fit uploaded once an
  iteration at the page-locked upload bandwidth measured here.
- prefetch: the same loop, each kernel followed by
  images[p + 1].prefetch(0, stream=s) on a gpumem.Stream; target:
  <= 1.1x raw CUDA C's best loop in the same memory (raw.cu's
  spill_loop figure, read from --raw, the records of raw C in the same
  run; "not run" where there are none, e.g. on the host backend).
- dirty: every iteration first negates each image in place
  (kernels.saxpy with a = -2 and x = y), RATIO 1.5; target: <= 1.25x
  the bound that counts the write-back, the partitions that do not fit
  downloaded at the page-locked download bandwidth and uploaded at the
  upload bandwidth.  With the prefetch of the next partition on a
  stream too (whose return starts the write-back of the partition just
  used beside it): <= 1.1x raw CUDA C's best dirty loop in the same
  memory.
- overhead: spilling off against on with nothing to spill, the two in
  alternate batches: gpumem.empty + free of 1 MiB (microseconds) and
  the loop over 4 partitions that fit (milliseconds); target: on <=
  1.05x off, each.
- return: a 1 GiB array spilled (a.spill()) and brought back
  (a.prefetch(0)), in GB/s; target: >= 0.9x the page-locked upload
  bandwidth.

Every partial update is compared with NumPy's mean of its partition,
and the dirty loops' images with NumPy's at the end: a mismatch, or a
loop that raises, fails the run (exit status 1) after the figures are
written.  Prints one line a figure and a verdict a target, and writes
them as JSON to --json and as the report's table (bench/report.py
includes the run's spill.md; its "- ... **met**" lines count among the
run's verdicts) to --markdown.  --quick shrinks every size (a smoke
test; on the host backend it runs without a GPU, and its verdicts mean
nothing).
"""

import argparse
import json
import statistics
import sys
import time

import numpy as np

import gpumem
from benchlib import figure_table, median_seconds

MiB = 1 << 20
GiB = 1 << 30
RATIOS = (1.5, 2.5)
DIRTY_RATIO = 1.5


def bandwidth_figures(nbytes):
    """Page-locked copies of NBYTES each way, in GB/s."""
    pinned = gpumem.pinned_empty(nbytes, "uint8")
    pinned[:] = 1
    device = gpumem.empty(nbytes, "uint8")
    figures = {
        "pinned_h2d_gbs": nbytes / median_seconds(
            lambda: gpumem.copy_to_gpu(pinned, device, nbytes)) / 1e9,
        "pinned_d2h_gbs": nbytes / median_seconds(
            lambda: gpumem.copy_from_gpu(device, pinned, nbytes)) / 1e9}
    device.free()
    del pinned
    return figures


class Images:
    """The loops' host images: 4 partitions of N float32 each and the
    mean of each, summed in double."""

    def __init__(self, n):
        rng = np.random.default_rng(7)
        self.n = n
        self.host = [rng.random(n, dtype=np.float32) for _ in range(4)]
        self.means = [float(np.mean(h, dtype=np.float64))
                      for h in self.host]
        self.checked = 0
        self.mismatches = []

    def check(self, what, p, got, want):
        """Compares partition P's partial update GOT with WANT."""
        self.checked += 1
        if not np.allclose(got, want, rtol=1e-4):
            self.mismatches.append(f"{what}, partition {p}: {got} != {want}")


def spill_loop(images, ratio, iterations, mode):
    """The stitching loop over IMAGES' partitions under a limit of
    1/RATIO of their bytes, spilling on; MODE "clean", "prefetch",
    "dirty" or "dirty_prefetch".  Returns (the mean and the median
    seconds of the iterations after the first, partitions that fit, the
    seconds of every partition's first trip to host memory before the
    iterations)."""
    n = images.n
    nbytes = 4 * n
    update = gpumem.zeros(4)
    partial = [gpumem.zeros(4) for _ in range(4)]
    used = gpumem.memory_stats()["allocated_bytes"]
    limit = used + int(4 * nbytes / ratio)
    fit = max(0, min(4, int((limit - used) // nbytes)))
    gpumem.set_spill(True)
    gpumem.set_memory_limit(limit)
    stream = gpumem.Stream()
    device = []
    out = np.empty(4, np.float32)
    what = f"{mode} loop {ratio}x"
    times = []
    try:
        device = [gpumem.to_device(h) for h in images.host]
        # Every partition starts in host memory, as raw C's images do:
        # its first trip there (the host memory taken for it, its bytes
        # copied) is a cost of the loop's start, timed apart, never of an
        # iteration (Belady's order may first send a partition down in
        # any iteration).
        start = time.perf_counter()
        for array in device:
            array.spill()
        first_trips = time.perf_counter() - start
        sign = 1.0
        for _ in range(iterations + 1):
            start = time.perf_counter()
            if mode in ("dirty", "dirty_prefetch"):
                sign = -sign
            for p in range(4):
                if mode in ("dirty", "dirty_prefetch"):
                    gpumem.kernels.saxpy(n, -2.0, device[p], device[p])
                gpumem.kernels.algo(device[p], update, partial[p], n)
                if mode in ("prefetch", "dirty_prefetch"):
                    device[(p + 1) % 4].prefetch(0, stream=stream)
                gpumem.copy_from_gpu(partial[p], out, 4)
                images.check(what, p, out, sign * images.means[p])
            times.append(time.perf_counter() - start)
        stream.synchronize()
        if mode in ("dirty", "dirty_prefetch"):
            for p in range(4):
                images.checked += 1
                if not np.array_equal(device[p].copy_to_host(),
                                      sign * images.host[p]):
                    images.mismatches.append(
                        f"{what}: image {p} differs from NumPy's")
    finally:
        for array in device:
            array.free()
        gpumem.set_memory_limit(None)
        gpumem.set_spill(False)
    return (statistics.mean(times[1:]), statistics.median(times[1:]), fit,
            first_trips)


def loop_figures(images, iterations, h2d, d2h, failures):
    """The clean, prefetch and dirty loops' figures, in ms; a loop that
    raises goes to FAILURES and has none."""
    nbytes = 4 * images.n
    figures = {}
    runs = [("clean", r) for r in RATIOS] + [("prefetch", r) for r in RATIOS]
    runs += [("dirty", DIRTY_RATIO), ("dirty_prefetch", DIRTY_RATIO)]
    for mode, ratio in runs:
        before = gpumem.memory_stats()
        try:
            mean, median, fit, first = spill_loop(images, ratio,
                                                  iterations, mode)
        except gpumem.Error as err:
            failures.append(f"{mode} loop {ratio}x raised {err!r}")
            continue
        after = gpumem.memory_stats()
        moved = (4 - fit) * nbytes
        figures[f"{mode}_{ratio}x_ms"] = mean * 1e3
        figures[f"{mode}_{ratio}x_median_ms"] = median * 1e3
        figures[f"{mode}_{ratio}x_first_trips_ms"] = first * 1e3
        # Where an iteration's time goes: the engine's moves, averaged
        # over every iteration, the first placement and the first trips.
        for key in ("spills", "returns"):
            figures[f"{mode}_{ratio}x_{key}_per_iteration"] = \
                (after[key] - before[key]) / (iterations + 1)
        for key in ("spill_seconds", "return_seconds"):
            figures[f"{mode}_{ratio}x_{key[:-8]}_ms_per_iteration"] = \
                (after[key] - before[key]) * 1e3 / (iterations + 1)
        figures[f"fit_{ratio}x"] = fit
        if mode == "clean":
            figures[f"clean_{ratio}x_bound_ms"] = moved / (h2d * 1e9) * 1e3
        elif mode == "dirty":
            figures[f"dirty_{ratio}x_bound_ms"] = \
                (moved / (h2d * 1e9) + moved / (d2h * 1e9)) * 1e3
    return figures


def overhead_figures(calls, nloop, batches=9):
    """Spilling off against on with nothing to spill, alternate batches,
    medians: empty + free of 1 MiB (us), the loop over 4 partitions of
    NLOOP float32 that fit (ms)."""
    def alloc():
        for _ in range(calls):
            gpumem.empty(MiB, "uint8").free()

    parts = [gpumem.to_device(np.ones(nloop, np.float32)) for _ in range(4)]
    update = gpumem.zeros(4)
    partial = [gpumem.zeros(4) for _ in range(4)]
    out = np.empty(4, np.float32)

    def loop():
        for p in range(4):
            gpumem.kernels.algo(parts[p], update, partial[p], nloop)
            gpumem.copy_from_gpu(partial[p], out, 4)

    times = {(name, on): [] for name in ("alloc", "loop")
             for on in (False, True)}
    for batch in range(batches + 1):
        for on in (False, True):
            gpumem.set_spill(on)
            alloc_s = median_seconds(alloc, repeats=1)
            loop_s = median_seconds(loop)
            if batch > 0:
                times[("alloc", on)].append(alloc_s / calls * 1e6)
                times[("loop", on)].append(loop_s * 1e3)
    gpumem.set_spill(False)
    for part in parts:
        part.free()
    return {"alloc_spill_off_us": statistics.median(times[("alloc", False)]),
            "alloc_spill_on_us": statistics.median(times[("alloc", True)]),
            "fitting_loop_spill_off_ms":
                statistics.median(times[("loop", False)]),
            "fitting_loop_spill_on_ms":
                statistics.median(times[("loop", True)])}


def return_figures(nbytes):
    """A spilled array of NBYTES brought back by prefetch, in GB/s."""
    gpumem.set_spill(True)
    array = gpumem.to_device(np.ones(nbytes // 4, np.float32))
    times = []
    for _ in range(5):
        array.spill()
        start = time.perf_counter()
        array.prefetch(0)
        times.append(time.perf_counter() - start)
    array.free()
    gpumem.set_spill(False)
    return {"return_gbs": nbytes / statistics.median(times) / 1e9}


def raw_figures(path, nbytes):
    """raw.cu's spill_loop medians at partitions of NBYTES, in ms, from
    the records at PATH ({} where there are none)."""
    figures = {}
    try:
        with open(path, encoding="utf-8") as f:
            records = [json.loads(line) for line in f if line.strip()]
    except (OSError, ValueError):
        return figures
    for rec in records:
        if (rec.get("impl") == "raw" and rec.get("figure") == "spill_loop"
                and rec.get("bytes") == nbytes):
            figures[f"raw_{rec['case']}_ms"] = rec["median_s"] * 1e3
    return figures


def verdicts(f, raw_why):
    rows = []

    def judge(name, numerator, denominator, target, sense, why=None):
        if numerator not in f or denominator not in f:
            rows.append({"target": name, "rule": f"{sense} {target}",
                         "verdict": "not run: " + (why or "not measured")})
            return
        ratio = f[numerator] / f[denominator]
        met = ratio <= target if sense == "<=" else ratio >= target
        rows.append({"target": name, "ratio": ratio,
                     "rule": f"{sense} {target}",
                     "verdict": "met" if met else "missed"})

    for r in RATIOS:
        judge(f"clean loop {r}x / bus bound", f"clean_{r}x_ms",
              f"clean_{r}x_bound_ms", 1.25, "<=", "the loop raised")
    for r in RATIOS:
        judge(f"prefetch loop {r}x / raw C's best",
              f"prefetch_{r}x_ms", f"raw_clean_{r}x_ms", 1.1, "<=",
              raw_why if f"prefetch_{r}x_ms" in f else "the loop raised")
    judge(f"dirty loop {DIRTY_RATIO}x / bus bound both ways",
          f"dirty_{DIRTY_RATIO}x_ms", f"dirty_{DIRTY_RATIO}x_bound_ms",
          1.25, "<=", "the loop raised")
    judge(f"dirty loop {DIRTY_RATIO}x with prefetch / raw C's best",
          f"dirty_prefetch_{DIRTY_RATIO}x_ms", f"raw_dirty_{DIRTY_RATIO}x_ms",
          1.1, "<=", raw_why if f"dirty_prefetch_{DIRTY_RATIO}x_ms" in f
          else "the loop raised")
    judge("empty+free 1 MiB, spilling on / off", "alloc_spill_on_us",
          "alloc_spill_off_us", 1.05, "<=")
    judge("fitting loop, spilling on / off", "fitting_loop_spill_on_ms",
          "fitting_loop_spill_off_ms", 1.05, "<=")
    judge("return of a spilled array / pinned H2D", "return_gbs",
          "pinned_h2d_gbs", 0.9, ">=")
    return rows


def markdown(figures, rows, failures):
    """The report's table of FIGURES, the verdicts ROWS and what failed."""
    lines = ["# Spilling (issue 52)", "",
             "bench/spill.py on device 0 "
             f"({figures['device']}, backend {figures['backend']}): "
             "medians, but a loop's *_ms is the mean of its iterations "
             "after the first (*_median_ms their median: the moves may "
             "repeat over several iterations), every partition sent to "
             "host memory once before them (*_first_trips_ms, as raw C's "
             "images start there); ms, us and GB/s.  The "
             "device's memory is emulated "
             "by a memory limit (set_memory_limit): the images of a loop "
             f"total RATIO times it, 4 partitions of "
             f"{figures['partition_bytes'] / MiB:.0f} MiB; raw_* are raw "
             "CUDA C's best loop within the same memory, one or two "
             "buffers (raw.cu, spill_loop).", ""]
    lines += figure_table(figures)
    lines += ["", f"Results: {figures['checked']} partial updates and "
              f"images compared with NumPy's, {figures['mismatches']} "
              "differ.", ""]
    for row in rows:
        if row["verdict"].startswith("not run"):
            lines.append(f"- {row['target']} (target {row['rule']}): "
                         f"**{row['verdict']}**")
            continue
        mark = "**met**" if row["verdict"] == "met" else "**not met**"
        lines.append(f"- {row['target']}: {row['ratio']:.3f} "
                     f"(target {row['rule']}) {mark}")
    for failure in failures:
        lines.append(f"- FAILED: {failure}")
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="tiny sizes: a smoke test of the script")
    parser.add_argument("--raw", help="raw C's records of this run "
                        "(raw.cu's spill_loop at the same --quick)")
    parser.add_argument("--json", help="write the figures here")
    parser.add_argument("--markdown", help="write the report's table here")
    args = parser.parse_args()
    partition = 4 * MiB if args.quick else 2 * GiB
    copy_bytes = 4 * MiB if args.quick else GiB
    failures = []
    figures = {"backend": gpumem.backend,
               "device": gpumem.Device(0).name,
               "partition_bytes": partition}
    figures.update(bandwidth_figures(copy_bytes))
    images = Images(partition // 4)
    figures.update(loop_figures(images, 3 if args.quick else 6,
                                figures["pinned_h2d_gbs"],
                                figures["pinned_d2h_gbs"], failures))
    del images.host[:]
    figures.update(overhead_figures(100 if args.quick else 2000,
                                    MiB // 4 if args.quick else GiB // 16))
    figures.update(return_figures(copy_bytes))
    if gpumem.backend == "host":
        raw_why = "raw CUDA C needs the cuda backend"
    elif not args.raw:
        raw_why = "no records of raw CUDA C given (--raw)"
    else:
        raw_why = f"raw CUDA C wrote no spill_loop record ({args.raw})"
        figures.update(raw_figures(args.raw, partition))
    figures["checked"] = images.checked
    figures["mismatches"] = len(images.mismatches)
    failures += images.mismatches
    rows = verdicts(figures, raw_why)
    for key, value in figures.items():
        print(f"{key:28} {value:.3f}" if isinstance(value, float)
              else f"{key:28} {value}")
    for row in rows:
        ratio = f"{row['ratio']:8.3f}" if "ratio" in row else " " * 8
        print(f"{row['target']:44} {ratio}  {row['rule']:7} "
              f"{row['verdict']}")
    for failure in failures:
        print(f"FAILED: {failure}")
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"figures": figures, "verdicts": rows,
                       "failures": failures}, out, indent=1)
    if args.markdown:
        with open(args.markdown, "w") as out:
            out.write(markdown(figures, rows, failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
