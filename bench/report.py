"""Turns one benchmark run into a report: a Markdown file of medians,
ratios and the issue's targets, and PNG plots of the copy sweep.

    python3 bench/report.py DIR [--date YYYY-MM-DD] [--tag h200]

DIR holds what bench/run.sh wrote there: raw.jsonl, gpumem.jsonl and
cupy.jsonl (one record a line, bench/benchlib.py says the format; any of
them may be missing), machine.txt ("key: value" lines) and, where
bench/nccl.sh ran, nccl-stitching.jsonl (scripts/stitching_mpi.py under
mpirun, for issue 15's mpirun -n N target).  Writes
DIR/DATE-TAG.md and DIR/DATE-TAG-sweep-CASE.png beside it (no
subfolders); TAG defaults to the GPU's model from the records ("h200").
Plots need matplotlib; without it the report says so and has none.
"""

import argparse
import datetime
import glob
import json
import os
import re
import statistics
import sys

IMPLS = ("raw", "gpumem", "cupy")
LABEL = {"raw": "raw CUDA C", "gpumem": "gpumem", "cupy": "CuPy"}
COPY_CASES = ("pinned_h2d", "pinned_d2h", "pageable_h2d", "pageable_d2h")
SWEEP_CASES = COPY_CASES + ("d2d",)
CASE_LABEL = {"pinned_h2d": "pinned host->device",
              "pinned_d2h": "pinned device->host",
              "pageable_h2d": "pageable host->device",
              "pageable_d2h": "pageable device->host",
              "d2d": "copy() device->device (read + write)"}
# The figures that have their own sections (not in the detail table).
OWN_SECTIONS = ("algo_sweep", "algo_shape", "loop_sweep", "multigpu",
                "staging", "kernel_launch", "jit_compile", "pipeline")
# Records whose figure is not the name of the driver's figure that
# writes them (the FIGURE arguments bench/run.sh's sections pass).
DRIVER_FIGURE = {"alloc_free": "alloc", "graph_replay": "graph"}
# The issue's anchor for the 4 x 2^28 workload, microseconds.
ANCHOR_4X2_28 = {"raw": 1081.0, "cupy": 1129.0}
# Issue 19's "the stitching workload's 4 x 10 loop no slower" is read
# as: gpumem's time over raw C's no higher than in run D (bench/NOTES.md, commit
# b951936), the last run committed before issue 19.  Its records are
# kept in bench/baseline/: this prefix plus -gpumem.jsonl and -raw.jsonl,
# whose workload seed_4x10 medians (98.0 and 86.0 us) give the threshold.
SEED_4X10_BASELINE = os.path.join(os.path.dirname(os.path.abspath(
    __file__)), "baseline", "2026-11-29-h200-runD")
SEED_4X10_BASELINE_NAME = "run D, commit b951936"


class Row:
    """One line of the main table: KIND is "time" (microseconds, lower
    is better) or "bw" (GB/s, higher is better); KEYS maps each
    implementation to its record's (figure, case)."""

    def __init__(self, name, label, kind, keys):
        self.name, self.label, self.kind = name, label, kind
        if isinstance(keys, tuple):
            keys = {impl: keys for impl in IMPLS}
        self.keys = keys


ROWS = [
    Row("launch_async", "empty-kernel launch, async (per launch: 1000 back "
        "to back, then one sync)", "time", ("launch", "async")),
    Row("launch_sync", "empty-kernel launch + synchronize", "time",
        ("launch", "sync")),
    Row("alloc_free", "alloc + free 1 MiB (raw: cudaMallocAsync/"
        "cudaFreeAsync, default pool)", "time",
        {"raw": ("alloc_free", "cudaMallocAsync"),
         "gpumem": ("alloc_free", "pool"), "cupy": ("alloc_free", "pool")}),
    Row("alloc_free_malloc", "alloc + free 1 MiB (raw: cudaMalloc/cudaFree)",
        "time", {"raw": ("alloc_free", "cudaMalloc"),
                 "gpumem": ("alloc_free", "pool"),
                 "cupy": ("alloc_free", "pool")}),
    Row("copy16_h2d", "16-byte copy host->device (synchronous)", "time",
        ("copy16", "h2d")),
    Row("copy16_d2h", "16-byte copy device->host (synchronous)", "time",
        ("copy16", "d2h")),
    Row("pinned_h2d", "256 MiB pinned host->device", "bw",
        ("copy256", "pinned_h2d")),
    Row("pinned_d2h", "256 MiB pinned device->host", "bw",
        ("copy256", "pinned_d2h")),
    Row("pageable_h2d", "256 MiB pageable host->device (raw C and CuPy: "
        "one cudaMemcpy from pageable memory)", "bw",
        ("copy256", "pageable_h2d")),
    Row("pageable_d2h", "256 MiB pageable device->host (raw C and CuPy: "
        "one cudaMemcpy into pageable memory)", "bw",
        ("copy256", "pageable_d2h")),
    Row("d2d", "device->device copy 1 GiB (read + write)", "bw",
        ("d2d", "1GiB")),
    Row("algo_bw", "algo kernel over 2^28 float32 (bytes read; CuPy: "
        "the same kernel source as a RawKernel)", "bw",
        ("algo_bw", "2^28")),
    Row("seed_4x10", "workload per iteration, 4 x 10 images, algo_seed",
        "time", ("workload", "seed_4x10")),
    Row("algo_4x2_28", "workload per iteration, 4 x 2^28 images, algo",
        "time", ("workload", "algo_4x2^28")),
    # The loop replayed as one graph an iteration: gpumem.graph against
    # raw C's CUDA graph of 4 branches (raw.cu's workload_graph), and
    # against raw C's serial loop.
    Row("graph_seed_4x10", "graph per iteration, 4 x 10 images, algo_seed "
        "(both graphs)", "time", ("graph", "seed_4x10")),
    Row("graph_replay_4x10", "graph replay per iteration (its host copies, "
        "launch and wait; the stitching left out), 4 x 10, algo_seed (both "
        "graphs)", "time", ("graph_replay", "seed_4x10")),
    Row("graph_vs_loop_4x10", "gpumem.graph per iteration against raw C's "
        "serial loop, 4 x 10, algo_seed", "time",
        {"raw": ("workload", "seed_4x10"), "gpumem": ("graph", "seed_4x10"),
         "cupy": ("graph", "seed_4x10")}),
    Row("graph_vs_loop_4x2_28", "gpumem.graph per iteration against raw C's "
        "serial loop, 4 x 2^28, algo", "time",
        {"raw": ("workload", "algo_4x2^28"),
         "gpumem": ("graph", "algo_4x2^28"),
         "cupy": ("graph", "algo_4x2^28")}),
]
ROW = {row.name: row for row in ROWS}


class Target:
    """One of the issue's targets.  AGAINST is "raw", "cupy" or None (an
    absolute bandwidth in GB/s); OP is "<=" or ">=" applied to the ratio
    gpumem/AGAINST as the main table shows it (time ratio for "time"
    rows, bandwidth ratio for "bw" rows) or to the bandwidth."""

    def __init__(self, text, row, against, op, threshold):
        self.text, self.row = text, ROW[row]
        self.against, self.op, self.threshold = against, op, threshold

    def needs(self):
        """The (implementation, figure) pairs the verdict reads."""
        impls = ["gpumem"] + ([self.against] if self.against else [])
        return [(impl, self.row.keys[impl][0]) for impl in impls]


TARGETS = [
    Target("launch (async) <= 1.2x raw C time", "launch_async", "raw", "<=",
           1.2),
    Target("launch + sync <= 1.2x raw C time", "launch_sync", "raw", "<=",
           1.2),
    Target("alloc + free <= CuPy's time", "alloc_free", "cupy", "<=", 1.0),
    Target("16-byte host->device <= 1.3x raw C time", "copy16_h2d", "raw",
           "<=", 1.3),
    Target("16-byte device->host <= 1.3x raw C time", "copy16_d2h", "raw",
           "<=", 1.3),
    Target("pinned 256 MiB host->device >= 0.97x raw C bandwidth",
           "pinned_h2d", "raw", ">=", 0.97),
    Target("pinned 256 MiB device->host >= 0.97x raw C bandwidth",
           "pinned_d2h", "raw", ">=", 0.97),
    Target("seed loop 4 x 10 <= 1.25x raw C time", "seed_4x10", "raw", "<=",
           1.25),
    Target("graph loop 4 x 10 <= 0.6x raw C's serial loop time",
           "graph_vs_loop_4x10", "raw", "<=", 0.6),
    Target("graph replay 4 x 10 <= 1.1x raw C's own graph time",
           "graph_replay_4x10", "raw", "<=", 1.1),
    Target("graph loop 4 x 2^28 <= 1.0x raw C's serial loop time",
           "graph_vs_loop_4x2_28", "raw", "<=", 1.0),
    Target("loop 4 x 2^28 >= 1.0x raw C speed, i.e. time <= 1.0x raw C "
           "(algo kernel; see notes)", "algo_4x2_28", "raw", "<=", 1.0),
    Target("pageable 256 MiB host->device >= 25 GB/s", "pageable_h2d", None,
           ">=", 25.0),
    Target("pageable 256 MiB device->host >= 20 GB/s", "pageable_d2h", None,
           ">=", 20.0),
    Target("pageable 256 MiB host->device >= 3.5x CuPy's bandwidth",
           "pageable_h2d", "cupy", ">=", 3.5),
    Target("pageable 256 MiB device->host >= 3.5x CuPy's bandwidth",
           "pageable_d2h", "cupy", ">=", 3.5),
]


