"""gmtest -- the small harness of gpumem's Python tests.

Each test file defines functions decorated with @case and ends with
gmtest.main().  Cases run in order; a failure prints its traceback and
the random seed (set GM_TEST_SEED to replay it).  A case that cannot
run here calls skip(reason) (or raises Skip), which prints "SKIP name:
reason" and counts it apart: a skipped case is never reported "ok".  The
last line is "N passed, N failed, N skipped"; the exit status is 1 when
any case failed.  A file calls skip_file() to exit 77 (a skip to ctest).
"""

import atexit
import os
import random
import selectors
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
import traceback

import numpy as np

SEED = int(os.environ.get("GM_TEST_SEED")
           or random.SystemRandom().randrange(2**32))
rng = np.random.default_rng(SEED)

GPUMEM = os.environ.get("GPUMEM", "gpumem")
GPUMEM_TEST = os.environ.get("GPUMEM_TEST", GPUMEM)
SRCDIR = os.environ.get("GM_SRCDIR", os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))


def source_files(*suffixes, folders=("src", "kernels")):
    """The paths of gpumem's sources under FOLDERS (subfolders
    included) whose names end in one of SUFFIXES, sorted."""
    found = []
    for folder in folders:
        for top, _, names in os.walk(os.path.join(SRCDIR, folder)):
            found += [os.path.join(top, n) for n in names
                      if n.endswith(suffixes)]
    return sorted(found)


_cases = []

DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16",
          "uint32", "uint64", "float16", "float32", "float64", "complex64",
          "complex128"]


def case(fn):
    """Registers FN as a test case."""
    _cases.append(fn)
    return fn


class Skip(Exception):
    """Raised by a case that cannot run here; its argument is the reason."""


def skip(reason):
    """Ends the running case as skipped, for REASON."""
    raise Skip(reason)


def skip_file(reason):
    """Skips the whole file (exit 77: ctest counts it as skipped)."""
    print("skipped:", reason)
    sys.exit(77)


def need_spin_kernel(path):
    """Makes sure the test build's spin kernel is there: run under plain
    gpumem, starts the test file PATH again under $GPUMEM_TEST (which has
    it), else skips the file saying so."""
    import gpumem
    if hasattr(gpumem.kernels, "spin"):
        return
    if GPUMEM_TEST != GPUMEM and os.access(GPUMEM_TEST, os.X_OK):
        sys.stdout.flush()
        os.execv(GPUMEM_TEST, [GPUMEM_TEST, f"--backend={gpumem.backend}",
                               "-q", os.path.abspath(path), *sys.argv[1:]])
    skip_file("needs the test build's spin kernel (tests/gpumem-test, "
              "which make check builds)")


class spill_pressure:
    """Spilling on and a memory limit of LIMIT bytes over what is in use
    now (after a collection, so that earlier cases' arrays are gone);
    both undone on exit."""

    def __init__(self, limit):
        self.limit = limit

    def __enter__(self):
        import gc
        import gpumem
        gc.collect()
        used = gpumem.memory_stats()["allocated_bytes"]
        gpumem.set_spill(True)
        gpumem.set_memory_limit(used + self.limit)
        return self

    def __exit__(self, *exc):
        import gpumem
        gpumem.set_memory_limit(None)
        gpumem.set_spill(False)


def scratch(prefix="gmtest-"):
    """A new private folder that is removed, with what is in it, when
    this process exits (a module loaded from it stays mapped until
    then)."""
    path = tempfile.mkdtemp(prefix=prefix)
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


def sanitized():
    """Whether this process runs under AddressSanitizer: then gpumem's
    extension module is instrumented too, and a plain python (a child
    started with sys.executable) cannot load it."""
    import ctypes
    return hasattr(ctypes.CDLL(None), "__asan_init")


class Raised:
    """What raises() caught, for further checks."""
    value = None


def raises(exc_type, fn, *args, match=None, **kwargs):
    """Asserts that FN(*ARGS, **KWARGS) raises EXC_TYPE, whose message
    contains MATCH when given.  Returns the exception."""
    try:
        fn(*args, **kwargs)
    except exc_type as exc:
        if match is not None and match not in str(exc):
            raise AssertionError(f"{exc_type.__name__} raised, but its "
                                 f"message {str(exc)!r} lacks {match!r}")
        return exc
    except BaseException as exc:
        raise AssertionError(f"expected {exc_type.__name__}, got "
                             f"{type(exc).__name__}: {exc}") from exc
    raise AssertionError(f"expected {exc_type.__name__}, nothing raised")


