"""Managed arrays (memory="managed"): making them, their books, every
path that takes arrays, prefetch/discard/advise and their checks and
ordering, and np.asarray's view without a copy (py-managed.c,
cuda-managed.c, host-managed.c).

The spin kernel is only in the test build: run under gpumem, this file
starts itself again under $GPUMEM_TEST."""

import gc

import numpy as np

import gmtest
from gmtest import case, raises

import gpumem

# The ordering cases queue the test build's spin kernel on a stream.
gmtest.need_spin_kernel(__file__)

CUDA = gpumem.backend == "cuda"
DEV = 0
SPIN_MS = 150 if CUDA else 1
flag = gpumem.zeros(1, "int32")


def stats(dev=DEV):
    return gpumem.memory_stats(dev)


def made_managed(a, want):
    assert a.memory == "managed", a.memory
    got = a.copy_to_host()
    assert got.dtype == np.asarray(want).dtype, (got.dtype, want)
    assert np.array_equal(got, want), (got, want)


@case
def every_maker_takes_memory_managed():
    host = np.arange(12, dtype=np.float64).reshape(3, 4)
    model = gpumem.to_device(host)
    assert model.memory == "device"
    made_managed(gpumem.zeros((3, 4), "int32", memory="managed"),
                 np.zeros((3, 4), np.int32))
    made_managed(gpumem.ones(5, memory="managed"), np.ones(5, np.float32))
    made_managed(gpumem.full(4, 7, memory="managed"), np.full(4, 7))
    made_managed(gpumem.to_device(host, memory="managed"), host)
    assert gpumem.empty(6, "uint8", memory="managed").memory == "managed"
    assert gpumem.alloc_gpu_memory(6, memory="managed").memory == "managed"
    made_managed(gpumem.zeros_like(model, memory="managed"),
                 np.zeros_like(host))
    made_managed(gpumem.ones_like(host, memory="managed"), np.ones_like(host))
    made_managed(gpumem.full_like(model, 2.5, memory="managed"),
                 np.full_like(host, 2.5))
    assert gpumem.empty_like(model, memory="managed").memory == "managed"
    # The *_like functions take the model's memory unless told.
    m = gpumem.zeros(4, memory="managed")
    assert gpumem.empty_like(m).memory == "managed"
    assert gpumem.zeros_like(m, memory="device").memory == "device"
    assert gpumem.empty(3, memory="device").memory == "device"
    assert gpumem.empty(3, memory=None).memory == "device"


@case
def a_bad_memory_is_refused_before_anything_is_allocated():
    before = stats()
    for fn in (gpumem.empty, gpumem.zeros, gpumem.ones):
        raises(ValueError, fn, 4, memory="pinned", match="'managed'")
        raises(TypeError, fn, 4, memory=1)
    raises(ValueError, gpumem.full, 4, 1.0, memory="Managed")
    raises(ValueError, gpumem.to_device, np.zeros(4), memory="host")
    raises(ValueError, gpumem.alloc_gpu_memory, 4, memory="")
    raises(ValueError, gpumem.empty_like, np.zeros(3), memory="x")
    after = stats()
    assert after["allocations"] == before["allocations"]
    assert after["total_allocations"] == before["total_allocations"]


@case
def managed_bytes_are_booked_and_limited():
    s0 = stats()
    a = gpumem.empty(1000, "float64", memory="managed")
    s1 = stats()
    assert s1["managed_bytes"] == s0["managed_bytes"] + 8000
    assert s1["managed_allocations"] == s0["managed_allocations"] + 1
    assert s1["allocated_bytes"] == s0["allocated_bytes"] + 8000
    assert s1["peak_managed_bytes"] >= s1["managed_bytes"]
    d = gpumem.empty(1000, "float64")
    assert stats()["managed_bytes"] == s1["managed_bytes"]  # device: not
    v = a[10:20]
    assert v.memory == "managed" and stats()["managed_allocations"] \
        == s1["managed_allocations"]
    del a, v, d
    gc.collect()
    s2 = stats()
    assert s2["managed_bytes"] == s0["managed_bytes"]
    assert s2["allocated_bytes"] == s0["allocated_bytes"]
    # The limit counts managed bytes as it counts device bytes.
    used = s2["allocated_bytes"]
    gpumem.set_memory_limit(used + (1 << 20), device=DEV)
    try:
        keep = gpumem.empty(1 << 17, "float32", memory="managed")   # 512 KiB
        raises(gpumem.OutOfMemoryError, gpumem.empty, 1 << 18, "float32",
               memory="managed")
        raises(gpumem.OutOfMemoryError, gpumem.empty, 1 << 18, "float32")
        del keep
        gc.collect()
        gpumem.empty(1 << 18, "float32", memory="managed").free()
    finally:
        gpumem.set_memory_limit(None, device=DEV)
    assert stats()["managed_bytes"] == s0["managed_bytes"]
    gpumem.empty_cache(DEV)


