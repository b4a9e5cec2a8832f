"""fuzz_api.py -- randomized calls at the whole gpumem module.

Throws GM_FUZZ_CALLS (default 10000) random calls at every public
function, type and method of gpumem: wrong types, None, huge, negative
and non-integer sizes, freed arrays and views, mismatched dtypes and
devices, foreign and hostile objects (whose __index__, __array__ or
__cuda_array_interface__ run code, raise, or free the very arrays the
call is using), kernels with wrong arguments, stream and event misuse,
junk shapes, slices and memory limits.  Every call must return or raise
an ordinary exception:

    TypeError, ValueError, IndexError, gpumem.Error and its subclasses,
    MemoryError, BufferError, OverflowError, the hostile objects' own
    Hostile, and AttributeError only where gpumem documents it (a host
    backend array's __cuda_array_interface__, attributes that do not
    exist or cannot be set).

A call that crashes the process fails the test (ctest sees the signal);
run with GM_FUZZ_VERBOSE=1 to print each call before it is made.
Successful copies and kernel calls are checked against NumPy, a set of
canary arrays no call may write is checked as the run goes, and at the
end a correctness round trip runs and every device's allocated_bytes
and live allocation count must be back where they started.

Seeded and reproducible: the first line prints the seed; GM_FUZZ_SEED
replays it.  Bounded: sizes stay small, every device runs under a
memory limit of 64 MiB (set_memory_limit) so that huge requests are
refused by the limit instead of reaching malloc or the GPU, and junk
given to set_memory_limit is undone at once.  A longer run by hand:

    GM_FUZZ_CALLS=200000 tests/gm-test.sh host tests/fuzz/fuzz_api.py

What is not fuzzed, because gpumem must trust it as every consumer of
these protocols does: a __cuda_array_interface__ that lies (a pointer
to memory smaller than its shape says, or a stream handle that names no
stream).  The foreign objects made here tell the truth about memory or
point at nothing.
"""

import gc
import math
import os
import random
import sys
import threading
import time
import traceback
import warnings
import weakref

import numpy as np

import gpumem

SEED = int(os.environ.get("GM_FUZZ_SEED")
           or random.SystemRandom().randrange(2**32))
CALLS = int(os.environ.get("GM_FUZZ_CALLS") or 10000)
VERBOSE = os.environ.get("GM_FUZZ_VERBOSE", "") not in ("", "0")
LIMIT = 64 << 20            # bytes per device while fuzzing
MAX_ELEMS = 1 << 14         # plausible sizes stay below this
POOL = 48                   # device arrays kept at a time
CUDA = gpumem.backend == "cuda"
NDEV = gpumem.device_count()

rnd = random.Random(SEED)
nrng = np.random.default_rng(SEED)

warnings.simplefilter("ignore")


class Hostile(Exception):
    """Raised by the hostile objects below; gpumem must let it through."""


ALLOWED = (TypeError, ValueError, IndexError, gpumem.Error, MemoryError,
           BufferError, OverflowError, Hostile)

DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16",
          "uint32", "uint64", "float16", "float32", "float64", "complex64",
          "complex128"]


# ---------------------------------------------------------------------
# The state the calls draw on.

arrays = []        # DeviceArrays: owners, views, freed ones
streams = []       # gpumem.Stream
events = []        # gpumem.Event
no_free = []       # arrays wrapped by honest foreign objects: never freed
callbacks = []     # (what, fn) run by hostile objects at the worst time


def pick(seq):
    return seq[rnd.randrange(len(seq))] if len(seq) else None


def pick_or(seq, default):
    """pick (SEQ), or DEFAULT when SEQ is empty (never truth-tests an
    array: a 0-d DeviceArray has no len)."""
    return pick(seq) if len(seq) else default()


def chance(p):
    return rnd.random() < p


def live_arrays():
    out = []
    for a in arrays:
        if "freed" not in repr(a):
            out.append(a)
    return out


def owner(a):
    return a if a.base is None or not isinstance(a.base, gpumem.DeviceArray) \
        else a.base


def small_size():
    r = rnd.random()
    if r < 0.1:
        return 0
    if r < 0.5:
        return rnd.randrange(1, 16)
    if r < 0.9:
        return rnd.randrange(16, 1024)
    return rnd.randrange(1024, MAX_ELEMS)


def random_host(n, dtype):
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return nrng.integers(0, 2, n).astype(bool)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return nrng.integers(max(info.min, -100), min(info.max, 100) + 1, n,
                             dtype=np.int64).astype(dt)
    if dt.kind == "f":
        return nrng.standard_normal(n).astype(dt)
    return (nrng.standard_normal(n) + 1j * nrng.standard_normal(n)).astype(dt)


# ---------------------------------------------------------------------
# Hostile and foreign objects.

class BadIndex:
    """An int-like whose __index__ raises, returns junk, or runs a
    callback (which may free arrays) before answering."""

    def __init__(self, value, mode):
        self.value, self.mode = value, mode

    def __index__(self):
        if self.mode == "raise":
            raise Hostile("__index__")
        if self.mode == "junk":
            return "not an int"
        if self.mode == "callback":
            run_callback()
        return self.value

    def __float__(self):
        if self.mode == "raise":
            raise Hostile("__float__")
        if self.mode == "callback":
            run_callback()
        return float(self.value)

    def __repr__(self):
        return f"BadIndex({self.value}, {self.mode})"


class Shrinker:
    """An item whose __index__ empties the list it is in while that list
    is being read (a plain list: CPython reads subclasses through a
    copy)."""


    def __init__(self, owner_list, value):
        self.owner_list, self.value = owner_list, value

    def __index__(self):
        self.owner_list.clear()
        gc.collect()
        return self.value

    def __repr__(self):
        return f"Shrinker({self.value})"


def shrinking_shape(dims):
    lst = []
    lst.append(Shrinker(lst, dims[0]))
    lst.extend(dims[1:])
    return lst


