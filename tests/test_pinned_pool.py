"""The pinned pool (src/core/pinned-pool.c): pinned_empty and the
concurrent queue's bounce buffers come from a caching pool of
page-locked host memory, with its own figures in memory_stats(), its own
limit (set_pinned_memory_limit), and empty_cache() giving its cache
back."""

import gc

import numpy as np

import gmtest
from gmtest import case, raises

import gpumem

KiB, MiB = 1 << 10, 1 << 20


def pinned():
    s = gpumem.memory_stats()
    return (s["pinned_reserved_bytes"], s["pinned_allocated_bytes"],
            s["pinned_peak_allocated_bytes"], s["pinned_limit"])


@case
def arguments_by_position_or_keyword():
    c = gpumem.pinned_empty(shape=(2, 3), dtype=np.int16)
    assert c.shape == (2, 3) and c.dtype == np.int16, c
    d = gpumem.pinned_empty(5)
    assert d.shape == (5,) and d.dtype == np.float32, d
    raises(TypeError, gpumem.pinned_empty)
    raises(TypeError, gpumem.pinned_empty, 4, "uint8", 1)
    raises(TypeError, gpumem.pinned_empty, 4, bogus=1)
    raises(TypeError, gpumem.pinned_empty, 4, dtype="no such type")


@case
def a_freed_buffer_is_reused_and_the_books_move_exactly():
    gpumem.empty_cache()
    reserved0, allocated0, _, limit = pinned()
    assert limit is None and reserved0 >= allocated0
    a = gpumem.pinned_empty(MiB, "uint8")
    address = a.ctypes.data
    reserved1, allocated1, peak1, _ = pinned()
    assert allocated1 == allocated0 + MiB
    assert reserved1 == reserved0 + MiB and peak1 >= allocated1
    del a
    gc.collect()
    reserved2, allocated2, _, _ = pinned()
    assert allocated2 == allocated0 and reserved2 == reserved1   # cached
    b = gpumem.pinned_empty((256, 1024), "float32")               # 1 MiB
    assert b.ctypes.data == address, "the cached block was not reused"
    assert b.shape == (256, 1024) and b.dtype == np.float32, b
    assert b.flags.c_contiguous and b.flags.writeable, b.flags
    assert type(b.base).__name__ == "PinnedBuffer", type(b.base)
    assert pinned()[0] == reserved1
    b[:] = 1.5
    d = gpumem.to_device(b)
    out = gpumem.pinned_empty((256, 1024), "float32")
    d.copy_to_host(out)
    assert np.all(out == 1.5)
    del b, out
    gc.collect()
    gpumem.empty_cache()
    reserved3, allocated3, _, _ = pinned()
    assert reserved3 == allocated3 == allocated0


@case
def requests_take_their_size_class():
    gpumem.empty_cache()
    base = pinned()[1]
    for nbytes, taken in [(1, 4 * KiB), (1000, 4 * KiB), (4 * KiB + 1,
                          8 * KiB), (MiB, MiB), (3 * MiB + 1, 4 * MiB)]:
        a = gpumem.pinned_empty(nbytes, "uint8")
        assert pinned()[1] == base + taken, (nbytes, pinned()[1] - base)
        assert a.nbytes == nbytes
        del a
        gc.collect()
    # An empty array takes the smallest class, a 0-d one its item.
    z = gpumem.pinned_empty(0, "float64")
    assert z.shape == (0,) and pinned()[1] == base + 4 * KiB
    del z
    gc.collect()
    gpumem.empty_cache()


@case
def the_limit_refuses_and_gives_the_cache_back():
    gpumem.empty_cache()
    reserved, allocated, _, _ = pinned()
    keep = gpumem.pinned_empty(MiB, "uint8")
    spare = gpumem.pinned_empty(2 * MiB, "uint8")
    del spare
    gc.collect()
    assert pinned()[0] == reserved + 3 * MiB
    try:
        # Down to the limit: the cached 2 MiB goes, the live 1 MiB stays.
        gpumem.set_pinned_memory_limit(reserved + 2 * MiB)
        assert pinned()[3] == reserved + 2 * MiB
        assert pinned()[0] == reserved + MiB
        raises(MemoryError, gpumem.pinned_empty, 2 * MiB, "uint8",
               match="set_pinned_memory_limit")
        assert pinned()[0] == reserved + MiB       # nothing taken
        ok = gpumem.pinned_empty(MiB, "uint8")     # fits
        del ok
        raises(ValueError, gpumem.set_pinned_memory_limit, -1)
        raises(TypeError, gpumem.set_pinned_memory_limit, "1")
    finally:
        gpumem.set_pinned_memory_limit(None)
    assert pinned()[3] is None
    big = gpumem.pinned_empty(4 * MiB, "uint8")
    del big, keep
    gc.collect()
    gpumem.empty_cache()
    assert pinned()[0] == pinned()[1] == allocated


@case
def the_concurrent_queue_stages_through_the_pool():
    allocated = pinned()[1]
    n = 1 << 18
    d = gpumem.to_device(np.arange(n, dtype=np.float32))
    out = np.empty(n, np.float32)                 # pageable
    with gpumem.concurrent():
        d.copy_to_host(out)                       # through a bounce buffer
        assert pinned()[1] >= allocated + 4 * n, (pinned(), allocated)
    assert np.array_equal(out, np.arange(n, dtype=np.float32))


gmtest.main()
