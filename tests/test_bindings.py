"""The C++ binding casters (include/gpumem/array.hpp, pybind11.h,
nanobind.h): tests/bindings/bindings.cpp is built with each library the
running Python imports (CMake, at test time), then called on gpumem
arrays.  Cases that read elements on the CPU run on the host backend."""

import importlib
import os
import shutil
import subprocess
import sys

import numpy as np

import gmtest
from gmtest import case, raises

import gpumem

HOST = gpumem.backend == "host"
CUDA_BACKEND = gpumem.backend == "cuda"
LIBRARIES = {"pybind11": "--cmakedir", "nanobind": "--cmake_dir"}


def build():
    """Builds the test modules into a temporary folder on sys.path; the
    names of those built."""
    if shutil.which("cmake") is None:
        gmtest.skip_file("no cmake")
    if gmtest.sanitized():
        gmtest.skip_file("a sanitized build (the modules are not)")
    flags = []
    for name, option in LIBRARIES.items():
        found = subprocess.run([sys.executable, "-m", name, option],
                               capture_output=True, text=True)
        if found.returncode == 0:
            flags.append(f"-D{name}_DIR={found.stdout.strip()}")
    if not flags:
        gmtest.skip_file(f"{sys.executable} imports neither pybind11 nor "
                         "nanobind (pip install pybind11 nanobind)")
    work = gmtest.scratch(prefix="gpumem-bindings.")
    source = os.path.join(gmtest.SRCDIR, "tests", "bindings")
    include = os.path.join(gmtest.SRCDIR, "include")
    for command in (["cmake", "-S", source, "-B", work,
                     f"-DPython_EXECUTABLE={sys.executable}",
                     f"-DGPUMEM_INCLUDE_DIR={include}", *flags],
                    ["cmake", "--build", work, "-j2"]):
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            print(done.stdout, done.stderr)
            raise SystemExit(f"building the test modules failed: {command}")
    sys.path.insert(0, work)
    return [name for name in LIBRARIES
            if any(f.startswith(f"gmbind_{name}") for f in os.listdir(work))]


MODULES = [importlib.import_module(f"gmbind_{name}") for name in build()]


def each(fn):
    """Registers FN(module) as a case run with every built module."""
    def run():
        for module in MODULES:
            fn(module)
    run.__name__ = fn.__name__
    return case(run)


def host_only():
    if not HOST:
        gmtest.skip("reads elements on the CPU: host backend only")


@each
def dtype_mismatch_names_parameter_and_dtypes(m):
    exc = raises(TypeError, m.sum_strided, gpumem.zeros(4, "float64"))
    text = str(exc)
    assert "gpumem.DeviceArray[const float32, ndim=1, strided]" in text, text
    assert "float32" in text and "float64" in text, text


@each
def const_takes_readonly_writable_refuses(m):
    """gpumem's own read-only arrays (asarray(x, readonly=True)) go to a
    const parameter and are refused by a writable one."""
    a = gpumem.to_device(np.arange(4, dtype=np.float32))
    ro = gpumem.asarray(a, readonly=True)
    assert ro.readonly and not a.readonly and ro.ptr == a.ptr
    if HOST:
        assert m.sum_strided(ro) == 6.0
        assert m.sum_contig(ro[::-1][::-1]) == 6.0
    else:
        m.stream_of(ro)                   # const takes it
        # The function body refuses device memory (it reads on the CPU).
        raises(ValueError, m.sum_strided, ro, match="host memory only")
    exc = raises(ValueError, m.fill, ro, 1.0)
    assert "read-only" in str(exc)
    assert "read-only" in str(raises(ValueError, m.fill, ro[1:], 1.0))
    if HOST:
        m.fill(a, 2.0)                    # the writable original still is
        assert ro.copy_to_host().tolist() == [2.0] * 4
    if not CUDA_BACKEND:
        return
    # A read-only CUDA Array Interface producer is refused the same way.

    class ReadOnly:
        __cuda_array_interface__ = dict(a.__cuda_array_interface__,
                                        data=(a.ptr, True))
    raises(ValueError, m.fill, ReadOnly(), 1.0, match="read-only")


