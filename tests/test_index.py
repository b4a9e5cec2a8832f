"""DeviceArray indexing, assignment, fill, copy and strided views against
NumPy on random shapes (py-index.c, py-array-copy.c, strided.c), and
transposed views (py-transpose.c)."""

import os

import numpy as np

import gmtest
from gmtest import case, raises, random_array, rng

import gpumem

ROUNDS = int(os.environ.get("GM_TEST_ROUNDS", 300))


def random_shape(max_ndim=4, max_dim=7):
    return tuple(int(rng.integers(0, max_dim + 1))
                 for _ in range(int(rng.integers(1, max_ndim + 1))))


def random_slice(n):
    step = int(rng.choice([1, 1, 2, 3, -1, -2]))
    start = None if rng.random() < 0.3 else int(rng.integers(-n - 2, n + 3))
    stop = None if rng.random() < 0.3 else int(rng.integers(-n - 2, n + 3))
    return slice(start, stop, step)


def random_key(shape):
    """A random basic index of SHAPE: ints, slices, at most one ...,
    some None."""
    key, axis = [], 0
    ellipsis_at = (int(rng.integers(0, len(shape) + 1))
                   if rng.random() < 0.3 else -1)
    while axis < len(shape):
        if len(key) == ellipsis_at:
            key.append(Ellipsis)
            skip = int(rng.integers(0, len(shape) - axis + 1))
            axis += skip
            continue
        if rng.random() < 0.1:
            key.append(None)
        n = shape[axis]
        if n > 0 and rng.random() < 0.3:
            key.append(int(rng.integers(-n, n)))
        else:
            key.append(random_slice(n))
        axis += 1
        if Ellipsis not in key and rng.random() < 0.15:
            break                     # trailing axes left out
    return tuple(key)


def make(shape, dtype="float32"):
    h = random_array(int(np.prod(shape)), dtype).reshape(shape)
    return h, gpumem.to_device(h)


@case
def views_match_numpy():
    for _ in range(ROUNDS):
        shape = random_shape()
        h, d = make(shape)
        key = random_key(shape)
        hv, dv = h[key], d[key]
        assert dv.shape == hv.shape, (shape, key, dv.shape, hv.shape)
        assert dv.strides == hv.strides or hv.size == 0, (shape, key)
        assert dv.is_contiguous == hv.flags.c_contiguous or hv.size == 0, (
            shape, key)
        got = dv.copy_to_host()
        assert got.flags.c_contiguous
        assert np.array_equal(got, hv), (shape, key)
        out = np.empty(hv.shape, hv.dtype)
        assert dv.copy_to_host(out=out) is out and np.array_equal(out, hv)
        c = dv.copy()
        assert c.is_contiguous and c.base is None
        assert np.array_equal(c.copy_to_host(), hv)


@case
def views_of_views_and_large_strided_views():
    # Large enough that some copies take the staging path (many pieces).
    for shape, keys in [((300, 40), [(slice(None), slice(None, None, 3)),
                                     (slice(None, None, -1), 5),
                                     (slice(10, 290, 7), slice(None, None, -2))]),
                        ((20, 30, 16), [(Ellipsis, slice(1, 9)),
                                        (slice(None), 3, slice(None, None, 4)),
                                        (slice(None, None, -1),) * 3])]:
        h, d = make(shape)
        for key in keys:
            hv, dv = h[key], d[key]
            assert np.array_equal(dv.copy_to_host(), hv), key
            assert np.array_equal(dv[1:][::2].copy_to_host(), hv[1:][::2])
            new = random_array(hv.size, "float32").reshape(hv.shape)
            dv.copy_from_host(new)
            h[key] = new
            assert np.array_equal(d.copy_to_host(), h), key
            dv[...] = -3.5
            h[key] = -3.5
            assert np.array_equal(d.copy_to_host(), h), key


