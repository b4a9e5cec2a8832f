"""gpumem._C_API, the extension authors' capsule (py-capi.c,
include/gpumem/extension.h), called through ctypes with the header's
struct layouts, as a C extension calls it; and DLPack's C exchange API
(py-dlpack-exchange.c) both ways, through gmexchange
(tests/bindings/exchange.c), a C consumer built here at test time, with
gpumem's arrays and, where installed, PyTorch's tensors."""

import ctypes
import os
import shutil
import subprocess
import sys
import sysconfig

import numpy as np

import gmtest
from gmtest import case, raises

import gpumem

CUDA = gpumem.backend == "cuda"
HOST = not CUDA
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
LOAD_BUFFER = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object,
                               ctypes.POINTER(Buffer),
                               ctypes.POINTER(ctypes.c_void_p))
STREAM_WAIT = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_void_p,
                               ctypes.c_void_p)
LAUNCH_DONE = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_void_p,
                               ctypes.POINTER(ctypes.py_object), ctypes.c_int)
VIEW_NDIM = 4
WRITABLE, C_CONTIG = 1, 2


class View(ctypes.Structure):
    """gm_view of gpumem/extension.h."""
    _fields_ = [("ptr", ctypes.c_void_p), ("owner", ctypes.c_void_p),
                ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("stream", ctypes.c_void_p), ("launch", ctypes.c_void_p),
                ("size", ctypes.c_int64), ("itemsize", ctypes.c_int64),
                ("ndim", ctypes.c_int32), ("device", ctypes.c_int32),
                ("device_type", ctypes.c_int32), ("readonly", ctypes.c_int32),
                ("dtype", ctypes.c_char_p),
                ("dims", ctypes.c_int64 * (2 * VIEW_NDIM))]


LOAD_VIEW = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object,
                             ctypes.POINTER(View), ctypes.c_char_p,
                             ctypes.c_int, ctypes.c_uint)


class Hold(ctypes.Structure):
    """gm_hold of gpumem/extension.h."""
    _fields_ = [("holds", ctypes.c_uint32), ("native", ctypes.c_uint32)]


HOLD = ctypes.PYFUNCTYPE(ctypes.POINTER(Hold), ctypes.py_object)
HOLD_GONE = ctypes.PYFUNCTYPE(None, ctypes.POINTER(Hold))


class Table(ctypes.Structure):
    """gm_c_api_table of gpumem/extension.h."""
    _fields_ = [("abi", ctypes.c_uint32), ("size", ctypes.c_uint32),
                ("version", ctypes.c_char_p), ("get_buffer", GET_BUFFER),
                ("new_array", NEW_ARRAY),
                ("current_stream", CURRENT_STREAM),
                ("load_buffer", LOAD_BUFFER), ("stream_wait", STREAM_WAIT),
                ("launch_done", LAUNCH_DONE), ("load_view", LOAD_VIEW),
                ("array_type", ctypes.c_void_p),
                ("lent_offset", ctypes.c_ssize_t),
                ("launch_blocks", ctypes.POINTER(ctypes.c_uint32)),
                ("hold", HOLD), ("hold_gone", HOLD_GONE)]


class Lent(ctypes.Structure):
    """gm_lent of gpumem/extension.h."""
    _fields_ = [("usable", ctypes.c_uint32), ("contiguous", ctypes.c_uint32),
                ("typestr", ctypes.c_char * 4),
                ("reserved", ctypes.c_uint32), ("view", View),
                ("hold", ctypes.POINTER(Hold))]


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


@case
def load_buffer():
    """load_buffer describes as get_buffer does, and names the stream to
    launch on; a freed array and a non-array raise as get_buffer's."""
    a = gpumem.zeros((4, 6), "float32")[:, ::2]
    buf, launch = Buffer(), ctypes.c_void_p(5)
    assert TABLE.load_buffer(a, ctypes.byref(buf), ctypes.byref(launch)) == 0
    assert ctypes.cast(buf.owner, ctypes.py_object).value is a
    decref(buf.owner)
    assert buf.ptr == a.ptr and buf.ndim == 2
    assert tuple(buf.shape[:2]) == (4, 3) and tuple(buf.strides[:2]) == (24, 8)
    assert buf.dtype == b"float32" and buf.typestr == b"<f4"
    assert launch.value is None            # no block open: default stream
    raises(TypeError, TABLE.load_buffer, 42, ctypes.byref(buf),
           ctypes.byref(launch), match="expected device memory")
    freed = gpumem.zeros(3)
    freed.free()
    raises(ValueError, TABLE.load_buffer, freed, ctypes.byref(buf),
           ctypes.byref(launch), match="freed")
    if CUDA:
        s = gpumem.Stream()
        with s:
            assert TABLE.load_buffer(gpumem.zeros(2), ctypes.byref(buf),
                                     ctypes.byref(launch)) == 0
            decref(buf.owner)
            assert launch.value == s.handle


