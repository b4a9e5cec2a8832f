"""Copies in every direction, partial copies, casting, and every error
leaving the destination as it was (py-copy.c)."""

import os

import numpy as np

import gmtest
from gmtest import case, raises, random_array, poison, DTYPES

import gpumem

SIZES = [0, 1, 3, 1023, 65537]


def device_poisoned(n, dtype, device=None):
    return gpumem.to_device(poison(n, dtype), device=device)


@case
def request_api_round_trip():
    images = np.arange(40)                          # int64, as the workload
    mem = gpumem.alloc_gpu_memory(40)
    assert mem.dtype == np.float32 and mem.shape == (40,)
    gpumem.copy_to_gpu(images, mem, 40)
    out = np.zeros(40, np.float32)
    gpumem.copy_from_gpu(mem, out, 40)
    assert np.array_equal(out, images.astype(np.float32))
    mem64 = gpumem.alloc_gpu_memory(5, dtype="float64", device=0)
    gpumem.copy_to_gpu([1, 2, 3, 4, 5], mem64, 5)
    assert mem64.copy_to_host().tolist() == [1, 2, 3, 4, 5]


@case
def partial_copies_leave_the_rest():
    for dtype in DTYPES:
        for n in SIZES[1:]:
            k = int(gmtest.rng.integers(0, n + 1))
            src = random_array(n, dtype)
            dst = device_poisoned(n, dtype)
            gpumem.copy_to_gpu(src, dst, k)
            expect = poison(n, dtype)
            expect[:k] = src[:k]
            assert np.array_equal(dst.copy_to_host(), expect), (dtype, n, k)
            host = poison(n, dtype)
            gpumem.copy_from_gpu(dst, host, k)
            want = poison(n, dtype)
            want[:k] = src[:k]
            assert np.array_equal(host, want), (dtype, n, k)