@case
def freed_blocks_serve_the_next_array_of_their_size():
    # A managed block freed without stream= is kept (by size, on its
    # device) for the next request of that size, out of the books until
    # then; advice keeps a block from being reused; empty_cache gives
    # the kept blocks back.
    gpumem.empty_cache(DEV)
    s0 = stats()
    assert s0["managed_cached_bytes"] == 0, s0
    n = 1 << 16                                   # 256 KiB of float32
    a = gpumem.empty(n, "float32", memory="managed")
    address = a.ptr
    a.free()
    s1 = stats()
    assert s1["managed_cached_bytes"] == 4 * n, s1
    assert s1["allocated_bytes"] == s0["allocated_bytes"]
    assert s1["managed_bytes"] == s0["managed_bytes"]
    other = gpumem.empty(n + 1, "float32", memory="managed")   # not its size
    assert other.ptr != address
    assert stats()["managed_cached_bytes"] == 4 * n
    b = gpumem.zeros(n, "float32", memory="managed")
    assert b.ptr == address, (hex(b.ptr), hex(address))
    assert not b.copy_to_host().any()             # zeros, as made anew
    s2 = stats()
    assert s2["managed_cached_bytes"] == 0, s2
    assert s2["managed_bytes"] == s0["managed_bytes"] + 4 * (2 * n + 1)
    assert s2["total_allocations"] == s0["total_allocations"] + 3
    # Advice makes the block go back to the backend when it goes.
    b.advise(read_mostly=True)
    b.free()
    assert stats()["managed_cached_bytes"] == 0
    # A view's advice is its base's block's.
    c = gpumem.empty(n, "float32", memory="managed")
    c[: n // 2].advise(preferred_location=DEV)
    del c
    gc.collect()
    assert stats()["managed_cached_bytes"] == 0
    other.free()
    assert stats()["managed_cached_bytes"] == 4 * (n + 1)
    gpumem.empty_cache(DEV)
    assert stats()["managed_cached_bytes"] == 0
    assert stats()["managed_bytes"] == s0["managed_bytes"]


@case
def a_refused_allocation_gives_the_kept_blocks_back():
    # Kept managed blocks are memory the device's other allocations
    # cannot have: a device allocation the backend refuses gives them
    # back and is tried again.  The host backend refuses once the
    # address space is limited (RLIMIT_AS), raised again after.
    if CUDA:
        gmtest.skip("host backend only: CUDA's allocations cannot be "
                    "made to fail by an address-space limit")
    if gmtest.sanitized():
        gmtest.skip("a sanitized build: its shadow memory needs the "
                    "address space")
    import resource
    gpumem.empty_cache(DEV)
    block = 24 << 20
    kept = [gpumem.empty(block, "uint8", memory="managed") for _ in range(8)]
    for a in kept:
        a.free()
    del kept
    assert stats()["managed_cached_bytes"] == 8 * block, stats()
    with open("/proc/self/status") as f:
        vm = next(int(line.split()[1]) * 1024 for line in f
                  if line.startswith("VmSize:"))
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (vm + (64 << 20), hard))
    try:
        # Fits only once the 192 MiB kept are given back.
        big = gpumem.empty(128 << 20, "uint8")
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
    assert stats()["managed_cached_bytes"] == 0, stats()
    big.free()
    gpumem.empty_cache(DEV)


