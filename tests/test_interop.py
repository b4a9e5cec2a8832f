"""Zero-copy interop: DLPack and the CUDA Array Interface (py-dlpack*.c,
py-cai.c, py-asarray.c), with NumPy on the host backend and CuPy, PyTorch, Numba and
JAX on the cuda backend.

Cases for a library that is not installed, or that need the other
backend, report SKIP with the reason; on the cuda backend the file is
skipped (77) when none of the libraries is.
"""

import ctypes
import gc
import os
import subprocess
import threading
import time
import weakref

# JAX would otherwise take most of the GPU's memory when it starts.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import numpy as np

import gmtest
from gmtest import case, raises, random_array, DTYPES

import gpumem

CUDA = gpumem.backend == "cuda"
HOST = not CUDA

# DLPack numbers.
KDLCPU, KDLCUDA, KDLOPENCL = 1, 2, 4
KDLINT, KDLUINT, KDLFLOAT, KDLBFLOAT, KDLCOMPLEX, KDLBOOL = 0, 1, 2, 4, 5, 6
READ_ONLY, IS_COPIED = 1, 2
DL_CODE = {"b": KDLBOOL, "i": KDLINT, "u": KDLUINT, "f": KDLFLOAT,
           "c": KDLCOMPLEX}


# The DLPack structures, as ctypes sees them (the ABI of the spec).
class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8),
                ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice),
                ("ndim", ctypes.c_int32), ("dtype", DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p),
                ("deleter", DELETER)]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [("version", DLPackVersion), ("manager_ctx", ctypes.c_void_p),
                ("deleter", DELETER), ("flags", ctypes.c_uint64),
                ("dl_tensor", DLTensor)]


_api = ctypes.pythonapi
_api.PyCapsule_IsValid.restype = ctypes.c_int
_api.PyCapsule_IsValid.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_GetPointer.restype = ctypes.c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_SetName.restype = ctypes.c_int
_api.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_New.restype = ctypes.py_object
_api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p,
                               ctypes.c_void_p]

# Capsules keep a pointer to their name: these must live as long as they.
LEGACY, VERSIONED = b"dltensor", b"dltensor_versioned"
USED_LEGACY, USED_VERSIONED = b"used_dltensor", b"used_dltensor_versioned"


def capsule_is(capsule, name):
    return _api.PyCapsule_IsValid(capsule, name) == 1


def managed(capsule):
    """The DLManagedTensor(Versioned) inside an unconsumed CAPSULE."""
    if capsule_is(capsule, VERSIONED):
        return DLManagedTensorVersioned.from_address(
            _api.PyCapsule_GetPointer(capsule, VERSIONED))
    assert capsule_is(capsule, LEGACY), capsule
    return DLManagedTensor.from_address(
        _api.PyCapsule_GetPointer(capsule, LEGACY))


def allocated(device=None):
    return gpumem.memory_stats(device)["allocated_bytes"]


def reserved(device=None):
    return gpumem.memory_stats(device)["reserved_bytes"]


def strided_import(to_gpumem, obj, expect):
    """TO_GPUMEM (asarray, from_dlpack) of the strided device array OBJ
    is a strided view whose elements are EXPECT's; kernels refuse it."""
    g = to_gpumem(obj)
    assert not g.is_contiguous and g.shape == expect.shape, (g, expect)
    assert np.array_equal(g.copy_to_host(), expect)
    raises(ValueError, gpumem.kernels.saxpy, g.size, 1.0, g, g,
           match="contiguous")


def settle(predicate, seconds=5.0):
    """Collects garbage until PREDICATE () holds (some consumers let go
    from another thread, a little later); returns its last value."""
    deadline = time.monotonic() + seconds
    while True:
        gc.collect()
        if predicate():
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)


def our_device():
    return (KDLCUDA, 0) if CUDA else (KDLCPU, 0)


class FakeProducer:
    """A DLPack producer made with ctypes, for the consumer's checks.  Its
    memory is MEMORY's (a DeviceArray, kept alive here), described as
    SHAPE of dtype DTYPE; every field can be set wrong on purpose."""

    def __init__(self, memory, shape=None, dtype=None, *, versioned=True,
                 device=None, code=None, bits=None, lanes=1, strides=None,
                 byte_offset=0, major=1, flags=0, data=None, max_version_kw=True):
        self.memory = memory
        dt = np.dtype(dtype or memory.dtype)
        self.shape = tuple(memory.shape if shape is None else shape)
        self.versioned = versioned
        self.device = device or (our_device()[0], memory.device.index if CUDA
                                 else 0)
        self.code = DL_CODE[dt.kind] if code is None else code
        self.bits = dt.itemsize * 8 if bits is None else bits
        self.lanes = lanes
        self.strides = strides
        self.byte_offset = byte_offset
        self.major = major
        self.flags = flags
        self.data = memory.ptr if data is None else data
        self.deleted = 0
        self.capsules = []
        if not max_version_kw:
            self.__dlpack__ = self._old_dlpack

    def _delete(self, address):
        self.deleted += 1

    def capsule(self):
        n = len(self.shape)
        shape = (ctypes.c_int64 * max(n, 1))(*self.shape)
        strides = None
        if self.strides is not None:
            strides = (ctypes.c_int64 * max(n, 1))(*self.strides)
        deleter = DELETER(self._delete)
        tensor = DLTensor(self.data, DLDevice(*self.device), n,
                          DLDataType(self.code, self.bits, self.lanes),
                          ctypes.cast(shape, ctypes.POINTER(ctypes.c_int64)),
                          ctypes.cast(strides, ctypes.POINTER(ctypes.c_int64))
                          if strides is not None else None, self.byte_offset)
        if self.versioned:
            struct = DLManagedTensorVersioned(
                DLPackVersion(self.major, 0), None, deleter, self.flags, tensor)
            name = VERSIONED
        else:
            struct = DLManagedTensor(tensor, None, deleter)
            name = LEGACY
        self.capsules.append((shape, strides, deleter, struct))
        return _api.PyCapsule_New(ctypes.addressof(struct), name, None)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None,
                   copy=None):
        self.stream = stream
        self.max_version = max_version
        return self.capsule()

    def _old_dlpack(self, stream=None):
        self.stream = stream
        self.max_version = "not passed"
        return self.capsule()

    def __dlpack_device__(self):
        return self.device


# Backend-independent cases (DLPack between gpumem and itself, ctypes).

@case
def dlpack_device_names_the_backend():
    for dev in range(gpumem.device_count()):
        a = gpumem.empty(3, device=dev)
        expect = (KDLCUDA, dev) if CUDA else (KDLCPU, 0)
        assert a.__dlpack_device__() == expect, (a.__dlpack_device__(), expect)
        assert a[1:].__dlpack_device__() == expect


@case
def legacy_and_versioned_capsules():
    a = gpumem.to_device(np.arange(12, dtype=np.float32).reshape(3, 4))
    for kwargs, name in (({}, LEGACY), ({"max_version": None}, LEGACY),
                         ({"max_version": (0, 8)}, LEGACY),
                         ({"max_version": (1, 0)}, VERSIONED),
                         ({"max_version": (1, 3)}, VERSIONED),
                         ({"max_version": (2, 0)}, VERSIONED)):
        capsule = a.__dlpack__(**kwargs)
        assert capsule_is(capsule, name), (kwargs, capsule)
        m = managed(capsule)
        t = m.dl_tensor
        if name == VERSIONED:
            assert (m.version.major, m.version.minor) == (1, 0)
            assert m.flags == 0
        assert t.data == a.ptr and t.byte_offset == 0
        assert (t.device.device_type, t.device.device_id) == our_device()
        assert t.ndim == 2 and [t.shape[0], t.shape[1]] == [3, 4]
        assert [t.strides[0], t.strides[1]] == [4, 1]
        assert (t.dtype.code, t.dtype.bits, t.dtype.lanes) == (KDLFLOAT, 32, 1)
        b = gpumem.from_dlpack(capsule)
        used = USED_VERSIONED if name == VERSIONED else USED_LEGACY
        assert capsule_is(capsule, used) and not capsule_is(capsule, name)
        assert b.ptr == a.ptr and b.shape == (3, 4) and b.dtype == np.float32


@case
def every_dtype_through_dlpack():
    for dtype in DTYPES:
        host = random_array(24, dtype).reshape(2, 3, 4)
        a = gpumem.to_device(host)
        capsule = a.__dlpack__(max_version=(1, 0))
        t = managed(capsule).dl_tensor
        dt = np.dtype(dtype)
        assert (t.dtype.code, t.dtype.bits, t.dtype.lanes) == \
            (DL_CODE[dt.kind], dt.itemsize * 8, 1), dtype
        b = gpumem.from_dlpack(capsule)
        assert b.dtype == dt and b.shape == (2, 3, 4) and b.ptr == a.ptr
        assert np.array_equal(b.copy_to_host(), host), dtype