@case
def copy_every_direction():
    ndev = gpumem.device_count()
    for dtype in ("float32", "int8", "complex128", "uint64", "float16"):
        for n in SIZES:
            src = random_array(n, dtype)
            a = gpumem.empty(n, dtype)
            gpumem.copy(a, src)                              # host -> device
            b = gpumem.empty(n, dtype, device=0)
            gpumem.copy(b, a)                                # same device
            c = gpumem.empty(n, dtype, device=ndev - 1)
            gpumem.copy(c, b)                                # across devices
            d = gpumem.empty(n, dtype, device=ndev // 2)
            gpumem.copy(d, c)
            out = np.empty(n, dtype)
            gpumem.copy(out, d)                              # device -> host
            assert np.array_equal(out, src), (dtype, n)


@case
def copy_count_and_views():
    src = random_array(100, "int32")
    a = gpumem.to_device(src)
    b = device_poisoned(100, "int32")
    gpumem.copy(b[10:20], a[50:60])
    expect = poison(100, "int32")
    expect[10:20] = src[50:60]
    assert np.array_equal(b.copy_to_host(), expect)
    gpumem.copy(b, a, count=5)
    expect[:5] = src[:5]
    assert np.array_equal(b.copy_to_host(), expect)
    out = poison(100, "int32")
    gpumem.copy(out, a[90:])
    assert np.array_equal(out[:10], src[90:]) and (out[10:] == 77).all()


@case
def same_kind_casting():
    dst = gpumem.alloc_gpu_memory(6, "float32")
    gpumem.copy_to_gpu(np.arange(6, dtype=np.int64), dst, 6)
    assert dst.copy_to_host().tolist() == [0, 1, 2, 3, 4, 5]
    gpumem.copy_to_gpu(np.linspace(0, 1, 6), dst, 6)          # f8 -> f4
    assert np.allclose(dst.copy_to_host(), np.linspace(0, 1, 6))
    ints = device_poisoned(6, "int32")
    raises(TypeError, gpumem.copy_to_gpu, np.arange(6) + 0.5, ints, 6,
           match="same_kind")
    raises(TypeError, gpumem.copy_to_gpu, np.ones(6, complex), dst, 6)
    assert (ints.copy_to_host() == 77).all()
    # device float32 into a float64 host array: allowed
    out = np.zeros(6)
    gpumem.copy_from_gpu(dst, out, 6)
    assert np.allclose(out, np.linspace(0, 1, 6), atol=1e-7)
    # device float32 into int host array: refused, untouched
    iout = np.full(6, 9, np.int32)
    raises(TypeError, gpumem.copy_from_gpu, dst, iout, 6)
    assert (iout == 9).all()


@case
def non_contiguous_host_arrays():
    base = random_array(200, "float64")
    src = base[::2]
    a = gpumem.empty(100, "float64")
    gpumem.copy_to_gpu(src, a, 100)
    assert np.array_equal(a.copy_to_host(), src)
    big = np.full(200, -1.0)
    dst = big[::2]
    gpumem.copy_from_gpu(a, dst, 60)
    assert np.array_equal(big[:120:2], src[:60])
    assert (big[1::2] == -1).all() and (big[120::2] == -1).all()
    m = random_array(60, "int16").reshape(6, 10).T    # Fortran order
    d = gpumem.to_device(m)
    assert np.array_equal(d.copy_to_host(), m)
    fo = np.zeros((10, 6), np.int16, order="F")
    gpumem.copy(fo, d)
    assert np.array_equal(fo, m)


@case
def buffer_protocol_sources_and_destinations():
    import array
    src = array.array("f", [1.5, 2.5, 3.5])
    a = gpumem.empty(3)
    gpumem.copy_to_gpu(src, a, 3)
    dst = array.array("f", [0.0] * 3)
    gpumem.copy_from_gpu(a, dst, 3)
    assert list(dst) == [1.5, 2.5, 3.5]
    raw = gpumem.empty(4, "uint8")
    gpumem.copy_to_gpu(b"\x01\x02\x03\x04", raw, 4)
    buf = bytearray(4)
    gpumem.copy_from_gpu(raw, buf, 4)
    assert bytes(buf) == b"\x01\x02\x03\x04"
    mv = memoryview(bytearray(8)).cast("i")
    ints = gpumem.to_device(np.array([5, 6], np.int32))
    gpumem.copy_from_gpu(ints, mv, 2)
    assert mv.tolist() == [5, 6]


@case
def read_only_and_wrong_destinations():
    a = gpumem.to_device(np.arange(4, dtype=np.float32))
    ro = np.zeros(4, np.float32)
    ro.setflags(write=False)
    raises(ValueError, gpumem.copy_from_gpu, a, ro, 4,
           match="copy_from_gpu: dest is read-only")
    ro_strided = np.zeros(8, np.float64)[::2]        # the NumPy path
    ro_strided.setflags(write=False)
    raises(ValueError, gpumem.copy_from_gpu, a, ro_strided, 4,
           match="read-only")
    assert not ro.any() and not ro_strided.any()
    raises(ValueError, gpumem.copy_from_gpu, gpumem.empty(4, "uint8"),
           b"abcd", 4, match="read-only")
    raises(TypeError, gpumem.copy_from_gpu, a, [0, 0, 0, 0], 4)
    raises(TypeError, gpumem.copy_from_gpu, a, None, 4)
    raises(TypeError, gpumem.copy_to_gpu, np.zeros(4), np.zeros(4), 4)
    raises(TypeError, gpumem.copy_from_gpu, np.zeros(4), np.zeros(4), 4)
    raises(TypeError, gpumem.copy_from_gpu, a, [0, 0, 0, 0], 4,
           match="copy_from_gpu: dest must be a writable host array")


@case
def device_to_device_through_the_host_functions_points_at_copy():
    a = gpumem.to_device(np.arange(4, dtype=np.float32))
    b = gpumem.zeros(4)
    exc = raises(TypeError, gpumem.copy_to_gpu, a, b, 4,
                 match="copy_to_gpu: src is a DeviceArray")
    assert "gpumem.copy(dest, src, size)" in str(exc)
    assert "copy_to_host" not in str(exc)
    exc = raises(TypeError, gpumem.copy_from_gpu, a, b, 4,
                 match="copy_from_gpu: dest is a DeviceArray")
    assert "gpumem.copy(dest, src, size)" in str(exc)
    assert not b.copy_to_host().any()
    gpumem.copy(b, a, 4)
    assert np.array_equal(b.copy_to_host(), a.copy_to_host())
    raises(TypeError, gpumem.copy, np.zeros(4), np.zeros(4))


@case
def bad_sizes_raise_before_writing():
    src = random_array(10, "float32")
    dst = device_poisoned(10, "float32")
    host = poison(10, "float32")
    for size, exc in [(11, ValueError), (-1, ValueError), (2**70, ValueError),
                      (3.0, TypeError), ("3", TypeError), (None, TypeError)]:
        raises(exc, gpumem.copy_to_gpu, src, dst, size)
        raises(exc, gpumem.copy_from_gpu, dst, host, size)
    raises(ValueError, gpumem.copy_to_gpu, src[:5], dst, 6)      # source short
    raises(ValueError, gpumem.copy_from_gpu, dst, host[:5], 6)   # dest short
    raises(ValueError, gpumem.copy, dst, random_array(11, "float32"))
    raises(ValueError, gpumem.copy, dst[:3], gpumem.empty(4))
    raises(ValueError, gpumem.copy, dst, gpumem.empty(4), count=5)
    raises(TypeError, gpumem.copy, dst, gpumem.empty(10, "float64"))
    raises(ValueError, gpumem.copy, dst, src, count=-2)
    assert (dst.copy_to_host() == 77).all() and (host == 77).all()
    gpumem.copy_to_gpu(src, dst, True)      # bool is an int: one element
    assert dst.copy_to_host()[0] == src[0]


@case
def to_device_and_copy_from_host_sizes():
    a = gpumem.empty((2, 3), "int64")
    raises(ValueError, a.copy_from_host, np.zeros(5, np.int64))
    a.copy_from_host(np.arange(6).reshape(3, 2))    # same size, any shape
    assert a.copy_to_host().ravel().tolist() == list(range(6))
    out = np.zeros((2, 3), np.int64)
    assert a.copy_to_host(out=out) is out
    raises(ValueError, a.copy_to_host, out=np.zeros(5, np.int64))
    s = gpumem.to_device(np.float64(2.5))
    assert s.shape == () and s.copy_to_host() == 2.5
    t = gpumem.to_device([[1, 2], [3, 4]])
    assert t.shape == (2, 2) and t.dtype == np.int64


def staged_round_trip(sizes_offsets):
    """Copies random bytes of each (size, offset) both ways through
    views at odd offsets; asserts exact results and untouched edges."""
    for n, off in sizes_offsets:
        src = random_array(n + off + 3, "uint8")
        dev = gpumem.to_device(poison(n + off + 3, "uint8"))
        gpumem.copy(dev[off:off + n], src[off:off + n])
        back = dev.copy_to_host()
        assert np.array_equal(back[off:off + n], src[off:off + n]), (n, off)
        assert (back[:off] == 77).all() and (back[off + n:] == 77).all()
        host = poison(n + 2 * off + 1, "uint8")
        gpumem.copy(host[off + 1:off + 1 + n], dev[off:off + n])
        assert np.array_equal(host[off + 1:off + 1 + n], src[off:off + n])
        assert (host[:off + 1] == 77).all() and (host[off + 1 + n:] == 77).all()


@case
def large_copies_exact_around_chunk_boundaries():
    """The CUDA backend stages large pageable copies in chunks (default
    16 MiB, from 16 MiB on): sizes around chunk multiples, odd
    alignments, shares that do not divide evenly among the threads."""
    mib = 1 << 20
    staged_round_trip([(n, off) for n in (16 * mib - 1, 16 * mib,
                                          16 * mib + 1, 16 * mib + 4093,
                                          3 * 16 * mib + 5)
                       for off in (0, 1, 3)])


@case
def ring_places_wrap_as_chunk_sizes_change():
    """Staged chunks take the ring's places in turn across copies (the
    ring is 4 x 16 MiB): copies of changing sizes, and so of changing
    chunk sizes, one after the other both ways, wrap it several times
    with chunks that start mid-buffer; every byte comes back exact."""
    kib, mib = 1 << 10, 1 << 20
    staged_round_trip([(n, off) for n, off in (
        (300 * kib, 1), (5 * mib + 3, 0), (17 * mib, 5), (256 * kib, 0),
        (33 * mib + 1, 3), (700 * kib + 9, 0), (2 * mib, 1),
        (9 * mib + 4097, 0), (40 * mib, 2), (1 * mib + 1, 0))])


@case
def small_chunks_in_a_child():
    """The same with 64 KiB chunks and 3 threads, so that one copy
    crosses many chunk boundaries and ring wrap-arounds."""
    import subprocess
    env = dict(os.environ, GPUMEM_COPY_CHUNK=str(64 << 10),
               GPUMEM_COPY_THREADS="3", GM_TEST_ONLY="staged_child")
    proc = subprocess.run([gmtest.GPUMEM, "-q", os.path.abspath(__file__)],
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 passed, 0 failed" in proc.stdout, proc.stdout


@case
def batched_uploads_in_a_child():
    """GPUMEM_COPY_BATCH=1 with 64 KiB chunks: staged uploads go through
    one cudaMemcpyBatchAsync of many chunks (and of larger ones past 64
    chunks); every byte lands exact, the edges untouched."""
    import subprocess
    if gpumem.backend != "cuda":
        gmtest.skip("GPUMEM_COPY_BATCH is the cuda backend's")
    env = dict(os.environ, GPUMEM_COPY_BATCH="1",
               GPUMEM_COPY_CHUNK=str(64 << 10), GM_TEST_ONLY="staged_child")
    proc = subprocess.run([gmtest.GPUMEM, "-q", os.path.abspath(__file__)],
                          env=env, capture_output=True, text=True, timeout=300)
    if proc.returncode == 3 and "needs cudaMemcpyBatchAsync" in proc.stderr:
        gmtest.skip("this build's CUDA has no cudaMemcpyBatchAsync")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 passed, 0 failed" in proc.stdout, proc.stdout


def staged_child():
    k = 64 << 10
    staged_round_trip([(n, off) for n in (16 << 20, (16 << 20) + k - 1,
                                          (16 << 20) + k + 1, 300 * k + 13)
                       for off in (0, 5)])


@case
def sizes_past_the_largest_name_the_number():
    # Not clipped to 2**63 - 1 (and then refused as too many elements):
    # the message names the number asked for.
    a = gpumem.zeros(4)
    for size in (2**63, 2**70, -2**70):
        exc = raises(ValueError, gpumem.copy_to_gpu, np.zeros(4), a, size)
        assert str(size) in str(exc), exc
        exc = raises(ValueError, gpumem.copy_from_gpu, a, np.zeros(4), size)
        assert str(size) in str(exc), exc
        exc = raises(ValueError, gpumem.copy, a, np.zeros(4), count=size)
        assert str(size) in str(exc), exc
    assert not a.copy_to_host().any()


@case
def overlapping_copies_move_as_memmove():
    # One behaviour on both backends (CUDA leaves an overlapping copy
    # undefined): the result of copying through a temporary, as memmove
    # and NumPy's assignment between overlapping views give.
    host = random_array(100, "float64")
    for dst_range, src_range in (((0, 50), (10, 60)), ((10, 60), (0, 50)),
                                 ((0, 100), (0, 100)), ((0, 51), (49, 100))):
        a = gpumem.to_device(host)
        want = host.copy()
        want[slice(*dst_range)] = host[slice(*src_range)]
        gpumem.copy(a[slice(*dst_range)], a[slice(*src_range)])
        assert np.array_equal(a.copy_to_host(), want), (dst_range, src_range)
    # Shapes that differ, one flat range each.
    a = gpumem.to_device(host)
    gpumem.copy(a.reshape(10, 10)[1:], a[:90])
    want = host.copy()
    want[10:] = host[:90]
    assert np.array_equal(a.copy_to_host(), want)
    # On a stream too (then complete on return).
    a = gpumem.to_device(host)
    gpumem.copy(a[1:], a[:99], stream=gpumem.Stream())
    assert np.array_equal(a.copy_to_host()[1:], host[:99])
    # Adjacent ranges do not overlap; a count keeps them apart.
    a = gpumem.to_device(host)
    gpumem.copy(a[0:50], a[50:100])
    assert np.array_equal(a.copy_to_host()[:50], host[50:])
    gpumem.copy(a[0:10], a[5:15], count=5)
    assert np.array_equal(a.copy_to_host()[:5], host[55:60])


if os.environ.get("GM_TEST_ONLY") == "staged_child":
    case(staged_child)


gmtest.main()