class BadSeq:
    """A sequence whose length or items misbehave."""

    def __init__(self, mode, n=3):
        self.mode, self.n = mode, n

    def __len__(self):
        if self.mode == "len-raise":
            raise Hostile("__len__")
        if self.mode == "len-huge":
            return sys.maxsize
        return self.n

    def __getitem__(self, i):
        if self.mode == "item-raise":
            raise Hostile("__getitem__")
        if self.mode == "callback":
            run_callback()
        if not isinstance(i, int) or i >= self.n:
            raise IndexError(i)
        return i + 1

    def __iter__(self):
        for i in range(self.n):
            yield self[i]

    def __repr__(self):
        return f"BadSeq({self.mode})"


class ArrayLike:
    """An object NumPy converts through __array__, which may run a
    callback (freeing the destination of the copy in progress) first."""

    def __init__(self, data, mode):
        self.data, self.mode = data, mode

    def __array__(self, dtype=None, copy=None):
        if self.mode == "raise":
            raise Hostile("__array__")
        if self.mode == "callback":
            run_callback()
        if self.mode == "junk":
            return "junk"
        return self.data if dtype is None else self.data.astype(dtype)

    def __len__(self):
        return len(self.data)

    def __repr__(self):
        return f"ArrayLike({self.data.dtype}[{self.data.size}], {self.mode})"


class SneakyArray(np.ndarray):
    """An ndarray subclass whose attributes run a callback."""

    @property
    def flags(self):
        run_callback()
        return super().flags

    @property
    def size(self):
        run_callback()
        return super().size


class FakeCAI:
    """A __cuda_array_interface__ producer: junk, raising, or honest about
    memory it does own (an array of its own, never freed)."""

    def __init__(self, mode):
        self.mode = mode
        self.backing = None
        if mode == "honest" and CUDA:
            n = small_size()
            self.backing = gpumem.to_device(random_host(n, pick(DTYPES)))
            no_free.append(self.backing)

    @property
    def __cuda_array_interface__(self):
        m = self.mode
        if m == "raise":
            raise Hostile("__cuda_array_interface__")
        if m == "callback":
            run_callback()
            m = "honest"
        if m == "not-dict":
            return [1, 2, 3]
        if m == "honest" and self.backing is not None:
            cai = dict(self.backing.__cuda_array_interface__)
            if chance(0.3):
                cai["shape"] = (0,)     # a smaller view of it is honest too
            return cai
        junk = {"version": pick([0, 1, 2, 3, 99, "x"])}
        for key, choices in (
                ("shape", [(3,), (2, 2), (), (-1,), (2**62, 2**62), "abc",
                           None, [1, "a"], (1,) * 40, BadSeq("len-raise")]),
                ("typestr", ["<f4", ">f4", "|b1", "<c16", "<f4\x00", "", "<",
                             "<f99999999999999999999", "<V4", 7, None,
                             "\udcff"]),
                ("data", [(0, False), (0, True), (8, False), None, (1,),
                          ("x", False), (2**70, False), (-5, False),
                          (0, BadIndex(0, "raise"))]),
                ("strides", [None, (4,), (8, 4), "x", (2**70,), (None,)]),
                ("stream", [None, 1, 2, 0, "s", 2**70]),
                ("mask", [None, None, None, 1])):
            if chance(0.85):
                junk[key] = pick(choices)
        return junk

    def __repr__(self):
        return f"FakeCAI({self.mode})"


def run_callback():
    if callbacks:
        what, fn = callbacks.pop()
        fn()


def arm_free_callback(*using):
    """Arms a callback that frees, when a hostile object runs it, one of
    the DeviceArrays USING (those the call in progress uses), or now and
    then any live array."""
    live = live_arrays()
    using = [a for a in using if isinstance(a, gpumem.DeviceArray)]
    if using and chance(0.9):
        victim = pick(using)
    elif live:
        victim = pick(live)
    else:
        return
    if any(victim is k for k in no_free):
        return

    def free_it():
        victim.free()
        gc.collect()
    callbacks.append(("free", free_it))
    return victim


# ---------------------------------------------------------------------
# Value generators.

def junk_scalar():
    return pick([None, -1, -2**63, 2**63, 2**64, 2**200, 0, 1, 1.5,
                 float("nan"), float("inf"), -0.0, "3", b"3", True, False,
                 np.int64(5), np.uint64(2**64 - 1), np.float32(2.5),
                 complex(1, 1), [], (), {}, object(), Ellipsis,
                 BadIndex(3, "raise"), BadIndex(2**70, "ok"),
                 BadIndex(3, "junk"), BadIndex(-7, "ok"), np.array(3),
                 np.array([1, 2]), slice(1, 2), int, gpumem])


def size_value(hint=None):
    r = rnd.random()
    if r < 0.6:
        return small_size() if hint is None else rnd.randrange(0, hint + 2)
    if r < 0.7:
        return pick([2**31, 2**32 + 1, 2**62, 2**63 - 1, sys.maxsize])
    if r < 0.8:
        return BadIndex(small_size(), pick(["ok", "callback"]))
    return junk_scalar()


def shape_value():
    r = rnd.random()
    if r < 0.35:
        return small_size()
    if r < 0.6:
        nd = rnd.randrange(0, 4)
        return tuple(rnd.randrange(0, 12) for _ in range(nd))
    if r < 0.65:
        return [rnd.randrange(0, 12) for _ in range(rnd.randrange(0, 4))]
    if r < 0.72:
        return pick([(0, 2**62, 2**62), (2**62, 0, 2**62), (2**40, 2**40),
                     (2**31, 2**31), (1,) * 32, (1,) * 33, (1,) * 200,
                     (0,) * 32, (3, -1), (-1,), (2**63,), (2**64,)])
    if r < 0.77:
        return shrinking_shape([rnd.randrange(0, 8), rnd.randrange(0, 8)])
    if r < 0.82:
        return BadSeq(pick(["len-raise", "len-huge", "item-raise",
                            "callback", "ok"]))
    if r < 0.86:
        return (BadIndex(3, pick(["raise", "junk", "callback", "ok"])), 2)
    if r < 0.9:
        return np.array([2, 3])
    return junk_scalar()


