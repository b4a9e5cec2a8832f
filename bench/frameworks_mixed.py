"""PyTorch, CuPy and gpumem allocating and freeing at once: one pool
(gpumem.use_pool) against three separate caches.

    gpumem bench/frameworks_mixed.py [--seconds S] [--max-live-mib N]

Each configuration runs in a fresh process: four threads (PyTorch, CuPy,
gpumem, and PyTorch again), each on a stream of its own, allocate arrays
of random sizes from 1 KiB to 256 MiB (log-uniform), fill each with a
value of its own, and free random ones.  The threads take turns, as the
stages of a pipeline do: in each --phase-seconds one thread may keep up
to --max-live-mib of its arrays alive and the others a sixteenth of
that, so each library's cache, when it has one of its own, keeps memory
another library needs next.  A sampler records the device's used
memory (total - free) every 5 ms.  At the end every live array is
checked against its value (results exact), and, with one pool, gpumem's
books per owner against the threads' own tally of live bytes (exact to
the byte).  It prints the peak device memory with one pool over the
peak with three caches.  Its turns let each library reuse its own
cache, so the ratio shows little of the hoarding one pool removes; the
target for that is bench/frameworks_pipeline.py's (issue 43).
"""

import argparse
import json
import math
import os
import subprocess
import sys

CHILD = r"""
import json, math, random, sys, threading, time
import numpy as np
import gpumem
mode, seconds, max_live, phase = sys.argv[-4], float(sys.argv[-3]), int(sys.argv[-2]) << 20, float(sys.argv[-1])
if mode == "pool":
    gpumem.use_pool("torch", "cupy")
import torch, cupy

KIB, MAX = 1 << 10, 256 << 20
def size(rng):
    return int(math.exp(rng.uniform(math.log(KIB), math.log(MAX)))) // 4 * 4

class Torch:
    owner = "torch"
    def __init__(self):
        self.stream = torch.cuda.Stream()
    def make(self, n, value):
        with torch.cuda.stream(self.stream):
            t = torch.empty(n // 4, dtype=torch.float32, device="cuda")
            t.fill_(value)
        return t
    def check(self, t, value):
        with torch.cuda.stream(self.stream):
            return bool((t == value).all().item())
    def sync(self):
        self.stream.synchronize()

class Cupy:
    owner = "cupy"
    def __init__(self):
        self.stream = cupy.cuda.Stream(non_blocking=True)
    def make(self, n, value):
        with self.stream:
            c = cupy.empty(n // 4, dtype=cupy.float32)
            c.fill(value)
        return c
    def check(self, c, value):
        with self.stream:
            return bool((c == value).all())
    def sync(self):
        self.stream.synchronize()

class Gpumem:
    owner = "gpumem"
    def __init__(self):
        self.stream = gpumem.Stream()
    def make(self, n, value):
        a = gpumem.empty(n // 4, "float32")
        a.fill(value)
        return a
    def check(self, a, value):
        sample = a[::max(1, a.size // 4096)].copy_to_host()
        return bool((sample == value).all())
    def sync(self):
        gpumem.synchronize()

tally = {"torch": 0, "cupy": 0, "gpumem": 0}
lock = threading.Lock()
errors, live_all = [], []
begin = time.monotonic()
stop = begin + seconds

def worker(kind, seed):
    rng = random.Random(seed)
    lib, live, held, count = kind(), [], 0, 0
    while time.monotonic() < stop:
        heavy = int((time.monotonic() - begin) / phase) % 4 == seed
        cap = max_live if heavy else max_live // 16
        if live and (held > cap or rng.random() < 0.45):
            obj, value, n = live.pop(rng.randrange(len(live)))
            if not lib.check(obj, value):
                errors.append(f"{lib.owner}: wrong values before free")
            del obj
            held -= n
            with lock:
                tally[lib.owner] -= n
        else:
            n, value = size(rng), float(rng.randrange(1, 1 << 20))
            try:
                obj = lib.make(n, value)
            except Exception:                 # out of memory: free one
                if live:
                    _, _, freed = live.pop(0)
                    held -= freed
                    with lock:
                        tally[lib.owner] -= freed
                continue
            live.append((obj, value, n))
            held += n
            with lock:
                tally[lib.owner] += n
            count += 1
    lib.sync()
    for obj, value, n in live:
        if not lib.check(obj, value):
            errors.append(f"{lib.owner}: wrong values at the end")
    live_all.append((lib.owner, live, count))

peak, sampling = [0], [True]
def sampler():
    dev = gpumem.Device(0)
    while sampling[0]:
        free, total = dev.mem_info()
        peak[0] = max(peak[0], total - free)
        time.sleep(0.005)

base_free, total = gpumem.Device(0).mem_info()
threads = [threading.Thread(target=worker, args=(k, i))
           for i, k in enumerate((Torch, Cupy, Gpumem, Torch))]
s = threading.Thread(target=sampler)
s.start()
for t in threads: t.start()
for t in threads: t.join()
sampling[0] = False
s.join()
books = gpumem.memory_stats()["owners"]
exact = all(books[o]["allocated_bytes"] == tally[o] for o in ("torch", "cupy")) \
    if mode == "pool" else None
print(json.dumps({"mode": mode, "peak_used": peak[0],
                  "used_before": total - base_free,
                  "allocations": sum(c for _, _, c in live_all),
                  "errors": errors[:5], "books_exact": exact,
                  "books": {o: books[o]["allocated_bytes"] for o in books},
                  "tally": tally}))
"""


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--max-live-mib", type=int, default=8192)
    parser.add_argument("--phase-seconds", type=float, default=2.0)
    args = parser.parse_args()
    program = os.environ.get("GPUMEM", "gpumem")
    results = {}
    for mode in ("separate", "pool"):
        run = subprocess.run(
            [program, "-q", "-c", CHILD, mode, str(args.seconds),
             str(args.max_live_mib), str(args.phase_seconds)],
            capture_output=True, text=True, timeout=args.seconds * 3 + 300)
        if run.returncode != 0:
            print(f"{mode}: failed\n{run.stderr[-3000:]}")
            return 1
        results[mode] = json.loads(run.stdout.strip().splitlines()[-1])
        r = results[mode]
        print(f"{mode}: peak {r['peak_used'] / 2**30:.2f} GiB used "
              f"({r['used_before'] / 2**30:.2f} before), "
              f"{r['allocations']} allocations, errors {r['errors']}, "
              f"books exact: {r['books_exact']}")
    ratio = results["pool"]["peak_used"] / results["separate"]["peak_used"]
    print(f"peak with one pool / peak with three: {ratio:.2f}")
    return 0 if not results["pool"]["errors"] \
        and not results["separate"]["errors"] \
        and results["pool"]["books_exact"] else 1


if __name__ == "__main__":
    sys.exit(main())