def load_view(obj, typestr=None, ndim=-1, flags=0):
    """OBJ through load_view: the view and its owner (the view's
    reference released)."""
    view = View()
    assert TABLE.load_view(obj, ctypes.byref(view), typestr, ndim, flags) == 0
    owner = ctypes.cast(view.owner, ctypes.py_object).value
    decref(view.owner)
    return view, owner


def dims_of(view):
    """(shape, strides) of VIEW, read through its pointers."""
    return (tuple(view.shape[i] for i in range(view.ndim)),
            tuple(view.strides[i] for i in range(view.ndim)))


def inline_dims(view):
    """Whether VIEW's shape and strides point into its own dims."""
    dims = ctypes.addressof(view) + View.dims.offset
    shape = ctypes.cast(view.shape, ctypes.c_void_p).value
    strides = ctypes.cast(view.strides, ctypes.c_void_p).value
    return shape == dims and strides == dims + 8 * VIEW_NDIM


@case
def load_view_describes():
    """load_view describes as load_buffer does, into the small view: a
    DeviceArray's shape and strides borrowed from it, for 0 to 7
    dimensions, views and reversed views included."""
    for ndim in range(8):
        a = gpumem.zeros(tuple(range(2, 2 + ndim)), "float32")
        for array in [a] + ([a[(slice(None, None, -1),) * ndim]]
                            if ndim else []):
            view, owner = load_view(array, b"<f4", ndim)
            assert owner is array
            assert dims_of(view) == (array.shape, array.strides)
            assert not inline_dims(view)          # borrowed
            assert view.ptr == array.ptr or (view.ptr is None
                                             and array.ptr == 0)
            assert view.ndim == ndim and view.size == array.size
            assert view.itemsize == 4 and view.dtype == b"float32"
            assert (view.device_type, view.device) == \
                tuple(array.__dlpack_device__())
            assert view.readonly == 0
            assert view.stream is None and view.launch is None
    b = gpumem.zeros((4, 6), "int16")[:, ::2]
    view, owner = load_view(b)                  # any dtype, ndim, layout
    assert owner is b and view.dtype == b"int16"
    assert dims_of(view) == ((4, 3), (12, 4))
    ro = gpumem.asarray(gpumem.zeros(3, "float64"), readonly=True)
    view, _ = load_view(ro, b"<f8", 1, C_CONTIG)
    assert view.readonly == 1
    if CUDA:
        s = gpumem.Stream()
        with s:
            view, _ = load_view(gpumem.zeros(2))
            assert view.launch == s.handle


@case
def load_view_of_foreign_memory():
    """Other objects: their shape copied into the view's dims up to
    GM_VIEW_NDIM dimensions (the exchange API's borrowed tensor), or
    borrowed from a DeviceArray made over the memory (DLPack, the CUDA
    Array Interface, more dimensions)."""
    ex_host = np.arange(24, dtype=np.float64).reshape(2, 3, 4)
    if CUDA:
        a = gpumem.to_device(ex_host)[::-1]

        class Foreign:
            __cuda_array_interface__ = a.__cuda_array_interface__
        foreign = Foreign()
    else:
        foreign = ex_host[::-1]
        if not hasattr(foreign, "__dlpack__"):
            gmtest.skip("NumPy %s has no __dlpack__" % np.__version__)
    view, owner = load_view(foreign, b"<f8", 3)
    assert isinstance(owner, gpumem.DeviceArray) and not inline_dims(view)
    assert dims_of(view) == ((2, 3, 4), (-96, 32, 8))