def dtype_value():
    r = rnd.random()
    if r < 0.5:
        return pick(DTYPES)
    if r < 0.7:
        return np.dtype(pick(DTYPES))
    if r < 0.8:
        return pick([np.float32, np.int8, np.complex128, np.bool_, float,
                     int, bool, complex])
    return pick([">f4", "<f4", "=i2", "object", "U10", "S3", "V4", "float32\0",
                 "float", "f4", "datetime64[s]", np.dtype([("a", "f4")]),
                 np.dtype(">i8"), "complex256", "float128", 42, b"float32",
                 "\udcff", "", None, object, BadIndex(1, "raise")])


def device_value():
    r = rnd.random()
    if r < 0.6:
        return rnd.randrange(NDEV)
    if r < 0.75:
        return gpumem.Device(rnd.randrange(NDEV))
    if r < 0.85:
        return None
    return pick([-1, NDEV, 2**31, 2**70, -2**70, True, 1.0, "0",
                 np.int32(0), BadIndex(0, "ok")])


def stream_value(device=None):
    r = rnd.random()
    if r < 0.5:
        return None
    if r < 0.85 and streams:
        if device is not None:
            same = [s for s in streams if s.device.index == device]
            if same and chance(0.8):
                return pick(same)
        return pick(streams)
    return pick([0, 1, 2, "stream", pick(events) if events else None,
                 object(), gpumem.Device(0)])


def host_value(n=None, dtype=None):
    """A host object a copy may read or write."""
    if n is None:
        n = small_size()
    if dtype is None:
        dtype = pick(DTYPES)
    base = random_host(n, dtype)
    r = rnd.random()
    if r < 0.45:
        return base
    if r < 0.5:
        v = random_host(2 * n, dtype)[::2]          # not contiguous
        return v
    if r < 0.55:
        base.flags.writeable = False
        return base
    if r < 0.6 and n:
        return np.asfortranarray(random_host(n * 2, dtype).reshape(n, 2))
    if r < 0.65:
        return base.tolist()
    if r < 0.7:
        return bytearray(base.tobytes())
    if r < 0.73:
        return memoryview(base.tobytes())            # read-only
    if r < 0.76:
        return memoryview(bytearray(base.tobytes())).cast("B")
    if r < 0.79:
        return ArrayLike(base, pick(["ok", "raise", "callback", "junk"]))
    if r < 0.82:
        return base.view(SneakyArray)
    if r < 0.85:
        try:
            return base.astype(pick(["S4", "U3", "O", ">f4", "datetime64[s]"])
                               if n else "O")
        except Exception:       # NumPy cannot make some of these pairs
            return base.astype("O")
    if r < 0.88:
        return BadSeq(pick(["len-raise", "len-huge", "item-raise",
                            "callback", "ok"]))
    if r < 0.9:
        return np.array(1.5)
    if r < 0.92 and CUDA:
        return gpumem.pinned_empty(n, dtype)
    return junk_scalar()


def array_value(allow_freed=True):
    """A DeviceArray (or something pretending) for a device argument."""
    r = rnd.random()
    if r < 0.8 and arrays:
        a = pick(arrays)
        if not allow_freed and "freed" in repr(a):
            a = pick_or(live_arrays(), lambda: a)
        return a
    if r < 0.9:
        return FakeCAI(pick(["raise", "junk", "junk", "not-dict", "honest",
                             "callback"]))
    return host_value()


def any_value():
    r = rnd.random()
    if r < 0.3:
        return array_value()
    if r < 0.5:
        return host_value()
    if r < 0.6:
        return pick(streams) if streams else None
    if r < 0.65:
        return pick(events) if events else None
    if r < 0.7:
        return gpumem.Device(rnd.randrange(NDEV))
    return junk_scalar()


# ---------------------------------------------------------------------
# Oracles: successful calls must have done exactly what they say.

class Mismatch(AssertionError):
    pass


def as_bytes(x):
    return np.ascontiguousarray(x).tobytes()


def snapshot(a):
    """The flat host contents of DeviceArray A, or None."""
    try:
        if not isinstance(a, gpumem.DeviceArray) or "freed" in repr(a):
            return None
        return a.copy_to_host().reshape(-1)
    except ALLOWED:
        return None


def expect_equal(got, want, what):
    if got.shape != want.shape or as_bytes(got) != as_bytes(want):
        raise Mismatch(f"{what}: got {got[:8]!r}... want {want[:8]!r}...")


def host_flat(obj):
    """OBJ's current contents, flat, as NumPy sees them (for oracles)."""
    if isinstance(obj, np.ndarray):
        return np.asarray(obj).reshape(-1)
    return np.asarray(memoryview(obj)).reshape(-1)


def plain_host(obj):
    """Whether OBJ is host data whose conversion runs no code of ours."""
    return (isinstance(obj, (np.ndarray, bytearray, memoryview, list))
            and not isinstance(obj, SneakyArray))


def same_memory(a, b):
    return (isinstance(a, gpumem.DeviceArray)
            and isinstance(b, gpumem.DeviceArray) and owner(a) is owner(b))


# ---------------------------------------------------------------------
# The calls.  Each returns (description, thunk, oracle or None,
# attribute_error_allowed).

def op_alloc():
    fn = pick([gpumem.empty, gpumem.zeros, gpumem.alloc_gpu_memory])
    shape = size_value() if fn is gpumem.alloc_gpu_memory else shape_value()
    kwargs = {}
    if chance(0.7):
        kwargs["dtype"] = dtype_value()
    if chance(0.5):
        kwargs["device"] = device_value()
    args = (shape,) if chance(0.95) else (shape, dtype_value(),
                                          device_value(), 5)

    def check(result):
        assert isinstance(result, gpumem.DeviceArray)
        if fn is gpumem.zeros:
            host = snapshot(result)     # None where NumPy cannot hold it
            if host is not None and host.any():
                raise Mismatch("zeros() is not all zero")
        keep(result)
    return f"{fn.__name__}{args!r} {kwargs!r}", \
        lambda: fn(*args, **kwargs), check, False


def keep(a):
    if not isinstance(a, gpumem.DeviceArray):
        return
    arrays.append(a)
    while len(arrays) > POOL:
        arrays.pop(rnd.randrange(len(arrays)))