@case
def copies_views_and_kernels_take_managed_arrays():
    n = 1 << 16
    x_host = (np.arange(n) % 5).astype(np.float32)
    y_host = (np.arange(n) % 7).astype(np.float32)
    x = gpumem.to_device(x_host, memory="managed")
    y = gpumem.to_device(y_host)                   # device memory
    z = gpumem.empty(n, memory="managed")
    gpumem.copy(z, y)                              # device -> managed
    gpumem.kernels.saxpy(n, 2.0, x, z)             # z += 2x
    want = 2 * x_host + y_host
    assert np.array_equal(z.copy_to_host(), want)
    back = gpumem.empty(n)
    gpumem.copy(back, z)                           # managed -> device
    assert np.array_equal(back.copy_to_host(), want)
    # Views, strided ones too, and their copies.
    v = z[1::3]
    assert v.memory == "managed" and not v.is_contiguous
    assert np.array_equal(v.copy_to_host(), want[1::3])
    c = v.copy()
    assert c.memory == "managed" and c.is_contiguous
    assert np.array_equal(c.copy_to_host(), want[1::3])
    r = z.reshape(256, 256).T
    assert r.memory == "managed"
    assert np.array_equal(r.copy_to_host(), want.reshape(256, 256).T)
    z[:4] = np.array([9, 8, 7, 6], np.float32)
    assert np.array_equal(z[:4].copy_to_host(), [9, 8, 7, 6])
    x.fill(1.5)
    assert np.all(x.copy_to_host() == 1.5)
    # Through a stream.
    s = gpumem.Stream()
    out = np.empty(n, np.float32)
    x.copy_from_host(x_host, stream=s)
    x.copy_to_host(out, stream=s)
    s.synchronize()
    assert np.array_equal(out, x_host)


@case
def dlpack_and_the_cuda_array_interface_export_managed_memory():
    m = gpumem.to_device(np.arange(6, dtype=np.int32), memory="managed")
    if CUDA:
        assert m.__dlpack_device__() == (13, DEV), m.__dlpack_device__()
        cai = m.__cuda_array_interface__
        assert cai["data"][0] == m.ptr and cai["shape"] == (6,)
        # gpumem takes its own export back (kDLCUDAManaged, no copy).
        back = gpumem.asarray(m)
        assert back.ptr == m.ptr
        # As device memory, no copy, for a consumer that asks for it.
        plain = gpumem.from_dlpack(m.__dlpack__(dl_device=(2, DEV)))
        assert plain.ptr == m.ptr and plain.memory == "device"
        copied = gpumem.from_dlpack(m.__dlpack__(copy=True))
        assert copied.ptr != m.ptr and copied.memory == "managed"
        imported = gpumem.from_dlpack(m)
        assert imported.ptr == m.ptr and imported.memory == "managed"
        imported.prefetch("host")
        assert np.array_equal(np.asarray(imported), np.arange(6))
        assert np.array_equal(back.copy_to_host(), np.arange(6))
    else:
        assert m.__dlpack_device__() == (1, 0)
        view = np.from_dlpack(m)
        assert np.array_equal(view, np.arange(6))
    d = gpumem.zeros(2)
    assert d.__dlpack_device__()[0] == (2 if CUDA else 1)


@case
def numpy_sees_a_managed_array_without_a_copy():
    m = gpumem.zeros((4, 5), "float64", memory="managed")
    view = np.asarray(m)
    assert view.shape == (4, 5) and view.dtype == np.float64
    assert view.__array_interface__["data"][0] == m.ptr
    view[1, 2] = 42.0                         # the host writes in place
    assert m.copy_to_host()[1, 2] == 42.0
    m.fill(3.0)                               # the device writes in place
    assert np.all(view == 3.0)
    # A strided view of a managed array, and a read-only one.
    t = np.asarray(m.T[::2])
    assert np.array_equal(t, np.full((3, 4), 3.0))
    # Work a stream queued on the array is done before the view is made.
    s = gpumem.Stream()
    big = gpumem.zeros(1 << 20, memory="managed")
    gpumem.kernels.spin(SPIN_MS, flag, stream=s)
    with s:
        big.fill(5.0)
    assert np.all(np.asarray(big) == 5.0)
    # free () leaves the memory to the view until it goes.
    before = stats()["managed_bytes"]
    keep = np.asarray(m)
    m.free()
    assert keep[0, 0] == 3.0
    assert stats()["managed_bytes"] == before
    del keep, view, t
    gc.collect()
    assert stats()["managed_bytes"] == before - 4 * 5 * 8
    raises(ValueError, np.asarray, m)         # freed
    # Device memory is still never converted implicitly.
    raises(TypeError, np.asarray, gpumem.zeros(3))
    assert np.asarray(gpumem.zeros(0, memory="managed")).shape == (0,)


