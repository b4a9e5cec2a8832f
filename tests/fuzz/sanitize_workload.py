"""sanitize_workload.py -- a small, clean workload for compute-sanitizer.

Exercises what gpumem does with device memory (allocation of every dtype,
copies in every direction and across devices, views, kernels with and
without streams, events, limits and out of memory, frees, the pool's
cache) at sizes small enough for compute-sanitizer's slow tools, and
checks every result against NumPy.  It never reads memory it did not
write first (initcheck), never faults, and ends with every device's
memory statistics back where they started.  Exit 0 and "workload: ok".

tests/gpu-sanitize.sh runs it under memcheck, racecheck, initcheck and
synccheck; ctest runs it on both backends.  GM_WORKLOAD_N sets the
largest array (elements, default 100000).
"""

import gc
import os

import numpy as np

import gpumem

N = int(os.environ.get("GM_WORKLOAD_N") or 100000)
DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16",
          "uint32", "uint64", "float16", "float32", "float64", "complex64",
          "complex128"]
rng = np.random.default_rng(1234)
NDEV = gpumem.device_count()


def host_data(n, dtype):
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return rng.integers(0, 2, n).astype(bool)
    if dt.kind in "iu":
        return rng.integers(0, 100, n).astype(dt)
    if dt.kind == "c":
        return (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(dt)
    return rng.standard_normal(n).astype(dt)


def same(a, b, what):
    assert a.shape == b.shape and a.tobytes() == b.tobytes(), what


def round_trips():
    for d in range(NDEV):
        for dtype in DTYPES:
            for n in (0, 1, 7, 4097, N):
                host = host_data(n, dtype)
                a = gpumem.to_device(host, device=d)
                same(a.copy_to_host(), host, f"to_device {dtype} {n}")
                out = np.empty_like(host)
                gpumem.copy_from_gpu(a, out, n)
                same(out, host, "copy_from_gpu")
                b = gpumem.zeros(n, dtype, device=d)
                gpumem.copy(b, a)
                same(b.copy_to_host(), host, "device copy")
                a.free()
                del b


def views_and_partial_copies():
    host = host_data(1000, "float64").reshape(10, 100)
    a = gpumem.to_device(host)
    for i, j in ((0, 10), (3, 7), (9, 10), (5, 5)):
        same(a[i:j].copy_to_host(), host[i:j], f"view {i}:{j}")
    row = a[4]
    new = host_data(100, "float64")
    row.copy_from_host(new)
    host[4] = new
    same(a.copy_to_host(), host, "write through a view")
    flat = a.reshape(-1)
    gpumem.copy_to_gpu(np.arange(50.0), flat, 50)
    host.reshape(-1)[:50] = np.arange(50.0)
    same(a.copy_to_host(), host, "partial copy")
    # Non-contiguous and other-dtype host data go through NumPy.
    src = np.arange(400, dtype=np.int32)[::2]
    dst = gpumem.zeros(200, "float64")
    gpumem.copy(dst, src)
    same(dst.copy_to_host(), src.astype(np.float64), "converted copy")


def kernels_and_streams():
    for d in range(NDEV):
        images = host_data(N, "float32")
        update = host_data(4, "float32")
        dev_images = gpumem.to_device(images, device=d)
        dev_update = gpumem.to_device(update, device=d)
        partial = gpumem.zeros(4, device=d)
        gpumem.kernels.algo(dev_images, dev_update, partial, N)
        want = images.astype(np.float64).mean() + update
        assert np.allclose(partial.copy_to_host(), want, rtol=1e-4,
                           atol=1e-4), "algo"
        seed = gpumem.zeros(4, device=d)
        gpumem.kernels.algo_seed(dev_images[:50], dev_update, seed, 50)
        assert np.allclose(seed.copy_to_host(), images[49] + update), \
            "algo_seed"
        x = gpumem.to_device(host_data(N, "float32"), device=d)
        y_host = host_data(N, "float32")
        y = gpumem.to_device(y_host, device=d)
        s = gpumem.Stream(d)
        start, end = gpumem.Event(d), gpumem.Event(d)
        start.record(s)
        gpumem.kernels.saxpy(N, 3.0, x, y, stream=s)
        gpumem.kernels.saxpy(N // 2, -1.0, x, y, grid=8, block=128,
                             stream=s)
        end.record(s)
        out = gpumem.pinned_empty(N, "float32")
        y.copy_to_host(out=out, stream=s)
        s.synchronize()
        assert end.query() and start.elapsed_ms(end) >= 0
        want = 3 * x.copy_to_host() + y_host
        want[:N // 2] -= x.copy_to_host()[:N // 2]
        assert np.allclose(out, want, rtol=1e-5, atol=1e-5), "saxpy"
        gpumem.synchronize(d)


def across_devices():
    if NDEV < 2:
        return
    host = host_data(N, "int32")
    a = gpumem.to_device(host, device=0)
    b = gpumem.zeros(N, "int32", device=1)
    gpumem.copy(b, a)
    same(b.copy_to_host(), host, "peer copy")
    s = gpumem.Stream(1)
    c = gpumem.zeros(N, "int32", device=0)
    gpumem.copy(c, b, stream=s)
    s.synchronize()
    same(c.copy_to_host(), host, "peer copy on a stream")


def limits_and_frees():
    d = 0
    used = gpumem.memory_stats(d)["allocated_bytes"]
    gpumem.set_memory_limit(used + (1 << 20), d)
    try:
        keep = gpumem.zeros(1 << 18, device=d)
        try:
            gpumem.empty(1 << 10, device=d)
        except gpumem.OutOfMemoryError:
            pass
        else:
            raise AssertionError("the limit did not hold")
        keep.free()
        with gpumem.zeros(1 << 18, device=d) as again:
            assert again.copy_to_host().sum() == 0
    finally:
        gpumem.set_memory_limit(None, d)
    for _ in range(50):
        t = gpumem.to_device(np.arange(1000, dtype=np.int64))
        assert t.copy_to_host()[-1] == 999
        del t
    gpumem.empty_cache()


def main():
    gc.collect()
    start = [gpumem.memory_stats(d) for d in range(NDEV)]
    round_trips()
    views_and_partial_copies()
    kernels_and_streams()
    across_devices()
    limits_and_frees()
    gc.collect()
    for d in range(NDEV):
        now = gpumem.memory_stats(d)
        for key in ("allocated_bytes", "allocations"):
            assert now[key] == start[d][key], (d, key, now[key], start[d][key])
    print(f"workload: ok ({gpumem.backend}, {NDEV} device(s), N={N})")


main()
