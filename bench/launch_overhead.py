"""Launch time of a user's kernel against a built-in one: the same
y = a*x + y as the built-in saxpy, from a plugin (c_axpy of
tests/plugins/cuda-plugin.so, built by make check) and compiled by
gpumem.jit, each called through its checked Python function.  Also
NVRTC's first-compile time and the time to get the kernel from the disk
cache.  The target: the plugin and the cached JIT kernel within 1.05x of
the built-in kernel's launch time.

    gpumem bench/launch_overhead.py [--plugin PATH] [--launches N]
                                    [--reps R] [--quick] [--json FILE]
                                    [--out FILE]

Launch time: N launches of a 1024-element kernel queued on one stream,
then one synchronize, the wall time divided by N (the host's cost of a
launch: checks, enqueue); and N synchronous calls (no stream=: each
returns when its kernel is done).  The variants take turns R times and
the medians are reported, so drift hits all alike.  Exits 77 without
the cuda backend (JIT and plugin kernels without a C reference need it).

bench/run.sh runs it as its section "kernels" with --out: records in
bench/benchlib.py's format (impl "gpumem"), figure "kernel_launch" with
cases BUILTIN_MODE, PLUGIN_MODE and JIT_MODE (MODE async or sync; times
per launch over the R turns), and figure "jit_compile" with cases
"nvrtc_first" (the first gpumem.jit call, NVRTC compiling) and
"cache_hit" (the same code from the disk cache); bench/report.py makes
its table and the 1.05x target from them.  --json FILE writes the
medians and ratios as one JSON object.
"""

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

import numpy as np

import gpumem
import benchlib as bl

SAXPY = r"""
extern "C" __global__ void saxpy(long long n, float a, const float *x,
                                 float *y)
{
  long long i = blockIdx.x * (long long) blockDim.x + threadIdx.x;
  if (i < n)
    y[i] = __fadd_rn(__fmul_rn(a, x[i]), y[i]);
}
"""
SIGNATURE = "int64 n, float32 a, in float32 *x[n], inout float32 *y[n]"


def per_launch(fn, args, launches, stream):
    """Seconds per launch: LAUNCHES calls of FN, on STREAM when given
    (then one synchronize at the end)."""
    kwargs = {"stream": stream} if stream is not None else {}
    start = time.perf_counter()
    for _ in range(launches):
        fn(*args, **kwargs)
    if stream is not None:
        stream.synchronize()
    return (time.perf_counter() - start) / launches


def main(argv):
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser()
    parser.add_argument("--plugin", default=os.path.join(
        os.path.dirname(here), "tests", "plugins", "cuda-plugin.so"))
    parser.add_argument("--launches", type=int, default=2000)
    parser.add_argument("--reps", type=int, default=15)
    parser.add_argument("--quick", action="store_true",
                        help="200 launches x 3 turns (a smoke test)")
    parser.add_argument("--json", metavar="FILE")
    parser.add_argument("--out", metavar="FILE",
                        help="records in bench/benchlib.py's format")
    args = parser.parse_args(argv)
    if args.quick:
        args.launches, args.reps = 200, 3
    if gpumem.backend != "cuda":
        print("launch_overhead: needs the cuda backend", file=sys.stderr)
        return 77
    if not os.path.exists(args.plugin):
        print(f"launch_overhead: no plugin at {args.plugin} (make check "
              "builds tests/plugins/cuda-plugin.so)", file=sys.stderr)
        return 1

    results = {}
    with tempfile.TemporaryDirectory() as cache:
        os.environ["GPUMEM_CACHE_DIR"] = cache
        t0 = time.perf_counter()
        jit_fn = gpumem.jit(SAXPY, "saxpy", SIGNATURE)
        results["jit_first_call_s"] = time.perf_counter() - t0
        results["nvrtc_compile_s"] = gpumem.jit_stats()["last_compile_seconds"]
        # The same code again, as a new process would get it: from disk
        # (another spelling of the signature is another function).
        hits = gpumem.jit_stats()["cache_hits"]
        t0 = time.perf_counter()
        gpumem.jit(SAXPY, "saxpy", SIGNATURE + " ")
        results["jit_cached_call_s"] = time.perf_counter() - t0
        assert gpumem.jit_stats()["cache_hits"] == hits + 1

    plugin = gpumem.load_kernels(args.plugin)
    n = 1024
    x = gpumem.to_device(np.ones(n, np.float32))
    y = gpumem.zeros(n)
    call = (n, 0.5, x, y)
    variants = {"builtin": gpumem.kernels.saxpy, "plugin": plugin.c_axpy,
                "jit": jit_fn}
    variants_note = {"builtin": "kernels.saxpy",
                     "plugin": "cuda-plugin.so's c_axpy",
                     "jit": "gpumem.jit saxpy"}
    # The three compute the same: check once, then warm up.
    for name, fn in variants.items():
        y = gpumem.zeros(n)
        fn(n, 0.5, x, y)
        assert np.all(y.copy_to_host() == 0.5), name
        call = (n, 0.5, x, y)
    stream = gpumem.Stream()
    for fn in variants.values():
        per_launch(fn, call, 200, stream)
        per_launch(fn, call, 50, None)

    times = {(name, mode): [] for name in variants
             for mode in ("async", "sync")}
    for _ in range(args.reps):
        for name, fn in variants.items():
            times[(name, "async")].append(
                per_launch(fn, call, args.launches, stream))
            times[(name, "sync")].append(
                per_launch(fn, call, args.launches // 4, None))

    print(f"device: {gpumem.Device(0).name}; {args.launches} launches x "
          f"{args.reps} turns; medians")
    print(f"{'kernel':10} {'async us':>10} {'ratio':>7} {'sync us':>10} "
          f"{'ratio':>7}")
    for name in variants:
        row = {}
        for mode in ("async", "sync"):
            med = statistics.median(times[(name, mode)])
            base = statistics.median(times[("builtin", mode)])
            row[mode] = (med, med / base)
            results[f"{name}_{mode}_us"] = med * 1e6
            results[f"{name}_{mode}_ratio"] = med / base
        print(f"{name:10} {row['async'][0] * 1e6:10.2f} "
              f"{row['async'][1]:7.3f} {row['sync'][0] * 1e6:10.2f} "
              f"{row['sync'][1]:7.3f}")
    print(f"NVRTC first compile: {results['nvrtc_compile_s'] * 1e3:.1f} ms "
          f"(gpumem.jit call {results['jit_first_call_s'] * 1e3:.1f} ms); "
          f"from the disk cache: {results['jit_cached_call_s'] * 1e3:.2f} ms")
    worst = max(results[f"{v}_{m}_ratio"] for v in ("plugin", "jit")
                for m in ("async", "sync"))
    print(f"target (plugin and JIT within 1.05x of built-in): "
          f"{'met' if worst <= 1.05 else 'NOT met'} (worst {worst:.3f})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    if args.out:
        records = bl.Results("gpumem", args.out)
        for (name, mode), samples in times.items():
            records.emit("kernel_launch", f"{name}_{mode}", "wall", samples,
                         note=f"{variants_note[name]}, {mode}; one sample "
                         "a turn, the mean of its launches")
        for case, key in (("nvrtc_first", "jit_first_call_s"),
                          ("cache_hit", "jit_cached_call_s")):
            records.emit("jit_compile", case, "wall", [results[key]],
                         note="gpumem.jit call, one sample")
    return 0


sys.exit(main(sys.argv[1:]))
