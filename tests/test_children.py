"""Child processes: multiprocessing's start methods and subprocess.

Run by the gpumem program (host.test_children, cuda.test_children) and
by a plain python importing the extension module (py.*.test_children).
A child imports gpumem on its parent's backend and computes with it;
with the cuda backend a child made by fork() cannot use CUDA (CUDA's
rule after fork), so the fork case's children there only report what
they see.
"""

import multiprocessing
import os
import subprocess
import sys

import numpy as np

import gmtest
from gmtest import case

import gpumem


def saxpy_in_child(n):
    """Runs in a child: y = 2 x + y on a device of the child's backend;
    returns the backend's name and the result."""
    import gpumem as gm
    x = gm.to_device(np.arange(n, dtype=np.float32))
    y = gm.to_device(np.ones(n, dtype=np.float32))
    gm.kernels.saxpy(n, 2.0, x, y)
    return gm.backend, y.copy_to_host().tolist()


def what_child_sees(_):
    """Runs in a child: its pid and the backend of its gpumem module."""
    import gpumem as gm
    return os.getpid(), gm.backend


def expected(n):
    return (2 * np.arange(n, dtype=np.float32) + 1).tolist()


def run_pool(method, fn, sizes):
    """FN over SIZES in a pool of 2 children started by METHOD.  A pool
    whose children cannot start retries for ever, hence the timeout."""
    ctx = multiprocessing.get_context(method)
    with ctx.Pool(2) as pool:
        return pool.map_async(fn, sizes, chunksize=1).get(timeout=120)


def check_saxpy_children(method, sizes):
    """saxpy_in_child over SIZES in children started by METHOD: each
    child on this process's backend, each result right."""
    results = run_pool(method, saxpy_in_child, sizes)
    for n, (backend, values) in zip(sizes, results):
        assert backend == gpumem.backend, (backend, gpumem.backend)
        assert values == expected(n), (n, values)


@case
def spawn_children_import_gpumem():
    check_saxpy_children("spawn", [1, 7, 64])


@case
def forkserver_children_import_gpumem():
    if gpumem.backend == "cuda":
        # The fork server would import this script, and so start CUDA,
        # before it forks the children; without the preload each child
        # imports it after its fork.
        multiprocessing.set_forkserver_preload([])
    check_saxpy_children("forkserver", [3, 33])


@case
def fork_children():
    if gpumem.backend == "cuda":
        seen = run_pool("fork", what_child_sees, [0, 1, 2])
        assert all(pid != os.getpid() for pid, _ in seen), seen
        assert all(backend == "cuda" for _, backend in seen), seen
        gmtest.skip("fork on cuda: a forked child cannot use CUDA "
                    "(children checked only to start and see the module)")
    check_saxpy_children("fork", [5, 17])


@case
def sys_executable_is_a_python():
    # python's own command line works: -c and -m.
    out = subprocess.run([sys.executable, "-c",
                          "import sys; print(sys.version_info[:2])"],
                         check=True, capture_output=True, text=True).stdout
    assert out.strip() == str(sys.version_info[:2]), out
    out = subprocess.run([sys.executable, "-m", "json.tool"],
                         input='{"a": 1}', check=True, capture_output=True,
                         text=True).stdout
    assert '"a": 1' in out, out


@case
def subprocess_imports_gpumem():
    code = ("import gpumem, numpy as np\n"
            "a = gpumem.to_device(np.arange(6, dtype=np.int32))\n"
            "print(gpumem.backend, int(a.copy_to_host().sum()))\n")
    result = subprocess.run([sys.executable, "-c", code],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [gpumem.backend, "15"], result.stdout
    # No notice of a backend fallback: the child was told the backend.
    assert "using the host backend" not in result.stderr, result.stderr


@case
def subprocess_of_the_program_keeps_the_backend():
    result = subprocess.run([gmtest.GPUMEM, "-c",
                             "import gpumem; print(gpumem.backend)"],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == gpumem.backend, result.stdout


if __name__ == "__main__":
    if gmtest.sanitized():
        gmtest.skip_file("sanitized build: its extension module cannot "
                         "load into an uninstrumented python child")
    gmtest.main()