def op_to_device():
    host = host_value()
    kwargs = {}
    if chance(0.4):
        kwargs["device"] = device_value()
    if chance(0.3):
        kwargs["stream"] = stream_value()
    want = np.asarray(host) if plain_host(host) else None

    def check(result):
        keep(result)
        if want is not None and want.dtype.name in DTYPES:
            s = kwargs.get("stream")
            if isinstance(s, gpumem.Stream):
                s.synchronize()
            expect_equal(result.copy_to_host().reshape(-1),
                         np.ascontiguousarray(want).reshape(-1), "to_device")
    return f"to_device({host!r:.80}, {kwargs!r})", \
        lambda: gpumem.to_device(host, **kwargs), check, False


def op_asarray():
    obj = any_value()

    def check(result):
        assert isinstance(result, gpumem.DeviceArray)
        if not isinstance(obj, gpumem.DeviceArray):
            no_free.append(result)
    return f"asarray({obj!r:.80})", lambda: gpumem.asarray(obj), check, False


def copy_oracle(dst, src, n, kind):
    """Checks, after a successful copy of N elements from SRC to DST, that
    exactly those arrived and the rest of DST stayed as it was."""
    if same_memory(dst, src) or n is None or not isinstance(n, int):
        return None
    if isinstance(dst, gpumem.DeviceArray):
        before = snapshot(dst)
        if before is None:
            return None
        if isinstance(src, gpumem.DeviceArray):
            src_now = snapshot(src)
        elif plain_host(src):
            try:
                src_now = np.asarray(src).reshape(-1)
            except Exception:
                return None
        else:
            return None
        if src_now is None or src_now.dtype.name not in DTYPES \
                or before.dtype.name not in DTYPES:
            return None
        try:
            want = src_now[:n].astype(before.dtype)
        except Exception:
            return None

        def check(_):
            after = snapshot(dst)
            if after is None:
                return
            expect_equal(after[:n], want, f"{kind}: copied part")
            expect_equal(after[n:], before[n:], f"{kind}: the rest")
        return check
    if isinstance(src, gpumem.DeviceArray) and plain_host(dst) \
            and not isinstance(dst, list):
        src_now = snapshot(src)
        try:
            before = host_flat(dst).copy()
            want = src_now[:n].astype(before.dtype)
        except Exception:
            return None
        if before.dtype.name not in DTYPES:
            return None

        def check(_):
            after = host_flat(dst)
            expect_equal(after[:n], want, f"{kind}: copied part")
            expect_equal(after[n:], before[n:], f"{kind}: the rest")
        return check
    return None


def plausible_pair():
    """A destination and source that often fit each other."""
    live = live_arrays()
    if live and chance(0.7):
        a = pick(live)
        n = a.size
        dtype = a.dtype if chance(0.7) else pick(DTYPES)
        return a, host_value(n if chance(0.7) else small_size(), dtype)
    return array_value(), host_value()


def op_copy_to_gpu():
    dest, src = plausible_pair()
    size = (getattr(dest, "size", 0) if chance(0.3) and
            isinstance(dest, gpumem.DeviceArray) else size_value(
                getattr(dest, "size", None)))
    if chance(0.2):
        arm_free_callback(dest)
    args = [src, dest, size]
    oracle = copy_oracle(dest, src, size, "copy_to_gpu") \
        if not callbacks else None
    if chance(0.05):
        args = args[:rnd.randrange(3)] + ([junk_scalar()] if chance(0.5)
                                          else [])
        oracle = None
    return f"copy_to_gpu{tuple(args)!r:.200}", \
        lambda: gpumem.copy_to_gpu(*args), oracle, False


def op_copy_from_gpu():
    src, dst = plausible_pair()
    if isinstance(dst, np.ndarray) and chance(0.5):
        dst = np.zeros_like(dst)
    size = size_value(getattr(src, "size", None))
    if chance(0.2):
        arm_free_callback(src)
    oracle = copy_oracle(dst, src, size, "copy_from_gpu") \
        if not callbacks else None
    return f"copy_from_gpu({src!r:.60}, {dst!r:.60}, {size!r})", \
        lambda: gpumem.copy_from_gpu(src, dst, size), oracle, False


def op_copy():
    r = rnd.random()
    live = live_arrays()
    if r < 0.4 and len(live) >= 2:
        dst, src = pick(live), pick(live)
        if chance(0.5):
            cands = [a for a in live if a.dtype == dst.dtype]
            src = pick_or(cands, lambda: src)
    elif r < 0.7:
        dst, src = plausible_pair()
    elif r < 0.85:
        src, dst = plausible_pair()
    else:
        dst, src = any_value(), any_value()
    kwargs = {}
    if chance(0.5):
        kwargs["count"] = size_value(min(getattr(dst, "size", 8),
                                         getattr(src, "size", 8)))
    if chance(0.3):
        dev = getattr(dst, "device", None)
        kwargs["stream"] = stream_value(dev.index if isinstance(
            dev, gpumem.Device) else None)
    if chance(0.15):
        arm_free_callback(dst, src)
    n = kwargs.get("count")
    if n is None and isinstance(src, gpumem.DeviceArray):
        n = src.size
    elif n is None and plain_host(src):
        n = np.size(src)
    oracle = None
    if "stream" not in kwargs and not callbacks:
        oracle = copy_oracle(dst, src, n, "copy")
    return f"copy({dst!r:.60}, {src!r:.60}, {kwargs!r:.80})", \
        lambda: gpumem.copy(dst, src, **kwargs), oracle, False


