"""gpumem._C_API, the extension authors' capsule (py-capi.c,
include/gpumem/extension.h), called through ctypes with the header's
struct layouts, as a C extension calls it."""

import ctypes

import numpy as np

import gmtest
from gmtest import case, raises

import gpumem

CUDA = gpumem.backend == "cuda"
MAX_NDIM = 32


class Buffer(ctypes.Structure):
    """gm_buffer of gpumem/extension.h."""
    _fields_ = [("ptr", ctypes.c_void_p), ("ndim", ctypes.c_int),
                ("shape", ctypes.c_int64 * MAX_NDIM),
                ("strides", ctypes.c_int64 * MAX_NDIM),
                ("dtype", ctypes.c_char_p), ("typestr", ctypes.c_char * 8),
                ("itemsize", ctypes.c_int64), ("size", ctypes.c_int64),
                ("device_type", ctypes.c_int), ("device", ctypes.c_int),
                ("readonly", ctypes.c_int), ("stream", ctypes.c_void_p),
                ("owner", ctypes.c_void_p)]


GET_BUFFER = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object,
                               ctypes.POINTER(Buffer))


NEW_ARRAY = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_int,
                             ctypes.POINTER(ctypes.c_int64), ctypes.c_char_p,
                             ctypes.c_int, ctypes.POINTER(Buffer))
CURRENT_STREAM = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_int,
                                  ctypes.POINTER(ctypes.c_void_p))


class Table(ctypes.Structure):
    """gm_c_api_table of gpumem/extension.h."""
    _fields_ = [("abi", ctypes.c_uint32), ("size", ctypes.c_uint32),
                ("version", ctypes.c_char_p), ("get_buffer", GET_BUFFER),
                ("new_array", NEW_ARRAY),
                ("current_stream", CURRENT_STREAM)]


get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
get_pointer.restype = ctypes.c_void_p
get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
decref = ctypes.pythonapi.Py_DecRef
decref.argtypes = [ctypes.c_void_p]

TABLE = Table.from_address(get_pointer(gpumem._C_API, b"gpumem._C_API"))


def describe(obj):
    buf = Buffer()
    assert TABLE.get_buffer(obj, ctypes.byref(buf)) == 0
    owner = ctypes.cast(buf.owner, ctypes.py_object).value
    decref(buf.owner)
    return buf, owner


@case
def table_header():
    assert TABLE.abi == 1
    assert TABLE.size == ctypes.sizeof(Table)
    assert TABLE.version.decode() == gpumem.__version__


@case
def device_array():
    a = gpumem.zeros((3, 5), "int16")
    buf, owner = describe(a)
    assert owner is a
    assert buf.ptr == a.ptr
    assert buf.ndim == 2 and list(buf.shape[:2]) == [3, 5]
    assert list(buf.strides[:2]) == [10, 2]
    assert buf.dtype == b"int16" and buf.typestr == b"<i2"
    assert buf.itemsize == 2 and buf.size == 15
    assert buf.readonly == 0
    assert (buf.device_type, buf.device) == tuple(a.__dlpack_device__())
    assert buf.stream is None          # nothing pending: the call was sync
    view = gpumem.zeros(10, "float64")[2:7]
    buf, owner = describe(view)
    assert buf.ptr == view.ptr and buf.size == 5 and buf.strides[0] == 8


@case
def foreign_objects():
    if CUDA:
        a = gpumem.zeros(6)

        class Foreign:
            __cuda_array_interface__ = a.__cuda_array_interface__
        buf, owner = describe(Foreign())
        assert buf.ptr == a.ptr and buf.shape[0] == 6
        assert buf.dtype == b"float32"
    else:
        # On the host backend host memory is the device's: NumPy through
        # DLPack (as gpumem.from_dlpack takes it), no copy.
        host = np.arange(12, dtype=np.float64).reshape(3, 4)
        buf, owner = describe(host)
        assert buf.ptr == host.ctypes.data
        assert list(buf.shape[:2]) == [3, 4] and buf.dtype == b"float64"
        assert buf.device_type == 1


@case
def checks():
    buf = Buffer()
    raises(TypeError, TABLE.get_buffer, 42, ctypes.byref(buf),
           match="device memory")
    a = gpumem.zeros(4)
    a.free()
    raises(ValueError, TABLE.get_buffer, a, ctypes.byref(buf))
    if CUDA:
        # Host memory is no device memory on the cuda backend.
        raises(Exception, TABLE.get_buffer, np.zeros(3), ctypes.byref(buf),
               match="host")


