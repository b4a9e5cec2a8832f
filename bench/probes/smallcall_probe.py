"""Whether this process's small CUDA calls run fast or slow
(bench/HISTORY.md, run L: the same build takes 8.3-9.6 or 10.0-10.9 us a
4 KiB copy, by process): a 4 KiB copy each way from page-locked memory,
one from NumPy memory and one within the device, each followed by
gpumem.synchronize(), medians of 3000 in microseconds; then the CPU time
of all the process's threads per second of wall time (about 1: no
thread spins meanwhile).  STAGE_FIRST=1 first makes a 64 MiB staged copy
each way, so that the staging pool's threads exist.  Not part of make
bench; run it in several fresh processes:

    for i in 1 2 3 4; do src/gpumem -q bench/probes/smallcall_probe.py; done

Linux only (/proc).  PROBE_TAG (environment) prefixes the line.
"""
import os
import time

import numpy as np
import gpumem

pc = time.perf_counter
tag = os.environ.get("PROBE_TAG", "")
n = 1024
pinned = gpumem.pinned_empty(n, "float32")
pinned[:] = 1
pageable = np.ones(n, np.float32)
d, d2 = gpumem.empty(n), gpumem.empty(n)
if os.environ.get("STAGE_FIRST"):
    big = np.ones(16 << 20, np.float32)
    dbig = gpumem.empty(big.size)
    gpumem.copy(dbig, big)
    gpumem.copy(big, dbig)


def cpu_seconds():
    total = 0
    for task in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{task}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])   # utime, stime
    return total / os.sysconf("SC_CLK_TCK")


c0, w0 = cpu_seconds(), pc()
out = []
for name, copy in (("pinned h2d", lambda: gpumem.copy(d, pinned)),
                   ("pinned d2h", lambda: gpumem.copy(pinned, d)),
                   ("pageable h2d", lambda: gpumem.copy(d, pageable)),
                   ("d2d", lambda: gpumem.copy(d2, d))):
    times = []
    for r in range(3300):
        t0 = pc()
        copy()
        gpumem.synchronize()
        if r >= 300:
            times.append(pc() - t0)
    times.sort()
    out.append(f"{name} {times[len(times) // 2] * 1e6:6.2f}")
out.append(f"cpu/wall {(cpu_seconds() - c0) / (pc() - w0):.2f}, "
           f"threads {len(os.listdir('/proc/self/task'))}")
print(tag, " | ".join(out), flush=True)
