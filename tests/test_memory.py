"""Memory statistics, limits, the pool, pinned memory (memory.c)."""

import gc

import numpy as np

import gmtest
from gmtest import case, raises

import gpumem

KEYS = ("allocated_bytes", "peak_allocated_bytes", "reserved_bytes",
        "allocations", "total_allocations")


@case
def stats_move_exactly():
    dev = gpumem.device_count() - 1
    s0 = gpumem.memory_stats(dev)
    for key in KEYS:
        assert isinstance(s0[key], int) and s0[key] >= 0, key
    a = gpumem.empty(1000, "float64", device=dev)
    s1 = gpumem.memory_stats(dev)
    assert s1["allocated_bytes"] == s0["allocated_bytes"] + 8000
    assert s1["allocations"] == s0["allocations"] + 1
    assert s1["total_allocations"] == s0["total_allocations"] + 1
    assert s1["peak_allocated_bytes"] >= s1["allocated_bytes"]
    assert s1["reserved_bytes"] >= 8000
    v = a[10:20]
    w = a.reshape(10, 100)
    s2 = gpumem.memory_stats(dev)
    assert s2["allocated_bytes"] == s1["allocated_bytes"]   # views are free
    assert s2["allocations"] == s1["allocations"]
    del a, v, w
    gc.collect()
    s3 = gpumem.memory_stats(dev)
    assert s3["allocated_bytes"] == s0["allocated_bytes"]
    assert s3["allocations"] == s0["allocations"]
    assert s3["peak_allocated_bytes"] >= s0["allocated_bytes"] + 8000
    raises(ValueError, gpumem.memory_stats, gpumem.device_count())


@case
def limit_refuses_then_recovers():
    dev = 0
    used = gpumem.memory_stats(dev)["allocated_bytes"]
    gpumem.set_memory_limit(used + (1 << 20), device=dev)
    try:
        assert gpumem.memory_stats(dev)["limit"] == used + (1 << 20)
        keep = gpumem.empty(1 << 18, "float32")         # 1 MiB: fits
        exc = raises(gpumem.OutOfMemoryError, gpumem.empty, 1 << 10)
        assert isinstance(exc, MemoryError)
        text = str(exc)
        assert "4096 bytes" in text and "device 0" in text, text
        assert "limit" in text, text
        del keep
        small = gpumem.empty(1 << 10)                   # works again
        assert small.size == 1 << 10
    finally:
        gpumem.set_memory_limit(None, device=dev)
    assert gpumem.memory_stats(dev)["limit"] is None
    raises(ValueError, gpumem.set_memory_limit, -5)
    raises(TypeError, gpumem.set_memory_limit, 1.5)


@case
def limit_as_a_size_string_or_a_fraction():
    """set_memory_limit takes bytes, the size strings GPUMEM_* settings
    take ("512MiB"), or fraction= of the device's total memory (CuPy's
    habits); a bad one is refused and leaves the limit as it was."""
    dev = gpumem.device_count() - 1
    total = gpumem.Device(dev).total_memory
    try:
        for text, nbytes in (("512MiB", 512 << 20), ("512m", 512 << 20),
                             ("2G", 2 << 30), ("64KiB", 64 << 10),
                             ("12345", 12345)):
            gpumem.set_memory_limit(text, device=dev)
            assert gpumem.memory_stats(dev)["limit"] == nbytes, text
        gpumem.set_memory_limit(fraction=0.5, device=dev)
        assert gpumem.memory_stats(dev)["limit"] == int(0.5 * total)
        gpumem.set_memory_limit(fraction=1, device=dev)
        assert gpumem.memory_stats(dev)["limit"] == total
        gpumem.set_memory_limit(4 << 20, device=dev)
        for bad in ("512 MiB", "512MB", "-1", "", "1.5G", "lots"):
            raises(ValueError, gpumem.set_memory_limit, bad, device=dev,
                   match="not a size")
        for bad in (0, 0.0, -0.5, 1.01, float("nan")):
            raises(ValueError, gpumem.set_memory_limit, fraction=bad,
                   device=dev, match="fraction")
        raises(TypeError, gpumem.set_memory_limit, fraction="half",
               device=dev)
        raises(TypeError, gpumem.set_memory_limit, 1 << 20, fraction=0.5,
               device=dev, match="not both")
        assert gpumem.memory_stats(dev)["limit"] == 4 << 20
        # A fraction limits as bytes do: past it, OutOfMemoryError.
        used = gpumem.memory_stats(dev)["allocated_bytes"]
        fraction = (used + (1 << 20)) / total
        gpumem.set_memory_limit(fraction=fraction, device=dev)
        raises(gpumem.OutOfMemoryError, gpumem.empty, 1 << 19, "float32",
               device=dev)
        gpumem.set_memory_limit(device=dev)
        assert gpumem.memory_stats(dev)["limit"] is None
    finally:
        gpumem.set_memory_limit(None, device=dev)