@case
def load_view_refusals():
    """Each check, with gpumem::array's messages, and no owner left."""
    a = gpumem.zeros((4, 6), "float32")
    view = View()
    cases = [
        (a, b"<f8", -1, 0, TypeError, "must hold float64 elements, not "
         "float32"),
        (gpumem.asarray(a, readonly=True), b"<f4", -1, WRITABLE,
         ValueError, "is written here but the array is read-only"),
        (a, b"<f4", 1, 0, ValueError, "must have 1 dimension, not 2"),
        (a, b"<f4", 3, 0, ValueError, "must have 3 dimensions, not 2"),
        (a[:, ::2], b"<f4", 2, C_CONTIG, ValueError, "must be C-contiguous"),
        (a[::-1], None, -1, C_CONTIG, ValueError, "must be C-contiguous"),
        (42, None, -1, 0, TypeError, "expected device memory"),
    ]
    for obj, typestr, ndim, flags, error, text in cases:
        view.owner = 7
        raises(error, TABLE.load_view, obj, ctypes.byref(view), typestr,
               ndim, flags, match=text)
        assert view.owner is None, (obj, typestr, ndim, flags)
    # What the checks take: strided where not asked for C_CONTIG, any
    # dtype with no typestr, read-only where not asked to be writable.
    load_view(a[:, ::2], b"<f4", 2, WRITABLE)
    load_view(a[1:3], b"<f4", 2, WRITABLE | C_CONTIG)
    freed = gpumem.zeros(3)
    freed.free()
    raises(ValueError, TABLE.load_view, freed, ctypes.byref(view), None, -1,
           0, match="freed")
    assert view.owner is None


def lent_of(array):
    """ARRAY's gm_lent, read in place as gpumem/array.hpp reads it."""
    return Lent.from_address(id(array) + TABLE.lent_offset)


@case
def lent_view():
    """A DeviceArray that owns its memory lends its description at its
    first load_view (refused or not), for casters to read in place:
    load_view's view but for the owner and the launch stream; never a
    view's; unusable from the moment work on a stream is pending on it,
    it is freed or shared, until load_view lends it again.
    launch_blocks counts the open blocks that pick the launch stream, and
    the non-blocking streams alive."""
    assert (ctypes.cast(TABLE.array_type, ctypes.py_object).value
            is gpumem.DeviceArray)
    a = gpumem.zeros((3, 5), "int16")
    assert lent_of(a).usable == 0
    view, _ = load_view(a, b"<i2", 2, WRITABLE | C_CONTIG)
    lent = lent_of(a)
    assert lent.usable == 1 and lent.contiguous == 1
    assert lent.typestr == b"<i2"
    for field, _ in View._fields_:
        if field not in ("owner", "dims"):
            got, want = getattr(lent.view, field), getattr(view, field)
            if field in ("shape", "strides"):
                got = ctypes.cast(got, ctypes.c_void_p).value
                want = ctypes.cast(want, ctypes.c_void_p).value
            assert got == want, (field, got, want)
    assert lent.view.owner is None and lent.view.stream is None
    assert lent.view.launch is None
    assert dims_of(lent.view) == ((3, 5), (10, 2))

    refused = gpumem.zeros(2, "float64")
    raises(TypeError, TABLE.load_view, refused, ctypes.byref(View()), b"<f4",
           -1, 0)
    assert lent_of(refused).usable == 1
    assert lent_of(refused).typestr == b"<f8"
    part = a[1:]
    load_view(part)
    assert lent_of(part).usable == 0

    s = gpumem.Stream()
    gpumem.copy(a, gpumem.ones((3, 5), "int16"), stream=s)
    assert lent_of(a).usable == 0
    s.synchronize()
    load_view(a)
    assert lent_of(a).usable == 1
    a.free()
    assert lent_of(a).usable == 0

    shared = gpumem.zeros(4, "float32")
    load_view(shared)
    handle = gpumem.share(shared)
    assert lent_of(shared).usable == 0
    del handle

    blocks = TABLE.launch_blocks
    assert blocks[0] == 0
    with s:
        assert blocks[0] == 1
        with gpumem.Stream():
            assert blocks[0] == 2
    assert blocks[0] == 0
    with gpumem.concurrent():
        assert blocks[0] == 1
        with gpumem.concurrent():
            assert blocks[0] == 2
    assert blocks[0] == 0
    # A non-blocking stream counts while it lives: the default stream's
    # work must first wait for it, which load_view arranges.
    nb = gpumem.Stream(non_blocking=True)
    assert blocks[0] == 1
    load_view(a2 := gpumem.zeros(2))
    assert lent_of(a2).usable == 1
    del nb
    assert blocks[0] == 0