# The bytes of a share handle before its shape and strides (or an event's
# data): src/share/share-handle.c's layout, checksum included.
FIXED = 260


def fnv(data):
    """FNV-1a, 64 bits, of DATA: the checksum src/share/share-handle.c ends a share
    handle with."""
    h = 0xcbf29ce484222325
    for b in data:
        h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h


def reforge(handle, at, new_bytes):
    """The share HANDLE with NEW_BYTES written at offset AT and its
    checksum made right again: only the server's checks can refuse it
    then."""
    body = bytearray(handle[:-8])
    body[at:at + len(new_bytes)] = new_bytes
    return bytes(body) + struct.pack("<Q", fnv(body))


def stats():
    """gpumem.sharing_stats(): this process's shared blocks, leases and
    imports."""
    import gpumem
    return gpumem.sharing_stats()


def default_sigint():
    """For preexec_fn: a child gets SIGINT's default disposition.  A
    shell's background job inherits SIGINT ignored, and Python then
    installs no handler, so Ctrl-C would not raise KeyboardInterrupt."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class Interrupted:
    """What interrupt() saw: returncode, out, err, elapsed (seconds from
    the first SIGINT to the end) and signals (how many were sent)."""

    def __init__(self, returncode, out, err, elapsed, signals):
        self.returncode, self.out, self.err = returncode, out, err
        self.elapsed, self.signals = elapsed, signals

    def __repr__(self):
        return (f"exit {self.returncode} {self.elapsed:.2f} s after the "
                f"first of {self.signals} SIGINT(s)\nstdout: {self.out!r}"
                f"\nstderr: {self.err!r}")


def interrupt(argv, env=None, delay=0.0, every=1.0, limit=10.0,
              ready_timeout=60.0):
    """Starts ARGV (SIGINT at its default), waits for it to print the
    line "ready" and DELAY seconds more, then sends SIGINT, again EVERY
    seconds until the child ends, for at most LIMIT seconds; kills it
    then.  Returns an Interrupted.

    The child prints "ready" just before it enters the blocking call
    under test, and a SIGINT that arrives before the call has started
    is only noted by Python's handler, and seen when the call returns.
    Sending it again once the call has surely started makes the test
    depend on what the product does inside the call, not on when the
    first signal happened to arrive; a product that ignores Ctrl-C in
    the call ignores every repeat as well."""
    proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, preexec_fn=default_sigint)
    signals = 0
    start = None
    try:
        with selectors.DefaultSelector() as sel:
            sel.register(proc.stdout, selectors.EVENT_READ)
            if not sel.select(timeout=ready_timeout):
                raise AssertionError(f"no 'ready' in {ready_timeout} s")
        line = proc.stdout.readline()
        if line != "ready\n":
            proc.kill()
            out, err = proc.communicate()
            raise AssertionError(f"expected 'ready', got {line!r}; "
                                 f"stdout {out!r}, stderr {err!r}")
        time.sleep(delay)
        start = time.monotonic()
        while proc.poll() is None and time.monotonic() - start < limit:
            proc.send_signal(signal.SIGINT)
            signals += 1
            try:
                proc.wait(timeout=every)
            except subprocess.TimeoutExpired:
                pass
        elapsed = time.monotonic() - start
    finally:
        if proc.poll() is None:
            proc.kill()
    out, err = proc.communicate()
    return Interrupted(proc.returncode, line + out, err, elapsed, signals)


def assert_interrupted(got, within=10.0):
    """Asserts that the Interrupted GOT ended by KeyboardInterrupt within
    WITHIN seconds of the first SIGINT."""
    # Python re-raises SIGINT after an uncaught KeyboardInterrupt; 130 and
    # 1 are what an embedding program may make of it.
    assert got.returncode in (-signal.SIGINT, 130, 1), got
    assert "KeyboardInterrupt" in got.err, got
    assert got.elapsed < within, got


def random_array(n, dtype):
    """N random elements of DTYPE, never all zero."""
    dt = np.dtype(dtype)
    if dt.kind == "b":
        a = rng.integers(0, 2, n).astype(bool)
    elif dt.kind in "iu":
        info = np.iinfo(dt)
        a = rng.integers(max(info.min, -1000), min(info.max, 1000) + 1, n,
                         dtype=np.int64).astype(dt)
    elif dt.kind == "f":
        a = rng.standard_normal(n).astype(dt)
    else:
        a = (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(dt)
    if n:
        a[0] = 1
    return a


def poison(n, dtype):
    """N elements of a recognisable non-zero pattern."""
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return np.ones(n, dt)
    return np.full(n, 77, dtype=dt)


def collective_data(shape, dtype, index, salt=0):
    """The array of SHAPE and DTYPE that rank or device INDEX brings to a
    collective: small values, so that sums over every rank or device
    stay exact in every integer dtype; the same on every process for
    the same seed, SALT and INDEX."""
    rng_i = np.random.default_rng([SEED, salt, index])
    dt = np.dtype(dtype)
    n = int(np.prod(shape))
    if dt.kind == "b":
        a = rng_i.integers(0, 2, n).astype(bool)
    elif dt.kind == "i":
        a = rng_i.integers(-20, 21, n).astype(dt)
    elif dt.kind == "u":
        a = rng_i.integers(0, 41, n).astype(dt)
    elif dt.kind == "f":
        a = rng_i.standard_normal(n).astype(dt)
    else:
        a = (rng_i.standard_normal(n)
             + 1j * rng_i.standard_normal(n)).astype(dt)
    return a.reshape(shape)


def reduce_all(stack, dtype, op):
    """NumPy's answer for a collective reduce(OP) over STACK's first axis
    (on bool arrays sum and max are an or, min an and)."""
    if np.dtype(dtype).kind == "b":
        return np.logical_and.reduce(stack) if op == "min" \
            else np.logical_or.reduce(stack)
    fn = {"sum": np.add, "max": np.maximum, "min": np.minimum}[op]
    return fn.reduce(stack, axis=0, dtype=dtype)


def assert_close(got, expect, dtype):
    """GOT equals EXPECT: exactly for integers and bools, to rounding for
    floats (ranks or devices may add their values in another order)."""
    if np.dtype(dtype).kind in "fc":
        tol = 1e-5 if np.dtype(dtype) in (np.float32, np.complex64) \
            else 1e-12
        assert np.allclose(got, expect, rtol=tol, atol=tol), (got, expect)
    else:
        assert np.array_equal(got, expect), (got, expect)


def collective_case(fn):
    """Registers FN as a case every rank of an MPI job runs (gpumem.comm);
    it fails on every rank if it fails on any, and the ranks stay in
    step."""
    def run():
        import gpumem
        comm = gpumem.comm
        error = skipped = None
        try:
            fn()
        except Skip as exc:
            skipped = exc
        except Exception as exc:
            error = exc
        # A shape no case uses, so a rank left behind in a case's own
        # collective fails it (mismatch) instead of matching this one.
        failed = gpumem.zeros((comm.size, 3), dtype="int64")
        if error is not None:
            failed[comm.rank:comm.rank + 1].copy_from_host(
                np.ones((1, 3), np.int64))
        comm.allreduce(failed, op="max")
        ranks = [r for r in range(comm.size)
                 if failed.copy_to_host()[r, 0]]
        if error is not None:
            raise error
        if ranks:
            raise AssertionError(f"the case failed on rank(s) {ranks}")
        if skipped is not None:
            raise skipped
    run.__name__ = fn.__name__
    return case(run)


def main():
    """Runs every case; exits 1 when any failed."""
    import gpumem
    print(f"# backend {gpumem.backend}, {gpumem.device_count()} device(s), "
          f"seed {SEED}")
    passed = failed = skipped = 0
    only = os.environ.get("GM_TEST_ONLY")
    for fn in _cases:
        if only and fn.__name__ != only:
            continue
        try:
            fn()
        except Skip as why:
            skipped += 1
            print(f"SKIP {fn.__name__}: {why}")
        except Exception:
            failed += 1
            print(f"FAIL {fn.__name__} (GM_TEST_SEED={SEED})")
            traceback.print_exc()
        else:
            passed += 1
            print(f"ok   {fn.__name__}")
        sys.stdout.flush()
    print(f"{passed} passed, {failed} failed, {skipped} skipped")
    if only and not passed + failed + skipped:
        print(f"FAIL GM_TEST_ONLY={only}: no case of that name")
        sys.exit(1)
    sys.exit(1 if failed else 0)