@case
def assignment_matches_numpy():
    for _ in range(ROUNDS):
        shape = random_shape()
        dtype = str(rng.choice(["float32", "int16", "float64", "uint8"]))
        h, d = make(shape, dtype)
        key = random_key(shape)
        target = h[key]
        how = int(rng.integers(0, 5))
        if how == 0:
            value = int(rng.integers(0, 100))          # scalar
            h[key] = value
            d[key] = value
        elif how == 1:                                 # NumPy, same shape
            value = random_array(target.size, dtype).reshape(target.shape)
            h[key] = value
            d[key] = value
        elif how == 2 and target.ndim > 0:             # NumPy, broadcast
            value = random_array(target.shape[-1], dtype)
            h[key] = value
            d[key] = value
        elif how == 3:                                 # a DeviceArray
            value = random_array(target.size, dtype).reshape(target.shape)
            dvalue = gpumem.to_device(value)
            if target.ndim > 0 and rng.random() < 0.5:
                # a strided device source of the same shape
                wide = np.repeat(value, 2, axis=-1)
                dvalue = gpumem.to_device(wide)[..., ::2]
            h[key] = value
            d[key] = dvalue
        else:                                          # itself, overlapping
            other = random_key(shape)
            if h[other].shape != target.shape:
                continue
            h[key] = h[other].copy()
            try:
                d[key] = d[other]
            except Exception as exc:
                raise AssertionError((shape, key, other)) from exc
        assert np.array_equal(d.copy_to_host(), h), (shape, key, how)


@case
def fill_every_dtype_and_layout():
    for dtype in gmtest.DTYPES:
        h, d = make((5, 6), dtype)
        value = np.array(1, dtype).item() if dtype == "bool" else 3
        d.fill(value)
        assert np.array_equal(d.copy_to_host(), np.full((5, 6), value, dtype))
        d[1:4, ::-2].fill(0)
        expect = np.full((5, 6), value, dtype)
        expect[1:4, ::-2] = 0
        assert np.array_equal(d.copy_to_host(), expect), dtype
    d = gpumem.empty(1000, dtype="float64")
    d.fill(0.1)                                   # bytes not all equal
    assert np.all(d.copy_to_host() == 0.1)
    raises(ValueError, d.fill, [1, 2])
    # Out of range: as NumPy converts (NumPy 2 raises, 1.x wraps around).
    small = gpumem.empty(3, dtype="uint8")
    try:
        expect = np.array(300, np.uint8)
    except OverflowError:
        raises(OverflowError, small.fill, 300)
    else:
        small.fill(300)
        assert np.all(small.copy_to_host() == expect)


@case
def len_iteration_repr():
    h, d = make((4, 3))
    assert len(d) == 4
    rows = list(d)
    assert len(rows) == 4 and all(r.shape == (3,) for r in rows)
    assert np.array_equal(np.stack([r.copy_to_host() for r in rows]), h)
    assert [x.copy_to_host()[()] for x in d[0]] == list(h[0])
    raises(TypeError, len, d[0, 0])
    raises(TypeError, iter, d[0, 0])
    r = repr(d[:, ::2])
    for part in ("shape=(4, 2)", "dtype=float32", "device=0", "strided"):
        assert part in r, r


@case
def numpy_conversion_raises():
    _, d = make((3,))
    raises(TypeError, np.asarray, d, match="copy_to_host")
    raises(TypeError, np.array, d, match="copy_to_host")
    raises(TypeError, np.sum, d)
    raises(TypeError, np.add, d, 1)


@case
def bad_indexes():
    _, d = make((3, 4))
    raises(IndexError, d.__getitem__, (0, 0, 0))
    raises(IndexError, d.__getitem__, 3)
    raises(IndexError, d.__getitem__, (0, -5))
    raises(IndexError, d.__getitem__, (Ellipsis, Ellipsis))
    raises(TypeError, d.__getitem__, [0, 1])
    raises(TypeError, d.__getitem__, np.array([0, 1]))
    raises(TypeError, d.__getitem__, True)
    raises(TypeError, d.__getitem__, 1.0)
    raises(ValueError, d.__getitem__, slice(None, None, 0))
    raises(TypeError, d.__delitem__, 0)
    raises(ValueError, d.__setitem__, slice(0, 2), np.zeros(3))
    raises(ValueError, d[:, ::2].reshape, 6)
    raises(ValueError, d[:, ::2].copy_from_host, np.zeros(5))


