"""Every kernel that has both a CUDA launcher and a C reference, run on
random inputs on the GPU and, in a child on the host backend, through
its reference; the two must agree (kernels/README: "the tests compare
the two").  Built-in kernels and those of the CUDA test plugin.  The
inputs come from each kernel's signature (gpumem.kernels.info), so a new
kernel is covered without a line here."""

import os
import re
import subprocess
import tempfile

import numpy as np

import gmtest
from gmtest import case, random_array, poison

import gpumem

if gpumem.backend != "cuda":
    gmtest.skip_file("compares the CUDA kernels with their C references: "
                     "needs the cuda backend")

PLUGIN = os.path.join(os.path.dirname(os.path.dirname(
    os.path.abspath(gmtest.GPUMEM))), "tests", "plugins", "cuda-plugin.so")
SIZES = [0, 1, 4097, 100003]
SLACK = 3           # elements past the minimum length, checked untouched


def namespaces():
    found = [("gpumem.kernels", gpumem.kernels)]
    if os.path.exists(PLUGIN):
        found.append((PLUGIN, gpumem.load_kernels(PLUGIN)))
    return found


def length(expr, scalars):
    """The value of a minimum-length expression (kernel.c's grammar)."""
    py = re.sub(r"(?<![/])/(?![/])", "//", expr)
    return max(0, int(eval(py, {"__builtins__": {}}, dict(scalars))))


def inputs(info, size):
    """Random arguments for the kernel INFO describes, with every integer
    scalar that a length names set to SIZE."""
    sized = set()
    for _, kind, _, expr in info["params"]:
        if kind != "scalar":
            sized.update(re.findall(r"[A-Za-z_]\w*", expr))
    scalars, args = {}, []
    for name, kind, dtype, _ in info["params"]:
        if kind == "scalar":
            if name in sized:
                value = size
            elif np.dtype(dtype).kind == "f":
                value = float(gmtest.rng.standard_normal())
            else:
                value = int(gmtest.rng.integers(0, 100))
            scalars[name] = value
    for name, kind, dtype, expr in info["params"]:
        if kind == "scalar":
            args.append(scalars[name])
        else:
            n = length(expr, scalars) + SLACK
            args.append(poison(n, dtype) if kind == "out"
                        else random_array(n, dtype))
    return args


def on_host(source, name, args):
    """Runs kernel NAME of SOURCE (a plugin path, or gpumem.kernels) on
    the host backend in a child; the arrays afterwards."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "io.npz")
        np.savez(path, **{f"a{i}": np.asarray(a) for i, a in enumerate(args)})
        code = (
            "import sys, numpy as np, gpumem\n"
            "d = np.load(sys.argv[1])\n"
            "ns = gpumem.kernels if sys.argv[2] == 'gpumem.kernels' "
            "else gpumem.load_kernels(sys.argv[2])\n"
            "args = []\n"
            "for i in range(len(d.files)):\n"
            "    a = d[f'a{i}']\n"
            "    args.append(gpumem.to_device(a) if a.ndim else a.item())\n"
            "getattr(ns, sys.argv[3])(*args)\n"
            "np.savez(sys.argv[1] + '.out.npz', **{f'a{i}': a.copy_to_host() "
            "for i, a in enumerate(args) if not np.isscalar(a)})\n")
        subprocess.run([gmtest.GPUMEM, "--backend=host", "-q", "-c", code,
                        path, source, name], check=True, timeout=600)
        out = np.load(path + ".out.npz")
        return {int(k[1:]): out[k] for k in out.files}


@case
def every_kernel_matches_its_reference():
    compared = []
    for source, ns in namespaces():
        for name, _ in ns.list():
            info = ns.info(name)
            if not (info["cuda"] and info["reference"]):
                continue
            for size in SIZES:
                args = inputs(info, size)
                want = on_host(source, name, args)
                device = [gpumem.to_device(a) if isinstance(a, np.ndarray)
                          else a for a in args]
                getattr(ns, name)(*device)
                for i, a in enumerate(device):
                    if not isinstance(a, gpumem.DeviceArray):
                        continue
                    got = a.copy_to_host()
                    if got.dtype.kind == "f":
                        ok = np.allclose(got, want[i], rtol=1e-5, atol=1e-6)
                    else:
                        ok = np.array_equal(got, want[i])
                    assert ok, (name, size, info["params"][i][0],
                                got[:8], want[i][:8])
            compared.append(name)
    print("  compared:", ", ".join(compared))
    assert {"algo", "algo_seed", "saxpy"} <= set(compared), compared


gmtest.main()