def merged(recs):
    """One record from the records of the same figure made by several
    processes (bench/run.sh's BENCH_ROUNDS): the median of their medians,
    of their first and of their third quartiles; the processes' medians
    in process_medians_s.  One record is returned as it is."""
    keys = ("median_s", "q1_s", "q3_s", "min_s", "n")
    if len(recs) == 1 or not all(k in r for r in recs for k in keys):
        return recs[-1]
    out = dict(recs[-1])
    for key in ("median_s", "q1_s", "q3_s"):
        out[key] = statistics.median(r[key] for r in recs)
    out["min_s"] = min(r["min_s"] for r in recs)
    out["n"] = sum(r["n"] for r in recs)
    out["process_medians_s"] = sorted(r["median_s"] for r in recs)
    return out


def load(directory):
    """Records by implementation: {impl: {"meta": {...}, "errors": [...],
    "rec": {(figure, case): record}, "sweep": {(case, bytes): record}}};
    an implementation with no file is absent.  A figure recorded by
    several processes is their merged record."""
    runs = {}
    for impl in IMPLS:
        path = os.path.join(directory, impl + ".jsonl")
        if not os.path.exists(path):
            continue
        run = {"meta": {}, "errors": [], "rec": {}, "sweep": {}}
        with open(path) as f:
            for line in f:
                line = line.strip()
                if not line:
                    continue
                try:
                    rec = json.loads(line)
                except ValueError:
                    run["errors"].append(f"unreadable line: {line[:80]}")
                    continue
                fig = rec.get("figure")
                if fig == "meta":
                    run["meta"] = rec
                elif fig == "error":
                    run["errors"].append(f"{rec.get('case')}: "
                                         f"{rec.get('note')}")
                elif fig == "sweep":
                    run["sweep"].setdefault((rec["case"], rec["bytes"]),
                                            []).append(rec)
                else:
                    run["rec"].setdefault((fig, rec["case"]), []).append(rec)
        for table in ("rec", "sweep"):
            run[table] = {key: merged(recs)
                          for key, recs in run[table].items()}
        runs[impl] = run
    return runs


def load_plan(directory):
    """What bench/run.sh planned: {"section": {figure: section}, "not_run":
    {("section" | "impl", name): the first why}, "lines": [not-run.txt's
    lines], "skipped": [lines]}, from
    sections.txt ("NAME: FIGURES"), not-run.txt ("KIND NAME: WHY") and
    skipped.txt (what the budget left out); empty where missing."""
    plan = {"section": {}, "not_run": {}, "skipped": [], "lines": []}
    for name, into in (("sections.txt", "section"),
                       ("not-run.txt", "not_run"),
                       ("skipped.txt", "skipped")):
        path = os.path.join(directory, name)
        if not os.path.exists(path):
            continue
        with open(path) as f:
            for line in f:
                line = line.strip()
                if not line:
                    continue
                if into == "skipped":
                    plan["skipped"].append(line)
                    continue
                head, _, tail = line.partition(": ")
                if into == "section":
                    for figure in tail.split():
                        plan["section"][figure] = head
                else:
                    kind, _, what = head.partition(" ")
                    plan["not_run"].setdefault((kind, what), tail)
                    plan["lines"].append(line)
    return plan


def why_not(runs, needs, plan):
    """The verdict of a target with nothing to judge, saying why: NEEDS
    are the (implementation, figure) pairs it reads; an implementation or
    a section that could not run here gives "not run: ... needs 2 GPUs",
    else "not measured" with what is missing."""
    plan = plan or {"section": {}, "not_run": {}, "skipped": [], "lines": []}
    for impl, figure in needs:
        why = plan["not_run"].get(("impl", impl))
        if why:
            return f"not run: {LABEL.get(impl, impl)} {why}"
        section = plan["section"].get(DRIVER_FIGURE.get(figure, figure))
        # A part of a section, named as its figure ("section sharing:
        # pipeline: needs PyTorch and CuPy").
        part = f"section {section}: {figure}: "
        for line in plan["lines"]:
            if line.startswith(part):
                return f"not run: {line[len('section '):]}"
        why = plan["not_run"].get(("section", section))
        if why:
            return f"not run: section {section} {why}"
    for impl, figure in needs:
        if impl not in runs:
            return f"not measured: no {LABEL.get(impl, impl)} records"
        section = plan["section"].get(DRIVER_FIGURE.get(figure, figure))
        if section and budget_spent(section, plan, (impl, figure)):
            return f"not run: section {section}, the budget was spent"
    missing = ", ".join(f"{LABEL.get(i, i)} {f}" for i, f in needs)
    return f"not measured: a record of {missing} is missing (see the logs)"


def needed_figures():
    """The (implementation, figure) pairs every target of the report
    reads, on any machine; figures named as bench/run.sh's sections
    name them (DRIVER_FIGURE)."""
    pairs = {pair for t in TARGETS for pair in t.needs()}
    for target in new_targets({}):
        pairs.update(target[5])
    return {(impl, DRIVER_FIGURE.get(fig, fig)) for impl, fig in pairs}


def verdict_counts(summary):
    """The verdicts' summary line."""
    met = sum(1 for _, w in summary if w.startswith("MET"))
    missed = sum(1 for _, w in summary if w.startswith("MISSED"))
    unrun = sum(1 for _, w in summary if w.startswith("not run"))
    unmeasured = len(summary) - met - missed - unrun
    return (f"{met} of {len(summary)} targets met, {missed} missed, {unrun} "
            f"not run here, {unmeasured} not measured")


def machine_lines(directory):
    path = os.path.join(directory, "machine.txt")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [line.rstrip() for line in f if line.strip()]


def gpu_tag(runs, machine):
    """The GPU's model from the records or machine.txt: "h200"."""
    names = [runs.get(impl, {}).get("meta", {}).get("device", "")
             for impl in ("raw", "cupy", "gpumem")]
    names += [line for line in machine if line.startswith("gpu")]
    for name in names:
        match = re.search(r"\b(?:NVIDIA |Tesla )?([A-Z]+[0-9]+[A-Za-z]*)\b",
                          str(name))
        if match:
            return match.group(1).lower()
    return "gpu"


def value(rec, kind):
    """The median as the table shows it: microseconds or GB/s."""
    if kind == "time":
        return rec["median_s"] * 1e6
    return rec["traffic"] / rec["median_s"] / 1e9


def spread(rec, kind):
    """The (low, high) of the value over the middle half of the samples."""
    if kind == "time":
        return rec["q1_s"] * 1e6, rec["q3_s"] * 1e6
    return rec["traffic"] / rec["q3_s"] / 1e9, rec["traffic"] / rec["q1_s"] / 1e9


def ratio(mine, other, kind):
    """gpumem/other: time ratio (lower better) or bandwidth ratio (higher
    better), with its range over the quartiles."""
    if kind == "time":
        r = mine["median_s"] / other["median_s"]
        lo = mine["q1_s"] / other["q3_s"]
        hi = mine["q3_s"] / other["q1_s"]
    else:
        r = other["median_s"] / mine["median_s"]
        lo = other["q1_s"] / mine["q3_s"]
        hi = other["q3_s"] / mine["q1_s"]
    return r, lo, hi


def lookup(runs, impl, key):
    return runs.get(impl, {}).get("rec", {}).get(key)


def fmt(x, kind=None):
    if x is None:
        return "—"
    if kind == "ratio":
        return f"{x:.2f}x"
    if abs(x) >= 100:
        return f"{x:,.0f}"
    if abs(x) >= 10:
        return f"{x:.1f}"
    return f"{x:.2f}"


def fmt_size(nbytes):
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= size:
            return f"{nbytes / size:g} {unit}"
    return f"{nbytes} B"


def main_table(runs):
    out = ["| figure | unit | raw CUDA C | gpumem | CuPy | gpumem / raw C "
           "| gpumem / CuPy | better |",
           "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |"]
    for row in ROWS:
        recs = {impl: lookup(runs, impl, row.keys[impl]) for impl in IMPLS}
        cells = [fmt(value(recs[i], row.kind)) if recs[i] else "—"
                 for i in IMPLS]
        ratios = []
        for other in ("raw", "cupy"):
            if recs["gpumem"] and recs[other]:
                ratios.append(fmt(ratio(recs["gpumem"], recs[other],
                                        row.kind)[0], "ratio"))
            else:
                ratios.append("—")
        unit = "us" if row.kind == "time" else "GB/s"
        better = ("lower (time ratio)" if row.kind == "time"
                  else "higher (bandwidth ratio)")
        out.append(f"| {row.label} | {unit} | " + " | ".join(cells) + " | "
                   + " | ".join(ratios) + f" | {better} |")
    return out