@case
def writes_are_seen_both_ways():
    host = random_array(100, "float64")
    a = gpumem.to_device(host)
    b = gpumem.from_dlpack(a)
    assert b.ptr == a.ptr and b.base is not None
    new = random_array(100, "float64")
    a.copy_from_host(new)
    assert np.array_equal(b.copy_to_host(), new)
    gpumem.kernels.saxpy(10, 1.0, gpumem.to_device(np.ones(10, np.float32)),
                         gpumem.from_dlpack(gpumem.zeros(10)))
    x = gpumem.to_device(np.ones(10, np.float32))
    y = gpumem.zeros(10)
    gpumem.kernels.saxpy(10, 2.0, x, gpumem.from_dlpack(y))
    assert np.array_equal(y.copy_to_host(), np.full(10, 2, np.float32))


@case
def capsule_consumed_twice_is_refused():
    a = gpumem.to_device(np.arange(5, dtype=np.int32))
    for kwargs in ({}, {"max_version": (1, 0)}):
        capsule = a.__dlpack__(**kwargs)
        b = gpumem.from_dlpack(capsule)
        raises(BufferError, gpumem.from_dlpack, capsule, match="consumed")
        assert np.array_equal(b.copy_to_host(), np.arange(5, dtype=np.int32))
    # A producer that hands out one capsule twice.
    capsule = a.__dlpack__(max_version=(1, 0))

    class Same:
        def __dlpack__(self, **kwargs):
            return capsule

        def __dlpack_device__(self):
            return a.__dlpack_device__()

    gpumem.from_dlpack(Same())
    raises(BufferError, gpumem.from_dlpack, Same(), match="consumed")
    raises(TypeError, gpumem.from_dlpack, 3)
    raises(TypeError, gpumem.from_dlpack, [1, 2])
    other = _api.PyCapsule_New(a.ptr or 1, b"something_else", None)
    raises(TypeError, gpumem.from_dlpack, other, match="not a DLPack")


@case
def zero_size_arrays():
    for shape in [(0,), (3, 0, 2), (0, 4)]:
        a = gpumem.empty(shape, "float32")
        for kwargs in ({}, {"max_version": (1, 0)}):
            b = gpumem.from_dlpack(a.__dlpack__(**kwargs))
            assert b.shape == shape and b.size == 0
            assert b.copy_to_host().shape == shape
    a = gpumem.to_device(np.arange(10, dtype=np.float32))
    empty_view = a[10:]
    b = gpumem.from_dlpack(empty_view)
    assert b.shape == (0,)
    scalar = gpumem.to_device(np.float64(2.5))
    b = gpumem.from_dlpack(scalar)
    assert b.shape == () and b.copy_to_host() == 2.5


@case
def views_with_offsets():
    host = np.arange(40, dtype=np.float32).reshape(4, 10)
    a = gpumem.to_device(host)
    v = a[1:3]
    capsule = v.__dlpack__(max_version=(1, 0))
    t = managed(capsule).dl_tensor
    assert t.data + t.byte_offset == a.ptr + 10 * 4
    b = gpumem.from_dlpack(capsule)
    assert b.ptr == v.ptr == a.ptr + 40 and b.shape == (2, 10)
    assert np.array_equal(b.copy_to_host(), host[1:3])
    b.copy_from_host(np.full((2, 10), -1, np.float32))
    host[1:3] = -1
    assert np.array_equal(a.copy_to_host(), host)
    row = gpumem.from_dlpack(a[3])
    assert row.ptr == a.ptr + 120 and np.array_equal(row.copy_to_host(),
                                                     host[3])
    r = gpumem.from_dlpack(a.reshape(5, 8)[1:])
    assert r.ptr == a.ptr + 32 and r.shape == (4, 8)
    # A view of an imported array is a view of the same memory.
    w = b[1:]
    assert w.ptr == b.ptr + 40 and w.base is b


@case
def producer_outlives_its_owner():
    for make_view in (False, True):
        gc.collect()
        before = allocated()
        host = random_array(1000, "int64")
        a = gpumem.to_device(host)
        source = a[100:200] if make_view else a
        b = gpumem.from_dlpack(source)
        del a, source
        gc.collect()
        assert allocated() == before + host.nbytes
        expect = host[100:200] if make_view else host
        assert np.array_equal(b.copy_to_host(), expect)
        # Unrelated allocations do not land on the memory still held.
        junk = [gpumem.to_device(np.zeros(1000, np.int64)) for _ in range(4)]
        assert np.array_equal(b.copy_to_host(), expect)
        del junk
        del b
        gc.collect()
        assert allocated() == before, (allocated(), before)


@case
def unconsumed_capsules_give_the_memory_back():
    gc.collect()
    before = allocated()
    a = gpumem.to_device(np.arange(1000, dtype=np.float32))
    capsules = [a.__dlpack__(), a.__dlpack__(max_version=(1, 0)),
                a[5:].__dlpack__()]
    del a
    gc.collect()
    assert allocated() == before + 4000
    del capsules
    gc.collect()
    assert allocated() == before


@case
def free_waits_for_dlpack_consumers():
    gc.collect()
    before = allocated()
    a = gpumem.to_device(np.arange(256, dtype=np.float32))
    b = gpumem.from_dlpack(a)
    a.free()
    raises(ValueError, a.copy_to_host, match="freed")
    assert "freed" in repr(a)
    # The consumer keeps the memory, and may go on using it.
    assert allocated() == before + 1024
    assert np.array_equal(b.copy_to_host(), np.arange(256, dtype=np.float32))
    del b
    gc.collect()
    assert allocated() == before, "free() did not release once the consumer went"
    raises(ValueError, a.copy_to_host, match="freed")
    # The same through a view, and with a with block.
    with gpumem.to_device(np.arange(256, dtype=np.float32)) as c:
        v = c[128:]
        d = gpumem.from_dlpack(v)
        v.free()
    assert allocated() == before + 1024
    assert np.array_equal(d.copy_to_host(),
                          np.arange(128, 256, dtype=np.float32))
    raises(ValueError, v.copy_to_host)
    del d
    gc.collect()
    assert allocated() == before
    # Without consumers free() is immediate, as before.
    e = gpumem.empty(100)
    cap = e.__dlpack__()
    del cap
    e.free()
    assert allocated() == before


@case
def dlpack_arguments_are_checked():
    a = gpumem.to_device(np.arange(6, dtype=np.float32))
    assert capsule_is(a.__dlpack__(stream=None), LEGACY)
    assert capsule_is(a.__dlpack__(stream=-1), LEGACY)
    raises(TypeError, a.__dlpack__, "x")             # keyword-only
    raises(TypeError, a.__dlpack__, stream="x")
    raises(TypeError, a.__dlpack__, stream=1.0)
    raises(ValueError, a.__dlpack__, stream=0)
    # Numbers that cannot be a stream's address (CUDA crashed on them).
    for junk in (2**63, 2**64 - 1, 2**200, -2**70):
        raises(ValueError, a.__dlpack__, stream=junk, match="CUDA stream")
    raises(TypeError, a.__dlpack__, stream=True)
    if HOST:
        raises(ValueError, a.__dlpack__, stream=1, match="None")
    else:
        raises(ValueError, a.__dlpack__, stream=-2)
        for stream in (1, 2):
            a.__dlpack__(stream=stream)
    raises(TypeError, a.__dlpack__, max_version=1)
    raises(TypeError, a.__dlpack__, max_version=(1,))
    raises(TypeError, a.__dlpack__, max_version=("1", 0))
    raises(TypeError, a.__dlpack__, dl_device=2)
    raises(TypeError, a.__dlpack__, copy=1)
    raises(TypeError, a.__dlpack__, bogus=1)
    assert capsule_is(a.__dlpack__(dl_device=our_device()), LEGACY)
    raises(BufferError, a.__dlpack__, dl_device=(KDLOPENCL, 0))
    raises(BufferError, a.__dlpack__, dl_device=(our_device()[0], 7))
    raises(BufferError, a.__dlpack__, dl_device=(KDLCPU, 0) if CUDA
           else (KDLCUDA, 0), copy=False)
    assert capsule_is(a.__dlpack__(copy=False), LEGACY)
    a.free()
    raises(ValueError, a.__dlpack__, match="freed")


