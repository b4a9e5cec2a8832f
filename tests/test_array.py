"""gpumem.DeviceArray: creation, dtypes, views, lifetime (py-array.c, py-array-core.c)."""

import gc
import weakref

import numpy as np

import gmtest
from gmtest import case, raises, random_array, DTYPES

import gpumem

SIZES = [0, 1, 3, 1023, 65537, 2**24 + 3]


@case
def every_dtype_round_trips():
    for dtype in DTYPES:
        for n in SIZES[:-1]:
            host = random_array(n, dtype)
            a = gpumem.to_device(host)
            assert a.dtype == np.dtype(dtype), (a.dtype, dtype)
            assert a.shape == (n,) and a.size == n and a.ndim == 1
            assert a.itemsize == np.dtype(dtype).itemsize
            assert a.nbytes == host.nbytes
            back = a.copy_to_host()
            assert back.dtype == host.dtype
            assert np.array_equal(back, host), (dtype, n)


@case
def large_round_trip():
    host = random_array(SIZES[-1], "float32")
    a = gpumem.to_device(host)
    assert np.array_equal(a.copy_to_host(), host)


@case
def shapes_and_zeros():
    for shape in [(), (0,), (5,), (2, 3), (4, 0, 2), (2, 3, 4, 5)]:
        for dtype in ("float32", "int16", "complex128", "bool"):
            z = gpumem.zeros(shape, dtype=dtype)
            assert z.shape == shape
            host = z.copy_to_host()
            assert host.shape == shape and not host.any()
            e = gpumem.empty(shape, dtype)
            assert e.shape == shape and e.dtype == np.dtype(dtype)
    assert gpumem.empty(7).shape == (7,)
    assert gpumem.empty(np.int64(3)).shape == (3,)
    assert gpumem.empty(3).dtype == np.float32
    assert gpumem.empty(3, np.float64).dtype == np.float64
    assert gpumem.empty(3, np.dtype("uint8")).dtype == np.uint8


@case
def bad_shapes_and_dtypes():
    raises(ValueError, gpumem.empty, -1)
    raises(ValueError, gpumem.empty, (2, -3))
    raises(TypeError, gpumem.empty, 2.5)
    raises(TypeError, gpumem.empty, (2, "3"))
    raises(TypeError, gpumem.empty, None)
    raises(ValueError, gpumem.empty, (2**40, 2**40))
    raises(ValueError, gpumem.empty, 2**62, "float64")
    for dtype in ("U10", object, ">f4", "datetime64[s]", "bogus", 3):
        raises(TypeError, gpumem.empty, 3, dtype)
    raises(TypeError, gpumem.to_device, np.array(["a", "b"]))
    raises(TypeError, gpumem.to_device, [object()])
    raises(TypeError, gpumem.DeviceArray)
    raises(ValueError, gpumem.empty, 3, device=-1)


@case
def views_share_memory():
    host = random_array(40, "float64").reshape(4, 10)
    a = gpumem.to_device(host)
    v = a[1:3]
    assert v.shape == (2, 10) and v.base is a
    assert v.ptr == a.ptr + 10 * 8
    assert np.array_equal(v.copy_to_host(), host[1:3])
    new = random_array(20, "float64").reshape(2, 10)
    v.copy_from_host(new)
    host[1:3] = new
    assert np.array_equal(a.copy_to_host(), host)
    row = a[-1]
    assert row.shape == (10,) and np.array_equal(row.copy_to_host(), host[3])
    vv = v[1:]
    assert vv.base is a and vv.ptr == a.ptr + 20 * 8
    assert a[5:].shape == (0, 10)
    assert a[-100:2].shape == (2, 10)
    r = a.reshape(40)
    assert r.base is a and np.array_equal(r.copy_to_host(), host.ravel())
    assert a.reshape(-1, 8).shape == (5, 8)
    assert a.reshape((2, 2, 10)).shape == (2, 2, 10)
    raises(ValueError, a.reshape, 41)
    raises(ValueError, a.reshape, -1, 7)
    assert not a[0:4:2].is_contiguous          # a strided view (test_index)
    raises(IndexError, a.__getitem__, 4)
    raises(TypeError, a.__getitem__, "x")
    raises(IndexError, a.__getitem__, (1, 2, 3))
    assert len(a) == 4
    raises(TypeError, len, gpumem.empty(()))