@each
def ndim_and_contiguity(m):
    exc = raises(ValueError, m.sum_strided, gpumem.zeros((2, 2), "float32"))
    assert "must have 1 dimension, not 2" in str(exc)
    assert m.matrix(gpumem.zeros((2, 3), "float64")) == 2
    exc = raises(ValueError, m.sum_contig, gpumem.zeros(8, "float32")[::2])
    assert "C-contiguous" in str(exc)


@each
def bare_pointer_default_refuses_views(m):
    """The default layout is C-contiguous: a parameter read through
    data () and size () refuses strided and reversed views (which it
    would misread, or read past the end of) with the fix named, and
    takes contiguous ones, slices included."""
    a = gpumem.to_device(np.arange(8, dtype=np.float32))
    for view in (a[::2], a[::-1], a[1::3]):
        exc = raises(ValueError, m.last, view, 2)
        text = str(exc)
        assert "gpumem.DeviceArray[const float32, ndim=1]" in text, text
        assert "C-contiguous" in text and "gpumem::strided" in text, text
        assert "copy" in text, text
    if HOST:
        assert m.last(a, 8) == 7.0
        assert m.last(a[2:6], 4) == 5.0
        assert m.last(a[::2].copy(), 4) == 6.0


@each
def strided_view_walked(m):
    host_only()
    host = np.arange(10, dtype=np.float32)
    a = gpumem.to_device(host)
    assert m.sum_strided(a[::3]) == float(host[::3].sum())
    assert m.sum_strided(a[::-2]) == float(host[::-2].sum())
    assert m.sum_contig(a[2:7]) == float(host[2:7].sum())
    m.fill(a[1::2], -1.0)
    host[1::2] = -1.0
    np.testing.assert_array_equal(a.copy_to_host(), host)


@each
def every_dimension_reaches_the_call(m):
    # Every dimension reaches the call: a DeviceArray's shape and strides
    # borrowed by the view (gpumem/array.hpp, load_view), whatever ndim.
    for ndim in range(0, 8):
        shape = tuple(range(2, 2 + ndim))
        a = gpumem.zeros(shape, "float32")
        views = [a]
        if ndim >= 1:
            views.append(a[(slice(None, None, -1),) * ndim])
        for view in views:
            want = sum((i + 1) * view.shape[i]
                       + 1000 * (i + 1) * view.strides[i] // 4
                       for i in range(ndim))
            assert m.dims_code(view) == want, (ndim, view.strides)


@each
def freed_array(m):
    a = gpumem.zeros(4, "float32")
    a.free()
    exc = raises(ValueError, m.sum_strided, a)
    assert "freed" in str(exc)


@each
def not_device_memory(m):
    exc = raises(TypeError, m.sum_strided, 42)
    text = str(exc)
    assert "gpumem.DeviceArray[const float32, ndim=1, strided]" in text
    # The caller never called asarray: the message does not name it.
    assert "asarray" not in text and "expected device memory" in text, text
    if HOST:
        assert "CUDA" not in text, text


@each
def returns_device_array(m):
    made = m.arange(6, HOST)
    assert isinstance(made, gpumem.DeviceArray)
    assert made.shape == (6,) and str(made.dtype) == "float32"
    if HOST:
        np.testing.assert_array_equal(made.copy_to_host(),
                                      np.arange(6, dtype=np.float32))


@each
def keeps_owner_alive(m):
    a = gpumem.zeros(3, "float32")
    before = sys.getrefcount(a)
    for _ in range(100):
        m.three_arrays(a, a, a)
    assert sys.getrefcount(a) == before
    assert m.three_arrays(a, a[:2], gpumem.zeros((2, 2), "float32")) == 4