def op_array_copy_methods():
    a = array_value()
    if chance(0.5):
        out = None
        if chance(0.6):
            out = host_value(getattr(a, "size", 3) if chance(0.7)
                             else small_size(),
                             getattr(a, "dtype", None) if chance(0.5)
                             else None)
        kwargs = {}
        if out is not None or chance(0.3):
            kwargs["out"] = out
        if chance(0.3):
            kwargs["stream"] = stream_value()
        if chance(0.1):
            arm_free_callback(a)
        fn = getattr(a, "copy_to_host", None)
        if fn is None:
            return "copy_to_host on a non-array", lambda: None, None, False
        return f"{a!r:.60}.copy_to_host({kwargs!r:.100})", \
            lambda: fn(**kwargs), None, False
    src = host_value(getattr(a, "size", 3) if chance(0.7) else small_size())
    kwargs = {"stream": stream_value()} if chance(0.3) else {}
    if chance(0.1):
        arm_free_callback(a)
    fn = getattr(a, "copy_from_host", None)
    if fn is None:
        return "copy_from_host on a non-array", lambda: None, None, False
    oracle = None
    if not kwargs and not callbacks and isinstance(a, gpumem.DeviceArray):
        oracle = copy_oracle(a, src, a.size, "copy_from_host")
    return f"{a!r:.60}.copy_from_host({src!r:.60}, {kwargs!r})", \
        lambda: fn(src, **kwargs), oracle, False


def slice_value(n):
    r = rnd.random()
    if r < 0.4:
        i = rnd.randrange(-n - 2, n + 3)
        j = rnd.randrange(-n - 2, n + 3)
        return slice(i, j)
    if r < 0.55:
        return rnd.randrange(-n - 2, n + 3)
    return pick([slice(None, None, 2), slice(None, None, -1),
                 slice(None, None, 0), slice(2**70, -2**70),
                 slice(-2**70, 2**70), slice("a", None), 2**70, -2**70,
                 np.int64(0), True, Ellipsis, None, (0, 0), [0], 1.5,
                 BadIndex(0, "raise"), BadIndex(0, "callback"),
                 slice(BadIndex(0, "raise"), None), "x", np.array(0)])


def op_view():
    a = array_value()
    n = len(a.shape) and a.shape[0] if isinstance(a, gpumem.DeviceArray) \
        else 4
    r = rnd.random()
    if not isinstance(a, gpumem.DeviceArray) and r < 0.85:
        # Not NumPy's indexing and reshape: junk crashes NumPy itself
        # (a list that empties itself while NumPy reads it as a shape).
        a = gpumem.empty(3)
    if r < 0.5:
        key = slice_value(n)
        if chance(0.1):
            arm_free_callback(a)

        def check(result):
            keep(result)
        return f"{a!r:.60}[{key!r}]", lambda: a[key], \
            check if isinstance(a, gpumem.DeviceArray) else None, False
    if r < 0.85:
        size = getattr(a, "size", 4)
        args = pick([(size,), ((size,),), (-1,), ((1, -1),), (1, size),
                     (-1, -1), (0,), (size, 1, 1), ((),), ()]) \
            if chance(0.7) else (shape_value(),)

        def check(result):
            keep(result)
        fn = getattr(a, "reshape", None)
        if fn is None:
            return "reshape on a non-array", lambda: None, None, False
        return f"{a!r:.60}.reshape{args!r:.80}", lambda: fn(*args), \
            check, False
    what = pick(["shape", "dtype", "size", "ndim", "itemsize", "nbytes",
                 "device", "ptr", "base", "__cuda_array_interface__",
                 "__dlpack_device__", "nonexistent", "len", "repr",
                 "set-shape", "set-junk", "weakref", "bool", "iter", "eq",
                 "hash", "dir", "reduce"])

    def attr():
        if what == "len":
            return len(a)
        if what == "repr":
            return repr(a)
        if what == "set-shape":
            a.shape = (1,)
        elif what == "set-junk":
            a.junk = 1
        elif what == "weakref":
            return weakref.ref(a)
        elif what == "bool":
            return bool(a)
        elif what == "iter":
            return list(zip(range(3), a))
        elif what == "eq":
            return a == a, a != 3, hash(a)
        elif what == "hash":
            return hash(a)
        elif what == "dir":
            return dir(a)
        elif what == "reduce":
            import pickle
            return pickle.dumps(a)
        else:
            return getattr(a, what)
    return f"{a!r:.60}: {what}", attr, None, True


def op_free():
    a = array_value()
    if any(a is k for k in no_free):
        return "free skipped", lambda: None, None, False
    r = rnd.random()
    if r < 0.6:
        fn = getattr(a, "free", None)
        if fn is None:
            return "free on a non-array", lambda: None, None, False
        return f"{a!r:.60}.free()", fn, None, False

    def with_block():
        with a:
            if chance(0.5):
                raise Hostile("inside with")
    return f"with {a!r:.60}", with_block, None, True


def op_use_after_free():
    """A freed array (or a view of one) must refuse every use."""
    freed = [a for a in arrays if "freed" in repr(a)]
    if not freed:
        return "nothing freed yet", lambda: None, None, False
    a = pick(freed)
    uses = [lambda: a.copy_to_host(),
            lambda: a.copy_from_host(np.zeros(a.size, a.dtype)),
            lambda: a[0:1],
            lambda: a.reshape(-1),
            lambda: a.ptr,
            lambda: gpumem.copy_to_gpu(np.zeros(a.size, a.dtype), a, a.size),
            lambda: gpumem.copy_from_gpu(a, np.zeros(a.size, a.dtype),
                                         a.size),
            lambda: gpumem.copy(a, np.zeros(a.size, a.dtype)),
            lambda: gpumem.kernels.saxpy(0, 1.0, a, a)]
    use = pick(uses)

    def call():
        try:
            use()
        except ValueError:
            return
        except TypeError:
            if a.dtype != np.float32:
                return          # saxpy's dtype check may come first
            raise
        raise Mismatch(f"a freed array was used without ValueError: {a!r}")
    return f"use after free of {a!r:.60}", call, None, False


# The product's kernels: the test program's fault and spin would end the
# CUDA context or take seconds.
KERNELS = [name for name, _ in gpumem.kernels.list()
           if name not in ("fault", "spin")]


