"""Turns one run of bench/nccl.sh into a report: a Markdown file of
allreduce latency and bus bandwidth, raw NCCL against gpumem, the
issue's targets with their verdicts, and a PNG plot of bus bandwidth
against size.

    python3 bench/nccl_report.py DIR [--date YYYY-MM-DD] [--tag h200]

DIR holds what bench/nccl.sh wrote: nccl-*.jsonl (bench/nccl_raw.c and
bench/nccl_gpumem.py say the records' fields; any may be missing) and
nccl-machine.txt (else bench/run.sh's machine.txt).  Writes DIR/DATE-TAG-nccl.md
and DIR/DATE-TAG-nccl-busbw.png (the plot needs matplotlib).
"""

import argparse
import datetime
import glob
import json
import os
import re

# (file stem, mode, label): the series of the tables and the plot.
SERIES = [
    ("raw-devices", "async", "raw NCCL, 1 process, queued"),
    ("raw-devices", "sync", "raw NCCL, 1 process, each waited"),
    ("raw-ranks", "async", "raw NCCL, MPI ranks, queued"),
    ("raw-ranks", "sync", "raw NCCL, MPI ranks, each waited"),
    ("gpumem-nccl", "sync", "gpumem.comm.allreduce on NCCL (ranks)"),
    ("gpumem-nccl", "async", "gpumem.comm.allreduce on NCCL, stream="),
    ("gpumem-devices", "sync", "gpumem.allreduce_devices (1 process)"),
    ("gpumem-mpi", "sync", "gpumem.comm.allreduce on MPI (staged)"),
]
LATENCY_SIZES = [4, 16, 256, 4096, 65536, 1 << 20]
BANDWIDTH_SIZES = [1 << 20, 4 << 20, 64 << 20, 256 << 20, 1 << 30]


def load(directory):
    """{(stem, mode): {bytes: record}} and the stitching records."""
    series, stitching = {}, []
    for path in glob.glob(os.path.join(directory, "nccl-*.jsonl")):
        stem = os.path.basename(path)[len("nccl-"):-len(".jsonl")]
        with open(path) as handle:
            for line in handle:
                if not line.strip():
                    continue
                record = json.loads(line)
                if record.get("impl") == "stitching":
                    stitching.append(record)
                else:
                    series.setdefault((stem, record["mode"]), {})[
                        record["bytes"]] = record
    return series, stitching


def size_name(nbytes):
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if nbytes >= 1 << shift:
            return f"{nbytes >> shift} {unit}"
    return f"{nbytes} B"


def table(series, sizes, field, fmt):
    present = [s for s in SERIES if (s[0], s[1]) in series]
    lines = ["| series | " + " | ".join(size_name(b) for b in sizes) + " |",
             "|---|" + "---|" * len(sizes)]
    for stem, mode, label in present:
        cells = []
        for b in sizes:
            record = series[(stem, mode)].get(b)
            cells.append(fmt.format(record[field]) if record else "-")
        n = next(iter(series[(stem, mode)].values()))["n"]
        lines.append(f"| {label} (n={n}) | " + " | ".join(cells) + " |")
    return lines


def figure(series, stem, mode, nbytes, field):
    record = series.get((stem, mode), {}).get(nbytes)
    return record[field] if record else None


def verdict(ok):
    return "**met**" if ok else "**not met**"