@case
def copy_true_exports_a_copy():
    gc.collect()
    before = allocated()
    host = random_array(64, "complex64")
    a = gpumem.to_device(host)
    capsule = a.__dlpack__(max_version=(1, 0), copy=True)
    m = managed(capsule)
    assert m.flags & IS_COPIED and not m.flags & READ_ONLY
    assert m.dl_tensor.data != a.ptr
    assert allocated() == before + 2 * host.nbytes
    b = gpumem.from_dlpack(capsule)
    assert np.array_equal(b.copy_to_host(), host)
    b.copy_from_host(np.zeros(64, np.complex64))
    assert np.array_equal(a.copy_to_host(), host)      # a copy indeed
    del capsule, b
    gc.collect()
    assert allocated() == before + host.nbytes
    # To host memory (the only other device gpumem copies to).
    capsule = a.__dlpack__(max_version=(1, 0), dl_device=(KDLCPU, 0),
                           copy=None if CUDA else True)
    m = managed(capsule)
    assert (m.dl_tensor.device.device_type, m.dl_tensor.device.device_id) \
        == (KDLCPU, 0)
    assert m.flags & IS_COPIED
    del capsule, m
    del a
    gc.collect()
    assert allocated() == before


@case
def deleter_runs_once_without_the_gil_and_from_threads():
    gc.collect()
    before = allocated()
    a = gpumem.to_device(np.arange(512, dtype=np.float32))
    capsules = [a.__dlpack__(max_version=(1, 0)) for _ in range(3)]
    capsules.append(a.__dlpack__())
    del a
    gc.collect()
    assert allocated() == before + 2048
    deleters = []
    for capsule in capsules:
        m = managed(capsule)
        # Consume by hand, as a C library would.
        name = USED_VERSIONED if capsule_is(capsule, VERSIONED) else USED_LEGACY
        deleters.append((m.deleter, ctypes.addressof(m)))
        assert _api.PyCapsule_SetName(capsule, name) == 0
    # ctypes releases the GIL around the call: the deleter takes it back.
    deleter, address = deleters.pop()
    deleter(address)
    threads = [threading.Thread(target=d, args=(addr,)) for d, addr in deleters]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    del capsules               # renamed: their destructors do nothing more
    gc.collect()
    assert allocated() == before


@case
def producer_deleter_called_once():
    backing = gpumem.to_device(np.arange(24, dtype=np.int16))
    for versioned in (True, False):
        fake = FakeProducer(backing, (4, 6), versioned=versioned)
        b = gpumem.from_dlpack(fake)
        assert fake.deleted == 0 and b.ptr == backing.ptr
        assert b.shape == (4, 6) and b.dtype == np.int16
        assert fake.max_version == (1, 0)
        if CUDA:
            assert fake.stream == 1, fake.stream
        else:
            assert fake.stream is None
        v = b[1:3]
        w = v.reshape(12)
        del b
        gc.collect()
        assert fake.deleted == 0
        assert np.array_equal(w.copy_to_host(), np.arange(6, 18,
                                                          dtype=np.int16))
        del v, w
        gc.collect()
        assert fake.deleted == 1
    # free() lets go at once.
    fake = FakeProducer(backing)
    b = gpumem.from_dlpack(fake)
    b.free()
    gc.collect()
    assert fake.deleted == 1
    del b
    gc.collect()
    assert fake.deleted == 1


@case
def old_producers_without_max_version():
    backing = gpumem.to_device(np.arange(6, dtype=np.float32))
    fake = FakeProducer(backing, versioned=False, max_version_kw=False)
    b = gpumem.from_dlpack(fake)
    assert fake.max_version == "not passed"
    assert b.ptr == backing.ptr
    del b
    gc.collect()
    assert fake.deleted == 1


@case
def readonly_travels_with_versioned_capsules():
    backing = gpumem.to_device(np.arange(8, dtype=np.float32))
    fake = FakeProducer(backing, flags=READ_ONLY)
    ro = gpumem.from_dlpack(fake)
    raises(ValueError, gpumem.kernels.saxpy, 8, 1.0, backing, ro,
           match="read-only")
    raises(ValueError, gpumem.copy, ro, np.zeros(8, np.float32))
    assert np.array_equal(ro.copy_to_host(), np.arange(8, dtype=np.float32))
    # Exported again: the flag stays; a legacy capsule cannot carry it.
    capsule = ro.__dlpack__(max_version=(1, 0))
    assert managed(capsule).flags & READ_ONLY
    raises(BufferError, ro.__dlpack__, match="read-only")
    capsule = ro.__dlpack__(max_version=(1, 0), copy=True)
    flags = managed(capsule).flags
    assert not flags & READ_ONLY and flags & IS_COPIED
    del capsule
    assert capsule_is(ro.__dlpack__(copy=True), LEGACY)
    # Legacy capsules are writable.
    rw = gpumem.from_dlpack(FakeProducer(backing, versioned=False))
    gpumem.kernels.saxpy(8, 0.0, backing, rw)