@case
def empty_arrays_with_huge_axes():
    """Beside an axis of length 0 another may be long, as in NumPy: the
    other dimensions times the item size must fit a Py_ssize_t (an index
    times a stride overflowed before, found by fuzz_api under UBSan), and
    views of what fits match NumPy's."""
    raises(ValueError, gpumem.empty(0).reshape, 0, 4289175493377974349,
           match="too large")
    raises(ValueError, gpumem.empty, (0, 2**62), "float32", match="too large")
    big = 2**61 - 1
    a = gpumem.empty(0).reshape(0, big)
    n = np.empty(0, np.float32).reshape(0, big)
    assert a.strides == n.strides
    for key in ((slice(None), big - 1), (slice(None), slice(big - 349, None)),
                (slice(None), slice(big - 1, 5, -7)), (Ellipsis, -1)):
        v = a[key]
        assert v.shape == n[key].shape and v.size == 0
        assert v.copy_to_host().shape == n[key].shape
        v[...] = 1.0                   # writes nothing, raises nothing
    raises(IndexError, a.__getitem__, (0, 0))
    raises(IndexError, a.__getitem__, (slice(None), big))


@case
def kernels_and_copies_refuse_strided_views():
    h, d = make((8, 8))
    col = d[:, 2]
    out = gpumem.zeros(8)
    raises(ValueError, gpumem.kernels.saxpy, 8, 1.0, col, out,
           match="strided")
    raises(ValueError, gpumem.kernels.saxpy, 8, 1.0, out, d[::-1, 0],
           match="strided")
    raises(ValueError, gpumem.copy_from_gpu, col, np.zeros(8, np.float32), 8,
           match="strided")
    raises(ValueError, gpumem.copy_to_gpu, np.zeros(8, np.float32), col, 8,
           match="strided")
    assert np.array_equal(out.copy_to_host(), np.zeros(8))   # untouched
    # Contiguous views and copies of strided ones work.
    gpumem.kernels.saxpy(8, 1.0, col.copy(), out)
    gpumem.kernels.saxpy(8, 1.0, d[3], out)
    assert np.allclose(out.copy_to_host(), h[:, 2] + h[3])


@case
def module_copy_takes_strided_views_whole():
    h, d = make((6, 8))
    col = d[:, ::-3]                                   # (6, 3), strided
    out = np.empty(18, np.float32)
    gpumem.copy(out, col)
    assert np.array_equal(out, h[:, ::-3].ravel())
    new = random_array(18, "float32")
    gpumem.copy(col, new)                              # host -> view
    h[:, ::-3] = new.reshape(6, 3)
    assert np.array_equal(d.copy_to_host(), h)
    flat = gpumem.empty(18)
    gpumem.copy(flat, col)                             # view -> device
    assert np.array_equal(flat.copy_to_host(), h[:, ::-3].ravel())
    same = gpumem.zeros((6, 3))
    gpumem.copy(same, col, count=18)
    assert np.array_equal(same.copy_to_host(), h[:, ::-3])
    gpumem.copy(d[::2, 1:4], same[:3])                 # view <- device
    h[::2, 1:4] = h[:, ::-3][:3]
    assert np.array_equal(d.copy_to_host(), h)
    if gpumem.device_count() > 1:
        other = gpumem.zeros((6, 3), device=1)
        gpumem.copy(other, col)                        # across devices
        assert np.array_equal(other.copy_to_host(), h[:, ::-3])
    raises(ValueError, gpumem.copy, out, col, count=5, match="count")
    raises(ValueError, gpumem.copy, gpumem.empty(17), col)
    raises(TypeError, gpumem.copy, gpumem.empty(18, dtype="int32"), col)
    raises(ValueError, gpumem.copy, col, np.zeros(5, np.float32))


@case
def interop_describes_strides():
    h, d = make((6, 5))
    v = d[1:, ::-2]
    if gpumem.backend == "cuda":
        cai = v.__cuda_array_interface__
        assert cai["strides"] == v.strides == h[1:, ::-2].strides
        assert cai["data"][0] == v.ptr
        assert d.__cuda_array_interface__["strides"] is None
    else:
        # NumPy consumes the host backend's memory through DLPack.
        got = np.from_dlpack(v)
        assert got.strides == h[1:, ::-2].strides
        assert np.array_equal(got, h[1:, ::-2])
    del v