@case
def device_out_of_memory_is_clean():
    exc = raises(gpumem.OutOfMemoryError, gpumem.empty, 1 << 58, "uint8")
    assert "device 0" in str(exc)
    a = gpumem.to_device(np.arange(10))            # the program goes on
    assert a.copy_to_host().sum() == 45


@case
def alloc_free_loop_stays_flat():
    for _ in range(20):
        gpumem.empty(1 << 20).free()
    base_stats = gpumem.memory_stats()
    for i in range(2000):
        a = gpumem.empty((1 << 20) + (i % 7) * 256, "uint8")
        a.free()
    assert gpumem.memory_stats()["allocated_bytes"] == base_stats["allocated_bytes"]
    assert gpumem.memory_stats()["allocations"] == base_stats["allocations"]
    if gpumem.backend == "cuda":
        # The pool caches; what it holds must not drift.  The pool's own
        # figure, not the device's free memory, which other processes
        # move (it failed so beside test_interop runs on the H200).
        assert gpumem.memory_stats()["reserved_bytes"] <= \
            base_stats["reserved_bytes"] + (64 << 20)
        gpumem.empty_cache()
        assert gpumem.memory_stats()["reserved_bytes"] <= \
            base_stats["reserved_bytes"]


@case
def pinned_arrays():
    p = gpumem.pinned_empty((3, 4), "float64")
    assert isinstance(p, np.ndarray) and p.shape == (3, 4)
    assert p.dtype == np.float64 and p.flags.writeable
    p[:] = 7
    assert p.sum() == 84
    z = gpumem.pinned_empty(0)
    assert z.size == 0
    raises(ValueError, gpumem.pinned_empty, -1)
    raises(TypeError, gpumem.pinned_empty, 3, "U3")
    for _ in range(200):
        gpumem.pinned_empty(1 << 20, "uint8")     # freed as they go
    # A freed block leaves the backend's list of page-locked memory:
    # NumPy arrays made after it, perhaps at its address, copy right.
    dev = gpumem.empty(1 << 18, "uint8")
    back = np.zeros(1 << 18, np.uint8)
    for i in range(20):
        p = gpumem.pinned_empty(1 << 18, "uint8")
        p[:] = i
        gpumem.copy(dev, p)
        del p
        host = np.full(1 << 18, 255 - i, np.uint8)
        gpumem.copy(back, dev)
        assert (back == i).all(), i
        gpumem.copy(dev, host)
        gpumem.copy(back, dev)
        assert (back == 255 - i).all(), i


@case
def pinned_empty_of_any_shape():
    zero_d = gpumem.pinned_empty(())
    assert zero_d.shape == () and zero_d.dtype == np.float32
    zero_d[()] = 2.5
    assert float(zero_d) == 2.5
    for shape in ((0,), 0, (2, 3), [4], (1, 1, 1)):
        p = gpumem.pinned_empty(shape, "int16")
        assert p.shape == (np.empty(shape).shape), (shape, p.shape)
        assert p.dtype == np.int16
    raises(ValueError, gpumem.pinned_empty, (-1,))
    raises(TypeError, gpumem.pinned_empty, "x")


gmtest.main()
