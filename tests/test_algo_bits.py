"""kernels.algo's exact bits: the device's result is bit for bit what
the kernel's summation order gives (kernels/algo.cu, "Method"), for
every launch shape, size and alignment, and it stays so across repeated
launches, streams and launch shapes that reuse or grow a stream's
scratch area (the counter the last block sets back to 0).

The order is emulated here in NumPy (float64 additions round as the
GPU's do; no multiplications, so no fused operations): `kernel_order`
vectorized, `kernel_order_literal` thread by thread as the kernel's
code reads, the one checked against the other on both backends."""

import numpy as np

import gmtest
from gmtest import case, random_array

import gpumem
from gpumem import kernels

CUDA = gpumem.backend == "cuda"
WARP = 32
UNROLL = 8


def warp_tree(values, lanes):
    """warp_sum of algo.cu over the last axis (32 lanes, LANES of them
    real): VALUES float64 [..., 32]; returns lane 0's value."""
    v = values.copy()
    lane = np.arange(WARP)
    for offset in (16, 8, 4, 2, 1):
        other = np.zeros_like(v)
        other[..., :WARP - offset] = v[..., offset:]
        take = (lane + offset) < lanes[..., None]
        v = np.where(take, v + other, v)
    return v[..., 0]


def block_tree(sums):
    """block_sum of algo.cu for every block: SUMS float64 [G, T]."""
    blocks, threads = sums.shape
    warps = (threads + WARP - 1) // WARP
    padded = np.zeros((blocks, warps * WARP))
    padded[:, :threads] = sums
    lanes = np.minimum(WARP, threads - WARP * np.arange(warps))
    per_warp = warp_tree(padded.reshape(blocks, warps, WARP),
                         np.broadcast_to(lanes, (blocks, warps)))
    first = np.zeros((blocks, WARP))
    first[:, :warps] = per_warp
    return warp_tree(first, np.full(blocks, min(WARP, threads)))


def split(images, misalign):
    """Head, float4 body (as the sum of each float4, in the kernel's
    order) and tail of IMAGES, whose first element sits MISALIGN floats
    past a 16-byte boundary."""
    count = images.size
    head = min((4 - misalign) % 4, count)
    vectors = (count - head) // 4
    body = images[head:head + 4 * vectors].astype(np.float64).reshape(-1, 4)
    quads = (body[:, 0] + body[:, 1]) + (body[:, 2] + body[:, 3])
    return (images[:head].astype(np.float64), quads,
            images[head + 4 * vectors:].astype(np.float64))


def finish(total, count, update):
    mean = total / count if count > 0 else 0.0
    return (np.float64(mean) + update.astype(np.float64)).astype(np.float32)


def kernel_order(images, update, blocks, threads, misalign):
    """algo's outputs as the kernel computes them with BLOCKS blocks of
    THREADS threads (vectorized)."""
    head, quads, tail = split(images, misalign)
    stride = blocks * threads
    sums = np.zeros(stride)
    for j, x in enumerate(head):
        sums[j % stride] += x
    for j, x in enumerate(tail):
        sums[j % stride] += x
    rounds = (quads.size + stride - 1) // stride
    padded = np.zeros(rounds * stride)
    padded[:quads.size] = quads
    for row in padded.reshape(rounds, stride):
        sums += row
    per_block = block_tree(sums.reshape(blocks, threads))
    if blocks == 1:
        total = per_block[0]
    else:
        rows = (blocks + threads - 1) // threads
        spread = np.zeros(rows * threads)
        spread[:blocks] = per_block
        last = np.zeros(threads)
        for row in spread.reshape(rows, threads):
            last += row
        total = block_tree(last.reshape(1, threads))[0]
    return finish(total, images.size, update)


def kernel_order_literal(images, update, blocks, threads, misalign):
    """The same, one thread after another as algo_kernel's code reads
    (slow: for small inputs)."""
    count = images.size
    head = min((4 - misalign) % 4, count)
    vectors = (count - head) // 4
    tail = (count - head) % 4
    rest = images[head + 4 * vectors:]
    stride = blocks * threads
    f64 = np.float64

    def thread_sum(g):
        s = f64(0.0)
        for j in range(g, head, stride):
            s += f64(images[j])
        for j in range(g, tail, stride):
            s += f64(rest[j])
        i = g
        while i + (UNROLL - 1) * stride < vectors:
            for u in range(UNROLL):
                v = images[head + 4 * (i + u * stride):][:4].astype(f64)
                s += (v[0] + v[1]) + (v[2] + v[3])
            i += UNROLL * stride
        while i < vectors:
            v = images[head + 4 * i:][:4].astype(f64)
            s += (v[0] + v[1]) + (v[2] + v[3])
            i += stride
        return s

    def block_reduce(values):
        warps = []
        for w in range(0, threads, WARP):
            lanes = min(WARP, threads - w)
            vals = list(values[w:w + lanes]) + [f64(0.0)] * (WARP - lanes)
            for offset in (16, 8, 4, 2, 1):
                vals = [vals[l] + vals[l + offset]
                        if l + offset < lanes else vals[l]
                        for l in range(WARP)]
            warps.append(vals[0])
        lanes = min(WARP, threads)
        vals = [warps[l] if l < len(warps) else f64(0.0)
                for l in range(WARP)]
        for offset in (16, 8, 4, 2, 1):
            vals = [vals[l] + vals[l + offset] if l + offset < lanes
                    else vals[l] for l in range(WARP)]
        return vals[0]

    per_block = [block_reduce([thread_sum(b * threads + t)
                               for t in range(threads)])
                 for b in range(blocks)]
    if blocks == 1:
        total = per_block[0]
    else:
        last = []
        for t in range(threads):
            s = f64(0.0)
            for b in range(t, blocks, threads):
                s += per_block[b]
            last.append(s)
        total = block_reduce(last)
    return finish(total, count, update)


