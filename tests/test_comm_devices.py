"""gpumem.allreduce_devices and gpumem.bcast_devices (py-comm-devices.c,
comm-devices.c, comm-nccl.c): collectives over arrays on the devices of
one process, against NumPy, in every dtype and op, and every argument
error raised before any byte moves.

On the host backend its simulated devices (GPUMEM_HOST_DEVICES, 4 by
default) run the plain loops; on the CUDA backend NCCL runs them where
gpumem was built with it (one communicator per device), else the loops.
No MPI is needed.
"""

import os
import subprocess

import numpy as np

import gmtest
from gmtest import case, raises, DTYPES, reduce_all, assert_close

import gpumem

NDEV = gpumem.device_count()
# GPUMEM_COMM=nccl (the cuda.test_comm_devices_nccl run) insists on
# NCCL: every collective below then runs on it or raises.
if os.environ.get("GPUMEM_COMM") == "nccl":
    if NDEV < 2:
        gmtest.skip_file("GPUMEM_COMM=nccl: needs 2 devices")
    try:
        gpumem.allreduce_devices([gpumem.zeros(1, device=i)
                                  for i in range(2)])
    except gpumem.Error as exc:
        gmtest.skip_file(f"GPUMEM_COMM=nccl, but NCCL cannot run here: "
                         f"{exc}")
REDUCIBLE = [d for d in DTYPES if d != "float16"]
ORDERED = [d for d in REDUCIBLE if np.dtype(d).kind != "c"]
SHAPES = [(0,), (1,), (7,), (3, 5), (1000,)]


data = gmtest.collective_data


def on_devices(shape, dtype, salt=0, n=NDEV):
    return [gpumem.to_device(data(shape, dtype, i, salt), device=i)
            for i in range(n)]


@case
def allreduce_every_dtype_and_op():
    for salt, dtype in enumerate(REDUCIBLE):
        ops = ["sum", "max", "min"] if dtype in ORDERED else ["sum"]
        for op in ops:
            for shape in SHAPES:
                arrays = on_devices(shape, dtype, salt)
                assert gpumem.allreduce_devices(arrays, op=op) is None
                expect = reduce_all(np.stack([data(shape, dtype, i, salt)
                                              for i in range(NDEV)]),
                                    dtype, op)
                for i, a in enumerate(arrays):
                    got = a.copy_to_host()
                    assert a.device.index == i
                    assert got.shape == shape and got.dtype == dtype
                    assert_close(got, expect, dtype)


@case
def allreduce_over_some_devices_in_any_order():
    # A tuple, devices in reverse, fewer than all: each list of devices
    # is its own group of communicators on NCCL.
    for n in range(1, NDEV + 1):
        devices = list(range(NDEV))[::-1][:n]
        arrays = tuple(gpumem.to_device(np.full(5, d + 1, np.int64),
                                        device=d) for d in devices)
        gpumem.allreduce_devices(arrays)
        for a in arrays:
            assert np.array_equal(a.copy_to_host(),
                                  np.full(5, sum(d + 1 for d in devices)))


@case
def bcast_every_dtype_from_every_root():
    for salt, dtype in enumerate(DTYPES):
        for root in range(NDEV):
            arrays = on_devices((2, 3), dtype, salt)
            assert gpumem.bcast_devices(arrays, root=root) is None
            for a in arrays:
                assert np.array_equal(a.copy_to_host().view(np.uint8),
                                      data((2, 3), dtype, root, salt)
                                      .view(np.uint8))


@case
def views_stay_in_place():
    owners = [gpumem.to_device(np.arange(10, dtype=np.float32) + i,
                               device=i) for i in range(NDEV)]
    gpumem.allreduce_devices([o[2:5] for o in owners], op="max")
    for i, o in enumerate(owners):
        expect = np.arange(10, dtype=np.float32) + i
        expect[2:5] = np.arange(2, 5) + NDEV - 1
        assert np.array_equal(o.copy_to_host(), expect)


