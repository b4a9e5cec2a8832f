"""Chooses the pageable-copy engine's thread count, chunk size and size
threshold by measurement (src/cuda/cuda-staging.c; bench/NOTES.md).

Each configuration runs in a child gpumem (the engine reads
GPUMEM_COPY_THREADS and GPUMEM_COPY_CHUNK once); GPUMEM_COPY_THREADS=0
is plain cudaMemcpy.  Copies are synchronous, so host wall-clock time is
what a script sees: median of REPS after two warm-ups.

    gpumem bench/probes/pageable_sweep.py --gpumem src/gpumem [--quick]
"""

import argparse
import json
import os
import subprocess
import sys

CHILD = r"""
import json, sys, time, statistics
import numpy as np, gpumem
sizes = json.loads(sys.argv[1]); reps = int(sys.argv[2])
rng = np.random.default_rng(0)
out = {}
for n in sizes:
    host = rng.integers(1, 255, n, dtype=np.uint8)
    back = np.empty(n, np.uint8)
    dev = gpumem.empty(n, "uint8")
    res = {}
    for name, fn in (("h2d", lambda: gpumem.copy(dev, host)),
                     ("d2h", lambda: gpumem.copy(back, dev))):
        fn(); fn()
        times = []
        for _ in range(reps):
            t = time.perf_counter(); fn(); times.append(time.perf_counter() - t)
        res[name] = n / statistics.median(times) / 1e9
    assert np.array_equal(back, host)
    out[str(n)] = res
print(json.dumps(out))
"""


def run(gpumem, env_extra, sizes, reps):
    env = dict(os.environ, **env_extra)
    proc = subprocess.run([gpumem, "-q", "-c", CHILD, json.dumps(sizes),
                           str(reps)], env=env, capture_output=True,
                          text=True, timeout=300)
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr)
    return json.loads(proc.stdout)


def main(argv):
    p = argparse.ArgumentParser()
    p.add_argument("--gpumem", required=True)
    p.add_argument("--quick", action="store_true")
    args = p.parse_args(argv)
    mib = 1 << 20
    big = [256 * mib]
    reps = 3 if args.quick else 7
    print("config                      H2D GB/s  D2H GB/s   (256 MiB)")
    plain = run(args.gpumem, {"GPUMEM_COPY_THREADS": "0"}, big, reps)
    r = plain[str(big[0])]
    print(f"plain cudaMemcpy            {r['h2d']:8.1f}  {r['d2h']:8.1f}")
    results = {"plain": r}
    threads = [2, 4] if args.quick else [1, 2, 4, 8, 12, 16]
    chunks = [4] if args.quick else [1, 2, 4, 8, 16]
    for t in threads:
        for c in chunks:
            env = {"GPUMEM_COPY_THREADS": str(t),
                   "GPUMEM_COPY_CHUNK": str(c * mib)}
            r = run(args.gpumem, env, big, reps)[str(big[0])]
            results[f"t{t}c{c}"] = r
            print(f"threads {t:2d} chunk {c:2d} MiB     {r['h2d']:8.1f}  "
                  f"{r['d2h']:8.1f}", flush=True)
    sizes = [mib * s for s in (1, 2, 4, 8, 16, 64)]
    print("\nsize threshold: plain vs staged (default engine), GB/s")
    plain_s = run(args.gpumem, {"GPUMEM_COPY_THREADS": "0"}, sizes, reps)
    staged_s = run(args.gpumem, {"GPUMEM_COPY_MIN": "0"}, sizes, reps)
    for n in sizes:
        a, b = plain_s[str(n)], staged_s[str(n)]
        print(f"{n // mib:4d} MiB  plain {a['h2d']:6.1f} / {a['d2h']:6.1f}   "
              f"default {b['h2d']:6.1f} / {b['d2h']:6.1f}")
    results["threshold"] = {"plain": plain_s, "default": staged_s}
    out = os.environ.get("OUT")
    if out:
        with open(os.path.join(out, "pageable_sweep.json"), "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