def kernel_args(name):
    """Mostly plausible arguments for kernel NAME, some of them junk."""
    fn = getattr(gpumem.kernels, name)
    live = [a for a in live_arrays() if a.ndim >= 1]
    floats = [a for a in live if a.dtype == np.float32]
    if name == "saxpy":
        x = pick_or(floats, array_value)
        y = pick_or(floats, array_value)
        n = min(getattr(x, "size", 0), getattr(y, "size", 0))
        args = [rnd.randrange(0, n + 2) if chance(0.8) else size_value(),
                rnd.uniform(-3, 3) if chance(0.8) else junk_scalar(), x, y]
    elif name in ("algo", "algo_seed"):
        images = pick_or(floats, array_value)
        args = [images, pick_or(floats, array_value),
                pick_or(floats, array_value),
                rnd.randrange(0, getattr(images, "size", 0) + 2)
                if chance(0.8) else size_value()]
    else:
        args = [array_value() if chance(0.5) else size_value()
                for _ in range(rnd.randrange(0, 5))]
    for i in range(len(args)):
        if chance(0.05):
            args[i] = any_value()
    if chance(0.05):
        args = args[:rnd.randrange(len(args) + 1)] + \
            ([any_value()] if chance(0.5) else [])
    kwargs = {}
    if chance(0.2):
        kwargs["grid"] = pick([1, (1,), (2, 2), 0, -1, 2**31, (1, 1, 1, 1),
                               (), "x", 1.0, [2], None, BadSeq("callback"),
                               (2**40,)])
        kwargs["block"] = pick([1, 32, 1024, 2048, (32, 32), (1, 1, 65),
                                0, None, "x", (1.5,)])
    if chance(0.2):
        kwargs["stream"] = stream_value()
    if chance(0.05):
        kwargs[pick(["grid", "nonexistent", "x"])] = 1
    if chance(0.15):
        arm_free_callback(*args)
        i = rnd.randrange(len(args)) if args else None
        if i is not None and not isinstance(args[i], gpumem.DeviceArray):
            args[i] = BadIndex(args[i] if isinstance(args[i], int) else 1,
                               "callback")
    return fn, args, kwargs


def op_kernel():
    name = pick(KERNELS)
    fn, args, kwargs = kernel_args(name)
    oracle = None
    if name == "saxpy" and len(args) == 4 and not kwargs and not callbacks \
            and all(isinstance(v, gpumem.DeviceArray) for v in args[2:]) \
            and isinstance(args[0], int) and isinstance(args[1], float) \
            and not same_memory(args[2], args[3]):
        n, alpha, x, y = args
        xs, ys = snapshot(x), snapshot(y)
        if xs is not None and ys is not None and xs.dtype == np.float32 \
                and ys.dtype == np.float32 and 0 <= n <= min(xs.size, ys.size):
            want = ys.copy()
            want[:n] = np.float32(alpha) * xs[:n] + ys[:n]

            def oracle(_):
                got = snapshot(y)
                if got is None or not np.allclose(got, want, rtol=1e-5,
                                                  atol=1e-5,
                                                  equal_nan=True):
                    raise Mismatch("saxpy result differs from NumPy")
    return f"kernels.{name}({args!r:.160}, {kwargs!r:.80})", \
        lambda: fn(*args, **kwargs), oracle, False


def op_stream_event():
    r = rnd.random()
    if r < 0.15:
        args = () if chance(0.5) else (device_value(),)

        def check(s):
            streams.append(s)
            if len(streams) > 6:
                streams.pop(0)
        return f"Stream{args!r}", lambda: gpumem.Stream(*args), check, False
    if r < 0.3:
        args = () if chance(0.5) else (device_value(),)

        def check(e):
            events.append(e)
            if len(events) > 6:
                events.pop(0)
        return f"Event{args!r}", lambda: gpumem.Event(*args), check, False
    if r < 0.55 and streams:
        s = pick(streams)
        what = pick(["synchronize", "query", "handle", "device", "repr",
                     "junk"])

        def call():
            if what == "synchronize":
                return s.synchronize()
            if what == "query":
                return s.query()
            if what == "repr":
                return repr(s)
            if what == "junk":
                return s.synchronize(1)
            return getattr(s, what)
        return f"stream.{what}", call, None, True
    if events:
        e = pick(events)
        what = pick(["record", "record-stream", "synchronize", "query",
                     "elapsed", "elapsed-junk", "record-junk"])

        def call():
            if what == "record":
                return e.record()
            if what == "record-stream":
                return e.record(stream_value())
            if what == "record-junk":
                return e.record(junk_scalar())
            if what == "synchronize":
                return e.synchronize()
            if what == "query":
                return e.query()
            if what == "elapsed":
                return e.elapsed_ms(pick(events))
            return e.elapsed_ms(junk_scalar())
        return f"event.{what}", call, None, False
    return "no stream yet", lambda: None, None, False


def op_device():
    what = pick(["Device", "mem_info", "synchronize", "with", "props",
                 "current", "count", "synchronize-module"])
    dev = device_value()

    def call():
        if what == "Device":
            return gpumem.Device(dev)
        if what == "current":
            return gpumem.current_device()
        if what == "count":
            return gpumem.device_count()
        if what == "synchronize-module":
            return gpumem.synchronize(dev)
        d = gpumem.Device(dev if isinstance(dev, int) and
                          not isinstance(dev, bool) and 0 <= dev < NDEV
                          else 0)
        if what == "mem_info":
            return d.mem_info()
        if what == "synchronize":
            return d.synchronize()
        if what == "props":
            return (d.name, d.total_memory, d.compute_capability, repr(d),
                    d.index)
        with d:
            if chance(0.5):
                raise Hostile("inside with Device")
            return gpumem.current_device()
    return f"device {what} {dev!r}", call, None, False


def op_memory():
    what = pick(["stats", "limit", "empty_cache", "pinned"])
    if what == "stats":
        dev = device_value() if chance(0.5) else None
        return f"memory_stats({dev!r})", \
            lambda: gpumem.memory_stats(dev), None, False
    if what == "empty_cache":
        dev = device_value() if chance(0.5) else None
        return f"empty_cache({dev!r})", \
            lambda: gpumem.empty_cache(dev), None, False
    if what == "pinned":
        shape = shape_value()
        dtype = dtype_value() if chance(0.5) else None
        if not pinned_shape_ok(shape, dtype):
            shape = small_size()

        def check(result):
            assert isinstance(result, np.ndarray)
            result[...] = 0
        return f"pinned_empty({shape!r:.80}, {dtype!r})", \
            lambda: gpumem.pinned_empty(shape, dtype), check, False
    value = pick([None, -1, 0, 1, 2**63, 2**64, 1.5, "1", LIMIT // 2,
                  BadIndex(5, "raise"), BadIndex(LIMIT, "ok"), np.int64(3)])
    dev = device_value() if chance(0.5) else None

    def call():
        try:
            gpumem.set_memory_limit(value, dev)
        finally:
            for d in range(NDEV):
                gpumem.set_memory_limit(LIMIT, d)
    return f"set_memory_limit({value!r}, {dev!r})", call, None, False


