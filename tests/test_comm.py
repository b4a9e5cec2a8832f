"""gpumem.comm under mpirun (py-comm.c, comm-mpi.c, comm-agree.c): every
collective against NumPy, and every mismatch raising on every rank.

Run by tests/gm-mpi-test.sh as `mpirun -n 4 gpumem test_comm.py`.  Each
rank's data comes from the shared seed and its rank, so every rank can
compute what every other rank holds, and with it the expected result.
After each case the ranks agree on whether any of them failed, so one
rank's failure fails the case everywhere and the ranks stay in step.
"""

import numpy as np

import gmtest
from gmtest import raises, DTYPES, reduce_all, assert_close

import gpumem

comm = getattr(gpumem, "comm", None)
if comm is None:
    gmtest.skip_file("gpumem was built without MPI")
if comm.size < 2:
    gmtest.skip_file("needs an MPI job of 2 or more ranks (mpirun -n 4)")

RANK, SIZE = comm.rank, comm.size
# GPUMEM_COMM=nccl (the cuda.test_comm_nccl run) insists on NCCL, which
# wants one GPU a rank: elsewhere every collective would raise.
if gmtest.os.environ.get("GPUMEM_COMM") == "nccl":
    if comm.backend != "nccl":
        gmtest.skip_file("GPUMEM_COMM=nccl, but NCCL is not this build's "
                         "or backend's engine")
    if gpumem.device_count() < comm.local_size:
        gmtest.skip_file("GPUMEM_COMM=nccl needs a GPU a rank")
REDUCIBLE = [d for d in DTYPES if d != "float16"]
ORDERED = [d for d in REDUCIBLE if np.dtype(d).kind != "c"]
SHAPES = [(0,), (1,), (7,), (3, 5), (2, 1, 4), (1000,)]


data = gmtest.collective_data


def every_rank(shape, dtype, salt=0):
    return np.stack([data(shape, dtype, r, salt) for r in range(SIZE)])


collective_case = gmtest.collective_case


@collective_case
def rank_size_and_default_device():
    assert 0 <= RANK < SIZE and isinstance(SIZE, int)
    assert 0 <= comm.local_rank < comm.local_size <= SIZE
    assert isinstance(comm.cuda_aware, bool)
    expect = comm.local_rank % gpumem.device_count()
    assert gpumem.current_device().index == expect
    assert gpumem.empty(3).device.index == expect
    import gpumem.comm as again
    assert again is comm
    ranks = comm.gather(gpumem.to_device(np.array([RANK, comm.local_rank])))
    if RANK == 0:
        assert np.array_equal(ranks.copy_to_host()[:, 0], np.arange(SIZE))


@collective_case
def the_engine_is_reported():
    assert comm.backend in ("nccl", "mpi", "ipc")
    setting = gmtest.os.environ.get("GPUMEM_COMM")
    if setting in ("mpi", "ipc"):
        assert comm.backend == setting
    elif gpumem.backend == "host":
        assert comm.backend == "mpi"
    # Every rank says the same.
    index = ("nccl", "mpi", "ipc").index(comm.backend)
    mine = gpumem.to_device(np.array([index], np.int32))
    comm.allreduce(mine)
    assert mine.copy_to_host()[0] == SIZE * index


