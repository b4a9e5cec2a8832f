"""Which sweep figures of one process ran slow, and when in that process:
tells a size's cost (slow in every process alike, so never flagged here)
from the machine's slow time (one process's figures of several cases
and sizes slow together, at about the same at_s).

    python3 bench/probes/sweep_at.py RECORDS [--from 2048] [--to 131072]

RECORDS is a run's records folder (bench/run.sh's BENCH_OUT/records, or
the folder a DATE-TAG-records.tar.gz unpacks to), read for its
IMPL-sweep-ROUND.jsonl files, one process each.  Prints, for each
implementation and process, every sweep figure whose size is in the
range: its median (us), its ratio to the fastest other process's same
figure (a '*' at 1.2x or more) and at_s (bench/benchlib.py; raw.cu's
records have none).  Needs no GPU."""

import argparse
import glob
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))))
from report import IMPLS, jsonl_records  # noqa: E402

SLOW = 1.2


def processes(folder, impl):
    """IMPL's sweep records, a list a process in round order."""
    def round_of(path):
        return int(re.search(r"-(\d+)\.jsonl$", path).group(1))

    out = []
    for path in sorted(glob.glob(os.path.join(folder,
                                              f"{impl}-sweep-[0-9]*.jsonl")),
                       key=round_of):
        out.append([r for r in jsonl_records(path)
                    if r.get("figure") == "sweep" and "median_s" in r])
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("records")
    ap.add_argument("--from", dest="lo", type=int, default=2048)
    ap.add_argument("--to", dest="hi", type=int, default=131072)
    args = ap.parse_args()
    if not os.path.isdir(args.records):
        ap.error(f"{args.records} is not a folder")
    found = False
    for impl in IMPLS:
        procs = processes(args.records, impl)
        if len(procs) < 2:
            continue
        found = True
        medians = [{(r["case"], r["bytes"]): r["median_s"] for r in p}
                   for p in procs]
        for i, recs in enumerate(procs):
            print(f"== {impl}, process {i + 1} of {len(procs)}")
            for r in recs:
                key = (r["case"], r["bytes"])
                if not args.lo <= r["bytes"] <= args.hi:
                    continue
                others = [m[key] for j, m in enumerate(medians)
                          if j != i and key in m]
                x = r["median_s"] / min(others) if others else float("nan")
                at = r.get("at_s")
                print(f"{r['case']:13s} {r['bytes'] // 1024:6d} KiB "
                      f"{r['median_s'] * 1e6:9.2f} us  x{x:4.2f}"
                      f"{'*' if x >= SLOW else ' '}  at "
                      + (f"{at:7.2f} s" if at is not None else "      —"))
    if not found:
        raise SystemExit(f"{args.records}: no implementation has the sweep "
                         "records of two processes or more")


if __name__ == "__main__":
    main()