def targets(series, stitching):
    lines = []
    size = 256 << 20
    ours = figure(series, "gpumem-nccl", "sync", size, "busbw_GBs")
    for stem, label in (("raw-ranks", "raw NCCL over MPI ranks"),
                        ("raw-devices", "raw NCCL in one process")):
        raw = figure(series, stem, "async", size, "busbw_GBs")
        if ours and raw:
            lines.append(f"- allreduce 256 MiB float32: gpumem on NCCL "
                         f"{ours:.1f} GB/s bus bandwidth, {label} {raw:.1f}: "
                         f"{ours / raw:.2f}x (target >= 0.9x) "
                         f"{verdict(ours >= 0.9 * raw)}")
    staged = figure(series, "gpumem-mpi", "sync", size, "busbw_GBs")
    if ours and staged:
        lines.append(f"- the MPI staged path at 256 MiB: {staged:.2f} GB/s; "
                     f"NCCL {ours / staged:.0f}x that")
    ours = figure(series, "gpumem-nccl", "sync", 16, "time_us")
    for stem, mode, label in (
            ("raw-ranks", "sync", "raw NCCL over ranks, each call waited"),
            ("raw-devices", "sync", "raw NCCL in one process, each waited"),
            ("raw-ranks", "async", "raw NCCL over ranks, queued")):
        raw = figure(series, stem, mode, 16, "time_us")
        if ours and raw:
            lines.append(f"- allreduce of 4 floats: gpumem on NCCL "
                         f"{ours:.1f} us a call (complete on return), "
                         f"{label} {raw:.1f} us: {ours / raw:.2f}x (target "
                         f"<= 1.3x) {verdict(ours <= 1.3 * raw)}")
    queued = figure(series, "gpumem-nccl", "async", 16, "time_us")
    if queued:
        lines.append(f"- gpumem with stream=, queued back to back: "
                     f"{queued:.1f} us a call")
    by = {(r["engine"], r["images"]): r["us_per_iteration"]
          for r in stitching}
    for images, label, want in ((40, "4 x 10", "no slower"),
                                (1 << 30, "4 x 2^28", "faster")):
        nccl, mpi = by.get(("nccl", images)), by.get(("mpi", images))
        if nccl and mpi:
            ok = nccl <= mpi * 1.02 if want == "no slower" else nccl < mpi
            lines.append(f"- scripts/stitching_mpi.py {label}: NCCL "
                         f"{nccl:.1f} us an iteration, MPI {mpi:.1f} "
                         f"({want} wanted; within 2% counts as no slower) "
                         f"{verdict(ok)}")
    return lines or ["- no figures to judge (steps missing)"]


def plot(series, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        return f"(no plot: matplotlib is not importable here: {exc})"
    fig, ax = plt.subplots(figsize=(9, 5.5))
    for stem, mode, label in SERIES:
        records = series.get((stem, mode))
        if not records:
            continue
        sizes = sorted(records)
        ax.plot(sizes, [records[b]["busbw_GBs"] for b in sizes], marker=".",
                label=label)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("allreduce size (bytes, float32)")
    ax.set_ylabel("bus bandwidth (GB/s) = algbw x 2(n-1)/n")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return f"![bus bandwidth]({os.path.basename(path)})"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("dir")
    parser.add_argument("--date", default=datetime.date.today().isoformat())
    parser.add_argument("--tag", default=None)
    args = parser.parse_args()
    series, stitching = load(args.dir)
    machine = ""
    for name in ("nccl-machine.txt", "machine.txt"):
        machine_path = os.path.join(args.dir, name)
        if os.path.exists(machine_path):
            with open(machine_path) as handle:
                machine = handle.read()
            break
    tag = args.tag
    if tag is None:
        found = re.search(r"H(\d+)", machine)
        tag = f"h{found.group(1)}" if found else "gpu"
    n = max((next(iter(r.values()))["n"] for r in series.values()),
            default=0)
    stem = os.path.join(args.dir, f"{args.date}-{tag}x{n}-nccl")
    lines = [f"# Collectives: raw NCCL against gpumem ({args.date}, "
             f"{n} GPUs)", "",
             "In-place allreduce (sum) of float32.  Bus bandwidth as "
             "nccl-tests defines it: busbw = algbw x 2(n-1)/n, algbw = "
             "bytes / time.  'queued': calls back to back, then one wait "
             "(nccl-tests' timing); 'each waited': every call complete "
             "before the next (what a gpumem call without stream= is).", ""]
    if machine:
        lines += ["```", machine.strip(), "```", ""]
    lines += ["## Targets", ""] + targets(series, stitching) + [""]
    lines += ["## Latency (us a call)", ""]
    lines += table(series, LATENCY_SIZES, "time_us", "{:.1f}") + [""]
    lines += ["## Bus bandwidth (GB/s)", ""]
    lines += table(series, BANDWIDTH_SIZES, "busbw_GBs", "{:.1f}") + [""]
    if stitching:
        lines += ["## scripts/stitching_mpi.py (us an iteration, median, "
                  "rank 0)", "", "| images | engine | us |", "|---|---|---|"]
        for r in sorted(stitching, key=lambda r: (r["images"], r["engine"])):
            lines.append(f"| {r['images']} | {r['engine']} | "
                         f"{r['us_per_iteration']:.1f} |")
        lines.append("")
    lines += ["## Plot", "", plot(series, stem + "-busbw.png"), ""]
    with open(stem + ".md", "w") as handle:
        handle.write("\n".join(lines))
    print("wrote", stem + ".md")


if __name__ == "__main__":
    main()