@case
def long_arrays_cross_chunks():
    # The plain loops stage 16 MiB at a time: 5 M float32 cross it.
    n = 5 << 20
    arrays = [gpumem.to_device(np.full(n, i + 1, np.float32), device=i)
              for i in range(NDEV)]
    gpumem.allreduce_devices(arrays)
    total = NDEV * (NDEV + 1) // 2
    for a in arrays:
        got = a.copy_to_host()
        assert got[0] == total and got[-1] == total and got[n // 2] == total
    gpumem.bcast_devices(arrays, root=NDEV - 1)


@case
def sees_work_queued_before_on_a_stream():
    # Without a stream a collective sees every stream's work queued
    # before it, as copies and kernels do.
    n = 1 << 20
    host = np.full(n, 3.0, np.float32)
    arrays = [gpumem.zeros(n, device=i) for i in range(NDEV)]
    streams = [gpumem.Stream(device=i) for i in range(NDEV)]
    for a, s in zip(arrays, streams):
        a.copy_from_host(host, stream=s)
    gpumem.allreduce_devices(arrays)
    for a in arrays:
        assert np.all(a.copy_to_host() == 3.0 * NDEV)


@case
def bad_arguments_raise_and_move_nothing():
    f = "gpumem.allreduce_devices"
    arrays = [gpumem.to_device(np.full(4, i, np.float32), device=i)
              for i in range(NDEV)]
    raises(TypeError, gpumem.allreduce_devices, arrays[0], match="list")
    raises(TypeError, gpumem.allreduce_devices, iter(arrays), match="list")
    raises(ValueError, gpumem.allreduce_devices, [], match="empty")
    raises(TypeError, gpumem.allreduce_devices,
           [arrays[0], np.zeros(4, np.float32)], match="arrays[1]")
    raises(ValueError, gpumem.allreduce_devices, arrays, op="prod",
           match=f"{f}: op must be")
    raises(TypeError, gpumem.allreduce_devices, arrays, op=None)
    raises(TypeError, gpumem.allreduce_devices)
    raises(TypeError, gpumem.allreduce_devices, arrays, "sum", 1)
    raises(ValueError, gpumem.allreduce_devices, [arrays[0], arrays[0]],
           match="both on device 0")
    if NDEV > 1:
        other = gpumem.zeros(5, device=1)
        raises(ValueError, gpumem.allreduce_devices, [arrays[0], other],
               match="differ")
        wide = gpumem.zeros(4, dtype="float64", device=1)
        raises(ValueError, gpumem.allreduce_devices, [arrays[0], wide],
               match="float64")
        shaped = gpumem.zeros((2, 2), device=1)
        raises(ValueError, gpumem.allreduce_devices, [arrays[0], shaped],
               match="differ")
        freed = gpumem.zeros(4, device=1)
        freed.free()
        raises(ValueError, gpumem.allreduce_devices, [arrays[0], freed],
               match="freed")
    h = [gpumem.zeros(4, dtype="float16", device=i) for i in range(NDEV)]
    raises(TypeError, gpumem.allreduce_devices, h, match="float16")
    c = [gpumem.zeros(4, dtype="complex64", device=i) for i in range(NDEV)]
    for op in ("max", "min"):
        raises(TypeError, gpumem.allreduce_devices, c, op=op,
               match="complex")
    raises(ValueError, gpumem.bcast_devices, arrays, root=NDEV,
           match="not an index")
    raises(ValueError, gpumem.bcast_devices, arrays, root=-1,
           match="not an index")
    raises(TypeError, gpumem.bcast_devices, arrays, root="0")
    raises(TypeError, gpumem.bcast_devices, arrays, root=True)
    # Far out of range: the number given, never a clipped one.
    raises(ValueError, gpumem.bcast_devices, arrays, root=2**70,
           match=str(2**70))
    raises(ValueError, gpumem.bcast_devices, arrays, root=-2**70,
           match=str(-2**70))
    # Nothing moved.
    for i, a in enumerate(arrays):
        assert np.array_equal(a.copy_to_host(), np.full(4, i, np.float32))


class Cai:
    """A foreign device array: the CUDA Array Interface of ARRAY, its
    memory read-only."""
    def __init__(self, array):
        self.__cuda_array_interface__ = {
            "version": 3, "shape": array.shape, "typestr": "<i4",
            "strides": None, "data": (array.ptr, True), "stream": None}


def read_only_on_device_0(values):
    """A read-only DeviceArray on device 0 holding VALUES (int32)."""
    if gpumem.backend == "host":
        n = np.array(values, np.int32)
        n.flags.writeable = False
        try:
            return gpumem.from_dlpack(n), n
        except Exception as exc:
            # NumPy 1.x cannot export a read-only array; 2.x can.
            if int(np.__version__.split(".")[0]) >= 2:
                raise
            gmtest.skip(f"NumPy {np.__version__} cannot pass a read-only "
                        f"array through DLPack ({exc})")
    backing = gpumem.to_device(np.array(values, np.int32), device=0)
    return gpumem.asarray(Cai(backing)), backing


@case
def read_only_arrays_are_refused_but_a_bcast_root_may_be_one():
    if NDEV < 2:
        gmtest.skip("needs 2 devices")
    ro, keep = read_only_on_device_0([1, 2, 3])
    assert ro.device.index == 0
    w = gpumem.to_device(np.zeros(3, np.int32), device=1)
    raises(ValueError, gpumem.allreduce_devices, [ro, w],
           match="arrays[0] is read-only")
    raises(ValueError, gpumem.bcast_devices, [w, ro],
           match="arrays[1] is read-only")
    assert np.array_equal(w.copy_to_host(), np.zeros(3))
    gpumem.bcast_devices([ro, w])
    assert np.array_equal(w.copy_to_host(), [1, 2, 3])
    del keep


@case
def leaves_no_allocations_behind():
    arrays = [gpumem.zeros(8, device=i) for i in range(NDEV)]
    before = [gpumem.memory_stats(i)["allocations"] for i in range(NDEV)]
    for _ in range(20):
        gpumem.allreduce_devices(arrays)
        gpumem.bcast_devices(arrays)
        raises(ValueError, gpumem.allreduce_devices, [arrays[0], arrays[0]])
    assert [gpumem.memory_stats(i)["allocations"]
            for i in range(NDEV)] == before


def run_with(env, code):
    return subprocess.run([gmtest.GPUMEM, "-q", "-c", code],
                          env=dict(os.environ, **env), capture_output=True,
                          text=True, timeout=120)


@case
def gpumem_comm_chooses_the_engine():
    code = ("import gpumem\n"
            "a = [gpumem.zeros(3, device=i) for i in "
            "range(gpumem.device_count())]\n"
            "gpumem.allreduce_devices(a)\n"
            "print('ok', gpumem.backend)\n")
    assert "ok" in run_with({"GPUMEM_COMM": "mpi"}, code).stdout
    assert "ok" in run_with({"GPUMEM_COMM": "auto"}, code).stdout
    forced = run_with({"GPUMEM_COMM": "nccl"}, code)
    if gpumem.backend == "host":
        # NCCL cannot move host memory: an error, not a silent fallback.
        assert forced.returncode == 1, forced
        assert "gpumem.Error: GPUMEM_COMM=nccl, but NCCL cannot run this " \
            "allreduce" in forced.stderr, forced.stderr
    elif forced.returncode == 0:
        print(f"NCCL runs the devices form here ({NDEV} device(s))")
    else:
        assert "built without NCCL" in forced.stderr, forced.stderr
        print("gpumem was built without NCCL: the devices form copies")
    for bad in ("nccl2", "MPI", " auto"):
        proc = run_with({"GPUMEM_COMM": bad}, "pass")
        assert proc.returncode == 3, proc
        assert f"GPUMEM_COMM='{bad}' is not one of auto, nccl, mpi" \
            in proc.stderr, proc.stderr
    for bad in ("-1", "ten", "1e9", "nan"):
        proc = run_with({"GPUMEM_COMM_TIMEOUT": bad}, "pass")
        assert proc.returncode == 3, proc
        assert "GPUMEM_COMM_TIMEOUT" in proc.stderr, proc.stderr
    for good in ("0", "2.5", "600"):
        assert run_with({"GPUMEM_COMM_TIMEOUT": good}, "pass").returncode \
            == 0


@case
def the_comm_module_offers_them_too():
    comm = getattr(gpumem, "comm", None)
    if comm is None:
        return
    assert comm.allreduce_devices is gpumem.allreduce_devices
    assert comm.bcast_devices is gpumem.bcast_devices
    assert comm.backend in ("nccl", "mpi")
    if gpumem.backend == "host":
        assert comm.backend == "mpi"


gmtest.main()