@each
def help_shows_signature(m):
    doc = m.sum_contig.__doc__
    assert "x: gpumem.DeviceArray[const float32, ndim=1]" in doc, doc
    assert "gpumem.DeviceArray[float32, ndim=1, strided]" in m.fill.__doc__


@each
def stream_is_current(m):
    a = gpumem.zeros(3, "float32")
    assert m.stream_of(a) == 0            # no block open: default stream
    if HOST:
        return
    s = gpumem.Stream()
    with s:
        assert m.stream_of(a) == s.handle


@each
def launch_stream_of_several_arrays(m):
    """gpumem::launch_stream: the current stream of the arrays' device
    (the default one outside a block), refusing arrays on two devices."""
    a, b = gpumem.zeros(4, "float32"), gpumem.zeros(4, "float32")
    assert m.launch_of(a, b) == 0
    assert m.launch_of(a[::2], b[::-1]) == 0      # any layout, declared
    if gpumem.device_count() > 1:
        other = gpumem.zeros(4, "float32", device=1)
        exc = raises(ValueError, m.launch_of, a, other)
        assert "devices 0 and 1" in str(exc), exc
    if HOST:
        return
    s = gpumem.Stream()
    with s:
        assert m.launch_of(a, b) == s.handle


@each
def launch_stream_waits_for_pending_writes(m):
    """A launch in a `with s2:` block that reads X while a copy on
    another stream S still writes it: on out.stream () (the rule for one
    array) the kernel reads stale data; on launch_stream (x, out) it
    waits for S and reads the copy.  The first half shows that the test
    can see the race at all."""
    if HOST:
        gmtest.skip("needs CUDA streams: cuda backend only")
    if not hasattr(m, "tail_into"):
        gmtest.skip("the test modules were built without CUDA (CMake found "
                    "no CUDA compiler)")
    n = 1 << 28                                   # 1 GiB of float32
    ones = gpumem.ones(n, "float32")
    s, s2 = gpumem.Stream(), gpumem.Stream()
    stale = 0
    for _ in range(5):
        for helper in (False, True):
            x = gpumem.zeros(n, "float32")
            out = gpumem.zeros(1 << 16, "float32")
            gpumem.copy(x, ones, stream=s)        # pending on s
            with s2:
                m.tail_into(x, out, helper)
                if helper:
                    assert out.__cuda_array_interface__["stream"] in (
                        None, s2.handle)
            got = out.copy_to_host()
            if helper:
                assert (got == 1).all(), "launch_stream did not wait for s"
            elif not (got == 1).all():
                stale += 1
            del x
    assert stale > 0, ("the launch on out.stream () never read stale data: "
                       "the test cannot tell launch_stream's wait from luck")
    # Outside any block the helper's launch is complete on return.
    x = gpumem.zeros(n, "float32")
    out = gpumem.zeros(1 << 16, "float32")
    gpumem.copy(x, ones, stream=s)
    m.tail_into(x, out, True)
    assert out.__cuda_array_interface__["stream"] is None
    assert (out.copy_to_host() == 1).all()


def outcome(fn, *args):
    """FN (*ARGS)'s result, or its exception's type and message."""
    try:
        return ("returned", fn(*args))
    except Exception as exc:              # the outcome is compared
        return (type(exc).__name__, str(exc))


