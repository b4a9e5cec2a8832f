"""One pool against three caches: a pipeline whose stages each need most
of the device.  PyTorch, then CuPy, then gpumem, each allocating about
FRACTION (default 0.6) of the device's memory, filling it, checking it
and dropping it, as the stages of a pipeline hand over to each other;
twice, so that the second pass starts from what the first left cached.

    gpumem bench/frameworks_pipeline.py [--fraction F] [--passes N] [--out FILE]

Each configuration runs in a fresh process, since a library's allocator
is chosen once a process: "three_caches" (each library its own cache,
as they come) and "one_pool" (gpumem.use_pool("torch", "cupy"): all
three on gpumem's pool).  No stage empties a cache: a stage that drops
its array is done with it, as a script that moves on is.  With three
caches a stage whose predecessor's cache still holds its 60% runs out
of memory; with one pool the memory one stage freed is the next one's.
Target (issue 43): with one pool every stage of every pass runs, with
exact results.  Writes one record per configuration (figure
"pipeline", case "one_pool" or "three_caches"; benchlib's format plus
"stages", "completed", "failed_at" and "error") to --out, a line each
to standard output.  Exit status 77 where it cannot run (the host
backend; PyTorch or CuPy not importable).
"""

import argparse
import importlib.util
import json
import os
import subprocess
import sys

import gpumem

CHILD = r"""
import json, sys, time
import gpumem
mode, fraction, passes = sys.argv[-3], float(sys.argv[-2]), int(sys.argv[-1])
if mode == "one_pool":
    gpumem.use_pool("torch", "cupy")
import torch, cupy

device = gpumem.Device(0)
free, total = device.mem_info()
n = int(total * fraction) // 4


def torch_stage(value):
    t = torch.full((n,), value, dtype=torch.float32, device="cuda")
    ok = bool((t[::4096] == value).all().item())
    del t
    return ok


def cupy_stage(value):
    c = cupy.full(n, value, dtype=cupy.float32)
    ok = bool((c[::4096] == value).all())
    del c
    return ok


def gpumem_stage(value):
    a = gpumem.empty(n, "float32")
    a.fill(value)
    ok = bool((a[::4096].copy_to_host() == value).all())
    a.free()
    return ok


stages, failed_at, error, peak = [], None, None, 0
begin = time.perf_counter()
for p in range(passes):
    for k, (name, stage) in enumerate((("torch", torch_stage),
                                       ("cupy", cupy_stage),
                                       ("gpumem", gpumem_stage))):
        value = float(1 + k + 3 * p)
        t0 = time.perf_counter()
        try:
            ok = stage(value)
        except Exception as exc:
            failed_at = f"{name} (pass {p + 1})"
            error = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
            break
        free_now, _ = device.mem_info()
        peak = max(peak, total - free_now)
        stages.append({"library": name, "pass": p + 1, "exact": ok,
                       "seconds": time.perf_counter() - t0})
    if failed_at:
        break
print(json.dumps({"mode": mode, "bytes": n * 4, "total": total,
                  "stages": stages, "failed_at": failed_at, "error": error,
                  "used_after": peak, "seconds":
                  time.perf_counter() - begin}))
"""


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fraction", type=float, default=0.6)
    parser.add_argument("--passes", type=int, default=2)
    parser.add_argument("--out", metavar="FILE")
    args = parser.parse_args()
    if not 0.0 < args.fraction < 1.0:
        parser.error("--fraction must lie between 0 and 1")
    if not 1 <= args.passes <= 100:
        parser.error("--passes must be 1 .. 100")
    if gpumem.backend != "cuda":
        print("frameworks_pipeline.py: needs the cuda backend")
        return 77
    missing = [name for name in ("torch", "cupy")
               if importlib.util.find_spec(name) is None]
    if missing:
        print(f"frameworks_pipeline.py: needs PyTorch and CuPy "
              f"({', '.join(missing)} not importable)")
        return 77
    program = os.environ.get("GPUMEM", "gpumem")
    records = []
    for mode in ("three_caches", "one_pool"):
        run = subprocess.run(
            [program, "-q", "-c", CHILD, mode, str(args.fraction),
             str(args.passes)], capture_output=True, text=True, timeout=600)
        if run.returncode != 0:
            print(f"{mode}: the child failed (exit status {run.returncode})"
                  f"\n{run.stderr[-3000:]}")
            return 1
        r = json.loads(run.stdout.strip().splitlines()[-1])
        want = 3 * args.passes
        done = len(r["stages"])
        exact = all(s["exact"] for s in r["stages"])
        completed = done == want and exact and r["failed_at"] is None
        seconds = r["seconds"]
        records.append({
            "impl": "gpumem", "figure": "pipeline", "case": mode,
            "timer": "wall", "median_s": seconds, "q1_s": seconds,
            "q3_s": seconds, "min_s": seconds, "n": 1, "bytes": r["bytes"],
            "traffic": 0, "stages": r["stages"], "want": want,
            "completed": completed, "exact": exact,
            "failed_at": r["failed_at"], "error": r["error"],
            "note": f"PyTorch, CuPy, gpumem at {args.fraction:g} of "
                    f"{r['total'] / 2 ** 30:.1f} GiB each, {args.passes} "
                    "passes"})
        print(f"{mode}: {done} of {want} stages"
              + ("" if exact else ", WRONG VALUES")
              + (f"; out at {r['failed_at']}: {r['error']}"
                 if r["failed_at"] else "")
              + f"; {r['bytes'] / 2 ** 30:.1f} GiB a stage, {seconds:.2f} s")
    if args.out:
        with open(args.out, "w") as f:
            for record in records:
                f.write(json.dumps(record) + "\n")
    return 0 if all(r["exact"] for r in records) else 1


if __name__ == "__main__":
    sys.exit(main())
