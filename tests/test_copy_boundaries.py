"""Every copy path gives exact data at every size-class boundary: each
threshold where a copy changes path, at one element below, at and above
it, for every dtype size (1, 2, 4, 8 and 16 bytes), into views that
leave one element untouched on each side (py-copy.c, cuda-copy.c,
cuda-staging.c).

The thresholds, in bytes (where the CUDA backend changes path; the host
backend runs the same sizes through its own path, but for the staging
thresholds, which it does not have: its copies from COPY_KEEP_GIL_MAX up
to COPY_CHUNK take one path, which the sizes around 1 MiB reach):

  GM_SMALL_MAX        64 KiB   synchronous copies between pageable
                               memory and a device up to it go through
                               a page-locked bounce buffer
  COPY_KEEP_GIL_MAX    1 MiB   smaller copies keep the GIL
  GM_STAGING_MIN     128 KiB   pageable copies from it are staged, in
                               chunks of an eighth of the copy (to the
                               host at least 256 KiB, to the device at
                               least 1 MiB; at most 16 MiB), each
                               shared among the threads in pieces of at
                               least 32 KiB; the ring of 4 chunks wraps
                               around in every one
  256 KiB                      to the host: two chunks from one above
  2 MiB, 8 MiB, 16 MiB         to the device: two chunks of 1 MiB; the
                               last size of 1 MiB chunks; 2 MiB chunks
                               (16 threads)
  64 MiB                       chunks of 8 MiB
  128 MiB - 32760              the smallest copy whose chunks (an
                               eighth, in whole pages) reach 16 MiB: to
                               the device these are filled through the
                               CPU's caches, smaller ones with
                               non-temporal stores
  COPY_CHUNK         256 MiB   host copies move in pieces of it, the GIL
                               released around each; staged chunks are
                               at their largest, 16 MiB
"""

import numpy as np

import gmtest
from gmtest import case

import gpumem

KIB, MIB = 1 << 10, 1 << 20
ITEMSIZES = {1: "uint8", 2: "float16", 4: "float32", 8: "int64",
             16: "complex128"}
SMALL = (64 * KIB, MIB)
STAGED = (128 * KIB, 256 * KIB, 2 * MIB, 8 * MIB, 16 * MIB, 64 * MIB,
          128 * MIB - 32760)
HUGE = (256 * MIB,)

_bytes = {}


def random_bytes(nbytes):
    """NBYTES random bytes, made once and sliced (a view)."""
    have = _bytes.get("buf")
    if have is None or have.size < nbytes:
        have = gmtest.rng.integers(0, 256, max(nbytes, 1), dtype=np.uint8)
        _bytes["buf"] = have
    return have[:nbytes]


def counts(threshold, itemsize):
    """Element counts one below, at and one above THRESHOLD bytes."""
    n = threshold // itemsize
    return (n - 1, n, n + 1)


def same(a, b):
    return np.array_equal(np.ascontiguousarray(a).view(np.uint8),
                          np.ascontiguousarray(b).view(np.uint8))


def edges_untouched(whole, n, marker):
    """WHOLE[0] and WHOLE[n + 1] still hold MARKER's bytes."""
    return same(whole[:1], marker) and same(whole[n + 1:], marker)


