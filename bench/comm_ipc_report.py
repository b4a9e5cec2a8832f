"""The table of bench/comm_ipc.sh: for 2 and 4 ranks sharing one GPU,
gpumem.comm.allreduce's time per call (the median of the runs) through
the shared windows and through MPI's host staging, their ratio, and the
windows against one device copy of the same bytes.

    python3 bench/comm_ipc_report.py DIR
"""

import glob
import json
import os
import statistics
import sys


def load(folder):
    """{(impl, n, bytes): [time_us, ...]} from every run's records."""
    times = {}
    for path in glob.glob(os.path.join(folder, "comm-ipc-*.jsonl")):
        n = int(os.path.basename(path).split("-")[3])
        with open(path) as handle:
            for line in handle:
                r = json.loads(line)
                key = (r["impl"], n, r["bytes"])
                times.setdefault(key, []).append(r["time_us"])
    return times


def main(folder):
    times = load(folder)
    med = {k: statistics.median(v) for k, v in times.items()}
    sizes = sorted({k[2] for k in med})
    print("| ranks | bytes | windows (us) | MPI staged (us) | staged / "
          "windows | device copy (us) | windows / copy |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for n in (2, 4):
        for size in sizes:
            ipc = med.get(("gpumem-ipc", n, size))
            mpi = med.get(("gpumem-mpi", n, size))
            copy = med.get(("device-copy", n, size))
            if ipc is None and mpi is None:
                continue
            cells = [str(n), str(size),
                     f"{ipc:.1f}" if ipc else "-",
                     f"{mpi:.1f}" if mpi else "-",
                     f"{mpi / ipc:.2f}x" if ipc and mpi else "-",
                     f"{copy:.1f}" if copy else "-",
                     f"{ipc / copy:.2f}x" if ipc and copy else "-"]
            print("| " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "bench/results"))
