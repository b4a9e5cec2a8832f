"""Per-call costs of two builds of gpumem side by side: the
version-specific build and the one against the limited API (configure
--enable-abi3, the binary wheel's), in one run on one machine.  The
figures are issue 53's: an empty kernel's launch (with and without
stream=), alloc+free of 1 MiB from the pool, a 16-byte copy each way,
and three arrays through the C++ binding casters.  Each round runs one
process of each build, the order swapped every round (small calls run
at one of two speeds a process, bench/NOTES.md); a figure is the median
over the rounds of the processes' medians, and its ratio abi3 / full is
the median of the rounds' ratios, judged against the target (<= 1.05x).

    python3 bench/abi3_compare.py --full PROGRAM --abi3 PROGRAM
                                  [--rounds N] [--backend cuda|host]
                                  [--quick]

PROGRAM is each build's src/gpumem.  make bench-abi3 builds the abi3
copy of the configured tree and runs this.  The casters' figures need
CMake and pybind11 or nanobind (as bench/binding_overhead.py); without
them the row says why.  Exit status: 0 with every figure within the
target, 1 with one past it, 2 when a process failed.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TARGET = 1.05
# (figure, case) of bench_gpumem.py's records, and the row's name.
FIGURES = [(("launch", "async"), "launch, stream="),
           (("launch", "sync"), "launch and wait"),
           (("alloc_free", "pool"), "alloc+free 1 MiB"),
           (("copy16", "h2d"), "16-byte copy to device"),
           (("copy16", "d2h"), "16-byte copy to host")]


def run(argv, timeout=600):
    done = subprocess.run(argv, capture_output=True, text=True,
                          timeout=timeout)
    if done.returncode != 0:
        sys.stderr.write(f"abi3_compare: {' '.join(argv)} failed "
                         f"(exit status {done.returncode}):\n"
                         f"{done.stderr[-3000:]}\n")
        sys.exit(2)
    return done.stdout


def basic(program, backend, quick, work):
    """{(figure, case): median seconds} of one process of PROGRAM."""
    out = os.path.join(work, "records.jsonl")
    argv = [program, "-q", "--backend", backend,
            os.path.join(HERE, "bench_gpumem.py"), "--out", out]
    if quick:
        argv.append("--quick")
    run(argv + ["launch", "alloc", "copy16"])
    medians = {}
    with open(out, encoding="utf-8") as f:
        for line in f:
            record = json.loads(line)
            if record.get("figure") == "error":
                sys.exit(f"abi3_compare: {program}: {record['note']}")
            if "median_s" in record:
                medians[(record["figure"], record["case"])] = \
                    record["median_s"]
    return medians


def build_bindings(program, backend):
    """The folder of tests/bindings' modules built once (by
    binding_overhead.build through PROGRAM), or (None, why)."""
    code = ("import json, sys; sys.path.insert(0, %r)\n"
            "import binding_overhead\n"
            "try:\n"
            "    print(json.dumps(binding_overhead.build()))\n"
            "except Exception as e:\n"
            "    print(json.dumps([None, '%%s: %%s' %% (type(e).__name__, e)]))\n"
            % HERE)
    work, names = json.loads(
        run([program, "-q", "--backend", backend, "-c", code])
        .strip().splitlines()[-1])
    if work is None:
        return None, names
    if not names:
        return None, "no pybind11 or nanobind module was built"
    return work, names


def casters(program, backend, work, quick):
    """{name: ns of three arrays through the casters} of one process."""
    calls, repeats = (2000, 3) if quick else (100000, 15)
    figures = json.loads(run(
        [program, "-q", "--backend", backend,
         os.path.join(HERE, "binding_overhead.py"), "--child", work,
         "--calls", str(calls), "--repeats", str(repeats)])
        .strip().splitlines()[-1])
    return {name: values[1] for name, values in figures.items()
            if name in ("pybind11", "nanobind")}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", required=True, metavar="PROGRAM")
    parser.add_argument("--abi3", required=True, metavar="PROGRAM")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--backend", default="cuda")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    builds = {"full": os.path.abspath(args.full),
              "abi3": os.path.abspath(args.abi3)}
    for name, program in builds.items():
        if not os.access(program, os.X_OK):
            parser.error(f"--{name} {program}: no such program")
    work = tempfile.mkdtemp(prefix="gpumem-abi3-compare.")
    bindings, built = build_bindings(builds["full"], args.backend)
    samples = {"full": [], "abi3": []}
    for round_ in range(args.rounds):
        order = ("full", "abi3") if round_ % 2 == 0 else ("abi3", "full")
        for name in order:
            figures = basic(builds[name], args.backend, args.quick, work)
            if bindings is not None:
                for module, ns in casters(builds[name], args.backend,
                                          bindings, args.quick).items():
                    figures[("casters", module)] = ns * 1e-9
            samples[name].append(figures)
    rows = list(FIGURES)
    if bindings is not None:
        rows += [(("casters", m), f"3 arrays through {m}") for m in built]
    print(f"backend {args.backend}; {args.rounds} rounds, one process of "
          "each build a round; medians over the rounds; ratio abi3/full "
          f"the median of the rounds' ratios (target <= {TARGET:.2f}x)")
    print(f"full: {builds['full']}\nabi3: {builds['abi3']}")
    worst = 0.0
    for key, label in rows:
        full = [s[key] for s in samples["full"] if key in s]
        abi3 = [s[key] for s in samples["abi3"] if key in s]
        if not full or not abi3:
            print(f"{label:28s} not measured")
            continue
        ratio = statistics.median(a / f for a, f in zip(abi3, full))
        worst = max(worst, ratio)
        print(f"{label:28s} full {statistics.median(full) * 1e6:9.3f} us  "
              f"abi3 {statistics.median(abi3) * 1e6:9.3f} us  "
              f"ratio {ratio:5.3f}x "
              + ("met" if ratio <= TARGET else "MISSED"))
    if bindings is None:
        print(f"casters: not measured ({built})")
    return 0 if worst <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