def check_paths(n, dtype, paths):
    """Copies N elements of DTYPE through each of PATHS (names below);
    every result is compared byte for byte, and the element before and
    after each destination view is untouched."""
    itemsize = np.dtype(dtype).itemsize
    src = random_bytes(n * itemsize).view(dtype)
    marker = np.frombuffer(bytes([0x5a]) * itemsize, dtype)
    dev = gpumem.to_device(np.concatenate([marker, np.zeros(n, dtype),
                                           marker]))
    view = dev[1:n + 1]
    what = (n, dtype)

    def host_target():
        return np.concatenate([marker, np.zeros(n, dtype), marker])

    if "h2d" in paths:
        gpumem.copy(view, src)
        back = dev.copy_to_host()
        assert same(back[1:n + 1], src) and edges_untouched(back, n, marker), \
            ("h2d",) + what
    if "d2h" in paths:
        gpumem.copy(view, src)
        out = host_target()
        gpumem.copy(out[1:n + 1], view)
        assert same(out[1:n + 1], src) and edges_untouched(out, n, marker), \
            ("d2h",) + what
    if "request" in paths:
        mem = gpumem.alloc_gpu_memory(n, dtype=dtype)
        gpumem.copy_to_gpu(src, mem, n)
        out = np.zeros(n, dtype)
        gpumem.copy_from_gpu(mem, out, n)
        assert same(out, src), ("copy_to_gpu/copy_from_gpu",) + what
        mem.free()
    if "stream" in paths:
        s = gpumem.Stream()
        pinned = gpumem.pinned_empty(n + 2, dtype)
        pinned[:] = host_target()
        pinned[1:n + 1] = src
        gpumem.copy(view, pinned[1:n + 1], stream=s)
        out = gpumem.pinned_empty(n + 2, dtype)
        out[:] = host_target()
        gpumem.copy(out[1:n + 1], view, stream=s)
        s.synchronize()
        assert same(out[1:n + 1], src) and edges_untouched(out, n, marker), \
            ("stream, pinned",) + what
    if "pinned" in paths:
        pinned = gpumem.pinned_empty(n, dtype)
        pinned[:] = src
        gpumem.copy(view, pinned)
        out = gpumem.pinned_empty(n + 2, dtype)
        out[:] = host_target()
        gpumem.copy(out[1:n + 1], view)
        assert same(out[1:n + 1], src) and edges_untouched(out, n, marker), \
            ("pinned",) + what
    if "d2d" in paths:
        gpumem.copy(view, src)
        other = gpumem.to_device(host_target())
        gpumem.copy(other[1:n + 1], view)
        back = other.copy_to_host()
        assert same(back[1:n + 1], src) and edges_untouched(back, n, marker), \
            ("d2d",) + what
        s = gpumem.Stream()
        again = gpumem.to_device(host_target())
        gpumem.copy(again[1:n + 1], view, stream=s)
        s.synchronize()
        back = again.copy_to_host()
        assert same(back[1:n + 1], src), ("d2d, stream",) + what


ALL = ("h2d", "d2h", "request", "stream", "pinned", "d2d")


@case
def small_thresholds_every_path():
    for threshold in SMALL:
        for itemsize, dtype in ITEMSIZES.items():
            for n in counts(threshold, itemsize):
                check_paths(n, dtype, ALL)


@case
def staging_thresholds():
    if gpumem.backend != "cuda":
        gmtest.skip("the staging thresholds are the CUDA backend's; the "
                    "%s backend has none" % gpumem.backend)
    for threshold in STAGED:
        for itemsize, dtype in ITEMSIZES.items():
            for n in counts(threshold, itemsize):
                check_paths(n, dtype, ("h2d", "d2h", "request"))
        # The other paths at one size class each: they never stage.
        for n in counts(threshold, 4):
            check_paths(n, "float32", ("stream", "pinned", "d2d"))


@case
def copy_without_count_counts_the_source_once():
    """copy(dst, src) with no count takes all of the source, counted
    where it is read: a buffer of the device's dtype, a list, an array
    cast under same_kind; a source larger than the destination raises
    before a byte moves."""
    from gmtest import raises
    for src in (np.arange(7, dtype=np.float32), [1.5, 2.5, 3.5],
                np.arange(5, dtype=np.float16)):
        dev = gpumem.to_device(np.full(9, 77, np.float32))
        gpumem.copy(dev, src)
        want = np.full(9, 77, np.float32)
        want[:len(src)] = np.asarray(src, np.float32)
        assert np.array_equal(dev.copy_to_host(), want), src
    for src in (np.arange(10, dtype=np.float32), list(range(10))):
        dev = gpumem.to_device(np.full(9, 77, np.float32))
        raises(ValueError, gpumem.copy, dev, src, match="destination")
        assert (dev.copy_to_host() == 77).all()


@case
def copy_chunk_threshold():
    for threshold in HUGE:
        for itemsize, dtype in ITEMSIZES.items():
            for n in counts(threshold, itemsize):
                check_paths(n, dtype, ("h2d", "d2h"))
        for n in counts(threshold, 1):
            check_paths(n, "uint8", ("pinned",))


gmtest.main()