def verdict(ok, lo_ok, hi_ok):
    """MET / MISSED, with "(within spread)" when the quartiles straddle
    the threshold."""
    word = "MET" if ok else "MISSED"
    if lo_ok != hi_ok:
        word += " (within spread)"
    return word


def target_table(runs, plan=None):
    out = ["| target | measured | range (quartiles) | verdict |",
           "| --- | ---: | ---: | --- |"]
    summary = []
    for t in TARGETS:
        row = t.row
        mine = lookup(runs, "gpumem", row.keys["gpumem"])
        other = (lookup(runs, t.against, row.keys[t.against])
                 if t.against else None)
        if mine is None or (t.against and other is None):
            word = why_not(runs, t.needs(), plan)
            out.append(f"| {t.text} | — | — | {word} |")
            summary.append((t.text, word))
            continue
        if t.against:
            x, lo, hi = ratio(mine, other, row.kind)
            shown = f"{x:.2f}x"
            rng = f"{lo:.2f}x – {hi:.2f}x"
        else:
            x = value(mine, row.kind)
            lo, hi = spread(mine, row.kind)
            shown = f"{x:.1f} GB/s"
            rng = f"{lo:.1f} – {hi:.1f}"

        def holds(v):
            return v <= t.threshold if t.op == "<=" else v >= t.threshold

        word = verdict(holds(x), holds(lo), holds(hi))
        out.append(f"| {t.text} | {shown} | {rng} | {word} |")
        summary.append((t.text, word))
    return out, summary


def sweep_tables(runs):
    out = []
    sizes = sorted({size for run in runs.values()
                    for (_, size) in run["sweep"]})
    if not sizes:
        return ["No sweep records."]
    for case in COPY_CASES:
        out += [f"**{CASE_LABEL[case]}** (GB/s; ratios of bandwidth, higher "
                "is better)", "",
                "| size | raw CUDA C | gpumem | CuPy | gpumem / raw C "
                "| gpumem / CuPy |",
                "| ---: | ---: | ---: | ---: | ---: | ---: |"]
        for size in sizes:
            recs = {impl: runs.get(impl, {}).get("sweep", {}).get((case, size))
                    for impl in IMPLS}
            cells = [fmt(value(recs[i], "bw")) if recs[i] else "—"
                     for i in IMPLS]
            ratios = [fmt(ratio(recs["gpumem"], recs[o], "bw")[0], "ratio")
                      if recs["gpumem"] and recs[o] else "—"
                      for o in ("raw", "cupy")]
            out.append(f"| {fmt_size(size)} | " + " | ".join(cells) + " | "
                       + " | ".join(ratios) + " |")
        out.append("")
    return out


def plot_sweep(runs, directory, base):
    """One PNG per copy case, bandwidth against size, one line per
    implementation.  Returns the file names written, or a reason."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        return None, f"matplotlib is not importable here ({exc})"
    names = []
    style = {"raw": ("k", "o"), "gpumem": ("tab:blue", "s"),
             "cupy": ("tab:orange", "^")}
    for case in COPY_CASES:
        fig, ax = plt.subplots(figsize=(7, 4.5))
        drawn = False
        for impl in IMPLS:
            points = sorted((size, value(rec, "bw")) for (c, size), rec
                            in runs.get(impl, {}).get("sweep", {}).items()
                            if c == case)
            if not points:
                continue
            color, marker = style[impl]
            ax.plot([p[0] for p in points], [p[1] for p in points],
                    color=color, marker=marker, label=LABEL[impl])
            drawn = True
        if not drawn:
            plt.close(fig)
            continue
        ax.set_xscale("log", base=2)
        ax.set_xlabel("bytes per copy")
        ax.set_ylabel("GB/s (median)")
        ax.set_title(f"{CASE_LABEL[case]}: bandwidth against size")
        ax.grid(True, which="both", alpha=0.3)
        ax.set_ylim(bottom=0)
        ax.legend()
        name = f"{base}-sweep-{case}.png"
        fig.tight_layout()
        fig.savefig(os.path.join(directory, name), dpi=110)
        plt.close(fig)
        names.append(name)
    return names, None


def detail_table(runs):
    out = ["| impl | figure | case | timer | median | q1 | q3 | min | n "
           "| how |",
           "| --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: "
           "| --- |"]
    for impl in IMPLS:
        for (fig, case), rec in runs.get(impl, {}).get("rec", {}).items():
            if fig in OWN_SECTIONS:
                continue
            out.append(
                f"| {LABEL[impl]} | {fig} | {case} | {rec['timer']} | "
                f"{rec['median_s'] * 1e6:.3f} us | {rec['q1_s'] * 1e6:.3f} | "
                f"{rec['q3_s'] * 1e6:.3f} | {rec['min_s'] * 1e6:.3f} | "
                f"{rec['n']} | {rec.get('note', '')} |")
    return out


def seed_rate_lines(runs):
    out = []
    for impl in IMPLS:
        rec = lookup(runs, impl, ("seed_rate", "2^18"))
        if rec is None:
            continue
        images = rec["bytes"] // 4
        per_image = rec["median_s"] / images
        out.append(f"- {LABEL[impl]}: one algo_seed call on {images} images "
                   f"takes {rec['median_s'] * 1e3:.2f} ms, "
                   f"{per_image * 1e9:.1f} ns an image; at 2^28 images that "
                   f"is {per_image * 2 ** 28:.1f} s a call, "
                   f"{4 * per_image * 2 ** 28:.1f} s an iteration of 4.")
    return out


# ---- Issue 19's and issue 15's targets: per size, per count, per GPU.

def sweep_rec(runs, impl, case, size):
    return runs.get(impl, {}).get("sweep", {}).get((case, size))


def sweep_sizes(runs):
    return sorted({size for run in runs.values() for (_, size) in run["sweep"]})


def holds(x, op, threshold):
    return x <= threshold if op == "<=" else x >= threshold


def verdict_over(points, op, threshold):
    """POINTS: [(label, ratio, lo, hi)] that must all hold.  Returns
    (measured text, range text, verdict); "not measured" when empty."""
    if not points:
        return "—", "—", "not measured"
    worst = (min if op == ">=" else max)(points, key=lambda p: p[1])
    ok = all(holds(p[1], op, threshold) for p in points)
    straddle = any(holds(p[2], op, threshold) != holds(p[3], op, threshold)
                   for p in points)
    failing = [p[0] for p in points if not holds(p[1], op, threshold)]
    word = ("MET" if ok else "MISSED") + (" (within spread)" if straddle
                                          else "")
    shown = f"worst {worst[1]:.2f}x at {worst[0]}"
    if failing:
        shown += f"; missed at {', '.join(failing[:6])}" + (
            f" and {len(failing) - 6} more" if len(failing) > 6 else "")
    return shown, f"{worst[2]:.2f}x – {worst[3]:.2f}x at {worst[0]}", word


def copy_points(runs, case, against_impl, against_case, sizes):
    points = []
    for size in sizes:
        mine = sweep_rec(runs, "gpumem", case, size)
        other = sweep_rec(runs, against_impl, against_case, size)
        if mine and other:
            points.append((fmt_size(size),) + ratio(mine, other, "bw"))
    return points


def algo_points(runs, floor):
    """gpumem algo's read bandwidth over raw C's device-to-device copy
    bandwidth (read + write) at every size from FLOOR floats."""
    points = []
    for (fig, case), mine in runs.get("gpumem", {}).get("rec", {}).items():
        if fig != "algo_sweep" or not case.startswith("algo_"):
            continue
        n = int(case.split("_")[1])
        other = (lookup(runs, "raw", ("algo_sweep", f"d2d_{n}"))
                 or lookup(runs, "gpumem", ("algo_sweep", f"d2d_{n}")))
        if n >= floor and other:
            points.append((f"{n} floats",) + ratio(mine, other, "bw"))
    return sorted(points, key=lambda p: int(p[0].split()[0]))


def case_numbers(runs, figure):
    """The numbers N of FIGURE's cases NAME_N in any implementation's
    records, sorted: loop_sweep's image counts, algo_sweep's sizes."""
    return sorted({int(case.rsplit("_", 1)[1])
                   for run in runs.values() for (fig, case) in run["rec"]
                   if fig == figure})


def gpumem_loop(runs, m):
    """The script's own figure where it ran, else the in-process loop."""
    return (lookup(runs, "gpumem", ("loop_sweep", f"script_{m}"))
            or lookup(runs, "gpumem", ("loop_sweep", f"gpumem_{m}")))


