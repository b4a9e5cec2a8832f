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


class Table(ctypes.Structure):
    """gm_c_api_table of gpumem/extension.h."""
    _fields_ = [("abi", ctypes.c_uint32), ("size", ctypes.c_uint32),
                ("version", ctypes.c_char_p), ("get_buffer", GET_BUFFER)]


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


gmtest.main()