@case
def strided_views_in_cupy_and_torch():
    if gpumem.backend != "cuda":
        gmtest.skip("CuPy and PyTorch take CUDA memory; host backend")
    h, d = make((6, 5))
    tried = []
    try:
        import cupy
    except ImportError:
        cupy = None
    if cupy is not None:
        v = d[1:, ::-2]                 # CuPy takes negative strides
        assert np.array_equal(cupy.asarray(v).get(), h[1:, ::-2])
        assert np.array_equal(cupy.from_dlpack(v).get(), h[1:, ::-2])
        # CuPy arrays assigned into views, without a host copy.
        c = cupy.asarray(random_array(12, "float32").reshape(4, 3))
        d[2:, ::2] = c
        h[2:, ::2] = c.get()
        d[0] = c[0, 0]
        h[0] = c[0, 0].get()
        assert np.array_equal(d.copy_to_host(), h)
        tried.append("cupy")
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None and torch.cuda.is_available():
        t = torch.from_dlpack(d[1:, ::2])   # PyTorch has no negative ones
        assert t.stride() == tuple(s // 4 for s in h[1:, ::2].strides)
        assert np.array_equal(t.cpu().numpy(), h[1:, ::2])
        tried.append("torch")
    if not tried:
        gmtest.skip("neither CuPy nor PyTorch is installed")


@case
def with_stream_assignments():
    s = gpumem.Stream()
    h, d = make((64, 64))
    with s:
        d[:, ::2] = 1.0
        d[::3] = np.arange(64, dtype=np.float32)
        c = d[5:, 1::2].copy()
        s.synchronize()
    h[:, ::2] = 1.0
    h[::3] = np.arange(64, dtype=np.float32)
    assert np.array_equal(d.copy_to_host(), h)
    assert np.array_equal(c.copy_to_host(), h[5:, 1::2])


@case
def array_indexes_are_refused_with_gpumem_messages():
    a = gpumem.to_device(np.arange(6, dtype=np.float32))
    masks = [np.array([True, False] * 3),
             gpumem.to_device(np.array([True, False] * 3)),
             np.ones((2, 3), bool)]
    for mask in masks:
        exc = raises(TypeError, a.__getitem__, mask,
                     match="boolean mask indexing is not supported")
        assert "copy_to_host()[mask]" in str(exc)
        assert "integer scalar" not in str(exc)
        raises(TypeError, a.__setitem__, mask, 0.0,
               match="boolean mask indexing is not supported")
        raises(TypeError, a.__getitem__, (Ellipsis, mask),
               match="boolean mask indexing")
    for indices in [np.array([0, 2]), gpumem.to_device(np.array([0, 2]))]:
        raises(TypeError, a.__getitem__, indices,
               match="indexing by an array of indices is not supported")
    assert np.array_equal(a.copy_to_host(), np.arange(6))
    # A 0-d integer array is an int, as in NumPy.
    for i in [np.array(4), gpumem.to_device(np.array(4))]:
        assert float(a[i]) == 4.0


@case
def transposed_views_in_copies_assignment_and_kernels():
    for _ in range(ROUNDS // 10):
        shape = random_shape()
        host = random_array(int(np.prod(shape)), "float64").reshape(shape)
        a = gpumem.to_device(host)
        axes = tuple(int(x) for x in rng.permutation(len(shape)))
        view, expect = a.transpose(axes), host.transpose(axes)
        assert view.strides == tuple(a.strides[i] for i in axes)
        assert view.base is a and view.ptr == a.ptr
        assert np.array_equal(view.copy_to_host(), expect)
        out = np.empty(expect.shape)
        gpumem.copy(out, view)
        assert np.array_equal(out, expect)
        fresh = random_array(expect.size, "float64").reshape(expect.shape)
        view[...] = fresh
        expect[...] = fresh
        assert np.array_equal(a.copy_to_host(), host)
        other = gpumem.zeros(expect.shape, "float64")
        other[...] = view
        assert np.array_equal(other.copy_to_host(), expect)
    m = gpumem.to_device(np.arange(8, dtype=np.float32).reshape(2, 4))
    out = gpumem.zeros((4, 2))
    raises(ValueError, gpumem.kernels.saxpy, 8, 1.0, m.T, out)
    gpumem.kernels.saxpy(8, 1.0, m.T.copy(), out)
    assert np.array_equal(out.copy_to_host(), np.arange(8).reshape(2, 4).T)
    if gpumem.backend == "cuda":
        cai = m.T.__cuda_array_interface__
        assert cai["shape"] == (4, 2) and cai["strides"] == (4, 16)
        assert cai["data"][0] == m.ptr
    else:
        got = np.from_dlpack(m.T)
        assert got.strides == (4, 16)
        assert np.array_equal(got, np.arange(8).reshape(2, 4).T)


gmtest.main()
