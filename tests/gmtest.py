"""gmtest -- the small harness of gpumem's Python tests.

Each test file defines functions decorated with @case and ends with
gmtest.main().  Cases run in order; a failure prints its traceback and
the random seed (set GM_TEST_SEED to replay it).  The last line is
"N passed, N failed"; the exit status is 1 when any case failed.  A file
calls skip_file() to exit 77 (a skip to ctest).
"""

import os
import random
import sys
import traceback

import numpy as np

SEED = int(os.environ.get("GM_TEST_SEED")
           or random.SystemRandom().randrange(2**32))
rng = np.random.default_rng(SEED)

GPUMEM = os.environ.get("GPUMEM", "gpumem")
GPUMEM_TEST = os.environ.get("GPUMEM_TEST", GPUMEM)
SRCDIR = os.environ.get("GM_SRCDIR", os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))

_cases = []

DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16",
          "uint32", "uint64", "float16", "float32", "float64", "complex64",
          "complex128"]


def case(fn):
    """Registers FN as a test case."""
    _cases.append(fn)
    return fn


def skip_file(reason):
    """Skips the whole file (exit 77: ctest counts it as skipped)."""
    print("skipped:", reason)
    sys.exit(77)


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


def main():
    """Runs every case; exits 1 when any failed."""
    import gpumem
    print(f"# backend {gpumem.backend}, {gpumem.device_count()} device(s), "
          f"seed {SEED}")
    passed = failed = 0
    only = os.environ.get("GM_TEST_ONLY")
    for fn in _cases:
        if only and fn.__name__ != only:
            continue
        try:
            fn()
        except Exception:
            failed += 1
            print(f"FAIL {fn.__name__} (GM_TEST_SEED={SEED})")
            traceback.print_exc()
        else:
            passed += 1
            print(f"ok   {fn.__name__}")
        sys.stdout.flush()
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)