def loop_points(runs):
    points = []
    for m in case_numbers(runs, "loop_sweep"):
        mine = gpumem_loop(runs, m)
        other = lookup(runs, "raw", ("loop_sweep", f"raw_{m}"))
        if mine and other:
            points.append((f"{m} images",) + ratio(mine, other, "time"))
    return points


def jsonl_records(path):
    """The records of the JSON-lines file PATH, skipping lines that do
    not parse; [] where the file does not exist."""
    if not os.path.exists(path):
        return []
    out = []
    with open(path) as f:
        for line in f:
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
    return out


def seed_4x10_baseline(prefix=SEED_4X10_BASELINE):
    """(ratio, gpumem seconds, raw C seconds) of the workload seed_4x10
    in the baseline run's records at PREFIX-{gpumem,raw}.jsonl, or None
    when either is missing or lacks the figure."""
    medians = {}
    for impl in ("gpumem", "raw"):
        for rec in jsonl_records(f"{prefix}-{impl}.jsonl"):
            if (rec.get("figure"), rec.get("case")) == ("workload",
                                                        "seed_4x10"):
                medians[impl] = rec["median_s"]
    if len(medians) < 2:
        return None
    return medians["gpumem"] / medians["raw"], medians["gpumem"], medians["raw"]


def kernel_launch_points(runs):
    """The plugin's and the JIT kernel's launch time over the built-in
    kernel's (bench/launch_overhead.py), async and with a wait."""
    return [p for name in ("plugin", "jit") for mode in ("async", "sync")
            for p in one_point(runs, "gpumem", ("kernel_launch",
                                                f"{name}_{mode}"),
                               "gpumem", ("kernel_launch", f"builtin_{mode}"),
                               "time", f"{name} {mode}")]


def kernel_launch_table(runs):
    """The section of bench/launch_overhead.py's records, or []."""
    rows = []
    for name in ("builtin", "plugin", "jit"):
        cells = []
        for mode in ("async", "sync"):
            mine = lookup(runs, "gpumem", ("kernel_launch", f"{name}_{mode}"))
            base = lookup(runs, "gpumem", ("kernel_launch", f"builtin_{mode}"))
            cells.append(f"{fmt(value(mine, 'time'))} | "
                         f"{ratio(mine, base, 'time')[0]:.3f}x"
                         if mine and base else "— | —")
        rows.append(f"| {name} | " + " | ".join(cells) + " |")
    if all(row.endswith("— | — | — | — |") for row in rows):
        return []
    out = ["| kernel | async us | / built-in | with a wait us | / built-in |",
           "| --- | ---: | ---: | ---: | ---: |"] + rows + [""]
    jit = [(case, lookup(runs, "gpumem", ("jit_compile", case)))
           for case in ("nvrtc_first", "cache_hit")]
    if all(rec for _, rec in jit):
        out.append(f"gpumem.jit's first call (NVRTC compiles): "
                   f"{jit[0][1]['median_s'] * 1e3:.1f} ms; the same code from "
                   f"the disk cache: {jit[1][1]['median_s'] * 1e3:.2f} ms.")
        out.append("")
    return out


def one_point(runs, impl, key, against, against_key, kind, label):
    mine = lookup(runs, impl, key)
    other = lookup(runs, against, against_key)
    if mine and other:
        return [(label,) + ratio(mine, other, kind)]
    return []


def new_targets(runs, stitching=()):
    """(issue, text, points, op, threshold) for every target of issues
    19 and 15 that one run can judge; STITCHING: bench/nccl.sh's records
    of scripts/stitching_mpi.py (load_stitching)."""
    sizes = sweep_sizes(runs)
    pinned_range = [z for z in sizes if 4 << 10 <= z <= 1 << 30]
    below_1m = [z for z in sizes if z < 1 << 20]
    from_16m = [z for z in sizes if z >= 16 << 20]
    at_4m = [z for z in sizes if z == 4 << 20]
    out = []

    def add(issue, text, points, op, threshold, figure, against="raw"):
        needs = [("gpumem", figure)] + ([(against, figure)] if against
                                         else [])
        out.append((issue, text, points, op, threshold, needs))

    for d in ("h2d", "d2h"):
        word = "host->device" if d == "h2d" else "device->host"
        add("19", f"pinned {word}, every size 4 KiB – 1 GiB: >= 0.9x "
            "raw C cudaMemcpy", copy_points(
                runs, f"pinned_{d}", "raw", f"pinned_{d}", pinned_range),
            ">=", 0.9, "sweep")
    for d in ("h2d", "d2h"):
        word = "host->device" if d == "h2d" else "device->host"
        pg, pn = f"pageable_{d}", f"pinned_{d}"
        add("19", f"pageable {word} below 1 MiB: >= 0.9x raw C",
            copy_points(runs, pg, "raw", pg, below_1m), ">=", 0.9, "sweep")
        add("19", f"pageable {word} at 4 MiB: >= 0.5x pinned raw C",
            copy_points(runs, pg, "raw", pn, at_4m), ">=", 0.5, "sweep")
        add("19", f"pageable {word} from 16 MiB up: >= 0.8x pinned raw C",
            copy_points(runs, pg, "raw", pn, from_16m), ">=", 0.8, "sweep")
        add("19", f"pageable {word}, every size: >= 1.0x raw C pageable",
            copy_points(runs, pg, "raw", pg, sizes), ">=", 1.0, "sweep")
    for d in ("h2d", "d2h"):
        add("19", f"16-byte copy {d}: <= 1.1x raw C time",
            one_point(runs, "gpumem", ("copy16", d), "raw", ("copy16", d),
                      "time", "16 B"), "<=", 1.1, "copy16")
    baseline = seed_4x10_baseline()
    if baseline:
        limit, then_mine, then_raw = baseline
        add("19", "the stitching workload's 4 x 10 loop no slower: <= "
            f"{limit:.2f}x raw C time (the ratio of "
            f"{SEED_4X10_BASELINE_NAME}: {then_mine * 1e6:.1f} / "
            f"{then_raw * 1e6:.1f} us)",
            one_point(runs, "gpumem", ("workload", "seed_4x10"), "raw",
                      ("workload", "seed_4x10"), "time", "4 x 10"),
            "<=", limit, "workload")
    else:
        add("19", "the stitching workload's 4 x 10 loop no slower (the "
            f"baseline, {SEED_4X10_BASELINE_NAME}'s records "
            f"{SEED_4X10_BASELINE}-*.jsonl, are missing)", [], "<=", 0.0,
            "workload")
    add("19", "algo from 4 M floats up: >= 0.8x the device->device copy's "
        "bandwidth (raw C's)", algo_points(runs, 4_000_000), ">=", 0.8,
        "algo_sweep")
    add("19", "the stitching workload, every image count 40 – 2^30: <= 1.1x "
        "raw C time (raw reduction, serial waits)", loop_points(runs), "<=",
        1.1, "loop_sweep")
    # Issue 15: with more than two GPUs, one row for the peer copies of
    # every pair.
    pairs = peer_pairs(runs)
    ndev = len({d for pair in pairs for d in pair})
    if ndev > 2:
        add("15", f"peer copy 256 MiB, every pair of the {ndev} GPUs: >= "
            "0.9x raw C (peer access enabled)",
            [p for a, b in pairs for p in one_point(
                runs, "gpumem", ("multigpu", f"peer_{a}_{b}"), "raw",
                ("multigpu", f"peer_{a}_{b}"), "bw", f"{a}->{b}")],
            ">=", 0.9, "multigpu")
    else:
        for a, b in ((0, 1), (1, 0)):
            add("15", f"peer copy 256 MiB {a} -> {b}: >= 0.9x raw C (peer "
                "access enabled)", one_point(
                    runs, "gpumem", ("multigpu", f"peer_{a}_{b}"), "raw",
                    ("multigpu", f"peer_{a}_{b}"), "bw", f"{a}->{b}"),
                ">=", 0.9, "multigpu")
    add("15", "4 x 2^28 on 2 GPUs: <= 1.1x raw C concurrent",
        best_gpumem_point(runs, "4x2^28", 2), "<=", 1.1, "multigpu")
    for nd in loop_device_counts(runs):
        if nd > 2:
            add("15", f"4 x 2^28 on {nd} GPUs: <= 1.15x raw C concurrent",
                best_gpumem_point(runs, "4x2^28", nd), "<=", 1.15,
                "multigpu")
    for nd in (1, 2):
        add("15", f"4 x 10 on {nd} GPU{'s' if nd > 1 else ''}: <= 1.15x raw "
            "C concurrent", best_gpumem_point(runs, "4x10", nd), "<=", 1.15,
            "multigpu")
    for nd in sorted({r["n"] for r in stitching}) or [2]:
        add("15", f"mpirun -n {nd}, 4 x 2^28: <= 1.15x raw C concurrent on "
            f"{nd} GPUs", stitching_point(runs, stitching, nd), "<=", 1.15,
            "nccl", None)
    add("17", "plugin and JIT kernels' launch, async and with a wait: <= "
        "1.05x the built-in kernel's time", kernel_launch_points(runs), "<=",
        1.05, "kernel_launch", None)
    add("43", PIPELINE_TEXT, [], ">=", 1.0, "pipeline", None)
    return out


