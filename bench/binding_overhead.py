"""Per-call cost of gpumem arrays through the C++ binding casters:
three arrays (gmbind_*.three_arrays) against three ints
(gmbind_*.three_ints), for pybind11 and nanobind; the target is at most
1.3x.  On the cuda backend with PyTorch, also three PyTorch tensors
through the casters (target 2x where torch.Tensor publishes DLPack's C
exchange API), and gpumem.asarray(tensor) against
torch.from_dlpack(device_array), per call.  Builds tests/bindings with
CMake into a temporary folder.

    gpumem bench/binding_overhead.py [--calls N] [--repeats R]
"""

import argparse
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
    """The built modules' names, from a fresh CMake build."""
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
    sys.path.insert(0, work)
    return [n for n in ("pybind11", "nanobind")
            if any(f.startswith(f"gmbind_{n}") for f in os.listdir(work))]


def per_call_ns(fn, args, calls, repeats):
    """The median over REPEATS of the mean ns of CALLS calls FN(*ARGS)."""
    samples = []
    for _ in range(repeats):
        start = time.perf_counter_ns()
        for _ in range(calls):
            fn(*args)
        samples.append((time.perf_counter_ns() - start) / calls)
    return statistics.median(samples)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=100000)
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    arrays = tuple(gpumem.zeros(1024, "float32") for _ in range(3))
    torch = None
    if gpumem.backend == "cuda":
        try:
            import torch
            if not torch.cuda.is_available():
                torch = None
        except ImportError:
            pass
    print(f"backend {gpumem.backend}; median ns per call over "
          f"{args.repeats} x {args.calls} calls")
    if torch is not None:
        print(f"PyTorch {torch.__version__}: torch.Tensor "
              + ("publishes" if hasattr(torch.Tensor,
                                       "__dlpack_c_exchange_api__")
                 else "does not publish")
              + " __dlpack_c_exchange_api__")
    for name in build():
        module = __import__(f"gmbind_{name}")
        ints = per_call_ns(module.three_ints, (1, 2, 3), args.calls,
                           args.repeats)
        arrs = per_call_ns(module.three_arrays, arrays, args.calls,
                           args.repeats)
        print(f"{name:9s} 3 ints {ints:8.1f} ns   3 arrays {arrs:8.1f} ns   "
              f"ratio {arrs / ints:5.2f}x (target <= 1.30x)")
        if torch is not None:
            tensors = tuple(torch.zeros(1024, device="cuda")
                            for _ in range(3))
            tens = per_call_ns(module.three_arrays, tensors, args.calls,
                               args.repeats)
            print(f"{name:9s} 3 ints {ints:8.1f} ns   3 tensors "
                  f"{tens:7.1f} ns   ratio {tens / ints:5.2f}x (target <= "
                  f"2x with the exchange API)")
    if torch is not None:
        tensor = torch.zeros(1024, device="cuda")
        ours = per_call_ns(gpumem.asarray, (tensor,), args.calls // 10,
                           args.repeats)
        theirs = per_call_ns(torch.from_dlpack, (arrays[0],),
                             args.calls // 10, args.repeats)
        print(f"gpumem.asarray(tensor) {ours:8.1f} ns   "
              f"torch.from_dlpack(DeviceArray) {theirs:8.1f} ns   "
              f"ratio {ours / theirs:5.2f}x (target <= 1x)")


if __name__ == "__main__":
    main()
