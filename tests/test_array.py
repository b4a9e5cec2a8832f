"""gpumem.DeviceArray: creation, dtypes, views, lifetime, scalars, pickling
(py-array.c, py-array-core.c, py-array-make.c, py-array-scalar.c,
py-transpose.c, py-pickle.c)."""

import gc
import operator
import pickle
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


@case
def one_element_arrays_convert_to_python_scalars():
    for shape in [(), (1,), (1, 1), (1, 1, 1)]:
        a = gpumem.to_device(np.full(shape, 2.75, np.float64))
        assert float(a) == 2.75 and isinstance(float(a), float)
        assert int(a) == 2 and isinstance(int(a), int)
        assert complex(a) == 2.75 + 0j
        assert a.item() == 2.75 and isinstance(a.item(), float)
        assert bool(a) is True
    for dtype in ["int32", "uint8", "int64"]:
        a = gpumem.to_device(np.array([7], dtype))
        assert int(a) == 7 and float(a) == 7.0 and a.item() == 7
        assert isinstance(a.item(), int)
    assert bool(gpumem.zeros(1)) is False
    assert bool(gpumem.to_device(np.array([False]))) is False
    assert bool(gpumem.to_device(np.array([True]))) is True
    assert complex(gpumem.to_device(np.array([1 - 2j], np.complex64))) \
        == 1 - 2j
    # A strided view's one element is the view's, not the owner's first.
    view = gpumem.to_device(np.arange(10, dtype=np.int64))[::-1][:1]
    assert int(view) == 9 and view.item() == 9


@case
def other_sizes_are_not_scalars():
    for shape in [(0,), (2,), (3, 4), (1, 0)]:
        a = gpumem.zeros(shape)
        raises(TypeError, float, a, match="only length-1 arrays")
        raises(TypeError, int, a, match="only length-1 arrays")
        raises(TypeError, complex, a, match="only length-1 arrays")
        raises(ValueError, a.item, match="can only convert an array of "
               "size 1 to a Python scalar")
    # bool (): NumPy 2's rules, empty arrays included.
    raises(ValueError, bool, gpumem.zeros(12),
           match="more than one element is ambiguous")
    raises(ValueError, bool, gpumem.zeros((2, 1)), match="a.any() or a.all()")
    raises(ValueError, bool, gpumem.zeros(0),
           match="truth value of an empty array is ambiguous")
    freed = gpumem.zeros(1)
    freed.free()
    for convert in (float, int, bool, complex):
        raises(ValueError, convert, freed, match="freed")
    raises(ValueError, freed.item, match="freed")


@case
def zero_d_integer_arrays_are_indexes():
    i = gpumem.to_device(np.array(3, np.int64))
    assert operator.index(i) == 3
    assert list(range(10))[i] == 3
    a = gpumem.to_device(np.arange(10, dtype=np.float32))
    assert float(a[i]) == 3.0
    assert operator.index(gpumem.to_device(np.array(5, np.uint16))) == 5
    for bad in [np.array([3], np.int64), np.array(3.0), np.array(True)]:
        raises(TypeError, operator.index, gpumem.to_device(bad),
               match="only integer scalar arrays")


@case
def full_and_ones():
    for value, dtype in [(7, np.int64), (1.5, np.float64), (True, np.bool_),
                         (1 + 1j, np.complex128)]:
        a = gpumem.full((2, 3), value)
        assert a.dtype == dtype and a.shape == (2, 3), (value, a.dtype)
        assert np.array_equal(a.copy_to_host(), np.full((2, 3), value))
    a = gpumem.full(4, 2.9, dtype="int32")
    assert a.dtype == np.int32
    assert np.array_equal(a.copy_to_host(), np.full(4, 2))
    assert gpumem.full(0, 1.0).size == 0
    ones = gpumem.ones((3, 2))
    assert ones.dtype == np.float32     # gpumem's default, as empty's
    assert np.array_equal(ones.copy_to_host(), np.ones((3, 2), np.float32))
    assert np.array_equal(gpumem.ones(5, "uint8").copy_to_host(),
                          np.ones(5, np.uint8))
    last = gpumem.device_count() - 1
    assert gpumem.ones(2, device=last).device.index == last
    assert gpumem.full(2, 1, device=last).device.index == last
    raises(TypeError, gpumem.full, 3, "text")
    raises(TypeError, gpumem.full, 3, 1, dtype="U3")
    raises(ValueError, gpumem.full, 3, [1, 2, 3], match="scalar")
    raises(ValueError, gpumem.ones, -1)
    raises(TypeError, gpumem.ones, 3, "nodtype")
    raises(ValueError, gpumem.ones, 3, device=gpumem.device_count())