def default_shape(count, sm_count, max_threads=1024):
    """The launcher's own choice (algo.cu, "Launch shape")."""
    if count <= 1 << 16:
        return 1, min(1024, max_threads)
    threads = min(256, max_threads)
    per_block = threads * UNROLL * 4
    return min(4 * sm_count, -(-count // per_block)), threads


@case
def emulation_is_the_kernels_code():
    """The vectorized emulation equals the literal one, bit for bit."""
    for count in (0, 1, 3, 4, 5, 37, 300, 1029):
        images = random_array(count, "float32")
        update = random_array(4, "float32")
        for blocks, threads in ((1, 1), (1, 7), (1, 64), (3, 33), (2, 40),
                                (5, 96), (70, 3)):
            for misalign in range(4):
                fast = kernel_order(images, update, blocks, threads, misalign)
                slow = kernel_order_literal(images, update, blocks, threads,
                                            misalign)
                assert fast.tobytes() == slow.tobytes(), \
                    (count, blocks, threads, misalign, fast, slow)


@case
def emulation_is_the_mean():
    """Both orders sum the same numbers: within the documented bound of
    the reference (one unit in the last place here)."""
    images = random_array(100003, "float32")
    update = random_array(4, "float32")
    want = (images.astype(np.float64).mean()
            + update.astype(np.float64)).astype(np.float32)
    for blocks, threads in ((1, 1024), (13, 256), (528, 256)):
        got = kernel_order(images, update, blocks, threads, 0)
        assert np.all(np.abs(got.view(np.int32) - want.view(np.int32)) <= 1)


def misalignment(array):
    return (array.__cuda_array_interface__["data"][0] // 4) % 4


def launch(images, update, count, shape=None, stream=None):
    out = gpumem.to_device(np.full(4, 77, np.float32))
    options = {}
    if shape is not None:
        options.update(grid=shape[0], block=shape[1])
    if stream is not None:
        options.update(stream=stream)
    kernels.algo(images, update, out, count, **options)
    if stream is not None:
        stream.synchronize()
    return out.copy_to_host()


def prod(dims):
    return int(np.prod(dims if isinstance(dims, tuple) else (dims,)))


@case
def device_bits_are_the_kernels_order():
    if not CUDA:
        gmtest.skip("the host backend runs the C reference; this compares "
                    "a GPU's bits")
    sm = gpumem.Device(0).multiprocessor_count
    host = random_array((1 << 22) + 11, "float32")
    update_host = random_array(4, "float32")
    d_images = gpumem.to_device(host)
    update = gpumem.to_device(update_host)
    counts = [1, 3, 4, 5, 1000, 65536, 65537, 100003, (1 << 20) + 3,
              (1 << 22) + 7]
    shapes = [None, (3, 33), (7, 1000), ((2, 2), (8, 4, 2)), (2000, 128),
              (1, 1)]
    for offset in range(4):
        view = d_images[offset:]
        mis = misalignment(view)
        for count in counts:
            for shape in shapes:
                if shape == (1, 1) and count > 100003:
                    continue
                if shape is None:
                    blocks, threads = default_shape(count, sm)
                else:
                    blocks, threads = prod(shape[0]), prod(shape[1])
                want = kernel_order(host[offset:offset + count], update_host,
                                    blocks, threads, mis)
                got = launch(view, update, count, shape)
                assert got.tobytes() == want.tobytes(), \
                    (offset, count, shape, got, want)


@case
def scratch_reuse_keeps_the_bits():
    """Repeated launches on one stream (the counter set back to 0 each
    time), on several streams, interleaved, and after a launch that
    grows a stream's area, give the same bits."""
    if not CUDA:
        gmtest.skip("the host backend has no scratch areas")
    a_host = random_array(5_000_000, "float32")
    b_host = random_array(3_000_001, "float32")
    update_host = random_array(4, "float32")
    a, b = gpumem.to_device(a_host), gpumem.to_device(b_host)
    update = gpumem.to_device(update_host)
    sm = gpumem.Device(0).multiprocessor_count
    want_a = kernel_order(a_host, update_host, *default_shape(a.size, sm),
                          misalignment(a))
    want_b = kernel_order(b_host, update_host, *default_shape(b.size, sm),
                          misalignment(b))
    streams = [gpumem.Stream() for _ in range(3)]
    outs = [gpumem.empty(4) for _ in range(6)]
    for round_ in range(5):
        for k, s in enumerate(streams):
            kernels.algo(a, update, outs[2 * k], a.size, stream=s)
            kernels.algo(b, update, outs[2 * k + 1], b.size, stream=s)
        if round_ == 2:           # grows the first stream's area
            big = gpumem.empty(4)
            kernels.algo(a, update, big, a.size, grid=4000, block=64,
                         stream=streams[0])
            streams[0].synchronize()
            assert big.copy_to_host().tobytes() == kernel_order(
                a_host, update_host, 4000, 64, misalignment(a)).tobytes()
        for s in streams:
            s.synchronize()
        for k in range(3):
            assert outs[2 * k].copy_to_host().tobytes() == want_a.tobytes()
            assert outs[2 * k + 1].copy_to_host().tobytes() == \
                want_b.tobytes()
    for _ in range(3):                # the synchronous call's stream
        assert launch(a, update, a.size).tobytes() == want_a.tobytes()


gmtest.main()