@case
def view_keeps_owner_alive():
    host = random_array(1000, "int32")
    a = gpumem.to_device(host)
    owner_ref = weakref.ref(a)
    v = a[100:200]
    del a
    gc.collect()
    assert owner_ref() is not None
    assert np.array_equal(v.copy_to_host(), host[100:200])
    before = gpumem.memory_stats()["allocated_bytes"]
    del v
    gc.collect()
    assert owner_ref() is None
    assert gpumem.memory_stats()["allocated_bytes"] == before - host.nbytes


@case
def use_after_free_raises():
    a = gpumem.to_device(random_array(10, "float32"))
    v = a[2:5]
    r = repr(a)
    assert "freed" not in r
    a.free()
    assert "freed" in repr(a) and "freed" in repr(v)
    for use in (lambda: a.ptr, a.copy_to_host, lambda: a[1:2],
                lambda: a.copy_from_host(np.zeros(10, np.float32)),
                lambda: v.copy_to_host(), lambda: v.ptr,
                lambda: gpumem.copy(a, np.zeros(10, np.float32)),
                lambda: gpumem.copy_from_gpu(a, np.zeros(10, np.float32), 1),
                lambda: gpumem.kernels.saxpy(3, 1.0, v, v),
                lambda: a.reshape(10)):
        raises(ValueError, use, match="freed")
    a.free()                      # a second free is harmless
    assert a.shape == (10,)       # metadata stays readable


@case
def with_block_frees():
    before = gpumem.memory_stats()["allocated_bytes"]
    with gpumem.empty(1000, "float64") as a:
        assert gpumem.memory_stats()["allocated_bytes"] == before + 8000
        a.copy_from_host(np.ones(1000))
    assert gpumem.memory_stats()["allocated_bytes"] == before
    raises(ValueError, a.copy_to_host)
    try:
        with gpumem.empty(10) as b:
            raise KeyError("inside")
    except KeyError:
        pass
    raises(ValueError, lambda: b.ptr)


@case
def view_free_releases_only_the_view():
    a = gpumem.to_device(np.arange(10, dtype=np.float32))
    v = a[0:5]
    v.free()
    raises(ValueError, v.copy_to_host)
    assert np.array_equal(a.copy_to_host(), np.arange(10, dtype=np.float32))


@case
def repr_names_shape_dtype_device():
    a = gpumem.empty((2, 3), "int16")
    text = repr(a)
    assert "(2, 3)" in text and "int16" in text and "device=0" in text


@case
def asarray_of_device_array_is_itself():
    a = gpumem.empty(3)
    assert gpumem.asarray(a) is a
    raises(TypeError, gpumem.asarray, np.zeros(3))
    raises(TypeError, gpumem.asarray, [1, 2])


@case
def views_of_wrapped_memory_are_refused_after_free():
    # An array over memory another producer owns (from_dlpack, asarray):
    # free() reaches its views, as it does an owner's.
    host = random_array(64, "float32")
    if gpumem.backend == "cuda":
        producer = gpumem.to_device(host)
    else:
        producer = host.copy()        # NumPy memory: the host backend's
    wraps = [gpumem.from_dlpack]
    if gpumem.backend == "cuda":      # asarray needs device memory

        class Interface:
            __cuda_array_interface__ = producer.__cuda_array_interface__
        wraps.append(lambda p: gpumem.asarray(Interface()))
    for wrap in wraps:
        a = wrap(producer)
        assert a is not producer
        views = [a[8:16], a.reshape(8, 8)[1], a[2:][3:], a[8:16][1:]]
        assert all(v.base is a for v in views)
        assert np.array_equal(views[0].copy_to_host(), host[8:16])
        a.free()
        for v in views:
            raises(ValueError, v.copy_to_host)
            raises(ValueError, lambda: v.ptr)
            assert "freed" in repr(v)


@case
def cuda_array_interface_strides_of_any_sequence_are_counted():
    # fuzz_api found it: strides given as a sequence that is not a list
    # or a tuple, of the wrong length, aborted the process instead of
    # raising ValueError.
    if gpumem.backend != "cuda":
        gmtest.skip("asarray reads __cuda_array_interface__ only where "
                    "device memory is CUDA memory")
    producer = gpumem.to_device(random_array(12, "float32"))
    iface = dict(producer.__cuda_array_interface__)
    iface["shape"] = (3, 4)

    class Interface:
        __cuda_array_interface__ = dict(iface, strides=range(16, 0, -4))
    raises(ValueError, gpumem.asarray, Interface(), match="strides")

    class Right:
        __cuda_array_interface__ = dict(iface, strides=range(16, 0, -12))
    got = gpumem.asarray(Right())
    assert got.shape == (3, 4)
    assert np.array_equal(got.copy_to_host().ravel(),
                          producer.copy_to_host())


gmtest.main()
