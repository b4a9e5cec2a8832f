"""The staging engine's pageable copies, both ways, 1 MiB to 256 MiB:
GB/s, medians of 40 copies (12 from 64 MiB), each copy followed by a
synchronize.  "hot": one buffer copied again and again (the CPU's caches
hold it); "cold": the copies rotate through a 1 GiB arena, as make
bench's sweep does, so the memory is not in the caches.  Checks the
bytes of every size both ways.  bench/HISTORY.md ("The staging engine,
third form") has its tables.  Not part of make bench; one process per
build or setting, by hand:

    src/gpumem -q bench/probes/staging_probe.py
    GPUMEM_COPY_THREADS=8 src/gpumem -q bench/probes/staging_probe.py

PROBE_TAG (environment) prefixes every line, to tell runs apart.
"""
import os
import time

import numpy as np
import gpumem

pc = time.perf_counter
tag = os.environ.get("PROBE_TAG", "")
MIB = 1 << 20
ARENA, TILE = 1 << 30, 16 * MIB
SIZES = [1 * MIB, 2 * MIB, 4 * MIB, 8 * MIB, 16 * MIB, 32 * MIB, 64 * MIB,
         256 * MIB]

host = np.empty(ARENA, np.uint8)
host[:TILE] = np.random.default_rng(0).integers(0, 255, TILE, dtype=np.uint8)
for o in range(TILE, ARENA, TILE):
    host[o:o + TILE] = host[:TILE]
back = np.ones(ARENA, np.uint8)
dev = gpumem.empty(max(SIZES), "uint8")
failed = False
for mode in ("hot", "cold"):
    out = []
    for n in SIZES:
        offsets = [0] if mode == "hot" else list(range(0, ARENA - n + 1, n))
        d = dev[:n]
        for name in ("h2d", "d2h"):
            def copy(j):
                o = offsets[j % len(offsets)]
                if name == "h2d":
                    gpumem.copy(d, host[o:o + n])
                else:
                    gpumem.copy(back[o:o + n], d)
            for j in range(3):
                copy(j)
                gpumem.synchronize()
            times = []
            for j in range(40 if n < 64 * MIB else 12):
                t0 = pc()
                copy(j + 3)
                gpumem.synchronize()
                times.append(pc() - t0)
            times.sort()
            out.append(f"{n // MIB}M {name} "
                       f"{n / times[len(times) // 2] / 1e9:5.1f}")
        gpumem.copy(d, host[:n])
        back[:n] = 0
        gpumem.copy(back[:n], d)
        if not np.array_equal(back[:n], host[:n]):
            out.append(f"{n // MIB}M MISMATCH")
            failed = True
    print(tag, mode, " | ".join(out), flush=True)
raise SystemExit(1 if failed else 0)