def pinned_shape_ok(shape, dtype):
    """Pinned memory is not under the limit: only shapes that are small,
    or so large that no machine can pin them, may be asked for."""
    try:
        dims = (shape,) if isinstance(shape, int) else tuple(shape)
        if not all(isinstance(d, int) for d in dims):
            return True
        itemsize = np.dtype(dtype or "float32").itemsize
    except Exception:
        return True
    nbytes = math.prod(dims) * itemsize
    return nbytes <= (1 << 20) or nbytes >= (1 << 62)


def op_module_misc():
    what = pick(["list", "doc", "DeviceArray()", "Stream.__new__",
                 "getattr-kernel", "dlpack", "from_dlpack", "subclass",
                 "copy.copy", "kernels-junk"])

    def call():
        if what == "list":
            return gpumem.kernels.list()
        if what == "doc":
            return [getattr(gpumem.kernels, n).__doc__ for n in KERNELS]
        if what == "DeviceArray()":
            return gpumem.DeviceArray()
        if what == "Stream.__new__":
            return object.__new__(gpumem.Stream)
        if what == "getattr-kernel":
            return getattr(gpumem.kernels, "no_such_kernel")
        if what == "kernels-junk":
            return gpumem.kernels.list(1)
        if what == "subclass":
            class Sub(gpumem.DeviceArray):
                pass
            return Sub
        if what == "copy.copy":
            import copy
            return copy.copy(array_value())
        a = array_value()
        if what == "dlpack":
            if not isinstance(a, gpumem.DeviceArray):
                return None
            fn = getattr(a, "__dlpack__", None)
            if fn is None:
                return None
            kwargs = {}
            if chance(0.5):
                kwargs[pick(["stream", "max_version", "dl_device",
                             "copy"])] = junk_scalar()
            return fn(**kwargs)
        fn = getattr(gpumem, "from_dlpack", None)
        if fn is None:
            return None
        return fn(a if chance(0.5) else host_value())
    return f"misc {what}", call, None, True