PIPELINE_TEXT = ("one pool against three: PyTorch, then CuPy, then gpumem, "
                 "each stage at 60% of the device, runs whole with one pool "
                 "(bench/frameworks_pipeline.py)")


def pipeline_verdict(runs):
    """(measured, range, verdict) of issue 43's pipeline, or None where
    it did not run: MET when every stage ran with one pool, with exact
    results; the measured text says how three caches fared."""
    pool = lookup(runs, "gpumem", ("pipeline", "one_pool"))
    caches = lookup(runs, "gpumem", ("pipeline", "three_caches"))
    if pool is None:
        return None

    def said(r):
        if r is None:
            return "—"
        text = f"{len(r['stages'])} of {r['want']} stages"
        if r.get("failed_at"):
            text += f", out of memory at {r['failed_at']}"
        if not r.get("exact", True):
            text += ", wrong values"
        return text

    shown = f"one pool: {said(pool)}; three caches: {said(caches)}"
    return shown, "—", "MET" if pool.get("completed") else "MISSED"


def best_gpumem_point(runs, label, nd):
    """gpumem's fastest way today (concurrent where it exists, else
    serial) against raw C concurrent, on ND GPUs."""
    other = lookup(runs, "raw", ("multigpu", f"loop_{label}_{nd}gpu_concurrent"))
    for kind in ("concurrent", "serial"):
        mine = lookup(runs, "gpumem",
                      ("multigpu", f"loop_{label}_{nd}gpu_{kind}"))
        if mine and other:
            return [(f"{nd} GPU, gpumem {kind}",) + ratio(mine, other, "time")]
    return []


def peer_pairs(runs):
    """The (from, to) device pairs of any implementation's peer copies,
    sorted."""
    return sorted({tuple(int(d) for d in case.split("_")[1:])
                   for run in runs.values() for (fig, case) in run["rec"]
                   if fig == "multigpu" and case.startswith("peer_")})


def loop_device_counts(runs):
    """The device counts of any implementation's multi-GPU loops,
    sorted."""
    return sorted({int(case.split("_")[2].rstrip("gpu"))
                   for run in runs.values() for (fig, case) in run["rec"]
                   if fig == "multigpu" and case.startswith("loop_")})


def load_stitching(directory):
    """bench/nccl.sh's records of scripts/stitching_mpi.py under mpirun
    (nccl-stitching.jsonl: impl "stitching", engine, n ranks, images,
    us_per_iteration) at 4 x 2^28 images; [] where it did not run."""
    return [rec for rec in jsonl_records(os.path.join(
        directory, "nccl-stitching.jsonl")) if rec.get("images") == 4 << 28]


def stitching_point(runs, stitching, nd):
    """scripts/stitching_mpi.py on ND ranks, its faster engine, against
    raw C concurrent on ND GPUs of the same run (the script prints a
    median only: the range is raw C's quartiles).  Only where raw C ran
    4 x 2^28 (not --quick)."""
    other = lookup(runs, "raw",
                   ("multigpu", f"loop_4x2^28_{nd}gpu_concurrent"))
    mine = [r for r in stitching if r["n"] == nd]
    if not other or not mine or runs["raw"]["meta"].get("log2n") != 28:
        return []
    best = min(mine, key=lambda r: r["us_per_iteration"])
    us = best["us_per_iteration"] * 1e-6
    return [(f"mpirun -n {nd}, {best['engine']}", us / other["median_s"],
             us / other["q3_s"], us / other["q1_s"])]


def new_target_table(runs, stitching=(), plan=None):
    out = ["| issue | target | measured (gpumem / other) | range (quartiles) "
           "| verdict |", "| --- | --- | --- | --- | --- |"]
    summary = []
    for issue, text, points, op, threshold, needs in new_targets(runs,
                                                                 stitching):
        judged = (pipeline_verdict(runs) if needs[0][1] == "pipeline"
                  else verdict_over(points, op, threshold))
        shown, rng, word = judged or ("—", "—", "not measured")
        if word == "not measured":
            word = why_not(runs, needs, plan)
        out.append(f"| {issue} | {text} | {shown} | {rng} | {word} |")
        summary.append((f"[{issue}] {text}", word))
    return out, summary


# ---- The per-size sections.

def sweep_tables_all(runs):
    """A row per size for each case; the pageable tables also show the
    limit (pinned raw C, same direction)."""
    sizes = sweep_sizes(runs)
    if not sizes:
        return ["No sweep records.", ""]
    out = []
    for case in SWEEP_CASES:
        limit_case = case.replace("pageable", "pinned")
        with_limit = case.startswith("pageable")
        head = "| size | raw CUDA C | gpumem | CuPy | gpumem / raw C | gpumem / CuPy |"
        rule = "| ---: | ---: | ---: | ---: | ---: | ---: |"
        if with_limit:
            head += " limit (pinned raw C) | gpumem / limit |"
            rule += " ---: | ---: |"
        out += [f"**{CASE_LABEL[case]}** (GB/s; ratios of bandwidth, higher "
                "is better" + ("; raw C and CuPy: one cudaMemcpy from or "
                               "into pageable memory" if with_limit else "")
                + ")", "", head, rule]
        for size in sizes:
            recs = {impl: sweep_rec(runs, impl, case, size) for impl in IMPLS}
            cells = [fmt(value(recs[i], "bw")) if recs[i] else "—"
                     for i in IMPLS]
            ratios = [fmt(ratio(recs["gpumem"], recs[o], "bw")[0], "ratio")
                      if recs["gpumem"] and recs[o] else "—"
                      for o in ("raw", "cupy")]
            row = (f"| {fmt_size(size)} | " + " | ".join(cells) + " | "
                   + " | ".join(ratios) + " |")
            if with_limit:
                lim = sweep_rec(runs, "raw", limit_case, size)
                row += (f" {fmt(value(lim, 'bw')) if lim else '—'} | "
                        + (fmt(ratio(recs['gpumem'], lim, 'bw')[0], 'ratio')
                           if lim and recs["gpumem"] else "—") + " |")
            out.append(row)
        out.append("")
    return out


def algo_table(runs):
    sizes = case_numbers(runs, "algo_sweep")
    if not sizes:
        return ["No algo sweep records."]
    out = ["GB/s (algo: bytes read; copy: read + write), event-timed medians; "
           "raw C runs gpumem's launcher (gm_kernel_algo) and a plain "
           "reduction (grid-stride float4, one launch plus a one-warp "
           "finish); CuPy runs kernels/algo.cu's kernel as a RawKernel.", "",
           "| floats | raw C launcher | raw C reduction | gpumem algo | CuPy "
           "algo | raw C d2d copy | gpumem copy | gpumem algo / raw copy | "
           "gpumem algo / raw reduction | gpumem algo time |",
           "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
           "| ---: |"]
    for n in sizes:
        recs = [lookup(runs, "raw", ("algo_sweep", f"algo_{n}")),
                lookup(runs, "raw", ("algo_sweep", f"reduce_{n}")),
                lookup(runs, "gpumem", ("algo_sweep", f"algo_{n}")),
                lookup(runs, "cupy", ("algo_sweep", f"algo_{n}")),
                lookup(runs, "raw", ("algo_sweep", f"d2d_{n}")),
                lookup(runs, "gpumem", ("algo_sweep", f"d2d_{n}"))]
        cells = [fmt(value(r, "bw")) if r else "—" for r in recs]
        mine = recs[2]
        r1 = fmt(ratio(mine, recs[4], "bw")[0], "ratio") if mine and recs[4] else "—"
        r2 = fmt(ratio(mine, recs[1], "bw")[0], "ratio") if mine and recs[1] else "—"
        t = f"{mine['median_s'] * 1e6:.1f} us" if mine else "—"
        out.append(f"| {n} | " + " | ".join(cells) + f" | {r1} | {r2} | {t} |")
    return out


def shape_table(runs):
    """The launch shapes raw C timed: per size the launcher's own time
    and the fastest given shape."""
    best = {}
    for (fig, case), rec in runs.get("raw", {}).get("rec", {}).items():
        if fig != "algo_shape":
            continue
        _, n, shape = case.split("_")
        n = int(n)
        if n not in best or rec["median_s"] < best[n][1]["median_s"]:
            best[n] = (shape, rec)
    if not best:
        return []
    out = ["| floats | launcher's shape: time | fastest grid x block | its "
           "time | launcher / fastest |", "| ---: | ---: | --- | ---: | ---: |"]
    for n in sorted(best):
        own = lookup(runs, "raw", ("algo_sweep", f"algo_{n}"))
        shape, rec = best[n]
        own_t = f"{own['median_s'] * 1e6:.1f} us" if own else "—"
        r = f"{own['median_s'] / rec['median_s']:.2f}x" if own else "—"
        out.append(f"| {n} | {own_t} | {shape} | "
                   f"{rec['median_s'] * 1e6:.1f} us | {r} |")
    return out