@case
def consumer_refuses_what_it_cannot_use():
    backing = gpumem.to_device(np.arange(64, dtype=np.float32))
    bad = [
        (TypeError, dict(code=KDLBFLOAT, bits=16), "data type"),
        (TypeError, dict(lanes=2), "lanes"),
        (TypeError, dict(code=KDLFLOAT, bits=8), "data type"),
        (TypeError, dict(code=KDLBOOL, bits=32), "data type"),
        (TypeError, dict(code=99), "data type"),
        (ValueError, dict(shape=(4, 4), strides=(0, 1)), "stride 0"),
        (BufferError, dict(device=(KDLOPENCL, 0)), "device type 4"),
        (BufferError, dict(device=((KDLCPU if CUDA else KDLCUDA), 0)),
         "DLPack device type"),
        (BufferError, dict(major=2), "DLPack 2.0"),
        (BufferError, dict(data=0), "no data pointer"),
        (ValueError, dict(shape=(2, -1)), "length"),
        (ValueError, dict(shape=(1,) * 33), "dimensions"),
        # Empty, but its other dimensions' bytes do not fit (as NumPy).
        (ValueError, dict(shape=(0, 2**62)), "too large"),
    ]
    if CUDA:
        bad.append((BufferError, dict(device=(KDLCUDA, 999)), "999"))
    for exc, kwargs, match in bad:
        fake = FakeProducer(backing, **kwargs)
        capsule = fake.capsule()
        raises(exc, gpumem.from_dlpack, capsule, match=match)
        # Refused capsules stay the producer's, untouched.
        assert capsule_is(capsule, VERSIONED), kwargs
        assert fake.deleted == 0, kwargs
        if "device" not in kwargs:
            raises(exc, gpumem.from_dlpack, fake, match=match)
    # Strides that are contiguous after all, and length-1 dimensions.
    for shape, strides in (((4, 16), (16, 1)), ((64, 1), (1, 5)),
                           ((1, 64), (3, 1)), ((0, 5), (7, 7)), ((), ()),
                           ((0, 2**60), None)):
        fake = FakeProducer(backing, shape, strides=strides)
        b = gpumem.from_dlpack(fake)
        assert b.shape == shape
    # Strided tensors become strided views (test_index has more).
    for shape, strides in (((4, 4), (1, 4)), ((8,), (2,)),
                           ((3, 2), (-2, 1))):
        offset = 16 if strides[0] < 0 else 0
        fake = FakeProducer(backing, shape, strides=strides,
                            byte_offset=offset)
        b = gpumem.from_dlpack(fake)
        assert not b.is_contiguous
        assert b.strides == tuple(4 * s for s in strides)
        expect = np.lib.stride_tricks.as_strided(
            np.arange(64, dtype=np.float32)[offset // 4:], shape,
            tuple(4 * s for s in strides)) if strides[0] > 0 else \
            np.arange(64, dtype=np.float32)[4::-2][:3, None] + [0, 1]
        assert np.array_equal(b.copy_to_host(), expect), (shape, strides)
        raises(ValueError, gpumem.kernels.saxpy, 8, 1.0, backing[:8], b,
               match="strided")
    # byte_offset is honoured.
    fake = FakeProducer(backing, (8,), byte_offset=16)
    b = gpumem.from_dlpack(fake)
    assert b.ptr == backing.ptr + 16
    assert np.array_equal(b.copy_to_host(), np.arange(4, 12,
                                                      dtype=np.float32))


@case
def asarray_takes_dlpack_device_memory():
    backing = gpumem.to_device(np.arange(6, dtype=np.float32))
    fake = FakeProducer(backing)
    if HOST:
        raises(TypeError, gpumem.asarray, fake)
        assert fake.deleted == 0
        return
    b = gpumem.asarray(fake)
    assert b.ptr == backing.ptr and b.dtype == np.float32
    del b
    gc.collect()
    assert fake.deleted == 1


@case
def interpreter_shutdown_with_live_exports():
    """Capsules, imported arrays and exports alive at exit, some in
    reference cycles, finalize without a crash or an unraisable error."""
    script = """
import gc, numpy as np, gpumem
a = gpumem.to_device(np.arange(10.0))
b = gpumem.from_dlpack(a)
cap = a.__dlpack__()
cap2 = a[2:].__dlpack__(max_version=(1, 0))
class Cycle:
    pass
c = Cycle()
c.me = c
c.cap = a.__dlpack__(max_version=(1, 0))
c.arr = gpumem.from_dlpack(a.__dlpack__())
if gpumem.backend == "host":
    n = np.from_dlpack(a)
    h = gpumem.from_dlpack(np.arange(5.0))
    c.n = np.from_dlpack(a[1:])
del a
gc.disable()
print("done")
"""
    result = subprocess.run([gmtest.GPUMEM, "--backend=" + gpumem.backend,
                             "-q", "-c", script], capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, (result.returncode, result.stderr)
    assert result.stdout.strip() == "done", result.stdout
    assert "Exception" not in result.stderr and "Fatal" not in result.stderr, \
        result.stderr


# The CUDA Array Interface (both ways on the cuda backend).

class FakeCai:
    """An object with a __cuda_array_interface__ over MEMORY's memory."""

    def __init__(self, memory, **fields):
        self.memory = memory
        self.__cuda_array_interface__ = {
            "shape": memory.shape, "typestr": np.dtype(memory.dtype).str,
            "data": (memory.ptr, False), "strides": None, "version": 3}
        self.__cuda_array_interface__.update(fields)


@case
def cai_producer_fields():
    a = gpumem.to_device(np.arange(12, dtype=np.int16).reshape(3, 4))
    if HOST:
        assert not hasattr(a, "__cuda_array_interface__")
        a.free()
        assert not hasattr(a, "__cuda_array_interface__")
        return
    cai = a.__cuda_array_interface__
    assert cai["shape"] == (3, 4) and cai["typestr"] == "<i2"
    assert cai["data"] == (a.ptr, False) and cai["strides"] is None
    assert cai["version"] == 3 and cai["stream"] is None
    assert a[1:].__cuda_array_interface__["data"][0] == a.ptr + 8
    assert gpumem.empty(0).__cuda_array_interface__["data"] == (0, False)
    assert a[3:].__cuda_array_interface__["data"] == (0, False)
    for dtype in DTYPES:
        t = gpumem.empty(2, dtype).__cuda_array_interface__["typestr"]
        assert np.dtype(t) == np.dtype(dtype), (t, dtype)
    # Work pending on a gpumem.Stream is named until it is done: some
    # 30 copies of 64 MiB (tens of milliseconds) are queued, so the
    # stream is named; None is right only if s had already finished when
    # the interface was read, which s.query() read after it then shows.
    s = gpumem.Stream()
    host = gpumem.pinned_empty(1 << 24, "float32")
    host[:] = 3
    big = gpumem.empty(1 << 24)
    for _ in range(30):
        big.copy_from_host(host, stream=s)
    named = [big.__cuda_array_interface__["stream"],
             big[10:].__cuda_array_interface__["stream"]]
    finished = s.query()
    for stream in named:
        assert stream == s.handle or (stream is None and finished), \
            (named, finished, s.handle)
    s.synchronize()
    assert big.__cuda_array_interface__["stream"] is None
    a.free()
    raises(ValueError, lambda: a.__cuda_array_interface__)


@case
def cai_consumer_checks():
    if HOST:
        gmtest.skip("the CUDA Array Interface is the cuda backend's")
    backing = gpumem.to_device(np.arange(24, dtype=np.float32))
    b = gpumem.asarray(FakeCai(backing))
    assert b.ptr == backing.ptr and b.shape == (24,) and b.base is not None
    b = gpumem.asarray(FakeCai(backing, shape=(4, 6), strides=(24, 4)))
    assert b.shape == (4, 6)
    empty = gpumem.empty(0)
    b = gpumem.asarray(FakeCai(empty, data=(0, False)))
    assert b.shape == (0,)
    ro = gpumem.asarray(FakeCai(backing, data=(backing.ptr, True)))
    raises(ValueError, gpumem.kernels.saxpy, 24, 1.0, backing, ro,
           match="read-only")
    for fields, exc, match in (
            (dict(data=(0, False)), ValueError, "null pointer"),
            (dict(stream=0), ValueError, "stream 0"),
            (dict(stream=-3), ValueError, "stream -3"),
            (dict(stream=2**63), ValueError, "below 2**63"),
            (dict(stream=2**64 - 1), ValueError, "not a CUDA stream"),
            (dict(stream=True), TypeError, "bool"),
            (dict(stream="1"), TypeError, "str"),
            (dict(mask=object()), ValueError, "mask"),
            (dict(shape=(4, 6), strides=(4, 2)), ValueError, "multiple"),
            (dict(shape=(4, 6), strides=(0, 4)), ValueError, "stride 0"),
            (dict(typestr=">f4"), TypeError, "not supported"),
            (dict(typestr="<V4"), TypeError, "not supported"),
            (dict(data=backing.ptr), TypeError, "tuple")):
        raises(exc, gpumem.asarray, FakeCai(backing, **fields), match=match)
        raises(exc, gpumem.kernels.saxpy, 24, 1.0, backing,
               FakeCai(backing, **fields), match=match)
    # Strided interfaces become strided views; kernels refuse them.
    t = gpumem.asarray(FakeCai(backing, shape=(4, 6), strides=(4, 16)))
    assert t.strides == (4, 16) and not t.is_contiguous
    assert np.array_equal(t.copy_to_host(),
                          np.arange(24, dtype=np.float32).reshape(6, 4).T)
    raises(ValueError, gpumem.kernels.saxpy, 24, 1.0, backing,
           FakeCai(backing, shape=(4, 6), strides=(4, 16)),
           match="C-contiguous")
    # A stream to wait for: the legacy default stream, by number.
    b = gpumem.asarray(FakeCai(backing, stream=1))
    assert b.ptr == backing.ptr
    # Host memory is not device memory.
    pinned = gpumem.pinned_empty(4, "float32")
    fake = FakeCai(backing, data=(pinned.ctypes.data, False), shape=(4,))
    raises(ValueError, gpumem.asarray, fake, match="host memory")


# NumPy on the host backend: DLPack reports a CPU device.

def host_only(name):
    """Skips the running case unless the backend is the host's."""
    if CUDA:
        gmtest.skip(f"{name} is for the host backend")


def _numpy_can(what, fn):
    """Whether FN() runs with the installed NumPy: None if it does, else
    why not (the reason a case that needs WHAT is skipped)."""
    try:
        fn()
    except Exception as exc:
        return (f"NumPy {np.__version__} cannot {what} "
                f"({type(exc).__name__}: {exc})")
    return None


def _readonly_round_trip():
    ro = np.zeros(2)
    ro.flags.writeable = False
    np.from_dlpack(ro)


def _asks_for_versioned_capsules():
    asked = {}

    class Probe:
        def __dlpack__(self, **kwargs):
            asked.update(kwargs)
            return np.zeros(1).__dlpack__()

        def __dlpack_device__(self):
            return (KDLCPU, 0)

    np.from_dlpack(Probe())
    if "max_version" not in asked:
        raise TypeError(f"from_dlpack passes only {sorted(asked)}")


# What the installed NumPy's DLPack can do: NumPy 1.x (Debian 12 has
# 1.24) knows no bool, makes every array it imports read-only, cannot
# export a read-only array, does not ask for
# versioned capsules, and from_dlpack has no copy=.  A case that needs
# what is missing reports SKIP with the reason; what the old NumPy does
# instead must still end in a clear exception.
NUMPY_LACKS = {
    "writable": _numpy_can(
        "give writable arrays from DLPack",
        lambda: np.from_dlpack(np.zeros(1)).__setitem__(0, 1)),
    "bool": _numpy_can("pass bool arrays through DLPack",
                       lambda: np.from_dlpack(np.zeros(2, bool))),
    "readonly": _numpy_can("pass read-only arrays through DLPack",
                           _readonly_round_trip),
    "versioned": _numpy_can("ask for versioned DLPack capsules",
                            _asks_for_versioned_capsules),
    "copy": _numpy_can("take from_dlpack(copy=True)",
                       lambda: np.from_dlpack(np.zeros(1), copy=True)),
}


def numpy_needs(what):
    """Skips the running case unless NumPy can do WHAT (NUMPY_LACKS)."""
    if NUMPY_LACKS[what] is not None:
        gmtest.skip(NUMPY_LACKS[what])


def numpy_dtypes():
    """DTYPES less bool where NumPy's DLPack lacks it."""
    return [d for d in DTYPES if d != "bool" or NUMPY_LACKS["bool"] is None]


@case
def numpy_from_dlpack_shares_memory():
    host_only("numpy.from_dlpack zero-copy")
    for dtype in numpy_dtypes():
        for shape in [(7,), (2, 3), (2, 1, 4), ()]:
            host = random_array(int(np.prod(shape)), dtype).reshape(shape)
            a = gpumem.to_device(host)
            n = np.from_dlpack(a)
            assert n.dtype == np.dtype(dtype) and n.shape == shape
            assert n.ctypes.data == a.ptr, dtype
            assert n.flags.c_contiguous
            assert n.flags.writeable == (NUMPY_LACKS["writable"] is None)
            assert np.array_equal(n, host)
            new = random_array(host.size, dtype).reshape(shape)
            a.copy_from_host(new)
            assert np.array_equal(n, new), dtype


@case
def numpy_writes_through_dlpack():
    host_only("NumPy writing gpumem's memory")
    numpy_needs("writable")
    for dtype in numpy_dtypes():
        host = random_array(6, dtype).reshape(2, 3)
        a = gpumem.to_device(random_array(6, dtype).reshape(2, 3))
        n = np.from_dlpack(a)
        n[...] = host
        assert np.array_equal(a.copy_to_host(), host), dtype


@case
def numpy_round_trip_through_gpumem():
    host_only("gpumem.from_dlpack(numpy)")
    for dtype in numpy_dtypes():
        n = random_array(30, dtype).reshape(5, 6)
        b = gpumem.from_dlpack(n)
        assert b.ptr == n.ctypes.data and b.shape == (5, 6)
        assert b.dtype == n.dtype and b.device.index == gpumem.current_device().index
        assert np.array_equal(b.copy_to_host(), n)
        new = random_array(30, dtype).reshape(5, 6)
        b.copy_from_host(new)
        assert np.array_equal(n, new), dtype
        back = np.from_dlpack(b)
        assert back.ctypes.data == n.ctypes.data
    # Kernels run on NumPy's memory, wrapped.
    x = np.arange(16, dtype=np.float32)
    y = np.ones(16, dtype=np.float32)
    gpumem.kernels.saxpy(16, 2.0, gpumem.from_dlpack(x), gpumem.from_dlpack(y))
    assert np.array_equal(y, 2 * np.arange(16, dtype=np.float32) + 1)
    # The current device is where it lands.
    if gpumem.device_count() > 1:
        with gpumem.Device(1):
            assert gpumem.from_dlpack(x).device.index == 1
    # A contiguous slice with an offset.
    big = np.arange(100.0)
    b = gpumem.from_dlpack(big[10:30])
    assert b.ptr == big.ctypes.data + 80
    assert np.array_equal(b.copy_to_host(), big[10:30])
    # Empty and 0-d arrays.
    assert gpumem.from_dlpack(np.empty((0, 4))).shape == (0, 4)
    assert gpumem.from_dlpack(np.array(5, np.int8)).copy_to_host() == 5
    # asarray stays for device memory, on both backends.
    raises(TypeError, gpumem.asarray, n)


@case
def numpy_bool_arrays():
    host_only("NumPy's bool through DLPack")
    host = np.array([True, False, True])
    a = gpumem.to_device(host)
    if NUMPY_LACKS["bool"] is not None:
        # What an old NumPy makes of bool: a clear error either way.
        raises(Exception, np.from_dlpack, a)
        raises(BufferError, gpumem.from_dlpack, host)
        gmtest.skip(NUMPY_LACKS["bool"])
    n = np.from_dlpack(a)
    assert n.dtype == bool and n.ctypes.data == a.ptr
    assert np.array_equal(n, host)
    b = gpumem.from_dlpack(host)
    assert b.dtype == bool and b.ptr == host.ctypes.data
    assert np.array_equal(b.copy_to_host(), host)


@case
def numpy_readonly_arrays():
    host_only("NumPy's read-only flag")
    n = np.arange(10, dtype=np.float32)
    n.flags.writeable = False
    if NUMPY_LACKS["readonly"] is not None:
        # An old NumPy refuses to export a read-only array, and gets no
        # writable alias of a read-only DeviceArray: it asks for an
        # unversioned capsule, which cannot say read-only, so gpumem
        # refuses it.
        raises(BufferError, gpumem.from_dlpack, n)
        backing = gpumem.to_device(np.arange(8, dtype=np.float32))
        ro = gpumem.from_dlpack(FakeProducer(backing, flags=READ_ONLY))
        raises(BufferError, np.from_dlpack, ro, match="read-only")
        gmtest.skip(NUMPY_LACKS["readonly"])
    ro = gpumem.from_dlpack(n)
    assert np.array_equal(ro.copy_to_host(), n)
    raises(ValueError, gpumem.kernels.saxpy, 10, 1.0, ro, ro, match="read-only")
    back = np.from_dlpack(ro)
    assert not back.flags.writeable and back.ctypes.data == n.ctypes.data


@case
def numpy_strided_arrays():
    host_only("NumPy's strided arrays")
    m = np.arange(20.0).reshape(4, 5)
    for view in (m[:, ::2], m.T, m[::-1, 1:4], np.arange(4)[::-1]):
        d = gpumem.from_dlpack(view)
        assert d.strides == view.strides and not d.is_contiguous
        assert np.array_equal(d.copy_to_host(), view)
        d[...] = -view                         # writes through to m
        assert np.array_equal(view, -np.abs(view))
        view *= -1
        raises(ValueError, gpumem.kernels.saxpy, d.size, 1.0, d, d,
               match="strided")
    assert gpumem.from_dlpack(m[1:2, :]).shape == (1, 5)
    assert gpumem.from_dlpack(m[1:2, :]).is_contiguous


@case
def numpy_lifetime_both_ways():
    host_only("NumPy lifetime")
    # gpumem's memory under a NumPy array.
    gc.collect()
    before = allocated()
    host = random_array(4096, "float64")
    a = gpumem.to_device(host)
    n = np.from_dlpack(a)
    v = np.from_dlpack(a[1000:2000])
    del a
    gc.collect()
    assert allocated() == before + host.nbytes
    assert np.array_equal(n, host) and np.array_equal(v, host[1000:2000])
    del n
    gc.collect()
    assert allocated() == before + host.nbytes          # v still holds it
    del v
    gc.collect()
    assert allocated() == before
    # NumPy's memory under a DeviceArray.
    n = random_array(1000, "int32")
    keep = n.copy()
    ref = weakref.ref(n)
    b = gpumem.from_dlpack(n)
    del n
    gc.collect()
    assert ref() is not None
    assert np.array_equal(b.copy_to_host(), keep)
    view = b[10:20]
    del b
    gc.collect()
    assert ref() is not None
    assert np.array_equal(view.copy_to_host(), keep[10:20])
    del view
    gc.collect()
    assert ref() is None
    # NumPy refuses a capsule consumed once already (an old NumPy takes
    # only unversioned capsules).
    a = gpumem.to_device(np.arange(4.0))
    versioned = NUMPY_LACKS["versioned"] is None
    capsule = (a.__dlpack__(max_version=(1, 0)) if versioned
               else a.__dlpack__())

    class Same:
        def __dlpack__(self, **kwargs):
            return capsule

        def __dlpack_device__(self):
            return (KDLCPU, 0)

    first = np.from_dlpack(Same())
    raises(Exception, np.from_dlpack, Same())
    assert capsule_is(capsule, USED_VERSIONED if versioned else USED_LEGACY)
    assert first.ctypes.data == a.ptr


@case
def numpy_copy_keyword():
    host_only("NumPy's from_dlpack(copy=True)")
    numpy_needs("copy")
    a = gpumem.to_device(np.arange(4.0))
    c = np.from_dlpack(a, copy=True)
    assert c.ctypes.data != a.ptr and np.array_equal(c, np.arange(4.0))
    c[0] = 9
    assert a.copy_to_host()[0] == 0


@case
def numpy_versioned_capsules():
    host_only("NumPy's versioned capsules")
    numpy_needs("versioned")
    a = gpumem.to_device(np.arange(4.0))
    asked = {}

    class Spy:
        def __dlpack__(self, **kwargs):
            asked.update(kwargs)
            return a.__dlpack__(**kwargs)

        def __dlpack_device__(self):
            return a.__dlpack_device__()

    n = np.from_dlpack(Spy())
    assert asked["max_version"][0] >= 1, asked
    assert n.ctypes.data == a.ptr and np.array_equal(n, np.arange(4.0))


@case
def whatever_numpy_hands_over_is_used_or_refused():
    """Every dtype, shape and layout NumPy makes, both ways: the data
    arrives whole, or the call raises a clear exception; nothing
    crashes, whatever the installed NumPy supports."""
    host_only("NumPy's DLPack")
    for dtype in DTYPES:
        for shape in [(5,), (2, 3), (), (0, 4)]:
            host = random_array(int(np.prod(shape)), dtype).reshape(shape)
            for writeable in (True, False):
                n = host.copy()
                n.flags.writeable = writeable
                try:
                    b = gpumem.from_dlpack(n)
                except (BufferError, TypeError, ValueError) as exc:
                    assert str(exc), (dtype, shape, writeable)
                    continue
                assert b.dtype == n.dtype and b.shape == n.shape
                assert np.array_equal(b.copy_to_host(), n), (dtype, shape)
            a = gpumem.to_device(host)
            try:
                back = np.from_dlpack(a)
            except (BufferError, TypeError, ValueError, RuntimeError) as exc:
                assert str(exc), (dtype, shape)
                continue
            assert back.dtype == host.dtype and back.shape == host.shape
            assert np.array_equal(back, host), (dtype, shape)


@case
def jax_cpu_both_ways():
    """A second real DLPack implementation on the host backend: JAX's CPU
    arrays (skipped without JAX)."""
    host_only("JAX on the CPU")
    try:
        import jax
        import jax.numpy as jnp
        jax.config.update("jax_enable_x64", True)
        cpu = jax.devices("cpu")[0]
    except Exception as exc:
        gmtest.skip(f"jax ({type(exc).__name__}: {exc})")
    for dtype in DTYPES:
        host = random_array(4 * 64, dtype).reshape(4, 64)
        a = gpumem.to_device(host)
        j = jnp.from_dlpack(a)
        assert j.unsafe_buffer_pointer() == a.ptr, dtype
        assert j.dtype == np.dtype(dtype) and j.shape == (4, 64)
        assert np.array_equal(np.asarray(j), host), dtype
        x = jax.device_put(jnp.asarray(host), cpu)
        g = gpumem.from_dlpack(x)
        assert g.ptr == x.unsafe_buffer_pointer(), dtype
        assert g.dtype == np.dtype(dtype) and g.shape == (4, 64)
        assert np.array_equal(g.copy_to_host(), host), dtype
    a = gpumem.to_device(np.arange(4 * 64, dtype=np.float32).reshape(4, 64))
    j = jnp.from_dlpack(a[1:3])
    assert j.unsafe_buffer_pointer() == a.ptr + 256
    assert np.array_equal(np.asarray(j), np.asarray(a.copy_to_host()[1:3]))
    assert jnp.from_dlpack(gpumem.empty((0, 4))).shape == (0, 4)
    assert gpumem.from_dlpack(jax.device_put(jnp.zeros((0, 4)), cpu)).shape \
        == (0, 4)
    raises(TypeError, gpumem.from_dlpack,
           jax.device_put(jnp.zeros(3, dtype=jnp.bfloat16), cpu),
           match="data type")
    # Lifetime both ways.
    del a, j, g, x
    assert settle(lambda: True)
    before = allocated()
    a = gpumem.to_device(np.arange(1000.0))
    j = jnp.from_dlpack(a)
    del a
    gc.collect()
    assert allocated() == before + 8000
    assert np.array_equal(np.asarray(j), np.arange(1000.0))
    del j
    assert settle(lambda: allocated() == before)
    x = jax.device_put(jnp.arange(1000.0), cpu)
    g = gpumem.from_dlpack(x)
    del x
    gc.collect()
    junk = [jax.device_put(jnp.full(1000, -1.0), cpu) for _ in range(4)]
    assert np.array_equal(g.copy_to_host(), np.arange(1000.0))
    del junk


@case
def numpy_on_cuda_copies_only_when_asked():
    if HOST:
        gmtest.skip("on the host backend NumPy shares gpumem's memory "
                    "(numpy_from_dlpack_shares_memory)")
    numpy_needs("copy")
    gc.collect()
    before = allocated()
    host = random_array(100, "float32")
    a = gpumem.to_device(host)
    raises((BufferError, RuntimeError, ValueError), np.from_dlpack, a)
    n = np.from_dlpack(a, device="cpu", copy=True)
    assert np.array_equal(n, host) and n.ctypes.data != a.ptr
    n2 = np.from_dlpack(a, device="cpu")
    assert np.array_equal(n2, host)
    raises(BufferError, np.from_dlpack, a, device="cpu", copy=False)
    raises(BufferError, gpumem.from_dlpack, host, match="CPU")
    a.free()
    gc.collect()
    assert allocated() == before, "a refused capsule kept the memory"


# CUDA cases with each library.  Each reports SKIP, with the reason,
# without the library (or on the host backend).

def optional(name):
    """Imports the library NAME for the cuda cases, or None with why."""
    if HOST:
        return None, "host backend"
    try:
        if name == "cupy":
            import cupy
            cupy.cuda.runtime.getDeviceCount()
            return cupy, None
        if name == "torch":
            import torch
            if not torch.cuda.is_available():
                return None, "torch.cuda is not available"
            return torch, None
        if name == "numba":
            from numba import cuda as numba_cuda
            if not numba_cuda.is_available():
                return None, "numba.cuda is not available"
            return numba_cuda, None
        if name == "jax":
            import jax
            jax.config.update("jax_enable_x64", True)
            if not jax.devices("gpu"):
                return None, "JAX has no GPU"
            return jax, None
    except Exception as exc:             # ImportError, or a broken install
        return None, f"{type(exc).__name__}: {exc}"
    raise ValueError(name)


LIBS = {name: optional(name) for name in ("cupy", "torch", "numba", "jax")}
if CUDA and not any(lib for lib, _ in LIBS.values()):
    gmtest.skip_file("none of CuPy, PyTorch, Numba, JAX is installed: "
                     + "; ".join(f"{k}: {why}" for k, (_, why) in LIBS.items()))


def lib(name):
    """The module NAME of LIBS; skips the running case without it."""
    module, why = LIBS[name]
    if module is None:
        gmtest.skip(f"{name} ({why})")
    return module


# Enough data that work on a stream is still running when the other side
# looks (tens of milliseconds of copies and kernels).
BIG = 1 << 26

CORE_DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8",
               "float16", "float32", "float64", "complex64", "complex128"]


@case
def cupy_both_ways():
    cupy = lib("cupy")
    for dtype in DTYPES:
        host = random_array(24, dtype).reshape(4, 6)
        # gpumem -> CuPy, through the CAI and through DLPack.
        for to_cupy in (cupy.asarray, cupy.from_dlpack):
            a = gpumem.to_device(host)
            c = to_cupy(a)
            assert c.data.ptr == a.ptr, (dtype, to_cupy)
            assert c.dtype == np.dtype(dtype) and c.shape == (4, 6)
            assert np.array_equal(cupy.asnumpy(c), host)
            new = random_array(24, dtype).reshape(4, 6)
            a.copy_from_host(new)
            assert np.array_equal(cupy.asnumpy(c), new), dtype
            c[...] = cupy.asarray(host)
            assert np.array_equal(a.copy_to_host(), host), dtype
        # CuPy -> gpumem.
        for to_gpumem in (gpumem.asarray, gpumem.from_dlpack):
            c = cupy.asarray(host)
            g = to_gpumem(c)
            assert g.ptr == c.data.ptr and g.dtype == np.dtype(dtype)
            assert g.shape == (4, 6)
            assert np.array_equal(g.copy_to_host(), host)
            new = random_array(24, dtype).reshape(4, 6)
            g.copy_from_host(new)
            assert np.array_equal(cupy.asnumpy(c), new), dtype
    # Views with offsets, 0-size arrays, both ways.
    host = np.arange(40, dtype=np.float32).reshape(4, 10)
    a = gpumem.to_device(host)
    for to_cupy in (cupy.asarray, cupy.from_dlpack):
        c = to_cupy(a[1:3])
        assert c.data.ptr == a.ptr + 40
        assert np.array_equal(cupy.asnumpy(c), host[1:3])
        z = to_cupy(gpumem.empty((0, 3)))
        assert z.shape == (0, 3)
    c = cupy.arange(100, dtype=cupy.float64)
    for to_gpumem in (gpumem.asarray, gpumem.from_dlpack):
        g = to_gpumem(c[10:30])
        assert g.ptr == c.data.ptr + 80
        assert np.array_equal(g.copy_to_host(), np.arange(10.0, 30.0))
        assert to_gpumem(cupy.empty((2, 0))).shape == (2, 0)
    # Strided imports are strided views (kernels refuse them).
    m = np.arange(100.0).reshape(10, 10)
    strided_import(gpumem.asarray, c.reshape(10, 10)[:, ::2], m[:, ::2])
    strided_import(gpumem.from_dlpack, c.reshape(10, 10).T, m.T)
    # Native kernels take CuPy arrays directly.
    x = cupy.arange(1000, dtype=cupy.float32)
    y = cupy.ones(1000, dtype=cupy.float32)
    gpumem.kernels.saxpy(1000, 2.0, x, y)
    assert cupy.allclose(y, 2 * x + 1)
    raises(TypeError, gpumem.kernels.saxpy, 1000, 2.0,
           cupy.arange(1000, dtype=cupy.float64), y)


@case
def cupy_lifetime():
    cupy = lib("cupy")
    for to_cupy in (cupy.asarray, cupy.from_dlpack):
        gc.collect()
        before = allocated()
        host = random_array(1 << 20, "float32")
        a = gpumem.to_device(host)
        c = to_cupy(a)
        del a
        gc.collect()
        assert allocated() == before + host.nbytes, to_cupy
        junk = cupy.zeros(1 << 22)            # must not land on c's memory
        assert np.array_equal(cupy.asnumpy(c), host)
        del c, junk
        assert settle(lambda: allocated() == before), to_cupy
    pool = cupy.get_default_memory_pool()
    for to_gpumem in (gpumem.asarray, gpumem.from_dlpack):
        used = pool.used_bytes()
        c = cupy.arange(1 << 20, dtype=cupy.int32)
        g = to_gpumem(c)
        del c
        gc.collect()
        assert pool.used_bytes() == used + (4 << 20)
        junk = cupy.full(1 << 20, -1, dtype=cupy.int32)
        assert np.array_equal(g.copy_to_host(), np.arange(1 << 20,
                                                          dtype=np.int32))
        del g, junk
        assert settle(lambda: pool.used_bytes() == used), to_gpumem


@case
def cupy_streams():
    cupy = lib("cupy")
    # CuPy's work on a non-blocking stream is done before gpumem reads.
    for to_gpumem in (gpumem.from_dlpack, gpumem.asarray):
        with cupy.cuda.Stream(non_blocking=True):
            c = cupy.zeros(BIG, dtype=cupy.float32)
            for _ in range(20):
                c += 1
            g = to_gpumem(c)
            back = g.copy_to_host()
        assert (back == 20).all(), (to_gpumem, np.unique(back)[:5])
    with cupy.cuda.Stream(non_blocking=True):
        c = cupy.zeros(BIG, dtype=cupy.float32)
        for _ in range(20):
            c += 1
        x = gpumem.zeros(BIG)
        gpumem.kernels.saxpy(BIG, 1.0, x, c)       # CAI stream: synced
        assert bool((c == 20).all())
    # gpumem's work on a gpumem.Stream is done before CuPy reads.
    host = gpumem.pinned_empty(BIG, "float32")
    host[:] = 7
    s = gpumem.Stream()
    for to_cupy in (cupy.from_dlpack, cupy.asarray):
        a = gpumem.zeros(BIG)
        a.copy_from_host(host, stream=s)
        gpumem.kernels.saxpy(BIG, 1.0, a, a, stream=s)        # a = 14
        with cupy.cuda.Stream(non_blocking=True):
            c = to_cupy(a)
            ok = bool((c == 14).all())
        assert ok, to_cupy


def torch_round_trip(torch, dtype):
    """DTYPE between gpumem and torch both ways, zero-copy."""
    host = random_array(24, dtype).reshape(2, 3, 4)
    a = gpumem.to_device(host)
    t = torch.from_dlpack(a)
    assert t.data_ptr() == a.ptr and t.is_cuda, dtype
    assert tuple(t.shape) == (2, 3, 4)
    assert np.array_equal(t.cpu().numpy(), host), dtype
    new = random_array(24, dtype).reshape(2, 3, 4)
    a.copy_from_host(new)
    assert np.array_equal(t.cpu().numpy(), new), dtype
    t.copy_(torch.from_numpy(host))
    assert np.array_equal(a.copy_to_host(), host), dtype
    # torch -> gpumem, by DLPack and by the CAI.
    for to_gpumem in (gpumem.from_dlpack, gpumem.asarray):
        t = torch.from_numpy(host).cuda()
        g = to_gpumem(t)
        assert g.ptr == t.data_ptr() and g.dtype == np.dtype(dtype)
        assert g.shape == (2, 3, 4)
        assert np.array_equal(g.copy_to_host(), host)
        g.copy_from_host(new)
        assert np.array_equal(t.cpu().numpy(), new), dtype


@case
def torch_both_ways():
    torch = lib("torch")
    for dtype in CORE_DTYPES:
        torch_round_trip(torch, dtype)
    # PyTorch's support of the wider unsigned types is partial: noted, not
    # required.
    for dtype in ("uint16", "uint32", "uint64"):
        try:
            torch_round_trip(torch, dtype)
        except Exception as exc:
            print(f"note: torch and {dtype}: {type(exc).__name__}: {exc}")
    # gpumem -> torch through the CAI.
    a = gpumem.to_device(np.arange(10, dtype=np.float32))
    t = torch.as_tensor(a, device="cuda")
    assert t.data_ptr() == a.ptr
    # Views with offsets and 0-size arrays.
    host = np.arange(40, dtype=np.float32).reshape(4, 10)
    a = gpumem.to_device(host)
    t = torch.from_dlpack(a[1:3])
    assert t.data_ptr() == a.ptr + 40
    assert np.array_equal(t.cpu().numpy(), host[1:3])
    assert tuple(torch.from_dlpack(gpumem.empty((0, 5))).shape) == (0, 5)
    base = torch.arange(100, dtype=torch.float64, device="cuda")
    for to_gpumem in (gpumem.from_dlpack, gpumem.asarray):
        g = to_gpumem(base[10:30])
        assert g.ptr == base.data_ptr() + 80
        assert np.array_equal(g.copy_to_host(), np.arange(10.0, 30.0))
        assert to_gpumem(torch.empty(0, 3, device="cuda")).shape == (0, 3)
    m = np.arange(100.0).reshape(10, 10)
    strided_import(gpumem.from_dlpack, base.reshape(10, 10).t(), m.T)
    strided_import(gpumem.asarray, base.reshape(10, 10)[:, ::2], m[:, ::2])
    raises(BufferError, gpumem.from_dlpack, torch.arange(4),
           match="CPU")
    # Native kernels take tensors directly.
    x = torch.arange(1000, dtype=torch.float32, device="cuda")
    y = torch.ones(1000, dtype=torch.float32, device="cuda")
    gpumem.kernels.saxpy(1000, 2.0, x, y)
    assert torch.allclose(y, 2 * x + 1)


@case
def torch_lifetime():
    torch = lib("torch")
    for to_torch in (torch.from_dlpack,
                     lambda a: torch.as_tensor(a, device="cuda")):
        gc.collect()
        before = allocated()
        host = random_array(1 << 20, "float32")
        a = gpumem.to_device(host)
        t = to_torch(a)
        del a
        gc.collect()
        assert allocated() == before + host.nbytes
        junk = torch.zeros(1 << 22, device="cuda")
        assert np.array_equal(t.cpu().numpy(), host)
        del t, junk
        assert settle(lambda: allocated() == before)
    for to_gpumem in (gpumem.from_dlpack, gpumem.asarray):
        torch.cuda.synchronize()
        used = torch.cuda.memory_allocated()
        t = torch.arange(1 << 20, dtype=torch.int32, device="cuda")
        g = to_gpumem(t)
        del t
        gc.collect()
        assert torch.cuda.memory_allocated() == used + (4 << 20)
        junk = torch.full((1 << 20,), -1, dtype=torch.int32, device="cuda")
        assert np.array_equal(g.copy_to_host(),
                              np.arange(1 << 20, dtype=np.int32))
        del g, junk
        assert settle(lambda: torch.cuda.memory_allocated() == used)


@case
def torch_streams():
    torch = lib("torch")
    # Torch's work on a side stream is done before gpumem reads: DLPack
    # (torch's CAI names no stream, so only DLPack can order this).
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        t = torch.zeros(BIG, device="cuda")
        for _ in range(20):
            t += 1
        g = gpumem.from_dlpack(t)
        back = g.copy_to_host()
    assert (back == 20).all(), np.unique(back)[:5]
    # gpumem's work on a gpumem.Stream is done before torch reads.
    host = gpumem.pinned_empty(BIG, "float32")
    host[:] = 5
    s = gpumem.Stream()
    a = gpumem.zeros(BIG)
    a.copy_from_host(host, stream=s)
    gpumem.kernels.saxpy(BIG, 1.0, a, a, stream=s)            # a = 10
    with torch.cuda.stream(side):
        t = torch.from_dlpack(a)
        ok = bool((t == 10).all())
    assert ok
    # And on torch's default stream.
    a = gpumem.zeros(BIG)
    a.copy_from_host(host, stream=s)
    t = torch.from_dlpack(a)
    assert bool((t == 5).all())


@case
def numba_both_ways():
    numba_cuda = lib("numba")
    for dtype in ("int8", "int16", "int32", "int64", "uint8", "uint32",
                  "float32", "float64", "complex64", "complex128", "bool"):
        host = random_array(24, dtype).reshape(4, 6)
        a = gpumem.to_device(host)
        d = numba_cuda.as_cuda_array(a)
        assert d.device_ctypes_pointer.value == a.ptr, dtype
        assert d.shape == (4, 6) and d.dtype == np.dtype(dtype)
        assert np.array_equal(d.copy_to_host(), host)
        new = random_array(24, dtype).reshape(4, 6)
        a.copy_from_host(new)
        assert np.array_equal(d.copy_to_host(), new), dtype
        d.copy_to_device(host)
        assert np.array_equal(a.copy_to_host(), host), dtype
        # Numba -> gpumem.
        d = numba_cuda.to_device(host)
        g = gpumem.asarray(d)
        assert g.ptr == d.device_ctypes_pointer.value
        assert np.array_equal(g.copy_to_host(), host)
        g.copy_from_host(new)
        assert np.array_equal(d.copy_to_host(), new), dtype
        if hasattr(d, "__dlpack__"):
            g = gpumem.from_dlpack(d)
            assert g.ptr == d.device_ctypes_pointer.value
    # Views with offsets, 0-size arrays.
    host = np.arange(40, dtype=np.float32).reshape(4, 10)
    a = gpumem.to_device(host)
    d = numba_cuda.as_cuda_array(a[1:3])
    assert d.device_ctypes_pointer.value == a.ptr + 40
    assert np.array_equal(d.copy_to_host(), host[1:3])
    assert numba_cuda.as_cuda_array(gpumem.empty(0)).shape == (0,)
    d = numba_cuda.to_device(np.arange(100.0))
    g = gpumem.asarray(d[10:30])
    assert g.ptr == d.device_ctypes_pointer.value + 80
    assert np.array_equal(g.copy_to_host(), np.arange(10.0, 30.0))
    assert gpumem.asarray(numba_cuda.device_array(0)).shape == (0,)
    strided_import(gpumem.asarray, d.reshape(10, 10)[:, ::2],
                   np.arange(100.0).reshape(10, 10)[:, ::2])
    # Kernels take Numba arrays, and the lifetime holds both ways.
    x = numba_cuda.to_device(np.arange(100, dtype=np.float32))
    y = numba_cuda.to_device(np.ones(100, dtype=np.float32))
    gpumem.kernels.saxpy(100, 2.0, x, y)
    assert np.array_equal(y.copy_to_host(),
                          2 * np.arange(100, dtype=np.float32) + 1)
    del a, d, g
    gc.collect()
    before = allocated()
    a = gpumem.to_device(np.arange(1000.0))
    d = numba_cuda.as_cuda_array(a)
    del a
    gc.collect()
    assert allocated() == before + 8000
    assert np.array_equal(d.copy_to_host(), np.arange(1000.0))
    del d
    assert settle(lambda: allocated() == before)
    d = numba_cuda.to_device(np.arange(1000.0))
    g = gpumem.asarray(d)
    del d
    gc.collect()
    assert np.array_equal(g.copy_to_host(), np.arange(1000.0))


@case
def numba_streams():
    numba_cuda = lib("numba")
    # A copy queued on a Numba stream: its CAI names the stream.
    host = np.full(BIG, 9, dtype=np.float32)
    stream = numba_cuda.stream()
    d = numba_cuda.to_device(host, stream=stream)
    g = gpumem.asarray(d)
    back = g.copy_to_host()
    assert (back == 9).all()
    # gpumem's pending work, read by Numba through the CAI.
    pinned = gpumem.pinned_empty(BIG, "float32")
    pinned[:] = 4
    s = gpumem.Stream()
    a = gpumem.zeros(BIG)
    a.copy_from_host(pinned, stream=s)
    d = numba_cuda.as_cuda_array(a)          # Numba syncs the named stream
    assert (d.copy_to_host() == 4).all()


@case
def jax_both_ways():
    jax = lib("jax")
    import jax.numpy as jnp
    for dtype in DTYPES:
        host = random_array(16 * 64, dtype).reshape(16, 64)
        # gpumem -> JAX: a zero-copy view; JAX arrays are immutable, so
        # gpumem writes before JAX reads.
        a = gpumem.to_device(host)
        new = random_array(16 * 64, dtype).reshape(16, 64)
        j = jnp.from_dlpack(a)
        assert j.unsafe_buffer_pointer() == a.ptr, dtype
        assert j.dtype == np.dtype(dtype) and j.shape == (16, 64)
        a.copy_from_host(new)
        assert np.array_equal(np.asarray(j), new), dtype
        j2 = jax.dlpack.from_dlpack(a)
        assert j2.unsafe_buffer_pointer() == a.ptr
        # JAX -> gpumem.
        x = jnp.asarray(host)
        g = gpumem.from_dlpack(x)
        assert g.ptr == x.unsafe_buffer_pointer(), dtype
        assert g.dtype == np.dtype(dtype) and g.shape == (16, 64)
        assert np.array_equal(g.copy_to_host(), host), dtype
        try:
            cai = x.__cuda_array_interface__
        except Exception:                # JAX offers it for some types only
            cai = None
        if cai is not None:
            assert gpumem.asarray(x).ptr == x.unsafe_buffer_pointer(), dtype
    # A view at a 256-byte offset, and 0-size arrays.
    host = np.arange(16 * 64, dtype=np.float32).reshape(16, 64)
    a = gpumem.to_device(host)
    j = jnp.from_dlpack(a[2:5])
    assert np.array_equal(np.asarray(j), host[2:5])
    assert j.unsafe_buffer_pointer() == a.ptr + 2 * 256
    assert jnp.from_dlpack(gpumem.empty((0, 4))).shape == (0, 4)
    assert gpumem.from_dlpack(jnp.zeros((0, 4))).shape == (0, 4)
    # JAX's work is done before gpumem reads.
    x = jnp.ones(BIG, dtype=jnp.float32)
    for _ in range(10):
        x = x + 1
    back = gpumem.from_dlpack(x).copy_to_host()
    assert (back == 11).all()
    # gpumem's pending work is done before JAX reads.
    pinned = gpumem.pinned_empty(BIG, "float32")
    pinned[:] = 6
    s = gpumem.Stream()
    a = gpumem.zeros(BIG)
    a.copy_from_host(pinned, stream=s)
    assert bool((jnp.from_dlpack(a) == 6).all())


@case
def jax_lifetime():
    jax = lib("jax")
    import jax.numpy as jnp
    gc.collect()
    before = allocated()
    host = random_array(1 << 20, "float32")
    a = gpumem.to_device(host)
    j = jnp.from_dlpack(a)
    del a
    gc.collect()
    assert allocated() == before + host.nbytes
    junk = jnp.zeros(1 << 22)
    assert np.array_equal(np.asarray(j), host)
    del j, junk
    assert settle(lambda: allocated() == before), "JAX kept gpumem's memory"
    x = jnp.arange(1 << 20, dtype=jnp.int32)
    g = gpumem.from_dlpack(x)
    del x
    gc.collect()
    junk = jnp.full(1 << 20, -1, dtype=jnp.int32)
    assert np.array_equal(g.copy_to_host(), np.arange(1 << 20, dtype=np.int32))
    del junk


@case
def cuda_no_leak_across_many_exchanges():
    if HOST:
        gmtest.skip("exchanges with the CUDA libraries need the cuda backend")
    names = [name for name in LIBS if LIBS[name][0] is not None]
    gc.collect()
    before = allocated()
    reserved_after_first = None
    for i in range(30):
        a = gpumem.empty(16 << 20, "uint8")
        views = [gpumem.from_dlpack(a), gpumem.from_dlpack(a[1 << 20:])]
        for name in names:
            module = LIBS[name][0]
            if name == "cupy":
                views += [module.asarray(a), module.from_dlpack(a)]
            elif name == "torch":
                views += [module.from_dlpack(a),
                          module.as_tensor(a, device="cuda")]
            elif name == "numba":
                views.append(module.as_cuda_array(a))
            elif name == "jax":
                views.append(module.numpy.from_dlpack(a))
        del a, views
        assert settle(lambda: allocated() == before), (i, allocated(), before)
        if i == 0:
            reserved_after_first = reserved()
    # The pool of this process, not the device's free memory, which
    # other processes on the same GPU move (ctest -j, several jobs).
    assert reserved() <= reserved_after_first + (64 << 20), \
        (reserved_after_first, reserved())


gmtest.main()