def op_gc():
    r = rnd.random()
    if r < 0.5 and arrays:
        arrays.pop(rnd.randrange(len(arrays)))
    elif r < 0.6:
        del arrays[:len(arrays) // 2]
    return "gc", gc.collect, None, False


def op_thread():
    """Another op, run in a thread of its own (thread-local state: the
    current device, the last error)."""
    desc, thunk, oracle, attr_ok = pick(OPS_PLAIN)()
    box = {}

    def body():
        try:
            box["result"] = thunk()
        except BaseException as exc:
            box["exc"] = exc

    def call():
        t = threading.Thread(target=body)
        t.start()
        t.join()
        if "exc" in box:
            raise box["exc"]
        return box.get("result")
    return f"in a thread: {desc}", call, oracle, attr_ok


def basic_key(shape):
    """A random basic index of SHAPE (ints, slices with steps, ...)."""
    key = []
    for n in shape:
        r = rnd.random()
        if r < 0.3 and n > 0:
            key.append(rnd.randrange(-n, n))
        elif r < 0.9:
            key.append(slice(rnd.randrange(-n - 1, n + 2),
                             rnd.randrange(-n - 1, n + 2),
                             pick([1, 2, 3, -1, -2])))
        else:
            key.append(Ellipsis)
            break
    return tuple(key)


def op_assign():
    """a[key] = value, a[key].fill(value), a[key].copy(): a NumPy oracle
    where the key is basic and the value plain."""
    a = array_value()
    shape = getattr(a, "shape", (3,))
    plain = isinstance(a, gpumem.DeviceArray) and chance(0.7)
    key = basic_key(shape) if plain else \
        slice_value(len(shape) and shape[0] if isinstance(shape, tuple)
                    else 3)
    r = rnd.random()
    if r < 0.3:
        value = pick([0, 1, -1, 2.5, True, 1j, 300, -2**70, np.float32(7),
                      np.int8(-3)])
    elif r < 0.6:
        value = host_value()
    elif r < 0.8:
        value = array_value()
    else:
        value = junk_scalar()
    how = pick(["setitem", "setitem", "fill", "copy"])
    if chance(0.1):
        arm_free_callback(a)
    oracle = None
    if plain and not callbacks and how != "copy" and "freed" not in repr(a):
        before = snapshot(a)
        simple = isinstance(value, (int, float, complex, np.generic)) or (
            plain_host(value) and isinstance(value, np.ndarray)
            and value.dtype.name in DTYPES)
        if before is not None and simple:
            want = before.reshape(shape).copy()
            try:
                with np.errstate(all="ignore"), warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    if how == "fill":
                        want[key] = np.array(value, want.dtype)
                    else:
                        want[key] = value
            except Exception:
                want = None
            if want is not None:
                def oracle(_):
                    after = snapshot(a)
                    if after is not None:
                        expect_equal(after, want.reshape(-1),
                                     f"{how} of {key!r:.60}")

    def call():
        if how == "setitem":
            a[key] = value
        elif how == "fill":
            a[key].fill(value)
        else:
            keep(a[key].copy())
    return f"{a!r:.60}[{key!r:.60}] {how} {value!r:.60}", call, oracle, \
        not isinstance(a, gpumem.DeviceArray)


OPS_PLAIN = [op_alloc, op_alloc, op_to_device, op_asarray,
             op_copy_to_gpu, op_copy_to_gpu, op_copy_from_gpu,
             op_copy_from_gpu, op_copy, op_copy, op_copy,
             op_array_copy_methods, op_array_copy_methods, op_view, op_view,
             op_view, op_free, op_use_after_free, op_kernel, op_kernel,
             op_kernel, op_stream_event, op_stream_event, op_device,
             op_memory, op_module_misc, op_gc, op_assign, op_assign]
OPS = OPS_PLAIN + [op_thread]


# ---------------------------------------------------------------------
# Canaries: memory no call may write.

canaries = []


def make_canaries():
    for d in range(NDEV):
        for dtype in ("float32", "uint8", "complex128"):
            host = random_host(257, dtype)
            canaries.append((gpumem.to_device(host, device=d), host))


def check_canaries(where):
    for dev_array, host in canaries:
        got = dev_array.copy_to_host()
        if as_bytes(got) != as_bytes(host):
            raise Mismatch(f"canary on device {dev_array.device.index} "
                           f"({host.dtype}) changed {where}")


# ---------------------------------------------------------------------

def describe_exc(exc):
    return f"{type(exc).__module__}.{type(exc).__qualname__}: {exc}"


def one_call(i, failures, outcomes):
    """Makes call I; records its outcome in OUTCOMES, what is wrong with
    it in FAILURES.  A function of its own, so that nothing the call made
    outlives it in a local variable."""
    op = pick(OPS)
    callbacks.clear()
    try:
        desc, thunk, oracle, attr_ok = op()
    except ALLOWED as exc:
        # Making the arguments called gpumem too (snapshots, honest
        # foreign objects), and that may refuse: an outcome like others.
        outcomes["refused while preparing"] = \
            outcomes.get("refused while preparing", 0) + 1
        return
    except Exception as exc:
        failures.append((i, f"preparing {op.__name__}", exc,
                         traceback.format_exc()))
        return
    if VERBOSE:
        print(f"[{i}] {desc}", flush=True)
    try:
        result = thunk()
    except Mismatch as exc:
        failures.append((i, desc, exc, traceback.format_exc()))
        return
    except (AttributeError, KeyError) as exc:
        # What a foreign object (a dict, say) answers to an attribute or
        # an index it lacks: allowed there, a failure for gpumem's own.
        # (Slices are hashable from Python 3.12: {}[1:2] is a KeyError.)
        name = type(exc).__name__
        outcomes[name] = outcomes.get(name, 0) + 1
        if not attr_ok:
            failures.append((i, desc, exc, traceback.format_exc()))
        return
    except ALLOWED as exc:
        name = type(exc).__name__
        outcomes[name] = outcomes.get(name, 0) + 1
        return
    except BaseException as exc:
        failures.append((i, desc, exc, traceback.format_exc()))
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        return
    outcomes["ok"] = outcomes.get("ok", 0) + 1
    if oracle is not None:
        try:
            oracle(result)
        except BaseException as exc:
            failures.append((i, desc + " [oracle]", exc,
                             traceback.format_exc()))


def run():
    print(f"# fuzz_api: backend {gpumem.backend}, {NDEV} device(s), seed "
          f"{SEED} (GM_FUZZ_SEED), {CALLS} calls (GM_FUZZ_CALLS)",
          flush=True)
    gc.collect()
    start = [gpumem.memory_stats(d) for d in range(NDEV)]
    for d in range(NDEV):
        gpumem.set_memory_limit(LIMIT, d)
    make_canaries()

    failures = []
    outcomes = {}
    t0 = time.monotonic()
    for i in range(CALLS):
        one_call(i, failures, outcomes)
        if i % 250 == 249:
            try:
                check_canaries(f"by call {i} or before")
            except Mismatch as exc:
                failures.append((i, "canaries", exc, traceback.format_exc()))
                canaries.clear()
    elapsed = time.monotonic() - t0
    summary = ", ".join(f"{k} {v}" for k, v in sorted(outcomes.items()))
    print(f"# {CALLS} calls in {elapsed:.1f} s: {summary}", flush=True)

    # A correctness round trip after all that.
    for d in range(NDEV):
        for dtype in DTYPES:
            host = random_host(1000, dtype)
            a = gpumem.to_device(host, device=d)
            if as_bytes(a.copy_to_host()) != as_bytes(host):
                failures.append((CALLS, f"round trip {dtype} on {d}",
                                 Mismatch("round trip differs"), ""))
        x = gpumem.to_device(np.arange(100, dtype=np.float32), device=d)
        y = gpumem.zeros(100, device=d)
        gpumem.kernels.saxpy(100, 2.0, x, y)
        if not np.array_equal(y.copy_to_host(),
                              2 * np.arange(100, dtype=np.float32)):
            failures.append((CALLS, f"saxpy on {d}",
                             Mismatch("saxpy differs"), ""))
    try:
        check_canaries("at the end")
    except Mismatch as exc:
        failures.append((CALLS, "canaries", exc, ""))

    # Everything dropped: the books must balance.
    for stream in streams:
        stream.synchronize()
    stream = None
    gpumem.synchronize()
    del a, x, y, stream
    arrays.clear()
    no_free.clear()
    canaries.clear()
    callbacks.clear()
    streams.clear()
    events.clear()
    gc.collect()
    alive = [o for o in gc.get_objects()
             if isinstance(o, (gpumem.DeviceArray, gpumem.Stream,
                               gpumem.Event))]
    if alive:
        failures.append((CALLS, "objects left", Mismatch(
            f"{len(alive)} gpumem objects outlive every reference the "
            f"fuzzer held: {alive[:5]!r}"), ""))
    del alive
    for d in range(NDEV):
        gpumem.set_memory_limit(None, d)
        now = gpumem.memory_stats(d)
        for key in ("allocated_bytes", "allocations"):
            if now[key] != start[d][key]:
                failures.append((CALLS, f"memory_stats({d})",
                                 Mismatch(f"{key} is {now[key]}, was "
                                          f"{start[d][key]} before the run"),
                                 ""))

    for i, desc, exc, tb in failures[:20]:
        print(f"FAIL call {i}: {desc}\n  {describe_exc(exc)}\n{tb}")
    if failures:
        print(f"{len(failures)} failures (GM_FUZZ_SEED={SEED})")
        sys.exit(1)
    print("fuzz_api: ok")


run()