def loop_table(runs):
    counts = case_numbers(runs, "loop_sweep")
    if not counts:
        return ["No loop sweep records."]
    out = ["Microseconds per iteration (medians); 4 partitions, all on "
           "device 0, serial waits as the stitching workload has them.", "",
           "| images | raw C, raw reduction | raw C, gpumem's launcher | "
           "gpumem scripts/stitching.py | gpumem, same loop in process | "
           "CuPy (algo.cu RawKernel) | gpumem / raw C |",
           "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for m in counts:
        recs = [lookup(runs, "raw", ("loop_sweep", f"raw_{m}")),
                lookup(runs, "raw", ("loop_sweep", f"algo_{m}")),
                lookup(runs, "gpumem", ("loop_sweep", f"script_{m}")),
                lookup(runs, "gpumem", ("loop_sweep", f"gpumem_{m}")),
                lookup(runs, "cupy", ("loop_sweep", f"cupy_{m}"))]
        cells = [fmt(value(r, "time")) if r else "—" for r in recs]
        mine = gpumem_loop(runs, m)
        r = (fmt(ratio(mine, recs[0], "time")[0], "ratio")
             if mine and recs[0] else "—")
        out.append(f"| {m} | " + " | ".join(cells) + f" | {r} |")
    return out


def multigpu_table(runs):
    keys = set()
    for run in runs.values():
        keys.update(case for (fig, case) in run["rec"] if fig == "multigpu")
    if not keys:
        return []
    out = ["| figure | unit | raw CUDA C | gpumem | CuPy | gpumem / raw C |",
           "| --- | --- | ---: | ---: | ---: | ---: |"]

    def order(case):
        parts = case.split("_")
        if parts[0] == "peer":
            return (0, int(parts[1]), int(parts[2]), case)
        return (1, 0, 0, case)

    for case in sorted(keys, key=order):
        kind = "bw" if case.startswith("peer") else "time"
        recs = [lookup(runs, impl, ("multigpu", case)) for impl in IMPLS]
        cells = [fmt(value(r, kind)) if r else "—" for r in recs]
        r = (fmt(ratio(recs[1], recs[0], kind)[0], "ratio")
             if recs[0] and recs[1] else "—")
        out.append(f"| {case} | {'GB/s' if kind == 'bw' else 'us'} | "
                   + " | ".join(cells) + f" | {r} |")
    return out


def staging_table(runs):
    """gpumem's pageable copies per size: plain cudaMemcpy and the
    staging engine at each chunk size, with pinned raw C as the limit;
    the best configuration per size and direction."""
    table = {}
    for (fig, case), rec in runs.get("gpumem", {}).get("rec", {}).items():
        if fig != "staging":
            continue
        name, d, n = case.split("_")
        table[(name, d, int(n))] = value(rec, "bw")
    if not table:
        return []
    names = sorted({k[0] for k in table},
                   key=lambda x: ({"plain": 0, "auto": 1, "batch": 2}.get(
                                      x, 3),
                                  int(x[5:-1]) if x.startswith("chunk")
                                  else 0))
    sizes = sorted({k[2] for k in table})
    out = []
    for d in ("h2d", "d2h"):
        out += [f"**pageable {'host->device' if d == 'h2d' else 'device->host'}"
                "** (GB/s; staged from 0 bytes on, auto: chunks sized for each "
                "copy, chunkNK: in N KiB chunks; batch: one "
                "cudaMemcpyBatchAsync of auto's chunks, the source read in "
                "any order, uploads only; plain: cudaMemcpy)",
                "", "| size | " + " | ".join(names)
                + " | best | limit (pinned raw C) |",
                "| ---: | " + " | ".join("---:" for _ in names)
                + " | --- | ---: |"]
        for n in sizes:
            cells = [table.get((name, d, n)) for name in names]
            best = max((c, name) for c, name in zip(cells, names)
                       if c is not None)
            lim = sweep_rec(runs, "raw", f"pinned_{d}", n)
            out.append(f"| {fmt_size(n)} | "
                       + " | ".join(fmt(c) for c in cells)
                       + f" | {best[1]} | "
                       + (fmt(value(lim, 'bw')) if lim else "—") + " |")
        out.append("")
    return out


# ---- Plots: at most four files.

def pyplot():
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        return None, f"matplotlib is not importable here ({exc})"
    return plt, None


STYLE = {"raw": ("k", "o"), "gpumem": ("tab:blue", "s"),
         "cupy": ("tab:orange", "^")}


def plot_all(runs, directory, base):
    """Writes the plots; returns (names, reason for none)."""
    plt, why = pyplot()
    if plt is None:
        return [], why
    names = []

    def save(fig, suffix):
        name = f"{base}-{suffix}.png"
        fig.tight_layout()
        fig.savefig(os.path.join(directory, name), dpi=100)
        plt.close(fig)
        names.append(name)

    sizes = sweep_sizes(runs)
    if sizes:
        fig, axes = plt.subplots(3, 2, figsize=(13, 13))
        for ax, case in zip(axes.flat, SWEEP_CASES):
            limit_case = ("d2d" if case == "d2d"
                          else case.replace("pageable", "pinned"))
            lim = [(z, value(r, "bw")) for z in sizes
                   for r in [sweep_rec(runs, "raw", limit_case, z)] if r]
            if lim:
                ax.plot([p[0] for p in lim], [p[1] for p in lim], "--",
                        color="0.5", linewidth=2,
                        label=f"limit: raw C {CASE_LABEL[limit_case]}")
            for impl in IMPLS:
                pts = [(z, value(r, "bw")) for z in sizes
                       for r in [sweep_rec(runs, impl, case, z)] if r]
                if pts:
                    color, marker = STYLE[impl]
                    ax.plot([p[0] for p in pts], [p[1] for p in pts],
                            color=color, marker=marker, markersize=4,
                            label=LABEL[impl])
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xlabel("bytes per copy")
            ax.set_ylabel("GB/s (median)")
            ax.set_title(CASE_LABEL[case])
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=8)
        axes.flat[-1].axis("off")
        save(fig, "sweep")

    asizes = case_numbers(runs, "algo_sweep")
    if asizes:
        fig, ax = plt.subplots(figsize=(8, 5))
        series = [("raw", "d2d", "raw C device->device copy (read + write)",
                   "0.5", "--"),
                  ("raw", "reduce", "raw C reduction", "k", "-"),
                  ("raw", "algo", "raw C, gpumem's launcher", "0.3", ":"),
                  ("gpumem", "algo", "gpumem algo", "tab:blue", "-"),
                  ("cupy", "algo", "CuPy, algo.cu RawKernel", "tab:orange",
                   "-")]
        for impl, case, label, color, style in series:
            pts = [(n, value(r, "bw")) for n in asizes
                   for r in [lookup(runs, impl, ("algo_sweep", f"{case}_{n}"))]
                   if r]
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], style,
                        color=color, marker=".", label=label)
        pts = [(n, 0.8 * value(r, "bw")) for n in asizes
               for r in [lookup(runs, "raw", ("algo_sweep", f"d2d_{n}"))] if r]
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], ":",
                    color="tab:red", label="target: 0.8 x the copy (from 4 M)")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("float32 elements")
        ax.set_ylabel("GB/s (median, event-timed)")
        ax.set_title("algo alone against the device->device copy")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
        save(fig, "algo")

    counts = case_numbers(runs, "loop_sweep")
    if counts:
        fig, ax = plt.subplots(figsize=(8, 5))
        series = [("raw", "raw", "raw C, raw reduction (the limit)", "k"),
                  ("raw", "algo", "raw C, gpumem's launcher", "0.5"),
                  ("gpumem", "script", "gpumem scripts/stitching.py",
                   "tab:blue"),
                  ("gpumem", "gpumem", "gpumem, loop in process",
                   "tab:cyan"),
                  ("cupy", "cupy", "CuPy", "tab:orange")]
        for impl, case, label, color in series:
            pts = [(m, value(r, "time")) for m in counts
                   for r in [lookup(runs, impl, ("loop_sweep", f"{case}_{m}"))]
                   if r]
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts],
                        color=color, marker="o", markersize=4, label=label)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("images (4 partitions)")
        ax.set_ylabel("us per iteration (median)")
        ax.set_title("the stitching workload against the image count")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
        save(fig, "loop")

    mg = {}
    for impl in IMPLS:
        for (fig_, case), rec in runs.get(impl, {}).get("rec", {}).items():
            if fig_ == "multigpu" and case.startswith("loop_"):
                _, label, gpus, kind = case.split("_")
                mg.setdefault((impl, label, kind), []).append(
                    (int(gpus.rstrip("gpu")), value(rec, "time")))
    if mg:
        fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
        for ax, label in zip(axes, ("4x10", "4x2^28")):
            for (impl, lab, kind), pts in sorted(mg.items()):
                if lab != label:
                    continue
                pts.sort()
                color, marker = STYLE[impl]
                ax.plot([p[0] for p in pts], [p[1] for p in pts],
                        "-" if kind == "concurrent" else "--", color=color,
                        marker=marker, label=f"{LABEL[impl]} {kind}")
            ax.set_xlabel("GPUs")
            ax.set_ylabel("us per iteration (median)")
            ax.set_title(f"loop {label}: time per iteration against GPUs")
            ax.grid(True, alpha=0.3)
            ax.set_ylim(bottom=0)
            ax.legend(fontsize=8)
        save(fig, "multigpu")
    return names, None


