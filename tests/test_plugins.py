"""Kernel plugins: gpumem.load_kernels, --kernels, GPUMEM_KERNELS and
gpumem -k with libraries built against gpumem/kernel.h alone
(tests/plugins/), the argument checks their kernels share with the
built-in ones, and every way a plugin is refused (plugin.c,
py-plugin.c, kernel-signature.c)."""

import os
import pydoc
import shutil
import subprocess
import sys
import tempfile

import numpy as np

import gmtest
from gmtest import case, raises, random_array

import gpumem

CUDA = gpumem.backend == "cuda"
PLUGINS = os.path.join(os.path.dirname(os.path.dirname(
    os.path.abspath(gmtest.GPUMEM))), "tests", "plugins")
GOOD = os.path.join(PLUGINS, "good.so")
CUDA_PLUGIN = os.path.join(PLUGINS, "cuda-plugin.so")

if not os.path.exists(GOOD):
    gmtest.skip_file(f"the test plugins are not built ({GOOD} is missing: "
                     "make tests/plugins/stamp)")


def plugin(variant):
    return os.path.join(PLUGINS, variant + ".so")


def run(*args, env_extra=None, cwd=None):
    """Runs gpumem ARGS on this backend (in folder CWD); the
    CompletedProcess (text)."""
    env = dict(os.environ)
    env.pop("GPUMEM_KERNELS", None)
    env["GPUMEM_BACKEND"] = gpumem.backend
    env.update(env_extra or {})
    return subprocess.run([gmtest.GPUMEM, "-q", *args], env=env, text=True,
                          capture_output=True, timeout=120,
                          stdin=subprocess.DEVNULL, cwd=cwd)


@case
def load_and_list():
    ns = gpumem.load_kernels(GOOD)
    names = [name for name, _ in ns.list()]
    assert names == ["p_scale", "p_fill", "p_noref"], names
    sigs = dict(ns.list())
    assert sigs["p_scale"] == ("p_scale(n: int64, a: float32, "
                               "x: float32[n] inout)"), sigs
    assert sigs["p_fill"] == ("p_fill(y: int32[2 * rows + 1] out, "
                              "rows: int32, value: int32)"), sigs
    assert ns.__file__ == os.path.realpath(GOOD)
    # The same library again is the same object.
    assert gpumem.load_kernels(GOOD) is ns
    # Not part of gpumem.kernels: only --kernels and GPUMEM_KERNELS are.
    assert not hasattr(gpumem.kernels, "p_scale")


@case
def docstrings_and_help():
    ns = gpumem.load_kernels(GOOD)
    doc = ns.p_scale.__doc__
    assert "x[i] = a * x[i] for i < n." in doc, doc
    assert "x: float32[n] inout" in doc, doc
    assert os.path.realpath(GOOD) in doc, doc
    text = pydoc.render_doc(ns.p_scale, renderer=pydoc.plaintext)
    assert "p_scale(n, a, x, *, grid=None, block=None, stream=None)" in text
    assert "p_fill" in pydoc.render_doc(ns, renderer=pydoc.plaintext)


@case
def host_reference_runs():
    ns = gpumem.load_kernels(GOOD)
    if CUDA:
        # A kernel with only a C reference: the cuda backend refuses it,
        # naming the kernel and the file.
        x = gpumem.zeros(4)
        exc = raises(gpumem.Error, ns.p_scale, 4, 2.0, x,
                     match="has only a C reference")
        assert "p_scale" in str(exc) and "good.so" in str(exc), exc
        return
    for n in (0, 1, 1000):
        data = random_array(n + 3, "float32")
        x = gpumem.to_device(data)
        ns.p_scale(n, 2.5, x)
        want = data.copy()
        want[:n] = np.float32(2.5) * want[:n]
        assert np.array_equal(x.copy_to_host(), want)
    y = gpumem.to_device(np.zeros(9, np.int32))
    ns.p_fill(y, 3, -7)
    assert list(y.copy_to_host()) == [-7] * 7 + [0, 0]
    # Keywords, as for built-in kernels.
    ns.p_fill(rows=0, value=5, y=y)
    assert y.copy_to_host()[0] == 5