@each
def lent_view_keeps_every_check(m):
    """An array that owns its memory lends its view at its first call,
    and the casters read it in place from then on (gm_lent): a second
    call gives what the first gave, result or error, and the same as
    against a table without lent views; freeing the array, work pending
    on it on another stream, and a block that picks the launch stream
    are seen at the next call."""
    seen = {}
    for member in ("array_type", ""):
        m.as_older_gpumem(member)
        try:
            f32 = gpumem.zeros(4, "float32")
            f64 = gpumem.zeros((2, 2), "float64")
            square = gpumem.zeros((2, 2), "float32")
            calls = [(m.dims_code, f32), (m.stream_of, f32),
                     (m.dims_code, f64), (m.matrix, f64),
                     (m.matrix, square), (m.sum_contig, square),
                     (m.three_arrays, f32, square, f32)]
            got = []
            for fn, *args in calls:
                first = outcome(fn, *args)
                assert outcome(fn, *args) == first, (member, fn, first)
                got.append(first)
            seen[member] = got
            assert m.dims_code(f32) == 1004
            assert "must hold float32 elements, not float64" in got[2][1]
            assert "must have 1 dimension, not 2" in got[5][1], got[5]
            f32.free()
            assert "freed" in str(raises(ValueError, m.dims_code, f32))
        finally:
            m.as_older_gpumem("")
    assert seen[""] == seen["array_type"], seen
    if HOST:
        return
    a = gpumem.zeros(4, "float32")
    assert m.stream_of(a) == 0 and m.stream_of(a) == 0
    s = gpumem.Stream()
    with s:
        assert m.stream_of(a) == s.handle
    with gpumem.concurrent():
        assert m.stream_of(a) not in (0, None)
    assert m.stream_of(a) == 0
    # Work pending on A: the launch stream is that work's stream.
    n = 1 << 28
    ones = gpumem.ones(n, "float32")
    pending = 0
    for _ in range(5):
        x = gpumem.zeros(n, "float32")
        assert m.stream_of(x) == 0 and m.stream_of(x) == 0
        gpumem.copy(x, ones, stream=s)
        launch = m.stream_of(x)
        if x.__cuda_array_interface__["stream"] is not None:
            pending += 1                  # pending then too: must be s
            assert launch == s.handle, (launch, s.handle)
        s.synchronize()
        assert m.stream_of(x) == 0
    assert pending > 0, "the 1 GiB copy was never seen pending"


@each
def older_gpumem_table(m):
    """Against a gpumem whose table ends before load_view (a copy of the
    table with that size), the casters load through load_buffer: the
    same results and messages, and RuntimeError naming the version for
    more than four dimensions."""
    m.as_older_gpumem("load_view")
    try:
        for ndim in range(0, 5):
            a = gpumem.zeros(tuple(range(2, 2 + ndim)), "float32")
            view = a[(slice(None, None, -1),) * ndim] if ndim else a
            want = sum((i + 1) * view.shape[i]
                       + 1000 * (i + 1) * view.strides[i] // 4
                       for i in range(ndim))
            assert m.dims_code(view) == want, ndim
        exc = raises(RuntimeError, m.dims_code,
                     gpumem.zeros((1, 2, 3, 4, 5), "float32"))
        text = str(exc)
        assert gpumem.__version__ in text and "upgrade gpumem" in text, text
        exc = raises(TypeError, m.sum_strided, gpumem.zeros(4, "float64"))
        assert "must hold float32 elements, not float64" in str(exc)
        ro = gpumem.asarray(gpumem.zeros(4, "float32"), readonly=True)
        assert "read-only" in str(raises(ValueError, m.fill, ro, 1.0))
        exc = raises(ValueError, m.sum_contig, gpumem.zeros(8, "float32")[::2])
        assert "C-contiguous" in str(exc)
        a, b = gpumem.zeros(4, "float32"), gpumem.zeros(4, "float32")
        assert m.launch_of(a, b) == 0 and m.stream_of(a) == 0
        made = m.arange(3, HOST)
        assert isinstance(made, gpumem.DeviceArray) and made.shape == (3,)
        before = sys.getrefcount(a)
        for _ in range(50):
            m.three_arrays(a, a, a)
        assert sys.getrefcount(a) == before
    finally:
        m.as_older_gpumem("")


def native_held():
    stats = gpumem.memory_stats()
    return stats["native_held_bytes"], stats["native_held_blocks"]