def process_lines(runs):
    """Where the basic and sweep sections ran in several processes a
    side: what that means, and the processes' own medians of the small
    figures, where the process a run lands in decides the speed."""
    shown = [("copy16", "h2d", "16-byte copy host->device"),
             ("copy16", "d2h", "16-byte copy device->host"),
             ("launch", "sync", "empty-kernel launch + synchronize"),
             ("workload", "seed_4x10",
              "the workload 4 x 10, per iteration")]
    sweeps = [("pinned_h2d", 4096, "pinned 4 KiB host->device"),
              ("pinned_d2h", 4096, "pinned 4 KiB device->host"),
              ("pageable_h2d", 4096, "pageable 4 KiB host->device")]
    rows = []
    counts = set()
    for table, items in (("rec", shown), ("sweep", sweeps)):
        for a, b, label in items:
            cells = []
            for impl in IMPLS:
                rec = runs.get(impl, {}).get(table, {}).get((a, b))
                meds = rec.get("process_medians_s") if rec else None
                if meds:
                    counts.add(len(meds))
                cells.append(", ".join(f"{m * 1e6:.2f}" for m in meds)
                             if meds else "")
            if any(cells):
                rows.append(f"| {label} | " + " | ".join(cells) + " |")
    if not rows:
        return []
    n = "/".join(str(c) for c in sorted(counts))
    return ["## Processes", "",
            f"The basic and sweep sections ran in {n} processes an "
            "implementation, in turn (BENCH_ROUNDS); each of their figures "
            "above is the median of the processes' medians, its quartiles "
            "the median of theirs.  Small calls run at one of two speeds "
            "for a whole process (bench/NOTES.md, run L), so one process "
            "a side would decide these ratios by chance.  The processes' "
            "own medians, in microseconds:", "",
            "| figure | " + " | ".join(LABEL[i] for i in IMPLS) + " |",
            "| --- |" + " ---: |" * len(IMPLS)] + rows + [""]


# The tables of the sections with scripts of their own, which the report
# includes: (section, file pattern in the run's folder, heading, what);
# a heading of None: the table's own first line ("# ...") is its heading,
# and ABSENT_TITLE names the section where it wrote none.
INCLUDED = [
    ("sharing", "sharing.md", "Sharing: C++ bindings and other libraries' "
     "allocations", "bench/binding_overhead.py, bench/frameworks_alloc.py, "
     "bench/sharing_ipc.py and bench/frameworks_mixed.py; their last lines."),
    ("peers", "peers.md", "Against every peer: CuPy, PyTorch, RMM and "
     "cuda.core", "bench/peers.py: the same operations through each "
     "library's own API, one process a library, the libraries in turn, "
     "medians of the processes' medians (each process's in brackets); "
     "each row's verdict is gpumem over the fastest peer of this run."),
    ("nccl", "*-nccl.md", None, None),
    ("managed", "managed.md", None, None),
    ("spill", "spill.md", None, None),
    ("commipc", "comm-ipc.md", "One GPU, several ranks: collectives through "
     "shared windows", "bench/comm_ipc.sh: gpumem.comm.allreduce under "
     "mpirun, every rank on device 0, the shared windows against MPI's "
     "host staging; medians of the runs."),
]
ABSENT_TITLE = {"nccl": "Collectives: raw NCCL against gpumem",
                "managed": "Managed and pinned memory (issue 51)",
                "spill": "Spilling (issue 52)"}


def fenced_content(body):
    """BODY's lines without its empty fenced blocks (a section whose
    steps the budget left out writes their fences alone); [] where no
    other text is left."""
    out, fenced = [], False
    for line in body:
        if line.startswith("```"):
            fenced = not fenced
            if not fenced and out and out[-1].startswith("```"):
                out.pop()
                continue
        out.append(line)
    return out if any(line.strip() for line in out) else []


def budget_spent(section, plan, who=()):
    """Whether the budget left out SECTION or a part of it (skipped.txt's
    "SECTION: ...", "IMPL, SECTION: ..." and "SECTION, PART: ...");
    with WHO (implementations and parts), only the whole section or a
    line naming one of WHO counts."""
    for line in plan["skipped"]:
        head = line.partition(": ")[0]
        if head == section:
            return True
        first, _, second = head.partition(", ")
        other = (second if first == section
                 else first if second == section else None)
        if other is not None and (not who or other in who):
            return True
    return False


def included_sections(directory, plan):
    """The report's part made of the sections' own tables (INCLUDED),
    headings one level down; a section that did not run says why."""
    out = []
    for section, pattern, heading, what in INCLUDED:
        paths = sorted(glob.glob(os.path.join(directory, pattern)))
        bodies = []
        for path in paths:
            with open(path, encoding="utf-8") as f:
                body = fenced_content(f.read().splitlines())
            if body:
                bodies.append((path, body))
        why = plan["not_run"].get(("section", section))
        if not why and budget_spent(section, plan):
            why = "the budget was spent (skipped.txt)"
        if not bodies:
            out += [f"## {heading or ABSENT_TITLE[section]}", "",
                    f"Not run: {why}." if why else
                    f"No table: section {section} wrote no {pattern} "
                    "(see its log in the records).", ""]
            continue
        for path, body in bodies:
            if heading:
                out += [f"## {heading}", "", what, ""]
            elif not (body and body[0].startswith("# ")):
                out += [f"## {os.path.basename(path)}", ""]
            fenced = False
            for line in body:
                if line.startswith("```"):
                    fenced = not fenced
                out.append("#" + line if line.startswith("#") and not fenced
                           else line)
            out.append("")
    return out


def included_verdicts(directory):
    """(text, MET | MISSED | "not run: ...") of each target judged in
    the run's collectives table (bench/nccl_report.py) and peers table
    (bench/peers.py), managed.md (bench/managed.py,
    bench/managed_oversubscribe.py) and spill.md (bench/spill.py): lines
    "- ... **met**", "**not met**" or "- ROW: **not run: WHY**", for the
    verdicts' count."""
    out = []
    for prefix, pattern in (("nccl", "*-nccl.md"), ("peers", "peers.md"),
                            ("managed", "managed.md"), ("spill", "spill.md")):
        for path in sorted(glob.glob(os.path.join(directory, pattern))):
            with open(path, encoding="utf-8") as f:
                for line in f:
                    line = line.strip()
                    if not line.startswith("- "):
                        continue
                    unrun = re.fullmatch(r"- (.*?):? \*\*(not run: .*)\*\*",
                                         line)
                    if unrun:
                        out.append((f"[{prefix}] {unrun.group(1)}",
                                    unrun.group(2)))
                        continue
                    for mark, word in (("**not met**", "MISSED"),
                                       ("**met**", "MET")):
                        if line.endswith(mark):
                            out.append((f"[{prefix}] "
                                        + line[2:-len(mark)].strip(), word))
                            break
    return out