@case
def same_checks_as_builtins():
    ns = gpumem.load_kernels(GOOD)
    x = gpumem.to_device(np.arange(8, dtype=np.float32))
    before = x.copy_to_host()
    raises(TypeError, ns.p_scale, 8, 2.0, gpumem.zeros(8, "float64"),
           match="must hold float32")
    raises(ValueError, ns.p_scale, 9, 2.0, x, match="needs at least 9")
    raises(TypeError, ns.p_scale, 8, "two", x, match="'a'")
    raises(TypeError, ns.p_scale, 8.5, 2.0, x, match="'n'")
    raises(TypeError, ns.p_scale, 8, 2.0, np.zeros(8, np.float32) if CUDA
           else [1.0] * 8, match="device memory")
    raises(TypeError, ns.p_scale, 8, 2.0, match="x")
    raises(ValueError, ns.p_fill, gpumem.zeros(5, "int32"), 3, 1,
           match="needs at least 7 elements (2 * rows + 1)")
    raises(ValueError, ns.p_fill, gpumem.zeros(5, "int32"), 2**40, 1,
           match="out of range")
    assert np.array_equal(x.copy_to_host(), before)


@case
def no_reference_refused_on_host():
    if CUDA:
        gmtest.skip("the host backend's refusal; p_noref's launcher is a "
                    "stub (cuda_plugin_matches runs real CUDA kernels)")
    ns = gpumem.load_kernels(GOOD)
    exc = raises(gpumem.Error, ns.p_noref, gpumem.zeros(1),
                 match="no C reference")
    assert "p_noref" in str(exc) and "good.so" in str(exc), exc