def read_element(address, dtype):
    """The element of DTYPE at ADDRESS, read through the address alone
    (device memory through a one-element CUDA Array Interface object,
    host memory through ctypes), as native code reads it."""
    dtype = np.dtype(dtype)
    if CUDA:
        class One:
            __cuda_array_interface__ = {
                "shape": (1,), "typestr": dtype.str, "version": 3,
                "data": (address, True), "strides": None}
        return gpumem.asarray(One()).copy_to_host()[0]
    raw = (ctypes.c_char * dtype.itemsize).from_address(address)
    return np.frombuffer(bytes(raw), dtype)[0]


def walk(buf, dtype):
    """The elements BUF describes, read one by one at ptr + index .
    strides, as a C extension walks (ptr, shape, strides)."""
    shape = tuple(buf.shape[:buf.ndim])
    out = np.empty(shape, dtype)
    for index in np.ndindex(*shape):
        offset = sum(i * buf.strides[axis] for axis, i in enumerate(index))
        out[index] = read_element(buf.ptr + offset, dtype)
    return out


def check_layout(array, expected):
    """get_buffer describes DeviceArray ARRAY as it is: its own shape,
    strides and element-0 address, which DLPack and (on CUDA) the CUDA
    Array Interface report too, and which read back EXPECTED."""
    buf, owner = describe(array)
    assert owner is array
    assert buf.ndim == array.ndim
    assert tuple(buf.shape[:buf.ndim]) == array.shape
    assert tuple(buf.strides[:buf.ndim]) == array.strides, \
        (tuple(buf.strides[:buf.ndim]), array.strides)
    assert buf.ptr == array.ptr or (buf.ptr is None and array.ptr == 0)
    assert buf.size == array.size
    if CUDA:
        cai = array.__cuda_array_interface__
        # (The interface names no address for an empty array: 0.)
        if buf.size > 0:
            assert cai["data"][0] == buf.ptr
        strides = cai["strides"] or np.empty(array.shape,
                                              array.dtype).strides
        # (The interface may restate the stride of an axis of length 1,
        # or of an empty array, which no element is reached through.)
        for axis in range(buf.ndim):
            if buf.shape[axis] > 1 and buf.size > 0:
                assert strides[axis] == buf.strides[axis], (strides, axis)
    if hasattr(np, "from_dlpack") and not CUDA:
        # NumPy reads the DLPack capsule: its view has the same layout.
        # (NumPy may restate the stride of an axis of length 1, which
        # no element is ever reached through.)
        host = np.from_dlpack(array)
        for axis in range(buf.ndim):
            if buf.shape[axis] > 1:
                assert host.strides[axis] == buf.strides[axis]
        if host.size:
            assert host.__array_interface__["data"][0] == buf.ptr
    got = walk(buf, array.dtype)
    np.testing.assert_array_equal(got, expected)
    assert got.sum(dtype=np.float64) == expected.sum(dtype=np.float64)


@case
def true_layout_of_views():
    """Strided, reversed, 0-d, empty and new-axis views: the layout the
    C API reports walks to NumPy's elements (a C-order rebuild of the
    strides read (16, 4) for a[:, 1::2] and outside the array for
    a[::-1, ::-2])."""
    host = np.arange(48, dtype=np.float32).reshape(6, 8) * 1.5 - 7
    a = gpumem.to_device(host)
    for key in [(slice(None), slice(1, None, 2)),     # (32, 8)
                (slice(None), 3),                      # (32,)
                (slice(None, None, -1), slice(None, None, -2)),
                (2, slice(None, None, -1)),
                (slice(1, 5), slice(2, 7)),
                (slice(None), None, slice(None, None, 3)),
                (None, 4, Ellipsis),
                (3, 5),                                # 0-d
                (slice(2, 2), slice(None)),            # empty
                (slice(None, None, -1),)]:
        check_layout(a[key], host[key])
    check_layout(a, host)
    wide = np.arange(2 * 3 * 4, dtype=np.int64).reshape(2, 3, 4)
    w = gpumem.to_device(wide)
    check_layout(w[::-1, :, ::2], wide[::-1, :, ::2])
    check_layout(w[:, ::-2, 1], wide[:, ::-2, 1])