@case
def like_functions_copy_shape_dtype_and_device():
    last = gpumem.device_count() - 1
    model = gpumem.to_device(np.arange(12, dtype=np.int16).reshape(3, 4),
                             device=last)
    for make, expect in [(gpumem.empty_like, None), (gpumem.zeros_like, 0),
                         (gpumem.ones_like, 1)]:
        a = make(model)
        assert (a.shape, a.dtype, a.device.index) == ((3, 4), np.int16, last)
        assert a.is_contiguous and a.base is None
        if expect is not None:
            assert np.array_equal(a.copy_to_host(), np.full((3, 4), expect))
    a = gpumem.full_like(model, 9)
    assert np.array_equal(a.copy_to_host(), np.full((3, 4), 9, np.int16))
    a = gpumem.full_like(model, 2.5, dtype="float64", shape=(5,), device=0)
    assert (a.shape, a.dtype, a.device.index) == ((5,), np.float64, 0)
    assert np.array_equal(a.copy_to_host(), np.full(5, 2.5))
    # A strided model gives a C-contiguous array of its shape.
    view = model.T[::-1]
    a = gpumem.zeros_like(view)
    assert a.shape == (4, 3) and a.is_contiguous
    assert a.strides == (6, 2)
    # Any array with shape and dtype is a model: on the current device.
    a = gpumem.ones_like(np.zeros((2, 2), np.float64))
    assert (a.shape, a.dtype) == ((2, 2), np.float64)
    assert a.device.index == gpumem.current_device().index
    raises(TypeError, gpumem.empty_like, [1, 2, 3], match="shape and dtype")
    raises(TypeError, gpumem.zeros_like, np.zeros(2, "U2"))
    raises(ValueError, gpumem.empty_like, model, shape=(-1,))
    raises(ValueError, gpumem.empty_like, model,
           device=gpumem.device_count())
    freed = gpumem.zeros(3)
    freed.free()
    raises(ValueError, gpumem.zeros_like, freed, match="freed")


@case
def transpose_gives_views_with_permuted_strides():
    host = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    a = gpumem.to_device(host)
    cases = [(a.T, host.T), (a.transpose(), host.transpose()),
             (a.transpose(None), host.transpose()),
             (a.transpose(1, 0, 2), host.transpose(1, 0, 2)),
             (a.transpose((2, 0, 1)), host.transpose((2, 0, 1))),
             (a.transpose([-1, 0, -2]), host.transpose([-1, 0, -2])),
             (a[::-1, :, 1::2].T, host[::-1, :, 1::2].T)]
    for view, expect in cases:
        assert view.shape == expect.shape and view.strides == expect.strides, \
            (view.strides, expect.strides)
        assert view.base is a and view.ptr == a.ptr + (
            expect.__array_interface__["data"][0]
            - host.__array_interface__["data"][0])
        assert not view.is_contiguous
        assert np.array_equal(view.copy_to_host(), expect)
        assert np.array_equal(view.copy().copy_to_host(), expect)
    # The same memory: writes through the view reach the owner.
    t = a.T
    t[0, 0, 1] = -5.0
    assert a.copy_to_host()[1, 0, 0] == -5.0
    one = gpumem.zeros(5)
    assert one.T.shape == (5,) and one.T.is_contiguous
    assert one.transpose(0).shape == (5,)
    zero = gpumem.zeros(())
    assert zero.T.shape == ()


@case
def transpose_checks_its_axes():
    a = gpumem.zeros((2, 3))
    raises(ValueError, a.transpose, 0, match="axes don't match")
    raises(ValueError, a.transpose, (0, 1, 2), match="axes don't match")
    raises(ValueError, a.transpose, 0, 0, match="repeated axis")
    raises(ValueError, a.transpose, 0, 2, match="out of bounds")
    raises(ValueError, a.transpose, 0, -3, match="out of bounds")
    raises(TypeError, a.transpose, 0, "1", match="axes are ints")
    raises(TypeError, a.transpose, 0, 1.0, match="axes are ints")
    raises(TypeError, a.transpose, True, False, match="axes are ints")
    a.free()
    raises(ValueError, a.transpose, match="freed")
    raises(ValueError, lambda: a.T, match="freed")


@case
def pickling_is_by_value():
    for dtype in DTYPES:
        host = random_array(7, dtype).reshape(7)
        a = gpumem.to_device(host)
        back = pickle.loads(pickle.dumps(a))
        assert back is not a and back.ptr != a.ptr
        assert back.dtype == a.dtype and back.shape == a.shape
        assert np.array_equal(back.copy_to_host(), host), dtype
    host = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
    a = gpumem.to_device(host)
    for view, expect in [(a[:, ::-1, 1::2], host[:, ::-1, 1::2]),
                         (a.T, host.T), (a[1], host[1]), (a[0, 0, 0], host[0, 0, 0])]:
        data = pickle.dumps(view, protocol=pickle.HIGHEST_PROTOCOL)
        back = pickle.loads(data)
        assert back.base is None and back.is_contiguous
        assert back.shape == expect.shape
        assert np.array_equal(back.copy_to_host(), expect)
    last = gpumem.device_count() - 1
    on_last = gpumem.ones(3, device=last)
    assert pickle.loads(pickle.dumps(on_last)).device.index == last
    func, args = on_last.__reduce__()
    assert func is gpumem._rebuild and args[1] == last
    assert isinstance(args[0], np.ndarray)
    # The copy is its own memory.
    back = pickle.loads(pickle.dumps(on_last))
    back.fill(5)
    assert np.array_equal(on_last.copy_to_host(), np.ones(3, np.float32))
    freed = gpumem.zeros(3)
    view = freed[1:]
    freed.free()
    raises(ValueError, pickle.dumps, freed, match="freed")
    raises(ValueError, pickle.dumps, view, match="freed")
    raises(ValueError, gpumem._rebuild, np.zeros(2), gpumem.device_count())


gmtest.main()