@collective_case
def auto_takes_the_shared_windows_for_large_arrays_only():
    # Ranks sharing one GPU (comm.backend 'ipc' under GPUMEM_COMM=auto):
    # small arrays go through MPI's staging, large ones through the
    # windows, which map every other rank's window (an import each).
    setting = gmtest.os.environ.get("GPUMEM_COMM") or "auto"
    if comm.backend != "ipc" or setting != "auto":
        gmtest.skip(f"engine {comm.backend}, GPUMEM_COMM={setting}")
    imports = gpumem.sharing_stats()["imports"]
    small = gpumem.full(1000, RANK + 1.0)
    comm.allreduce(small)
    assert np.all(small.copy_to_host() == SIZE * (SIZE + 1) / 2)
    assert gpumem.sharing_stats()["imports"] == imports
    large = gpumem.full(SIZE * (512 << 10) // 4, RANK + 1.0)
    comm.allreduce(large)
    assert np.all(large.copy_to_host() == SIZE * (SIZE + 1) / 2)
    assert gpumem.sharing_stats()["imports"] == SIZE - 1


@collective_case
def collectives_on_a_stream():
    s = gpumem.Stream()
    a = gpumem.to_device(np.full(1000, RANK + 1, np.float32))
    assert comm.allreduce(a, stream=s) is None
    s.synchronize()
    assert np.array_equal(a.copy_to_host(),
                          np.full(1000, SIZE * (SIZE + 1) // 2))
    b = gpumem.to_device(np.arange(6, dtype=np.int32) * (RANK + 1))
    assert comm.bcast(b, root=SIZE - 1, stream=s) is None
    s.synchronize()
    assert np.array_equal(b.copy_to_host(), np.arange(6) * SIZE)
    out = comm.gather(b, root=0, stream=s)
    s.synchronize()
    if RANK == 0:
        assert np.array_equal(out.copy_to_host(),
                              np.stack([np.arange(6) * SIZE] * SIZE))
    else:
        assert out is None
    # Without a stream, a collective sees the work queued on a stream
    # before it.
    c = gpumem.zeros(1 << 16)
    c.copy_from_host(np.full(1 << 16, RANK, np.float32), stream=s)
    comm.allreduce(c, op="max")
    assert np.all(c.copy_to_host() == SIZE - 1)


@collective_case
def collectives_in_a_concurrent_block():
    """In a gpumem.concurrent() block a collective sees the block's work
    queued before it on its device, the block's later calls see its
    result, and it is done when the block's wait() returns (on NCCL it is
    queued on the block's stream, on MPI complete on return)."""
    n = 1 << 20
    x = gpumem.to_device(np.full(n, RANK + 1, np.float32))
    seven = gpumem.to_device(np.arange(7, dtype=np.int64) + 10 * RANK)
    a = gpumem.zeros(n)
    summed = np.zeros(n, np.float32)
    gathered = None
    with gpumem.concurrent() as block:
        for _ in range(20):            # the device is behind the script
            gpumem.kernels.saxpy(n, 1.0, x, a)
        assert comm.allreduce(a) is None
        gpumem.copy_from_gpu(a, summed, n)
        comm.bcast(seven, root=SIZE - 1)
        gathered = comm.gather(seven, root=0)
        gpumem.kernels.saxpy(n, -1.0, x, a)     # after the allreduce
        block.wait()
        assert np.all(summed == 20 * SIZE * (SIZE + 1) // 2)
        expect = np.arange(7) + 10 * (SIZE - 1)
        if RANK == 0:
            assert np.array_equal(gathered.copy_to_host(),
                                  np.stack([expect] * SIZE))
        else:
            assert gathered is None
        assert np.array_equal(seven.copy_to_host(), expect)
    assert np.all(a.copy_to_host() == 20 * SIZE * (SIZE + 1) // 2 - RANK - 1)


@collective_case
def bad_streams_raise_everywhere():
    a = gpumem.to_device(np.full(4, RANK, np.float32))
    raises(TypeError, comm.allreduce, a, stream=5, match="stream")
    raises(TypeError, comm.bcast, a, 0, gpumem.Stream())
    raises(TypeError, comm.gather, a, stream="s")
    if gpumem.device_count() > 1:
        home = gpumem.current_device().index
        elsewhere = gpumem.Stream(device=(home + 1) % gpumem.device_count())
        raises(ValueError, comm.allreduce, a, stream=elsewhere,
               match="device")
    # One rank's bad stream makes every rank raise.
    bad = SIZE - 1
    if RANK == bad:
        raises(TypeError, comm.allreduce, a, stream=1.5)
    else:
        raises(ValueError, comm.allreduce, a, stream=gpumem.Stream(),
               match=f"rank {bad} refused")
    assert np.array_equal(a.copy_to_host(), np.full(4, RANK, np.float32))


@collective_case
def barrier_returns_none():
    for _ in range(3):
        assert comm.barrier() is None


@collective_case
def allreduce_every_dtype_and_op():
    for salt, dtype in enumerate(REDUCIBLE):
        ops = ["sum", "max", "min"] if dtype in ORDERED else ["sum"]
        for op in ops:
            for shape in SHAPES:
                a = gpumem.to_device(data(shape, dtype, RANK, salt))
                assert comm.allreduce(a, op=op) is None
                got = a.copy_to_host()
                assert got.shape == shape and got.dtype == np.dtype(dtype)
                assert_close(got, reduce_all(every_rank(shape, dtype, salt),
                                             dtype, op), dtype)


@collective_case
def allreduce_default_op_is_sum_and_views_stay_in_place():
    a = gpumem.to_device(np.arange(10, dtype=np.float64) + RANK)
    comm.allreduce(a[2:5])
    got = a.copy_to_host()
    expect = np.arange(10, dtype=np.float64) + RANK
    expect[2:5] = SIZE * np.arange(2, 5) + SIZE * (SIZE - 1) // 2
    assert np.array_equal(got, expect), got


@collective_case
def bcast_every_dtype_from_every_root():
    for salt, dtype in enumerate(DTYPES):
        for root in range(SIZE):
            for shape in [(0,), (5,), (2, 3), (1000,)]:
                a = gpumem.to_device(data(shape, dtype, RANK, salt))
                assert comm.bcast(a, root=root) is None
                got = a.copy_to_host()
                assert got.shape == shape and got.dtype == np.dtype(dtype)
                assert np.array_equal(got.view(np.uint8),
                                      data(shape, dtype, root, salt)
                                      .view(np.uint8))


@collective_case
def gather_every_dtype_to_every_root():
    for salt, dtype in enumerate(DTYPES):
        for root in range(SIZE):
            for shape in [(0,), (4,), (2, 3), (999,)]:
                a = gpumem.to_device(data(shape, dtype, RANK, salt))
                out = comm.gather(a, root=root)
                # The source is left as it was.
                assert np.array_equal(a.copy_to_host(),
                                      data(shape, dtype, RANK, salt))
                if RANK != root:
                    assert out is None
                    continue
                assert isinstance(out, gpumem.DeviceArray)
                assert out.shape == (SIZE,) + shape
                assert out.dtype == np.dtype(dtype)
                assert out.device.index == a.device.index
                got = out.copy_to_host()
                assert np.array_equal(got.view(np.uint8),
                                      every_rank(shape, dtype, salt)
                                      .view(np.uint8))


@collective_case
def gather_default_root_and_keywords():
    a = gpumem.to_device(np.full((2, 2), RANK, np.int32))
    out = comm.gather(a=a)
    if RANK == 0:
        assert out.shape == (SIZE, 2, 2)
        assert np.array_equal(out.copy_to_host()[:, 0, 0], np.arange(SIZE))
    else:
        assert out is None


@collective_case
def float16_and_complex_reductions_raise_type_error_everywhere():
    h = gpumem.to_device(data((4,), "float16", RANK))
    for op in ("sum", "max", "min"):
        raises(TypeError, comm.allreduce, h, op=op, match="float16")
    assert np.array_equal(h.copy_to_host(), data((4,), "float16", RANK))
    c = gpumem.to_device(data((4,), "complex64", RANK))
    for op in ("max", "min"):
        raises(TypeError, comm.allreduce, c, op=op, match="complex")
    assert np.array_equal(c.copy_to_host(), data((4,), "complex64", RANK))


@collective_case
def bad_arguments_raise_everywhere():
    a = gpumem.zeros(4)
    raises(ValueError, comm.allreduce, a, op="prod", match="op must be")
    raises(TypeError, comm.allreduce, a, op=1)
    raises(TypeError, comm.allreduce, np.zeros(4, np.float32),
           match="DeviceArray")
    raises(ValueError, comm.bcast, a, root=SIZE, match="not a rank")
    raises(ValueError, comm.gather, a, root=-1, match="not a rank")
    raises(TypeError, comm.bcast, a, root="0")
    raises(ValueError, comm.gather, a, root=2**70, match=str(2**70))
    raises(TypeError, comm.bcast)
    raises(TypeError, comm.gather, a, 0, 1)
    freed = gpumem.zeros(4)
    freed.free()
    raises(ValueError, comm.allreduce, freed, match="freed")


@collective_case
def one_rank_refusing_makes_every_rank_raise():
    bad = SIZE - 1
    a = gpumem.to_device(np.full(4, RANK, np.float32))
    arg = np.zeros(4, np.float32) if RANK == bad else a
    if RANK == bad:
        raises(TypeError, comm.allreduce, arg)
    else:
        raises(ValueError, comm.allreduce, arg,
               match=f"rank {bad} refused")
    # Nothing moved anywhere.
    assert np.array_equal(a.copy_to_host(), np.full(4, RANK, np.float32))


@collective_case
def mismatched_sizes_raise_value_error_everywhere():
    n = 5 if RANK == 1 else 4
    for fn in (comm.allreduce, comm.bcast, comm.gather):
        a = gpumem.to_device(np.full(n, RANK + 1, np.float32))
        raises(ValueError, fn, a, match="rank 1")
        assert np.array_equal(a.copy_to_host(), np.full(n, RANK + 1,
                                                        np.float32))


@collective_case
def mismatched_dtypes_raise_value_error_everywhere():
    dtype = "float64" if RANK == SIZE - 1 else "float32"
    for fn in (comm.allreduce, comm.bcast, comm.gather):
        a = gpumem.to_device(np.full(4, RANK + 1, dtype))
        raises(ValueError, fn, a, match="float64")
        assert np.array_equal(a.copy_to_host(), np.full(4, RANK + 1, dtype))


@collective_case
def mismatched_shapes_ops_roots_and_calls_raise_everywhere():
    shape = (3, 2) if RANK == 1 else (2, 3)
    raises(ValueError, comm.allreduce, gpumem.zeros(shape), match="shapes")
    a = gpumem.zeros(4)
    raises(ValueError, comm.allreduce, a, op="max" if RANK else "min",
           match="op")
    raises(ValueError, comm.bcast, a, root=RANK % 2, match="root")
    raises(ValueError, comm.gather, a, root=1 if RANK == 0 else 0,
           match="root")
    if RANK == 0:
        raises(ValueError, comm.barrier, match="different collectives")
    else:
        raises(ValueError, comm.bcast, a, match="different collectives")


@collective_case
def the_job_goes_on_after_errors():
    a = gpumem.to_device(np.full(3, RANK, np.int64))
    comm.allreduce(a)
    assert np.array_equal(a.copy_to_host(),
                          np.full(3, SIZE * (SIZE - 1) // 2))


@collective_case
def long_arrays_cross_chunks():
    # Chunks are 64 MiB unless GPUMEM_MPI_CHUNK makes them small (the
    # staged runs of the suite set 64 bytes): then these cross many.
    small = gmtest.os.environ.get("GPUMEM_MPI_CHUNK")
    for dtype in ("uint8", "float64", "complex128"):
        shape = (3 * 64 + 5,) if small else (1 << 18,)
        a = gpumem.to_device(data(shape, dtype, RANK, 99))
        comm.allreduce(a)
        assert_close(a.copy_to_host(),
                     reduce_all(every_rank(shape, dtype, 99), dtype, "sum"),
                     dtype)
        b = gpumem.to_device(data(shape, dtype, RANK, 98))
        comm.bcast(b, root=SIZE - 1)
        assert np.array_equal(b.copy_to_host(),
                              data(shape, dtype, SIZE - 1, 98))
        out = comm.gather(b, root=1)
        if RANK == 1:
            assert np.array_equal(out.copy_to_host(),
                                  np.stack([data(shape, dtype, SIZE - 1, 98)]
                                           * SIZE))


@collective_case
def collectives_leave_no_allocations_behind():
    a = gpumem.zeros((3, 4))
    before = gpumem.memory_stats()["allocations"]
    for i in range(50):
        out = comm.gather(a, root=i % SIZE)
        del out
        comm.allreduce(a)
        comm.bcast(a)
        raises(ValueError, comm.gather, gpumem.zeros(5 + (RANK == 1)))
    assert gpumem.memory_stats()["allocations"] == before


@collective_case
def arrays_on_other_devices():
    device = (comm.local_rank + 1) % gpumem.device_count()
    a = gpumem.to_device(np.full(6, RANK, np.int32), device=device)
    comm.allreduce(a, op="max")
    assert np.array_equal(a.copy_to_host(), np.full(6, SIZE - 1))
    out = comm.gather(a, root=0)
    if RANK == 0:
        assert out.device.index == device


gmtest.main()
