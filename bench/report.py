"""Turns one benchmark run into a report: a Markdown file of medians,
ratios and the issue's targets, and PNG plots of the copy sweep.

    python3 bench/report.py DIR [--date YYYY-MM-DD] [--tag h200]

DIR holds what bench/run.sh wrote there: raw.jsonl, gpumem.jsonl and
cupy.jsonl (one record a line, bench/benchlib.py says the format; any of
them may be missing) and machine.txt ("key: value" lines).  Writes
DIR/DATE-TAG.md and DIR/DATE-TAG-sweep-CASE.png beside it (no
subfolders); TAG defaults to the GPU's model from the records ("h200").
Plots need matplotlib; without it the report says so and has none.
"""

import argparse
import datetime
import json
import os
import re
import sys

IMPLS = ("raw", "gpumem", "cupy")
LABEL = {"raw": "raw CUDA C", "gpumem": "gpumem", "cupy": "CuPy"}
COPY_CASES = ("pinned_h2d", "pinned_d2h", "pageable_h2d", "pageable_d2h")
CASE_LABEL = {"pinned_h2d": "pinned host->device",
              "pinned_d2h": "pinned device->host",
              "pageable_h2d": "pageable host->device",
              "pageable_d2h": "pageable device->host"}
# The anchor for the 4 x 2^28 workload, microseconds.
ANCHOR_4X2_28 = {"raw": 1081.0, "cupy": 1129.0}


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
    Row("pageable_h2d", "256 MiB pageable host->device", "bw",
        ("copy256", "pageable_h2d")),
    Row("pageable_d2h", "256 MiB pageable device->host", "bw",
        ("copy256", "pageable_d2h")),
    Row("d2d", "device->device copy 1 GiB (read + write)", "bw",
        ("d2d", "1GiB")),
    Row("algo_bw", "algo kernel over 2^28 float32 (bytes read)", "bw",
        ("algo_bw", "2^28")),
    Row("seed_4x10", "workload per iteration, 4 x 10 images, algo_seed",
        "time", ("workload", "seed_4x10")),
    Row("algo_4x2_28", "workload per iteration, 4 x 2^28 images, algo",
        "time", ("workload", "algo_4x2^28")),
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


def load(directory):
    """Records by implementation: {impl: {"meta": {...}, "errors": [...],
    "rec": {(figure, case): record}, "sweep": {(case, bytes): record}}};
    an implementation with no file is absent."""
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
                    run["sweep"][(rec["case"], rec["bytes"])] = rec
                else:
                    run["rec"][(fig, rec["case"])] = rec
        runs[impl] = run
    return runs


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


def target_table(runs):
    out = ["| target | measured | range (quartiles) | verdict |",
           "| --- | ---: | ---: | --- |"]
    summary = []
    for t in TARGETS:
        row = t.row
        mine = lookup(runs, "gpumem", row.keys["gpumem"])
        other = (lookup(runs, t.against, row.keys[t.against])
                 if t.against else None)
        if mine is None or (t.against and other is None):
            out.append(f"| {t.text} | — | — | not measured |")
            summary.append((t.text, "not measured"))
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


def write_report(directory, date, tag):
    runs = load(directory)
    machine = machine_lines(directory)
    tag = tag or gpu_tag(runs, machine)
    base = f"{date}-{tag}"
    lines = [f"# Benchmarks, {date}, {tag.upper()}", ""]
    lines += ["Made by `make bench` (bench/run.sh, bench/report.py); the "
              "method and the floors are in bench/NOTES.md.  Medians; "
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
    for impl in IMPLS:
        if impl not in runs or not (runs[impl]["rec"]
                                    or runs[impl]["sweep"]):
            problems.append(f"- {LABEL[impl]}: no results (see {impl}.log)")
        if impl in runs:
            problems += [f"- {LABEL[impl]}: {e}" for e in runs[impl]["errors"]]
        if runs.get(impl, {}).get("meta", {}).get("quick"):
            problems.append(f"- {LABEL[impl]}: ran with --quick (tiny sizes: "
                            "not a measurement)")
    if problems:
        lines += ["## Problems in this run", ""] + problems + [""]

    target_lines, summary = target_table(runs)
    lines += ["## Targets (issue 7)", ""]
    met = sum(1 for _, w in summary if w.startswith("MET"))
    lines += [f"{met} of {len(summary)} met.  Ratios are gpumem over the "
              "named implementation; \"within spread\" means the quartile "
              "range of the ratio straddles the threshold, so the verdict "
              "could flip between runs.", ""]
    lines += target_lines + [""]

    lines += ["## Medians", ""] + main_table(runs) + [""]
    anchor = []
    for impl, us in ANCHOR_4X2_28.items():
        rec = lookup(runs, impl, ("workload", "algo_4x2^28"))
        got = f"{rec['median_s'] * 1e6:.0f} us" if rec else "not measured"
        anchor.append(f"{LABEL[impl]} {us:.0f} us (here: {got})")
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

    lines += ["## Copy bandwidth against size", ""]
    names, why = plot_sweep(runs, directory, base)
    if names:
        lines += [f"![{n}]({n})" for n in names] + [""]
    elif why:
        lines += [f"No plots: {why}.", ""]
    lines += sweep_tables(runs)

    lines += ["## All figures", "",
              "Times per operation; wall = host clock around the call as a "
              "script sees it, event = CUDA events (device time).  The "
              "sweep's records are in the .jsonl files.", ""]
    lines += detail_table(runs) + [""]

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
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