@case
def true_layout_of_foreign_memory():
    """Objects gpumem accepts but did not make keep their own layout."""
    host = np.arange(30, dtype=np.float64).reshape(5, 6)
    if CUDA:
        a = gpumem.to_device(host)
        view = a[::-1, 1::2]

        class Foreign:
            __cuda_array_interface__ = view.__cuda_array_interface__
        buf, owner = describe(Foreign())
        assert tuple(buf.strides[:2]) == view.strides == (-48, 16)
        assert buf.ptr == view.ptr
        np.testing.assert_array_equal(walk(buf, np.float64),
                                      host[::-1, 1::2])
    else:
        # NumPy as a DLPack producer, reversed and strided.
        view = host[::-1, 1::2]
        if not hasattr(view, "__dlpack__"):
            gmtest.skip("NumPy %s has no __dlpack__" % np.__version__)
        buf, owner = describe(view)
        assert tuple(buf.strides[:2]) == view.strides == (-48, 16)
        assert buf.ptr == view.__array_interface__["data"][0]
        np.testing.assert_array_equal(walk(buf, np.float64), view)


@case
def contiguity_of_reported_layouts():
    """The header's gm_buffer_is_contiguous, written again here as the
    header has it, agrees with DeviceArray.is_contiguous."""
    def is_contiguous(buf):
        expected = buf.itemsize
        for i in reversed(range(buf.ndim)):
            if buf.shape[i] != 1 and buf.strides[i] != expected:
                return buf.size == 0
            expected *= buf.shape[i]
        return True
    a = gpumem.zeros((4, 6), "int32")
    for view in [a, a[1:3], a[:, ::2], a[::-1], a[2], a[:, 1], a[None],
                 a[1:1], a[1:2, :]]:
        buf, _ = describe(view)
        assert is_contiguous(buf) == view.is_contiguous, view.strides


@case
def new_array():
    assert TABLE.size >= ctypes.sizeof(Table)
    shape = (ctypes.c_int64 * 2)(3, 7)
    buf = Buffer()
    assert TABLE.new_array(2, shape, b"float64", -1, ctypes.byref(buf)) == 0
    array = ctypes.cast(buf.owner, ctypes.py_object).value
    decref(buf.owner)
    assert isinstance(array, gpumem.DeviceArray)
    assert array.shape == (3, 7) and array.dtype == np.float64
    assert array.device == gpumem.current_device()
    assert buf.ptr == array.ptr and tuple(buf.strides[:2]) == (56, 8)
    assert buf.readonly == 0 and buf.size == 21
    array.copy_from_host(np.ones((3, 7)))
    assert array.copy_to_host().sum() == 21
    # 0-d, and the checks gpumem.empty makes.
    assert TABLE.new_array(0, None, b"int16", -1, ctypes.byref(buf)) == 0
    scalar = ctypes.cast(buf.owner, ctypes.py_object).value
    decref(buf.owner)
    assert scalar.shape == () and buf.ndim == 0
    raises(TypeError, TABLE.new_array, 1, (ctypes.c_int64 * 1)(4),
           b"complex1024", -1, ctypes.byref(buf))
    raises(ValueError, TABLE.new_array, 1, (ctypes.c_int64 * 1)(-4),
           b"float32", -1, ctypes.byref(buf))
    raises(ValueError, TABLE.new_array, 33, (ctypes.c_int64 * 33)(),
           b"float32", -1, ctypes.byref(buf))
    raises(ValueError, TABLE.new_array, 1, (ctypes.c_int64 * 1)(4),
           b"float32", gpumem.device_count(), ctypes.byref(buf))


@case
def current_stream():
    stream = ctypes.c_void_p(123)
    assert TABLE.current_stream(-1, ctypes.byref(stream)) == 0
    assert stream.value is None            # no block open: default stream
    raises(ValueError, TABLE.current_stream, gpumem.device_count(),
           ctypes.byref(stream))
    if not CUDA:
        return
    s = gpumem.Stream()
    with s:
        assert TABLE.current_stream(-1, ctypes.byref(stream)) == 0
        assert stream.value == s.handle
    with gpumem.concurrent():
        assert TABLE.current_stream(0, ctypes.byref(stream)) == 0
        assert stream.value is not None


gmtest.main()