@case
def launch_helpers():
    """stream_wait and launch_done: no-ops where nothing is pending (the
    host backend's memory); launch_done without a block waits."""
    assert TABLE.stream_wait(-1, None, None) == 0
    a = gpumem.zeros(8)
    written = (ctypes.py_object * 1)(a)
    assert TABLE.launch_done(-1, None, written, 1) == 0
    if CUDA:
        raises(ValueError, TABLE.stream_wait, gpumem.device_count(), None,
               ctypes.c_void_p(0x10))
        s1, s2 = gpumem.Stream(), gpumem.Stream()
        assert TABLE.stream_wait(0, s1.handle, s2.handle) == 0
        with s1:
            assert TABLE.launch_done(0, s1.handle, written, 1) == 0


def build_exchange():
    """Builds gmexchange (tests/bindings/exchange.c) into a temporary
    folder on sys.path; the module, or None with the reason."""
    compiler = sysconfig.get_config_var("CC") or "cc"
    compiler = compiler.split()[0]
    if shutil.which(compiler) is None:
        return None, f"no C compiler ({compiler})"
    if gmtest.sanitized():
        return None, "a sanitized build (the module is not)"
    work = gmtest.scratch(prefix="gpumem-exchange.")
    target = os.path.join(work, "gmexchange"
                          + sysconfig.get_config_var("EXT_SUFFIX"))
    source = os.path.join(gmtest.SRCDIR, "tests", "bindings", "exchange.c")
    done = subprocess.run([compiler, "-O2", "-Wall", "-Werror", "-shared",
                           "-fPIC", "-I" + sysconfig.get_paths()["include"],
                           source, "-o", target],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise AssertionError("building gmexchange failed:\n" + done.stderr)
    sys.path.insert(0, work)
    import gmexchange
    return gmexchange, None


EXCHANGE, EXCHANGE_MISSING = build_exchange()


def exchange():
    if EXCHANGE is None:
        gmtest.skip(EXCHANGE_MISSING)
    return EXCHANGE


@case
def exchange_api_published():
    """DeviceArray's type publishes DLPack 1.3's table, as the standard
    lays it out (the consumer checks the offsets when built)."""
    ex = exchange()
    capsule = gpumem.DeviceArray.__dlpack_c_exchange_api__
    assert type(capsule).__name__ == "PyCapsule"
    assert "dlpack_exchange_api" in repr(capsule)
    assert ex.info(gpumem.DeviceArray) == (1, 3, True, True)


@case
def exchange_borrowed_tensor():
    """dltensor_from_py_object_no_sync lends the array's own layout:
    element-0 address, shape, strides in elements, reversed views."""
    ex = exchange()
    host = np.arange(48, dtype=np.float32).reshape(6, 8)
    a = gpumem.to_device(host)
    dl_type = a.__dlpack_device__()
    for key in [(), (slice(None), slice(1, None, 2)),
                (slice(None, None, -1), slice(None, None, -3)), (2,)]:
        view = a[key]
        data, device, ndim, dtype, shape, strides, offset = ex.borrowed(view)
        assert data == view.ptr and offset == 0
        assert device == tuple(dl_type)
        assert ndim == view.ndim and shape == view.shape
        assert strides == tuple(s // 4 for s in view.strides), strides
        assert dtype == (2, 32, 1)
        if not CUDA:
            assert ex.sum_host(view) == float(host[key].sum())
    freed = gpumem.zeros(2)
    freed.free()
    raises(ValueError, ex.borrowed, freed, match="freed")


@case
def exchange_export_and_import():
    """managed_tensor_from_py_object_no_sync exports with the read-only
    flag; managed_tensor_to_py_object_no_sync imports (gpumem to gpumem
    here: the memory is the same, the array is kept alive by the
    export)."""
    ex = exchange()
    host = np.arange(12, dtype=np.float32).reshape(3, 4)
    a = gpumem.to_device(host)
    version, readonly, tensor = ex.exported(a)
    assert version[0] == 1 and readonly is False
    assert tensor[0] == a.ptr and tensor[4] == (3, 4)
    ro = gpumem.asarray(a, readonly=True)
    assert ex.exported(ro)[1] is True
    back = ex.convert(a[::-1], gpumem.DeviceArray)
    assert isinstance(back, gpumem.DeviceArray) and back is not a
    assert back.ptr == a[::-1].ptr and back.strides == (-16, 4)
    np.testing.assert_array_equal(back.copy_to_host(), host[::-1])
    assert ex.convert(ro, gpumem.DeviceArray).readonly
    del a
    np.testing.assert_array_equal(back.copy_to_host(), host[::-1])


@case
def exchange_allocator_and_stream():
    """managed_tensor_allocator makes a new array (SetError for what it
    cannot make); current_work_stream answers with gpumem's rule."""
    ex = exchange()
    device_type = gpumem.zeros(1).__dlpack_device__()[0]
    made = ex.allocate(gpumem.DeviceArray, (2, 5), 2, 64, device_type, 0)
    assert isinstance(made, gpumem.DeviceArray)
    assert made.shape == (2, 5) and made.dtype == np.float64
    raises(RuntimeError, ex.allocate, gpumem.DeviceArray, (2,), 2, 24,
           device_type, 0, match="ValueError")
    raises(RuntimeError, ex.allocate, gpumem.DeviceArray, (2,), 2, 32,
           device_type + 5, 0, match="device type")
    assert ex.current_stream(gpumem.DeviceArray, device_type, 0) == 0
    if CUDA:
        s = gpumem.Stream()
        with s:
            assert ex.current_stream(gpumem.DeviceArray, 2, 0) == s.handle
        # A consumer's device index is checked before any stream is asked.
        raises(ValueError, ex.current_stream, gpumem.DeviceArray, 2,
               gpumem.device_count())


@case
def exchange_dispatch_comes_first():
    """A type's exchange API is used before its __dlpack__: a type that
    publishes gpumem's table without being a DeviceArray is refused by
    that table, and __dlpack__ is never called."""
    class Borrower:
        __dlpack_c_exchange_api__ = \
            gpumem.DeviceArray.__dlpack_c_exchange_api__

        def __dlpack__(self, **kwargs):
            raise AssertionError("__dlpack__ was called")

        def __dlpack_device__(self):
            return gpumem.zeros(1).__dlpack_device__()
    raises(TypeError, gpumem.from_dlpack, Borrower(),
           match="needs a gpumem.DeviceArray, not Borrower")
    buf = Buffer()
    raises(TypeError, TABLE.get_buffer, Borrower(), ctypes.byref(buf),
           match="exchange API")


def torch_with_exchange():
    """PyTorch on the GPU whose Tensor type publishes the exchange API,
    else skips the case with the reason."""
    if not CUDA:
        gmtest.skip("PyTorch's exchange with CUDA memory: cuda backend only")
    try:
        import torch
    except ImportError:
        gmtest.skip("PyTorch is not installed")
    if not torch.cuda.is_available():
        gmtest.skip("torch.cuda is not available")
    if not hasattr(torch.Tensor, "__dlpack_c_exchange_api__"):
        gmtest.skip(f"PyTorch {torch.__version__}'s Tensor does not publish "
                    "__dlpack_c_exchange_api__")
    return torch


@case
def exchange_with_torch():
    """Both directions with PyTorch's table: torch to gpumem (asarray,
    from_dlpack, the C API and gmexchange's convert) and gpumem to torch
    (torch's importer through gmexchange, torch.from_dlpack)."""
    ex = exchange()
    torch = torch_with_exchange()
    major, minor, _, _ = ex.info(torch.Tensor)
    assert major == 1
    t = torch.arange(24, dtype=torch.float32, device="cuda").reshape(4, 6)
    view = t[:, 1::2]
    for take in (gpumem.asarray, gpumem.from_dlpack,
                 lambda x: ex.convert(x, gpumem.DeviceArray)):
        a = take(view)
        assert isinstance(a, gpumem.DeviceArray)
        assert a.ptr == view.data_ptr() and a.shape == (4, 3)
        assert a.strides == (24, 8)
        np.testing.assert_array_equal(a.copy_to_host(), view.cpu().numpy())
    buf, owner = describe(view)
    assert owner is view and buf.ptr == view.data_ptr()
    assert tuple(buf.strides[:2]) == (24, 8)
    assert buf.stream == (torch.cuda.current_stream().cuda_stream or None)
    # load_view: up to four dimensions copied into the view's dims, the
    # tensor its owner; more borrowed from a DeviceArray over an export.
    view_, owner = load_view(view, b"<f4", 2, 0)
    assert owner is view and inline_dims(view_)
    assert dims_of(view_) == ((4, 3), (24, 8))
    assert view_.stream == buf.stream
    wide = torch.zeros((2, 3, 2, 2, 2), device="cuda")
    view_, owner = load_view(wide, b"<f4", 5, C_CONTIG)
    assert isinstance(owner, gpumem.DeviceArray) and not inline_dims(view_)
    assert dims_of(view_) == ((2, 3, 2, 2, 2), tuple(
        4 * s for s in wide.stride()))
    d = gpumem.to_device(np.arange(10, dtype=np.float32))[::2]
    for give in (lambda x: ex.convert(x, torch.Tensor), torch.from_dlpack):
        tt = give(d)
        assert isinstance(tt, torch.Tensor) and tt.data_ptr() == d.ptr
        assert tt.stride() == (2,)
        assert tt.cpu().tolist() == [0.0, 2.0, 4.0, 6.0, 8.0]
    # torch's current stream is the one its table names.
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        assert ex.current_stream(torch.Tensor, 2, 0) == s.cuda_stream


@case
def hold_keeps_memory_past_free():
    # A C API hold keeps the memory after free(); the last drop (the
    # header's gm_hold_drop: counts, then hold_gone at 0) gives it back.
    a = gpumem.zeros(4096)
    before = gpumem.memory_stats()["allocated_bytes"]
    hold = TABLE.hold(a[10:20])                   # a view: its base's record
    assert hold and (hold[0].holds, hold[0].native) == (2, 1)
    a.free()
    stats = gpumem.memory_stats()
    assert stats["allocated_bytes"] == before
    assert (stats["native_held_bytes"], stats["native_held_blocks"]) \
        == (4096 * 4, 1)
    assert (hold[0].holds, hold[0].native) == (1, 1)
    hold[0].native -= 1
    hold[0].holds -= 1
    TABLE.hold_gone(hold)
    stats = gpumem.memory_stats()
    assert stats["allocated_bytes"] == before - 4096 * 4
    assert stats["native_held_bytes"] == 0
    assert not TABLE.hold(np.zeros(3))            # not gpumem's memory
    assert not TABLE.hold(a)                      # freed: nothing to hold


@case
def lifetime_stress_in_threads():
    # Native holders (C API holds on arrays and views), DLPack capsules,
    # shares and free() in several threads at once: every holder reads
    # the bytes it held intact, and once all let go nothing is left
    # booked.  Run under the sanitizers by check-sanitizers.
    import threading
    drop_lock = threading.Lock()         # native code drops with the GIL

    def drop(hold):
        with drop_lock:
            hold[0].native -= 1
            hold[0].holds -= 1
            if hold[0].holds == 0:
                TABLE.hold_gone(hold)

    before = gpumem.memory_stats()["allocated_bytes"]
    errors = []
    kept = []
    kept_lock = threading.Lock()

    def maker(seed):
        rng = np.random.default_rng(seed)
        try:
            for _ in range(40):
                n = int(rng.integers(1, 4096))
                value = float(seed)
                a = gpumem.full(n, value, "float64")
                view = a[n // 2:]
                hold = TABLE.hold(view if rng.random() < 0.5 else a)
                capsule = a.__dlpack__() if rng.random() < 0.3 else None
                if rng.random() < 0.2 and hasattr(gpumem, "share"):
                    try:
                        gpumem.share(a)
                    except gpumem.Error as exc:   # the hold refuses it
                        assert "native code" in str(exc), exc
                with kept_lock:
                    kept.append((hold, a.ptr, n,
                                 value))
                a.free()
                del view, capsule
        except Exception as exc:          # noqa: BLE001 - reported below
            errors.append(exc)

    def reader():
        try:
            for _ in range(200):
                with kept_lock:
                    item = kept.pop() if kept else None
                if item is None:
                    continue
                hold, ptr, n, value = item
                if HOST:
                    got = np.frombuffer(ctypes.string_at(ptr, 8 * n),
                                        np.float64)
                    assert (got == value).all(), (value, np.unique(got))
                drop(hold)
        except Exception as exc:          # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=maker, args=(i,)) for i in range(4)]
    threads += [threading.Thread(target=reader) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for hold, ptr, n, value in kept:
        if HOST:
            got = np.frombuffer(ctypes.string_at(ptr, 8 * n), np.float64)
            assert (got == value).all()
        drop(hold)
    import gc
    gc.collect()
    stats = gpumem.memory_stats()
    assert stats["native_held_bytes"] == 0, stats
    assert stats["allocated_bytes"] == before, (stats, before)


gmtest.main()
