"""The extension module: 'import gpumem' in a plain python.

Run by the gpumem program (host.test_extension, cuda.test_extension):
each case starts a plain python (sys.executable, which finds the
extension module through the PYTHONPATH the program set) and compares
what it sees with the program: the same names, kernels and backends,
the backend chosen as GPUMEM_BACKEND says, a clear ImportError when it
cannot start, and a clean exit with arrays still alive.
"""

import os
import subprocess
import sys

import gmtest
from gmtest import case

import gpumem


def python(code, backend=None, unset_backend=False):
    """Runs CODE in a plain python with GPUMEM_BACKEND=BACKEND (or
    without it); returns the CompletedProcess."""
    env = dict(os.environ)
    if unset_backend:
        env.pop("GPUMEM_BACKEND", None)
    elif backend is not None:
        env["GPUMEM_BACKEND"] = backend
    return subprocess.run([sys.executable, "-c", code], env=env,
                          capture_output=True, text=True, timeout=120)


def program(code, *options):
    """Runs CODE in the gpumem program; returns its standard output."""
    env = dict(os.environ)
    env.pop("GPUMEM_BACKEND", None)
    result = subprocess.run([gmtest.GPUMEM, *options, "-q", "-c", code],
                            env=env, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout


REIMPORT = """
import gc, importlib, sys
import numpy as np
import gpumem
first = gpumem
a = gpumem.to_device(np.arange(8, dtype=np.float32))
view = a[2:]
s = gpumem.Stream()
del sys.modules["gpumem"]
import gpumem
# One gpumem a process: the second module holds the first one's names.
for name in ("DeviceArray", "Stream", "Error", "OutOfMemoryError", "zeros",
             "copy", "kernels", "_C_API", "share", "memory_stats"):
    assert getattr(gpumem, name) is getattr(first, name), name
assert gpumem.__name__ == "gpumem"
del first
gc.collect()
# Arrays made through the first still work, with the second's calls.
assert a.copy_to_host().tolist() == list(range(8))
assert view.copy_to_host().tolist() == list(range(2, 8))
b = gpumem.zeros(8)
assert isinstance(a, gpumem.DeviceArray) and type(a) is type(b)
gpumem.copy(b, a)
with s:
    got = b.copy_to_host()
s.synchronize()
assert got.tolist() == list(range(8)), got
gpumem.set_memory_limit(1)
try:
    gpumem.empty(1 << 20)
except gpumem.OutOfMemoryError:
    pass
else:
    raise AssertionError("no OutOfMemoryError")
gpumem.set_memory_limit(None)
importlib.reload(gpumem)
assert gpumem.DeviceArray is type(a)
a.free()
try:
    a.copy_to_host()
except ValueError:
    pass
# A third import, and a module of its own once everything is gone.
del sys.modules["gpumem"]
import gpumem
assert gpumem.zeros(3).copy_to_host().tolist() == [0, 0, 0]
del a, b, view, s, gpumem, sys.modules["gpumem"]
gc.collect()
import gpumem
assert gpumem.zeros(2).copy_to_host().tolist() == [0, 0]
print("reimported")
"""


@case
def a_second_import_is_the_same_gpumem():
    # `del sys.modules["gpumem"]; import gpumem` (test runners,
    # autoreload) once made a second module with its own types and
    # state: an array made before crashed the next call (SIGSEGV).  In
    # the extension module and in the program alike.
    result = python(REIMPORT, backend=gpumem.backend)
    assert result.returncode == 0 and result.stdout == "reimported\n", \
        (result.returncode, result.stdout, result.stderr)
    assert program(REIMPORT, f"--backend={gpumem.backend}") == \
        "reimported\n"


@case
def the_same_module_from_another_file():
    result = python("import gpumem; print(gpumem.__file__)")
    assert result.returncode == 0, result.stderr
    path = result.stdout.strip()
    assert path.endswith(".so") and "gpumem" in os.path.basename(path), path
    # In the program the module is built in: no file.
    assert not hasattr(gpumem, "__file__") or gpumem.__file__ is None


@case
def the_same_names_and_kernels():
    code = ("import gpumem\n"
            "print(sorted(n for n in dir(gpumem) if not n.startswith('_')))\n"
            "print(gpumem.kernels.list())\n"
            "print(gpumem.__version__, gpumem.device_count())\n")
    result = python(code, backend=gpumem.backend)
    assert result.returncode == 0, result.stderr
    names, kernels, version = result.stdout.splitlines()
    here = sorted(n for n in dir(gpumem) if not n.startswith("_"))
    assert names == str(here), (names, here)
    assert kernels == str(gpumem.kernels.list()), kernels
    assert version == f"{gpumem.__version__} {gpumem.device_count()}", version


@case
def gpumem_backend_chooses():
    result = python("import gpumem; print(gpumem.backend)", backend="host")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "host"
    assert result.stderr == "", result.stderr
    # auto, and unset, choose as the program does.
    chosen = program("import gpumem; print(gpumem.backend)").strip()
    for kwargs in ({"backend": "auto"}, {"unset_backend": True}):
        result = python("import gpumem; print(gpumem.backend)", **kwargs)
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == chosen, (kwargs, result.stdout)


@case
def a_backend_that_cannot_start_is_an_import_error():
    result = python("import gpumem", backend="bogus")
    assert result.returncode == 1
    assert "ImportError: gpumem: GPUMEM_BACKEND: unknown backend 'bogus'" \
        in result.stderr, result.stderr
    probe = subprocess.run([gmtest.GPUMEM, "--backend=cuda", "-q", "-c",
                            "pass"], capture_output=True, text=True)
    if probe.returncode != 3:
        gmtest.skip("a CUDA device answers here: the cuda backend starts")
    result = python("import gpumem", backend="cuda")
    assert result.returncode == 1
    assert "ImportError: gpumem: the CUDA backend is unavailable" \
        in result.stderr, result.stderr


@case
def exit_with_arrays_and_streams_alive():
    code = ("import numpy as np, gpumem\n"
            "keep = [gpumem.to_device(np.arange(1000, dtype=np.float32))\n"
            "        for _ in range(8)]\n"
            "s = gpumem.Stream()\n"
            "y = gpumem.zeros(1000)\n"
            "gpumem.kernels.saxpy(1000, 2.0, keep[0], y, stream=s)\n"
            "view = y[10:20]\n"
            "print('done')\n")
    result = python(code, backend=gpumem.backend)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "done"
    assert result.stderr == "", result.stderr


@case
def the_host_fallback_is_a_backend_warning():
    """Without a CUDA device, auto falls back to the host backend: in a
    plain python that is a gpumem.BackendWarning, which a filter can
    silence, never a line written to stderr."""
    record = ("import warnings\n"
              "with warnings.catch_warnings(record=True) as seen:\n"
              "    warnings.simplefilter('always')\n"
              "    import gpumem\n"
              "mine = [w for w in seen\n"
              "        if issubclass(w.category, gpumem.BackendWarning)]\n"
              "print(gpumem.backend, len(mine))\n"
              "for w in mine:\n"
              "    assert issubclass(w.category, UserWarning)\n"
              "    print(w.message)\n")
    result = python(record, unset_backend=True)
    assert result.returncode == 0, result.stderr
    assert result.stderr == "", result.stderr
    lines = result.stdout.splitlines()
    backend, count = lines[0].split()
    if backend == "cuda":
        assert count == "0", result.stdout
        gmtest.skip("a CUDA device answers here: no fallback to warn of")
    assert count == "1", result.stdout
    assert lines[1].endswith("using the host backend"), lines
    # Shown at the script's import statement, not in importlib.
    # (Its text: "no CUDA device (...)", or "built without CUDA" in a
    # build configured without it.)
    shown = python("import gpumem", unset_backend=True).stderr
    assert shown.startswith(("<string>:1: BackendWarning: no CUDA device",
                             "<string>:1: BackendWarning: built without "
                             "CUDA")), shown
    # Filtered by message before the import (the category exists only
    # after it), or by its base class: nothing at all on stderr.
    silenced = python("import warnings\n"
                      "warnings.filterwarnings('ignore', "
                      "message='.*using the host backend')\n"
                      "import gpumem\n", unset_backend=True)
    assert silenced.returncode == 0 and silenced.stderr == "", \
        silenced.stderr
    by_module = python("import warnings\n"
                       "warnings.filterwarnings('ignore', category="
                       "UserWarning, module='__main__')\n"
                       "import gpumem\n", unset_backend=True)
    assert by_module.returncode == 0 and by_module.stderr == "", \
        by_module.stderr
    as_error = python("import warnings\n"
                      "warnings.simplefilter('error', UserWarning)\n"
                      "try:\n"
                      "    import gpumem\n"
                      "except UserWarning as exc:\n"
                      "    print(type(exc).__module__, type(exc).__name__)\n",
                      unset_backend=True)
    assert as_error.stdout.strip() == "gpumem BackendWarning", \
        (as_error.stdout, as_error.stderr)
    # GPUMEM_BACKEND=host is a choice, not a fallback: no warning.
    chosen = python(record, backend="host")
    assert chosen.stdout.splitlines() == ["host 0"], chosen.stdout


if __name__ == "__main__":
    if gmtest.sanitized():
        gmtest.skip_file("sanitized build: its extension module cannot "
                         "load into an uninstrumented python")
    gmtest.main()
