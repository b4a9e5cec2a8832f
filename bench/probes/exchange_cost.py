"""What one argument of a C++ caster costs, step by step, timed from C
(bench/probes/exchange_cost.c, built here with the running Python's
headers): a gpumem.DeviceArray and, on the cuda backend with PyTorch, a
torch tensor through gpumem's C API (load_buffer, get_buffer) and the
tensor's own DLPack exchange API (dltensor_from_py_object_no_sync,
current_work_stream).  Medians of 9 batches of N calls, in ns a call.
Not part of make bench:

    gpumem bench/probes/exchange_cost.py [N]
"""
import os
import statistics
import subprocess
import sys
import sysconfig
import tempfile

import gpumem

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(os.path.dirname(HERE))


def build():
    work = tempfile.mkdtemp(prefix="gpumem-exchange-cost.")
    out = os.path.join(work, "gmexchcost"
                       + sysconfig.get_config_var("EXT_SUFFIX"))
    subprocess.run([os.environ.get("CC", "cc"), "-O2", "-shared", "-fPIC",
                    "-I" + sysconfig.get_paths()["include"],
                    "-I" + os.path.join(TOP, "include"),
                    os.path.join(HERE, "exchange_cost.c"), "-o", out],
                   check=True)
    sys.path.insert(0, work)
    import gmexchcost
    return gmexchcost


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100000
    probe = build()
    objects = {"DeviceArray": gpumem.zeros(1024, "float32")}
    if gpumem.backend == "cuda":
        try:
            import torch
            objects["torch.Tensor"] = torch.zeros(1024, device="cuda")
        except ImportError:
            print("no torch: the DeviceArray alone")
    for name, obj in objects.items():
        probe.cost(obj, n)
        runs = [probe.cost(obj, n) for _ in range(9)]
        print("%-12s " % name + "  ".join(
            "%s %.1f" % (key, statistics.median(r[key] for r in runs))
            for key in runs[0]) + "  (ns a call)")


if __name__ == "__main__":
    main()