@case
def prefetch_discard_and_advise_check_their_arguments_first():
    m = gpumem.zeros(1024, memory="managed")
    d = gpumem.zeros(1024)
    raises(ValueError, m.prefetch, "gpu", match="'host'")
    raises(TypeError, m.prefetch, None)
    raises(TypeError, m.prefetch, True)
    raises(ValueError, m.prefetch, gpumem.device_count())
    # Device memory moves only between its device and the host (the
    # spill engine's); to another device it is refused.
    other = (DEV + 1) % gpumem.device_count()
    if other != DEV:
        raises(ValueError, d.prefetch, other, match="device memory")
    d.prefetch(DEV)
    raises(ValueError, d.discard, match="managed")
    raises(ValueError, d.advise, read_mostly=True, match="managed")
    raises(TypeError, m.prefetch, DEV, stream=3)
    # The batch is checked whole before any array moves.
    if other != DEV:
        raises(ValueError, gpumem.prefetch, [m, d], other,
               match="device memory")
    raises(TypeError, gpumem.prefetch, [m, "x"], DEV)
    raises(TypeError, gpumem.prefetch, m, DEV, match="sequence")
    raises(TypeError, gpumem.prefetch, 5, DEV)
    raises(ValueError, gpumem.prefetch, [m], "disk")
    raises(TypeError, m.advise, read_mostly=1)
    raises(ValueError, m.advise, preferred_location="gpu")
    raises(ValueError, m.advise, accessed_by=[DEV, "nowhere"])
    raises(ValueError, m.advise, not_accessed_by=gpumem.device_count())
    raises(TypeError, m.advise, True)        # keywords only
    f = gpumem.zeros(4, memory="managed")
    f.free()
    raises(ValueError, f.prefetch, DEV)
    raises(ValueError, gpumem.prefetch, [m, f], DEV)
    with gpumem.graph():
        raises(gpumem.Error, m.prefetch, DEV, match="graph")
        raises(gpumem.Error, m.discard, match="graph")
        raises(gpumem.Error, gpumem.prefetch, [m], "host", match="graph")