@case
def builtin_without_reference():
    """A registry kernel written GM_KERNEL_CUDA (the test build's fill):
    the cuda backend runs it, the host backend refuses it by name."""
    code = ("import gpumem, numpy as np\n"
            "y = gpumem.zeros(5)\n"
            "info = gpumem.kernels.info('fill')\n"
            "assert not info['reference'], info\n"
            "assert info['cuda'] == CUDA_BUILT_IN, info\n"
            "try:\n"
            "    gpumem.kernels.fill(4, 2.5, y)\n"
            "except gpumem.Error as exc:\n"
            "    print('refused:', exc)\n"
            "else:\n"
            "    print('ran:', y.copy_to_host().tolist())\n")
    # A build without CUDA has no launcher for it either.
    version = subprocess.run([gmtest.GPUMEM_TEST, "-V"], text=True,
                             capture_output=True, timeout=60).stdout
    code = f"CUDA_BUILT_IN = {'CUDA backend built in' in version}\n" + code
    env = dict(os.environ, GPUMEM_BACKEND=gpumem.backend)
    proc = subprocess.run([gmtest.GPUMEM_TEST, "-q", "-c", code], env=env,
                          text=True, capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    if CUDA:
        assert "ran: [2.5, 2.5, 2.5, 2.5, 0.0]" in proc.stdout, proc.stdout
    else:
        assert "refused: kernel 'fill' (built in) has no C reference" \
            in proc.stdout, proc.stdout


@case
def refused_plugins():
    gpumem.load_kernels(GOOD)     # clash_plugin clashes with it
    cases = {
        "no_table": "exports no gm_plugin_table",
        "null_table": "returned no table",
        "abi2": "ABI version 2, but this gpumem reads version 1",
        "bad_signature": "'[' and a minimum length expected",
        "bad_dtype": "unknown dtype 'float17'",
        "bad_length": "names no parameter of the kernel",
        "bad_name": "kernel '9lives'",
        "neither": "neither a CUDA launcher nor a C reference",
        "clash": "clashes with the kernel of that name in gpumem's built-in",
        "clash_plugin": "kernel 'p_scale' clashes",
        "duplicate": "kernel 'k_one' clashes",
    }
    for variant, words in cases.items():
        exc = raises(gpumem.Error, gpumem.load_kernels, plugin(variant),
                     match=words)
        assert plugin(variant) in str(exc), (variant, exc)
        # Nothing of it stays: the kernels it read are gone.
        if variant in ("bad_signature", "duplicate"):
            raises(gpumem.Error, gpumem.load_kernels, plugin(variant))
    raises(gpumem.Error, gpumem.load_kernels,
           os.path.join(PLUGINS, "no-such.so"), match="no such file")
    raises(gpumem.Error, gpumem.load_kernels,
           os.path.join(gmtest.SRCDIR, "tests", "test_plugins.py"),
           match="cannot load the kernel plugin")
    raises(TypeError, gpumem.load_kernels, 42)
    # Bad arguments are ValueError, not gpumem.Error.
    for path in ("", "no\0nul.so"):
        exc = raises(ValueError, gpumem.load_kernels, path)
        assert not isinstance(exc, gpumem.Error), exc


@case
def mismatched_functions_do_not_compile():
    """A plugin's kernels cannot be inspected once built (the table holds
    adapters of one C type), so the mismatch between a kernel's line and
    its function is caught where it can be: GM_PLUGIN_KERNEL declares the
    function from the line, and a definition of another parameter count,
    size or const-ness is a compile error."""
    cc = shutil.which(os.environ.get("CC", "cc"))
    if cc is None:
        gmtest.skip("no C compiler (cc) to build a plugin with")
    line = ('GM_PLUGIN_KERNEL_HOST (p_axpy, "y += a x.",\n'
            '  GM_SCALAR (0, n, int64) GM_SCALAR (1, a, float32)\n'
            '  GM_IN (2, x, float32, "n") GM_INOUT (3, y, float32, "n"))\n')
    definitions = {
        None: "int64_t n, float a, const float *x, float *y",
        "count": "int64_t n, float a, const float *x",
        "size": "int32_t n, float a, const float *x, float *y",
        "dtype": "int64_t n, float a, const double *x, float *y",
        "const-ness": "int64_t n, float a, float *x, float *y",
        "written const": "int64_t n, float a, const float *x, "
                         "const float *y",
    }
    folder = tempfile.mkdtemp(prefix="gpumem-plugin-test-")
    try:
        for what, params in definitions.items():
            path = os.path.join(folder, "p.c")
            with open(path, "w") as f:
                f.write("#include <gpumem/kernel.h>\n" + line
                        + f"void gm_ref_p_axpy ({params}) {{ }}\n"
                        + "GM_PLUGIN_TABLE (p_axpy)\n")
            proc = subprocess.run(
                [cc, "-std=c11", "-fsyntax-only", "-I",
                 os.path.join(gmtest.SRCDIR, "include"), path],
                capture_output=True, text=True, timeout=120)
            if what is None:
                assert proc.returncode == 0, proc.stderr
            else:
                assert proc.returncode != 0, what
                assert "gm_ref_p_axpy" in proc.stderr, (what, proc.stderr)
    finally:
        shutil.rmtree(folder)


@case
def signature_errors_name_the_kernel():
    exc = raises(gpumem.Error, gpumem.load_kernels, plugin("bad_signature"))
    assert "kernel 'bad_sig'" in str(exc), exc
    assert 'signature "int64 n, float32 *x"' in str(exc), exc


@case
def preload_option_and_environment():
    code = ("import gpumem; k = gpumem.kernels; "
            "print(sorted(n for n, _ in k.list()))")
    proc = run("--kernels=" + GOOD, "-c", code)
    assert proc.returncode == 0, proc.stderr
    assert "'p_fill', 'p_noref', 'p_scale'" in proc.stdout, proc.stdout
    assert "'saxpy'" in proc.stdout, proc.stdout
    proc = run("-c", code, env_extra={"GPUMEM_KERNELS":
                                      ":" + GOOD + "::"})
    assert proc.returncode == 0, proc.stderr
    assert "'p_scale'" in proc.stdout, proc.stdout
    # Loaded once, however named: preloading it twice is no clash.
    proc = run("--kernels=" + GOOD, "-c", code,
               env_extra={"GPUMEM_KERNELS": GOOD})
    assert proc.returncode == 0, proc.stderr
    # The preloaded kernels run as built-in ones do.
    if not CUDA:
        proc = run("--kernels", GOOD, "-c",
                   "import gpumem, numpy as np\n"
                   "x = gpumem.to_device(np.ones(3, np.float32))\n"
                   "gpumem.kernels.p_scale(3, 4.0, x)\n"
                   "print(x.copy_to_host().tolist())")
        assert proc.returncode == 0, proc.stderr
        assert "[4.0, 4.0, 4.0]" in proc.stdout, proc.stdout


@case
def preload_environment_in_plain_python():
    """GPUMEM_KERNELS in a plain python importing the extension module
    (sys.executable finds it through the PYTHONPATH the program set):
    the program's parsing and refusals, as an ImportError at import."""
    if gmtest.sanitized():
        gmtest.skip("sanitized build: its extension module cannot load "
                    "into an uninstrumented python")
    code = ("import gpumem; k = gpumem.kernels; "
            "print(sorted(n for n, _ in k.list()))")

    def python(paths, source=code):
        env = dict(os.environ, GPUMEM_BACKEND=gpumem.backend,
                   GPUMEM_KERNELS=paths)
        return subprocess.run([sys.executable, "-c", source], env=env,
                              text=True, capture_output=True, timeout=120,
                              stdin=subprocess.DEVNULL)

    proc = python(":" + GOOD + "::")
    assert proc.returncode == 0, proc.stderr
    assert "'p_fill', 'p_noref', 'p_scale'" in proc.stdout, proc.stdout
    assert "'saxpy'" in proc.stdout, proc.stdout
    proc = python("")
    assert proc.returncode == 0, proc.stderr
    assert "'p_scale'" not in proc.stdout, proc.stdout
    if not CUDA:
        proc = python(GOOD, "import gpumem, numpy as np\n"
                      "x = gpumem.to_device(np.ones(3, np.float32))\n"
                      "gpumem.kernels.p_scale(3, 4.0, x)\n"
                      "print(x.copy_to_host().tolist())")
        assert proc.returncode == 0, proc.stderr
        assert "[4.0, 4.0, 4.0]" in proc.stdout, proc.stdout
    # A plugin that does not load: ImportError naming it, at every try.
    retry = ("for _ in range(2):\n"
             "    try:\n"
             "        import gpumem\n"
             "    except ImportError as e:\n"
             "        print('ImportError', e)\n")
    for paths, words in (
            (plugin("no_table"), plugin("no_table") + ": not a gpumem "
             "kernel plugin"),
            (plugin("abi2"), "ABI version 2"),
            (GOOD + ":" + plugin("clash_plugin"), "kernel 'p_scale' clashes"),
            ("/no/such/plugin.so", "/no/such/plugin.so")):
        proc = python(paths, retry)
        assert proc.returncode == 0, (paths, proc.stderr)
        lines = proc.stdout.splitlines()
        assert len(lines) == 2, (paths, proc.stdout)
        for line in lines:
            assert line.startswith("ImportError gpumem: GPUMEM_KERNELS: "), \
                (paths, line)
            assert words in line, (paths, line)


@case
def list_kernels_shows_plugins():
    proc = run("-k", "--kernels=" + GOOD)
    assert proc.returncode == 0, proc.stderr
    assert "p_fill(y: int32[2 * rows + 1] out, rows: int32, value: int32)" \
        in proc.stdout, proc.stdout
    assert "(from " + os.path.realpath(GOOD) + ")" in proc.stdout
    assert "saxpy(" in proc.stdout, proc.stdout


@case
def preloaded_kernels_keep_load_order():
    """gpumem.kernels and -k list the built-in kernels, then each
    preloaded plugin's in the order given, whatever that order."""
    if not os.path.exists(CUDA_PLUGIN):
        gmtest.skip(f"a second plugin is needed ({CUDA_PLUGIN} is missing)")
    code = ("import gpumem\n"
            "print(' '.join(n for n, _ in gpumem.kernels.list()))\n")
    builtin = run("-c", code)
    assert builtin.returncode == 0, builtin.stderr
    builtin = builtin.stdout.split()
    good = [n for n, _ in gpumem.load_kernels(GOOD).list()]
    other = run("--kernels=" + CUDA_PLUGIN, "-c", code)
    assert other.returncode == 0, other.stderr
    other = other.stdout.split()[len(builtin):]
    assert other and not set(other) & set(good), other
    for first, second in ((GOOD, CUDA_PLUGIN), (CUDA_PLUGIN, GOOD)):
        proc = run("--kernels=" + first, "--kernels=" + second, "-c", code)
        assert proc.returncode == 0, proc.stderr
        names = {GOOD: good, CUDA_PLUGIN: other}
        assert proc.stdout.split() == builtin + names[first] + names[second], \
            (first, proc.stdout)


@case
def preload_errors():
    for args, env, words in (
            (["--kernels=" + plugin("abi2")], None, "ABI version 2"),
            (["--kernels=" + GOOD, "--kernels=" + plugin("clash_plugin")],
             None, "kernel 'p_scale' clashes"),
            ([], {"GPUMEM_KERNELS": plugin("no_table")}, "GPUMEM_KERNELS"),
            (["--kernels=/no/such/plugin.so"], None, "no such file")):
        proc = run(*args, "-c", "print('ran')", env_extra=env)
        assert proc.returncode == 2, (args, proc.returncode, proc.stderr)
        assert words in proc.stderr, (args, proc.stderr)
        assert "ran" not in proc.stdout


@case
def bare_name_is_not_taken_from_the_current_folder():
    """A plugin named without a '/' is found where dlopen looks
    (LD_LIBRARY_PATH, the system's folders), never in the current folder,
    which another user may have written in: a library planted there does
    not load, its constructor does not run, and the error names the fix
    (./NAME).  The same library as ./NAME, or found on LD_LIBRARY_PATH,
    loads."""
    folder = tempfile.mkdtemp()
    marker = os.path.join(folder, "constructor-ran")
    cwd = os.getcwd()
    os.environ["GM_TEST_PLUGIN_MARKER"] = marker
    try:
        shutil.copy(plugin("marker"), os.path.join(folder, "planted.so"))
        os.chdir(folder)
        try:
            exc = raises(gpumem.Error, gpumem.load_kernels, "planted.so")
        finally:
            os.chdir(cwd)
        assert "./planted.so" in str(exc) and "current folder" in str(exc), \
            str(exc)
        assert not os.path.exists(marker)
        code = "import gpumem; print(sorted(n for n, _ in gpumem.kernels.list()))"
        for args, env in ((["--kernels=planted.so"], None),
                          ([], {"GPUMEM_KERNELS": "planted.so"})):
            proc = run(*args, "-c", code, env_extra=env, cwd=folder)
            assert proc.returncode == 2, (args, proc.returncode, proc.stderr)
            assert "./planted.so" in proc.stderr, proc.stderr
            assert not os.path.exists(marker), args
        # The control: named as a path, the planted library does load and
        # its constructor runs (in a child: its kernels stay out of this
        # process).
        proc = run("--kernels=./planted.so", "-c", code, cwd=folder)
        assert proc.returncode == 0 and "'k_one'" in proc.stdout, proc.stderr
        assert os.path.exists(marker)
        os.unlink(marker)
        # A bare name dlopen finds: on LD_LIBRARY_PATH, from any folder;
        # preloaded by its name and by its path, it is loaded once.
        search = {"LD_LIBRARY_PATH": PLUGINS,
                  "GPUMEM_KERNELS": "marker.so:" + plugin("marker")}
        proc = run("-c", code + "; import gpumem as g; "
                   "print(g.load_kernels('marker.so').__file__)",
                   env_extra=search, cwd=folder)
        assert proc.returncode == 0 and "'k_one'" in proc.stdout, proc.stderr
        assert os.path.realpath(plugin("marker")) in proc.stdout, proc.stdout
        assert os.path.exists(marker)
    finally:
        os.chdir(cwd)
        del os.environ["GM_TEST_PLUGIN_MARKER"]
        shutil.rmtree(folder)


@case
def cuda_plugin_matches():
    """The nvcc-built plugin: its kernel against its own C reference (on
    the host backend in a child), and its CUDA-only kernel refused by
    the host backend."""
    if not os.path.exists(CUDA_PLUGIN):
        gmtest.skip("tests/plugins/cuda-plugin.so not built: configured "
                    "without CUDA")
    ns = gpumem.load_kernels(CUDA_PLUGIN)
    data = random_array(100003, "float32")
    x = gpumem.to_device(data)
    ns.c_scale(len(data) - 3, -1.5, x)
    want = data.copy()
    want[:-3] = np.float32(-1.5) * want[:-3]
    assert np.array_equal(x.copy_to_host(), want)
    y = gpumem.to_device(np.ones(10, np.float32))
    if CUDA:
        ns.c_axpy(10, 2.0, gpumem.to_device(np.arange(10, dtype=np.float32)),
                  y)
        assert np.array_equal(y.copy_to_host(),
                              2 * np.arange(10, dtype=np.float32) + 1)
        ns.c_scale(10, 3.0, y, grid=2, block=32)
    else:
        raises(gpumem.Error, ns.c_axpy, 10, 2.0, y, y,
               match="no C reference")


gmtest.main()