def write_report(directory, date, tag):
    runs = load(directory)
    machine = machine_lines(directory)
    tag = tag or gpu_tag(runs, machine)
    base = f"{date}-{tag}"
    lines = [f"# Benchmarks, {date}, {tag.upper()}", "", "VERDICTS", ""]
    lines += ["Made by `make bench` (bench/run.sh, bench/report.py); the "
              "method and the lower bounds are in bench/NOTES.md.  Medians; "
              "times in microseconds per operation, bandwidths in GB/s "
              "(10^9 bytes/s).  Ratios are gpumem over the other in the "
              "same run: for times lower is better, for bandwidths higher "
              "is better.", ""]
    lines += ["## Machine", ""]
    lines += [f"- {line}" for line in machine] or ["- (no machine.txt)"]
    for impl in IMPLS:
        meta = runs.get(impl, {}).get("meta")
        if meta:
            shown = ", ".join(f"{k} {v}" for k, v in meta.items()
                              if k not in ("impl", "figure"))
            lines.append(f"- {LABEL[impl]}: {shown}")
    lines.append("")

    problems = []
    plan = load_plan(directory)
    for impl in IMPLS:
        # bench/run.sh writes IMPL-SECTION[-ROUND].log for every section
        # it runs of IMPL: without one, IMPL had nothing to run here.
        if ("impl", impl) in plan["not_run"] or not glob.glob(
                os.path.join(directory, f"{impl}-*.log")):
            pass
        elif impl not in runs or not (runs[impl]["rec"]
                                      or runs[impl]["sweep"]):
            problems.append(f"- {LABEL[impl]}: no results (see {impl}-*.log in "
                            "the records)")
        if impl in runs:
            problems += [f"- {LABEL[impl]}: {e}" for e in runs[impl]["errors"]]
        if runs.get(impl, {}).get("meta", {}).get("quick"):
            problems.append(f"- {LABEL[impl]}: ran with --quick (tiny sizes: "
                            "not a measurement)")
    for name in ("failed.txt", "skipped.txt"):
        path = os.path.join(directory, name)
        if os.path.exists(path):
            with open(path) as f:
                problems += [f"- {line.strip()}" for line in f
                             if line.strip()]
    if problems:
        lines += ["## Problems in this run", ""] + problems + [""]

    target_lines, summary = target_table(runs, plan)
    lines += ["## Targets (issue 7)", ""]
    met = sum(1 for _, w in summary if w.startswith("MET"))
    lines += [f"{met} of {len(summary)} met.  Ratios are gpumem over the "
              "named implementation; \"within spread\" means the quartile "
              "range of the ratio straddles the threshold, so the verdict "
              "could flip between runs.", ""]
    lines += target_lines + [""]
    new_lines, new_summary = new_target_table(
        runs, load_stitching(directory), plan)
    met = sum(1 for _, w in new_summary if w.startswith("MET"))
    lines += ["## Targets (issue 19: every size; issue 15: several GPUs; "
              "issue 17: plugin and JIT kernels; issue 43: one pool)",
              "", f"{met} of {len(new_summary)} met.  A target over "
              "sizes or counts holds only if it holds at every one; the "
              "table names the worst and the misses.  These lines are "
              "made to be copied into README.md's performance table.", ""]
    lines += new_lines + [""]
    summary = summary + new_summary
    not_run = [f"- {line}" for line in sorted(plan["lines"])]
    if not_run:
        lines += ["## Not run here", "",
                  "What this machine or run could not measure, and why "
                  "(bench/run.sh's not-run.txt); the targets that need it "
                  "say so.", ""] + not_run + [""]

    lines += ["## Medians", ""] + main_table(runs) + [""]
    anchor = []
    for impl, us in ANCHOR_4X2_28.items():
        rec = lookup(runs, impl, ("workload", "algo_4x2^28"))
        got = f"{rec['median_s'] * 1e6:.0f} us" if rec else "—"
        anchor.append(f"{LABEL[impl]} {us:.0f} us (here: {got})")
    landed = lookup(runs, "raw", ("copy16", "h2d_landed"))
    mine = lookup(runs, "gpumem", ("copy16", "h2d"))
    if landed and mine:
        lines += ["The 16-byte copy to the device with its bytes on the "
                  "device on return, as gpumem's call is: raw C (cudaMemcpy "
                  "+ cudaStreamSynchronize) "
                  f"{landed['median_s'] * 1e6:.2f} us, gpumem "
                  f"{mine['median_s'] * 1e6:.2f} us: "
                  f"{mine['median_s'] / landed['median_s']:.2f}x.  Plain "
                  "cudaMemcpy from pageable memory returns once the bytes "
                  "are staged, before they land.", ""]
    lines += ["The issue's anchor for the 4 x 2^28 loop: " + "; ".join(anchor)
              + ".", ""]
    rows = {impl: (lookup(runs, impl, ROW["algo_bw"].keys[impl]),
                   lookup(runs, impl, ROW["d2d"].keys[impl])) for impl in IMPLS}
    ratios = [f"{LABEL[i]} {value(a, 'bw') / value(d, 'bw'):.3f}"
              for i, (a, d) in rows.items() if a and d]
    if ratios:
        lines += ["algo's read bandwidth over the device->device copy's "
                  "(read + write) bandwidth, each implementation's own: "
                  + "; ".join(ratios) + ".", ""]
    raw_saxpy = [(c, lookup(runs, "raw", ("launch", c)))
                 for c in ("async_saxpy0", "sync_saxpy0")]
    if any(r for _, r in raw_saxpy):
        lines += ["raw C through the very launcher gpumem calls "
                  "(gm_kernel_saxpy, n = 0): " + "; ".join(
                      f"{c} {r['median_s'] * 1e6:.2f} us"
                      for c, r in raw_saxpy if r) + ".", ""]
    seed = seed_rate_lines(runs)
    if seed:
        lines += ["Why the 4 x 2^28 loop runs algo, not algo_seed "
                  "(one thread walks every image):", ""] + seed + [""]
    lines += process_lines(runs)

    names, why = plot_all(runs, directory, base)
    if why:
        lines += [f"No plots: {why}.", ""]

    def picture(suffix):
        name = f"{base}-{suffix}.png"
        return [f"![{name}]({name})", ""] if name in names else []

    lines += ["## Copy bandwidth against size", "",
              "Every size from 1 KiB to 1 GiB in powers of two; the "
              "limit drawn on the plots is pinned raw C (one cudaMemcpy "
              "from page-locked memory) of the same direction.  Host "
              "copies are synchronous and followed by a device "
              "synchronize (host clock); device->device copies are "
              "event-timed on a stream.", ""]
    lines += picture("sweep")
    lines += sweep_tables_all(runs)

    lines += ["## algo against the device-to-device copy, per size", ""]
    lines += picture("algo")
    lines += algo_table(runs) + [""]
    shapes = shape_table(runs)
    if shapes:
        lines += ["Launch shapes of the same kernel (raw C, grid x block "
                  "given; event-timed), for choosing the launcher's shape "
                  "(a different shape sums in a different order: the bits "
                  "of the result change with it):", ""] + shapes + [""]

    lines += ["## The stitching workload against the image count", ""]
    lines += picture("loop")
    lines += loop_table(runs) + [""]

    st = staging_table(runs)
    if st:
        lines += ["## The staging engine's threshold and chunk (gpumem)", "",
                  "Each configuration in a child process; synchronous "
                  "copies, host clock, medians.  The data for choosing "
                  "GM_STAGING_MIN (src/cuda/cuda-staging.h) and the chunk "
                  "size (src/cuda/cuda-staging.c).",
                  ""] + st

    kt = kernel_launch_table(runs)
    if kt:
        lines += ["## Plugin and JIT kernels (gpumem)", "",
                  "bench/launch_overhead.py: the built-in saxpy, the same "
                  "kernel from a plugin (tests/plugins/cuda-plugin.cu) and "
                  "from gpumem.jit, 1024 elements; time per launch, queued "
                  "on a stream (async) or each waited for; medians over "
                  "turns taken in rotation.", ""] + kt

    mg = multigpu_table(runs)
    if mg:
        lines += ["## Several GPUs", "",
                  "Peer copies between every ordered pair of devices "
                  "(raw C: "
                  "cudaMemcpyPeerAsync with peer access enabled, the "
                  "limit); the stitching workload with partitions on devices "
                  "i % D, serial (a kernel and a synchronous copy per "
                  "partition) and concurrent (a stream per device, one "
                  "wait per device per iteration).  4x10 and 4x2^28 run "
                  "algo.", ""]
        lines += picture("multigpu")
        lines += mg + [""]

    lines += included_sections(directory, plan)
    summary = summary + included_verdicts(directory)

    lines += ["## All figures", "",
              "Times per operation; wall = host clock around the call as a "
              "script sees it, event = CUDA events (device time).  The "
              "sweep's records are in the .jsonl files.", ""]
    lines += detail_table(runs) + [""]

    lines[lines.index("VERDICTS")] = f"Verdicts: {verdict_counts(summary)}."
    path = os.path.join(directory, base + ".md")
    with open(path, "w") as f:
        f.write("\n".join(lines))
    return path, summary


def main(argv):
    parser = argparse.ArgumentParser(prog="report.py")
    parser.add_argument("dir")
    parser.add_argument("--date", default=datetime.date.today().isoformat())
    parser.add_argument("--tag", default=None,
                        help="name suffix (default: the GPU model, h200)")
    args = parser.parse_args(argv)
    if not re.fullmatch(r"[A-Za-z0-9._-]+", args.date) or (
            args.tag and not re.fullmatch(r"[A-Za-z0-9._-]+", args.tag)):
        parser.error("--date and --tag: letters, digits, '.', '_', '-'")
    path, summary = write_report(args.dir, args.date, args.tag)
    print(f"report: {path}")
    for text, word in summary:
        print(f"  {word:28s} {text}")
    print(f"verdicts: {verdict_counts(summary)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