@each
def kept_array_outlives_free(m):
    # C++ keeps the array in a std::vector; Python frees it: the memory
    # stays, counted as held by native code, until C++ lets go.
    n = 1 << 22                                   # 16 MiB: its own mapping
    a = gpumem.to_device(np.arange(n, dtype=np.float32) % 7)
    before = gpumem.memory_stats()["allocated_bytes"]
    m.keep(a)
    m.keep(a[: n // 2])                           # a view holds it too
    a.free()
    raises(ValueError, a.copy_to_host)            # Python's use ended
    assert native_held() == (4 * n, 1), native_held()
    assert gpumem.memory_stats()["allocated_bytes"] == before
    if HOST:
        other = gpumem.full(n, 100.0)             # may take freed memory
        expected = float((np.arange(n) % 7).sum()
                         + (np.arange(n // 2) % 7).sum())
        assert m.kept_sum() == expected, (m.kept_sum(), expected)
        del other
    assert m.forget() == 2
    assert native_held() == (0, 0), native_held()
    assert gpumem.memory_stats()["allocated_bytes"] == before - 4 * n


@each
def every_parameter_form(m):
    # By value, const reference, reference, pointer and rvalue reference:
    # each gets the array, holds its memory only while it should, and
    # gives its references back.
    n = 1 << 20
    a = gpumem.to_device(np.arange(n, dtype=np.float32) % 5)
    expected = float((np.arange(n) % 5).sum())
    before = sys.getrefcount(a)
    for fn in (m.sum_contig, m.sum_const_ref, m.sum_ref, m.sum_pointer):
        if HOST:
            assert fn(a) == expected, fn
        else:
            raises(ValueError, fn, a)             # reads on the CPU
        assert sys.getrefcount(a) == before, fn
        assert native_held() == (0, 0), (fn, native_held())
        raises(TypeError, fn, gpumem.zeros(4, dtype=np.int32))
    if HOST:
        assert m.keep_moved(a) == expected
        a.free()
        assert native_held() == (4 * n, 1), native_held()
        assert m.kept_sum() == expected
        assert m.forget() == 1
        assert native_held() == (0, 0), native_held()


@each
def casters_on_spilled_and_clean_arrays(m):
    # A spilled array comes back before a caster reads it, also on the
    # path without a call (the lent view); a caster that may write ends
    # the clean host copy, so the next spill copies its writes out.
    host_only()
    n = 1000
    a = gpumem.to_device(np.arange(n, dtype=np.float32))
    for _ in range(2):                        # the second: a lent view
        a.spill()
        assert m.sum_contig(a) == float(np.arange(n).sum())
        assert not a.is_spilled
    a.spill()
    a.copy_to_host()                          # back, with a clean copy
    clean = gpumem.memory_stats()["spill_clean_bytes"]
    assert clean >= 4 * n, clean
    m.fill(a, 3.0)
    assert gpumem.memory_stats()["spill_clean_bytes"] == clean - 4 * n
    a.spill()
    assert m.sum_contig(a) == 3.0 * n
    np.testing.assert_array_equal(a.copy_to_host(), np.full(n, 3.0))


@each
def an_array_cpp_keeps_never_moves(m):
    # Under pressure with spilling on, the array C++ keeps stays while
    # others move; once C++ lets go it moves too.
    n = 1 << 16
    with gmtest.spill_pressure(3 * 4 * n):
        a = gpumem.full(n, 1.0, "float32")
        m.keep(a)
        b = gpumem.full(n, 2.0, "float32")
        c = gpumem.full(n, 3.0, "float32")
        exc = raises(gpumem.Error, a.spill)
        assert "native code" in str(exc), exc
        d = gpumem.full(n, 4.0, "float32")        # b moves, a stays
        assert not a.is_spilled and b.is_spilled
        if HOST:
            assert m.kept_sum() == float(n)
        assert m.forget() == 1
        a.spill()
        assert a.is_spilled
        np.testing.assert_array_equal(a.copy_to_host(), np.ones(n))
        # An address read through .ptr pins the array for good.
        b.prefetch(0)                             # back, a moving again
        e = b.ptr
        exc = raises(gpumem.Error, b.spill)
        assert ".ptr" in str(exc), exc
        assert b.ptr == e
        del c, d


@each
def kept_foreign_memory_outlives_free(m):
    # A DeviceArray over another object's memory: free() lets go of that
    # object, but not while C++ keeps the array.
    if not HOST:
        gmtest.skip("reads elements on the CPU: host backend only")
    host = np.arange(1000, dtype=np.float32)
    wrapped = gpumem.from_dlpack(host)
    m.keep(wrapped)
    del host
    wrapped.free()
    assert m.kept_sum() == float(np.arange(1000).sum())
    m.forget()


@each
def native_call_without_gil_survives_free(m):
    # A native call writes its array with the GIL released while another
    # thread frees it: the call keeps the memory to its end.
    host_only()
    import threading
    import time
    n = 1 << 22
    a = gpumem.zeros(n)
    results = []

    def call():
        try:
            results.append(m.increment_released(a, 40))
        except ValueError as exc:       # freed before the call took it
            results.append(exc)

    worker = threading.Thread(target=call)
    worker.start()
    time.sleep(0.2)                     # the call holds it by now, mostly
    a.free()
    junk = gpumem.full(n, -5.0)         # takes the memory, were it gone
    worker.join()
    assert results == [40.0] or (isinstance(results[0], ValueError)
                                 and "freed" in str(results[0])), results
    assert native_held() == (0, 0), native_held()
    del junk


@each
def share_refuses_natively_held_memory(m):
    # Making memory shareable may move its bytes: not while native code
    # holds it (it may be writing it).
    if not hasattr(gpumem, "share"):
        gmtest.skip("no gpumem.share in this build")
    a = gpumem.zeros(1000)
    m.keep(a)
    exc = raises(gpumem.Error, gpumem.share, a)
    assert "held by native code" in str(exc), exc
    m.forget()
    gpumem.share(a)


@each
def share_loses_no_native_write(m):
    # A native thread increments the array while Python shares it: either
    # the share is refused while the thread holds it, or it comes after;
    # no write is lost.
    host_only()
    if not hasattr(gpumem, "share"):
        gmtest.skip("no gpumem.share in this build")
    import threading
    n = 1 << 21
    a = gpumem.zeros(n)
    worker = threading.Thread(target=m.increment_released, args=(a, 30))
    worker.start()
    shared = None
    while shared is None:
        try:
            shared = gpumem.share(a)
        except gpumem.Error as exc:
            assert "held by native code" in str(exc), exc
    worker.join()
    got = a.copy_to_host()
    assert (got == 30).all(), np.unique(got)


@each
def native_call_in_graph_is_refused(m):
    # Inside a recording a native call would run at once, before the
    # recorded work, and never again: refused before it runs.
    if not hasattr(gpumem, "graph"):
        gmtest.skip("no gpumem.graph")
    a = gpumem.zeros(8)
    b = gpumem.zeros(8)
    with gpumem.graph() as g:
        gpumem.copy_to_gpu(np.ones(8, np.float32), a, 8)
        exc = raises(gpumem.Error, m.fill, b, 3.0)
        assert "native call" in str(exc), exc
        exc = raises(gpumem.Error, m.three_arrays, a, a, b)
    g()
    assert (b.copy_to_host() == 0).all()
    m.three_arrays(a, a, b)                       # after the block: fine


@case
def algo_matches_numpy():
    host_only()
    root = os.path.join(gmtest.SRCDIR, "examples")
    sys.path.insert(0, os.path.join(root, "pybind11"))
    for module in MODULES:
        images = gmtest.rng.random(37, dtype=np.float32)
        update = gmtest.rng.random(4, dtype=np.float32)
        expected = (images.astype(np.float64).mean()
                    + update.astype(np.float64)).astype(np.float32)
        # The example's CPU path, through sum_strided's caster as algo's
        # parameters take it: mean and update in double.
        total = module.sum_strided(gpumem.to_device(images))
        got = (np.float64(total) / 37 + update.astype(np.float64))
        np.testing.assert_allclose(got.astype(np.float32), expected,
                                   rtol=1e-7)


gmtest.main()
