"""Per-call cost of gpumem arrays through the C++ binding casters:
three arrays (gmbind_*.three_arrays) against three ints
(gmbind_*.three_ints), for pybind11 and nanobind; the target is at most
1.3x.  The arrays also through the C API's load_view alone, as against
a gpumem whose arrays lend no view.  On the cuda backend with PyTorch,
also three PyTorch tensors through the casters (target 2x where
torch.Tensor publishes DLPack's C exchange API), and
gpumem.asarray(tensor) against torch.from_dlpack(device_array), per
call.  Builds tests/bindings with CMake into a temporary folder, then
measures in PROCESSES fresh processes of GPUMEM (default gpumem), each
timing its cases in turn: small calls run at one of two speeds a
process (bench/NOTES.md), so a figure is the median over the processes
and a ratio the median of the processes' own ratios.

    gpumem bench/binding_overhead.py [--calls N] [--repeats R]
                                     [--processes N]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import gpumem

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.join(HERE, "..", "tests", "bindings")
INCLUDE = os.path.join(HERE, "..", "include")


def build():
    """The build folder and the built modules' names, from a fresh CMake
    build."""
    work = tempfile.mkdtemp(prefix="gpumem-binding-bench.")
    flags = []
    for name, option in (("pybind11", "--cmakedir"),
                         ("nanobind", "--cmake_dir")):
        found = subprocess.run([sys.executable, "-m", name, option],
                               capture_output=True, text=True)
        if found.returncode == 0:
            flags.append(f"-D{name}_DIR={found.stdout.strip()}")
        else:
            print(f"{name}: not importable by {sys.executable}, skipped")
    subprocess.run(["cmake", "-S", SOURCE, "-B", work,
                    "-DCMAKE_BUILD_TYPE=Release",
                    f"-DPython_EXECUTABLE={sys.executable}",
                    f"-DGPUMEM_INCLUDE_DIR={INCLUDE}", *flags],
                   check=True, capture_output=True)
    subprocess.run(["cmake", "--build", work, "-j4"], check=True,
                   capture_output=True)
    return work, [n for n in ("pybind11", "nanobind")
                  if any(f.startswith(f"gmbind_{n}")
                         for f in os.listdir(work))]


def timed_ns(fn, args, calls):
    """The mean ns of CALLS calls FN(*ARGS)."""
    start = time.perf_counter_ns()
    for _ in range(calls):
        fn(*args)
    return (time.perf_counter_ns() - start) / calls


def per_call_ns(cases, calls, repeats):
    """Per call ns of each case of CASES, (fn, args, mode) with MODE an
    as_older_gpumem member or None: the median over REPEATS rounds, each
    timing CALLS calls of every case in turn, after a round of warm-up,
    so that a drift of the machine's speed within the process meets
    every case alike."""
    samples = [[] for _ in cases]
    for round_ in range(repeats + 1):
        for i, (fn, args, mode) in enumerate(cases):
            if mode is not None:
                mode[0](mode[1])
            try:
                ns = timed_ns(fn, args, calls)
            finally:
                if mode is not None:
                    mode[0]("")
            if round_ > 0:
                samples[i].append(ns)
    return [statistics.median(s) for s in samples]


def measure(work, calls, repeats):
    """One process's figures, as a dict: for each module built in WORK,
    its cases' ns per call; "asarray" the pair (gpumem.asarray of a
    tensor, torch.from_dlpack of a DeviceArray) where PyTorch runs."""
    sys.path.insert(0, work)
    arrays = tuple(gpumem.zeros(1024, "float32") for _ in range(3))
    torch = None
    if gpumem.backend == "cuda":
        try:
            import torch
            if not torch.cuda.is_available():
                torch = None
        except ImportError:
            pass
    figures = {"torch": None}
    if torch is not None:
        figures["torch"] = [torch.__version__,
                            hasattr(torch.Tensor,
                                    "__dlpack_c_exchange_api__")]
    for name in ("pybind11", "nanobind"):
        try:
            module = __import__(f"gmbind_{name}")
        except ImportError:
            continue
        # The arrays again, each through the C API's load_view as against
        # a gpumem without lent views (tests/bindings' as_older_gpumem).
        cases = [(module.three_ints, (1, 2, 3), None),
                 (module.three_arrays, arrays, None),
                 (module.three_arrays, arrays,
                  (module.as_older_gpumem, "array_type"))]
        if torch is not None:
            tensors = tuple(torch.zeros(1024, device="cuda")
                            for _ in range(3))
            cases.append((module.three_arrays, tensors, None))
        figures[name] = per_call_ns(cases, calls, repeats)
    if torch is not None:
        tensor = torch.zeros(1024, device="cuda")
        figures["asarray"] = per_call_ns(
            [(gpumem.asarray, (tensor,), None),
             (torch.from_dlpack, (arrays[0],), None)],
            calls // 10, repeats)
    return figures


def summary(runs, key, over):
    """The median over the processes' RUNS of figure KEY, its ratio to
    figure OVER in each process, and those ratios' median."""
    values = [run[key] for run in runs]
    ratios = [run[key] / run[over] for run in runs]
    return statistics.median(values), statistics.median(ratios), ratios


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=100000)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--processes", type=int, default=3)
    parser.add_argument("--child", metavar="WORK", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.child, args.calls, args.repeats)))
        return 0
    work, names = build()
    runs = []
    for _ in range(args.processes):
        run = subprocess.run(
            [os.environ.get("GPUMEM", "gpumem"), "-q", "--backend",
             gpumem.backend, os.path.abspath(__file__), "--child", work,
             "--calls", str(args.calls), "--repeats", str(args.repeats)],
            capture_output=True, text=True, timeout=300)
        if run.returncode != 0:
            print(f"a measuring process failed:\n{run.stderr[-2000:]}")
            return 1
        runs.append(json.loads(run.stdout.strip().splitlines()[-1]))
    print(f"backend {gpumem.backend}; median over {args.processes} "
          f"processes of the median ns per call over {args.repeats} x "
          f"{args.calls} calls, the cases in turn; ratios the median of "
          "the processes' ratios")
    if runs[0]["torch"] is not None:
        version, publishes = runs[0]["torch"]
        print(f"PyTorch {version}: torch.Tensor "
              + ("publishes" if publishes else "does not publish")
              + " __dlpack_c_exchange_api__")

    def each(ratios):
        return ", ".join(f"{r:.2f}x" for r in ratios)

    for name in names:
        figures = [dict(zip(("ints", "arrays", "load_view", "tensors"),
                            run[name])) for run in runs]
        ints = statistics.median(f["ints"] for f in figures)
        arrs, ratio, ratios = summary(figures, "arrays", "ints")
        print(f"{name:9s} 3 ints {ints:8.1f} ns   3 arrays {arrs:8.1f} ns   "
              f"ratio {ratio:5.2f}x (target <= 1.30x; processes "
              f"{each(ratios)})")
        called, ratio, ratios = summary(figures, "load_view", "ints")
        print(f"{name:9s} 3 arrays through load_view, no lent view "
              f"{called:8.1f} ns   ratio {ratio:5.2f}x")
        if "tensors" in figures[0]:
            tens, ratio, ratios = summary(figures, "tensors", "ints")
            print(f"{name:9s} 3 ints {ints:8.1f} ns   3 tensors "
                  f"{tens:7.1f} ns   ratio {ratio:5.2f}x (target <= 2x "
                  f"with the exchange API; processes {each(ratios)})")
    if "asarray" in runs[0]:
        pairs = [dict(zip(("ours", "theirs"), run["asarray"]))
                 for run in runs]
        ours, ratio, _ = summary(pairs, "ours", "theirs")
        theirs = statistics.median(p["theirs"] for p in pairs)
        print(f"gpumem.asarray(tensor) {ours:8.1f} ns   "
              f"torch.from_dlpack(DeviceArray) {theirs:8.1f} ns   "
              f"ratio {ratio:5.2f}x (target <= 1x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