@case
def prefetch_discard_and_advise_keep_the_contents_and_the_order():
    n = 1 << 18
    host = (np.arange(n) % 11).astype(np.float32)
    a = gpumem.to_device(host, memory="managed")
    b = gpumem.to_device(host, memory="managed")
    assert a.prefetch("host") is None
    assert np.array_equal(np.asarray(a), host)
    a.prefetch(DEV)
    a.prefetch(gpumem.Device(DEV))
    assert gpumem.prefetch([a, b, a[::2]], DEV) is None
    assert gpumem.prefetch([], "host") is None
    gpumem.prefetch((a, b), "host")
    assert np.array_equal(a.copy_to_host(), host)
    assert np.array_equal(b.copy_to_host(), host)
    assert a.advise(read_mostly=True, preferred_location=DEV,
                    accessed_by=[DEV, "host"]) is None
    assert np.array_equal(a.copy_to_host(), host)
    a.advise(read_mostly=False, preferred_location=False,
             not_accessed_by=(DEV, "host"))
    a.advise(preferred_location="host")
    a.advise()
    # A prefetch without stream= follows the work queued before it on a
    # stream and is complete on return: the stream is idle afterwards.
    s = gpumem.Stream()
    gpumem.kernels.spin(SPIN_MS, flag, stream=s)
    gpumem.kernels.saxpy(n, 1.0, a, b, stream=s)      # b = 2 * host
    b.prefetch("host")
    assert s.query(), "the prefetch returned before earlier stream work"
    assert np.array_equal(np.asarray(b), 2 * host)
    # With stream=: ordered on that stream.
    gpumem.kernels.spin(SPIN_MS, flag, stream=s)
    gpumem.kernels.saxpy(n, 1.0, a, b, stream=s)      # b = 3 * host
    b.prefetch("host", stream=s)
    gpumem.prefetch([a, b], DEV, stream=s)
    s.synchronize()
    assert np.array_equal(b.copy_to_host(), 3 * host)
    # discard: the contents may be anything, and the array stays usable;
    # 16 MiB, so that whole 2 MiB pages lie inside it.
    big = gpumem.ones(4 << 20, memory="managed")
    gpumem.kernels.spin(SPIN_MS, flag, stream=s)
    big.discard()
    assert s.query(), "the discard returned before earlier stream work"
    big[1:].discard(stream=s)
    s.synchronize()
    big.fill(4.0)
    assert np.all(big.copy_to_host() == 4.0)
    b.discard()                        # under 2 MiB: nothing to discard
    assert np.array_equal(b.copy_to_host(), 3 * host)
    b.fill(4.0)
    # In a concurrent() block: on the block's stream, joined at its end.
    with gpumem.concurrent():
        gpumem.kernels.saxpy(n, 1.0, a, b)              # b = 4 + host
        b.prefetch("host")
        gpumem.prefetch([a], DEV)
    assert np.array_equal(b.copy_to_host(), 4.0 + host)


@case
def pickles_keep_the_memory():
    import pickle
    m = gpumem.to_device(np.arange(5.0), memory="managed")
    back = pickle.loads(pickle.dumps(m))
    assert back.memory == "managed" and back.ptr != m.ptr
    assert np.array_equal(back.copy_to_host(), np.arange(5.0))
    d = pickle.loads(pickle.dumps(gpumem.to_device(np.arange(3))))
    assert d.memory == "device"


@case
def sharing_refuses_managed_arrays_by_name():
    m = gpumem.zeros(16, memory="managed")
    before = gpumem.sharing_stats()
    raises(ValueError, gpumem.share, m, match="managed")
    raises(ValueError, gpumem.share, m[2:], match="managed")
    assert gpumem.sharing_stats() == before
    # A device copy shares.
    d = gpumem.empty_like(m, memory="device")
    gpumem.copy(d, m)
    assert d.memory == "device"
    gpumem.unshare(gpumem.share(d))


@case
def the_history_and_the_report_show_managed_arrays():
    import os
    gpumem.memory_history(max_entries=100)
    try:
        m = gpumem.empty(12345, "uint8", memory="managed")
        gone = gpumem.empty(4321, "uint8", memory="managed")
        gone.free()                                # kept for reuse
        snap = gpumem.memory_snapshot()
        sizes = [int(b["size"]) for b in snap["blocks"]]
        assert 12345 in sizes, sizes
        keep = gpumem.pinned_empty(1000, "uint8")
        path = os.path.join(gmtest.scratch(), "report.html")
        gpumem.memory_report(path)
        page = open(path).read()
        s = gpumem.memory_stats(DEV)
        assert '"managed_now":%d,' % s["managed_bytes"] in page
        assert s["managed_cached_bytes"] >= 4321, s
        assert '"managed_cached_now":%d,' % s["managed_cached_bytes"] \
            in page
        assert '"pinned_allocated":%d,' % s["pinned_allocated_bytes"] in page
        assert s["managed_bytes"] >= 12345 and s["pinned_allocated_bytes"] \
            >= 4096
        del m, keep
    finally:
        gpumem.memory_history(False)


@case
def graphs_run_kernels_on_managed_arrays():
    n = 1000
    x = gpumem.to_device(np.arange(n, dtype=np.float32), memory="managed")
    y = gpumem.zeros(n, memory="managed")
    with gpumem.graph() as g:
        gpumem.kernels.saxpy(n, 2.0, x, y)
    assert np.all(y.copy_to_host() == 0)
    g()
    g()
    assert np.array_equal(np.asarray(y), 4 * np.arange(n, dtype=np.float32))


gmtest.main()
