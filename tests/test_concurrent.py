"""Devices working at the same time (py-concurrent.c) and peer access
between devices (Device.can_access_peer, kernels on a peer's arrays).

Runs on both backends: the host backend's simulated devices
(GPUMEM_HOST_DEVICES, default 4) check the semantics (order, landing at
wait() and at the block's end, errors, exceptions, freeing inside); the
cases that measure that devices really overlap, or that a block's end
waits for running kernels, need 2 CUDA devices and skip otherwise."""

import os
import subprocess
import threading
import time

import numpy as np

import gmtest
from gmtest import case, raises

import gpumem

CUDA = gpumem.backend == "cuda"
NDEV = gpumem.device_count()


def need_devices(n):
    if NDEV < n:
        gmtest.skip(f"needs {n} devices, {NDEV} here")


def run_test_program(code, env=None, timeout=120):
    """CODE in the test program (it has the spin kernel), this backend."""
    return subprocess.run([gmtest.GPUMEM_TEST, f"--backend={gpumem.backend}",
                           "-q", "-c", code], capture_output=True, text=True,
                          env=env, timeout=timeout)


@case
def copies_into_host_memory_land_at_wait_and_at_the_end():
    devs = list(range(NDEV))
    src = [gpumem.to_device(np.arange(8, dtype=np.float32) + 10 * d,
                            device=d) for d in devs]
    out = np.full((NDEV, 8), -1, np.float32)
    with gpumem.concurrent() as block:
        assert block.open
        for d in devs:
            gpumem.copy_from_gpu(src[d], out[d], 8)
        # Not yet landed: the old contents, never a partial copy.
        assert np.all(out == -1), out
        block.wait()
        for d in devs:
            assert np.array_equal(out[d], np.arange(8) + 10 * d), out
        out[:] = -1
        for d in devs:
            gpumem.copy(out[d], src[d])
        assert np.all(out == -1)
    assert not block.open
    for d in devs:
        assert np.array_equal(out[d], np.arange(8) + 10 * d), out


@case
def each_device_keeps_the_order_of_its_calls():
    n = 1000
    devs = list(range(NDEV))
    x = [gpumem.empty(n, device=d) for d in devs]
    y = [gpumem.empty(n, device=d) for d in devs]
    first = np.zeros((NDEV, n), np.float32)
    second = np.zeros((NDEV, n), np.float32)
    host = np.arange(n, dtype=np.float32)
    with gpumem.concurrent():
        for d in devs:
            gpumem.copy_to_gpu(host, x[d], n)
            gpumem.copy_to_gpu(np.ones(n, np.float32) * d, y[d], n)
        # The sources were read in the call: changing them now does not
        # change what was copied.
        host[:] = 1e6
        for d in devs:
            gpumem.kernels.saxpy(n, 2.0, x[d], y[d])   # y = 2x + d
            gpumem.copy_from_gpu(y[d], first[d], n)
            gpumem.kernels.saxpy(n, 1.0, y[d], y[d])   # y = 2y
            y[d].copy_to_host(out=second[d])
    base = np.arange(n, dtype=np.float32)
    for d in devs:
        assert np.array_equal(first[d], 2 * base + d), d
        assert np.array_equal(second[d], 2 * (2 * base + d)), d


@case
def the_request_loop_matches_the_serial_run():
    rng = np.random.default_rng(gmtest.SEED)
    parts = [rng.random(37 + i).astype(np.float32) for i in range(4)]
    devices = [i % NDEV for i in range(4)]

    def run(concurrent, iterations=6):
        update = np.array([0.5, 0.25, 0.125, 1.0], np.float32)
        partial = np.empty((4, 4), np.float32)
        images = [gpumem.to_device(p, device=d)
                  for p, d in zip(parts, devices)]
        gpu_update = {d: gpumem.to_device(update, device=d)
                      for d in set(devices)}
        gpu_partial = [gpumem.empty(4, device=d) for d in devices]

        def iteration():
            for i in range(4):
                gpumem.kernels.algo(images[i], gpu_update[devices[i]],
                                    gpu_partial[i], len(parts[i]))
                gpumem.copy_from_gpu(gpu_partial[i], partial[i], 4)

        def stitch():
            update[:] = (partial[:, 0] + partial[:, 1] + partial[:, 2]
                         - partial[:, 3]) * 0.25
            for mem in gpu_update.values():
                gpumem.copy_to_gpu(update, mem, 4)

        if concurrent:
            with gpumem.concurrent() as block:
                for _ in range(iterations):
                    iteration()
                    block.wait()
                    stitch()
        else:
            for _ in range(iterations):
                iteration()
                stitch()
        return update.copy()

    assert np.array_equal(run(False), run(True))


@case
def copy_to_host_without_out_is_filled_on_return():
    a = gpumem.to_device(np.arange(5, dtype=np.float32))
    with gpumem.concurrent():
        gpumem.kernels.saxpy(5, 1.0, a, a)
        got = a.copy_to_host()
        assert np.array_equal(got, 2 * np.arange(5)), got


@case
def reading_a_pending_host_buffer_raises():
    a = gpumem.to_device(np.arange(6, dtype=np.float32))
    b = gpumem.empty(6)
    out = np.zeros(6, np.float32)
    with gpumem.concurrent() as block:
        gpumem.copy_from_gpu(a, out, 6)
        raises(ValueError, gpumem.copy_to_gpu, out, b, 6,
               match="filled when the block ends")
        raises(ValueError, gpumem.copy, b[2:4], out[1:3],
               match="wait()")
        # Also when it would be converted (float32 into float64).
        raises(ValueError, gpumem.copy_to_gpu, out, gpumem.empty(6, "float64"),
               6, match="filled when the block ends")
        block.wait()
        gpumem.copy_to_gpu(out, b, 6)             # landed: fine now
    assert np.array_equal(b.copy_to_host(), np.arange(6))


@case
def an_exception_inside_waits_and_propagates():
    a = gpumem.to_device(np.ones(4, np.float32))
    out = np.zeros(4, np.float32)

    class Boom(Exception):
        pass

    try:
        with gpumem.concurrent() as block:
            gpumem.kernels.saxpy(4, 1.0, a, a)
            gpumem.copy_from_gpu(a, out, 4)
            raise Boom()
    except Boom:
        pass
    else:
        raise AssertionError("the exception did not propagate")
    assert not block.open
    # The work was complete before the exception left the block.
    assert np.array_equal(out, [2, 2, 2, 2]), out
    # Outside, calls are synchronous again.
    gpumem.kernels.saxpy(4, 1.0, a, a)
    assert np.array_equal(a.copy_to_host(), [4, 4, 4, 4])


@case
def freeing_inside_the_block():
    before = gpumem.memory_stats()["allocated_bytes"]
    keep = gpumem.to_device(np.arange(1000, dtype=np.float32))
    out = np.zeros(1000, np.float32)
    with gpumem.concurrent():
        scratch = gpumem.to_device(np.ones(1000, np.float32))
        gpumem.kernels.saxpy(1000, 1.0, scratch, keep)
        scratch.free()                 # after the kernel that reads it
        del scratch
        with gpumem.empty(1000) as temp:
            gpumem.copy(temp, keep)
            gpumem.kernels.saxpy(1000, 1.0, temp, keep)
        gpumem.copy_from_gpu(keep, out, 1000)
    assert np.array_equal(out, 2 * (np.arange(1000) + 1)), out[:4]
    del keep
    assert gpumem.memory_stats()["allocated_bytes"] == before


@case
def bad_use_raises():
    raises(TypeError, gpumem.concurrent, 1)
    block = gpumem.concurrent()
    raises(RuntimeError, block.wait, match="open")
    with block:
        raises(RuntimeError, block.__enter__, match="already open")
    raises(RuntimeError, block.wait)
    outer = gpumem.concurrent()
    inner = gpumem.concurrent()
    outer.__enter__()
    inner.__enter__()
    raises(RuntimeError, outer.__exit__, None, None, None,
           match="innermost")
    inner.__exit__(None, None, None)
    outer.__exit__(None, None, None)
    assert "closed" in repr(outer)


@case
def nested_blocks_share_the_queues():
    a = gpumem.to_device(np.ones(3, np.float32))
    out = np.zeros(3, np.float32)
    with gpumem.concurrent():
        gpumem.kernels.saxpy(3, 1.0, a, a)
        with gpumem.concurrent():
            gpumem.kernels.saxpy(3, 1.0, a, a)
            gpumem.copy_from_gpu(a, out, 3)
        # The inner block's end waited for all the work so far.
        assert np.array_equal(out, [4, 4, 4]), out


@case
def other_threads_are_not_in_the_block():
    a = gpumem.to_device(np.arange(4, dtype=np.float32))
    seen = {}

    def other():
        out = np.zeros(4, np.float32)
        gpumem.copy_from_gpu(a, out, 4)         # synchronous here
        seen["out"] = out.copy()

    with gpumem.concurrent():
        t = threading.Thread(target=other)
        t.start()
        t.join()
    assert np.array_equal(seen["out"], np.arange(4)), seen


@case
def large_host_copies_are_synchronous_inside():
    n = (65 << 20) // 4                     # above the 64 MiB bounce limit
    host = np.arange(n, dtype=np.float32)
    a = gpumem.empty(n)
    out = np.zeros(n, np.float32)
    tail = host[-1000:].copy()
    with gpumem.concurrent():
        gpumem.copy_to_gpu(host, a, n)
        host[:] = 0
        gpumem.copy_from_gpu(a, out, n)
        assert np.array_equal(out[-1000:], tail)   # complete on return
    assert np.array_equal(out[:1000], np.arange(1000))


@case
def stats_and_converting_copies_inside():
    a = gpumem.to_device(np.arange(4, dtype=np.float32))
    out64 = np.zeros(4, np.float64)
    with gpumem.concurrent():
        gpumem.copy_from_gpu(a, out64, 4)       # converted: synchronous
        assert np.array_equal(out64, np.arange(4)), out64
        gpumem.copy_to_gpu(np.arange(4, dtype=np.int16), a, 4)
        stats = gpumem.memory_stats()
    assert stats["allocations"] >= 1
    assert np.array_equal(a.copy_to_host(), np.arange(4))


@case
def can_access_peer():
    for d in range(NDEV):
        assert gpumem.Device(d).can_access_peer(d) is True
        assert gpumem.Device(d).can_access_peer(gpumem.Device(d)) is True
    raises(ValueError, gpumem.Device(0).can_access_peer, NDEV)
    raises(TypeError, gpumem.Device(0).can_access_peer, "1")
    if not CUDA:
        want = os.environ.get("GPUMEM_HOST_PEER_ACCESS", "").lower() \
            not in ("0", "no", "false", "off")
        for d in range(NDEV):
            for p in range(NDEV):
                assert gpumem.Device(d).can_access_peer(p) is (want or d == p)


@case
def kernels_and_copies_across_devices():
    need_devices(2)
    if not gpumem.Device(0).can_access_peer(1):
        gmtest.skip("device 0 cannot access device 1")
    before = [gpumem.memory_stats(d)["allocated_bytes"] for d in (0, 1)]
    n = 1 << 16
    x1 = gpumem.to_device(np.arange(n, dtype=np.float32), device=1)
    y0 = gpumem.to_device(np.ones(n, np.float32), device=0)
    # The kernel runs on device 0 (its first array's) and writes device
    # 1's array through the peer mapping.
    gpumem.kernels.saxpy(n, 2.0, y0, x1)
    assert np.array_equal(x1.copy_to_host(), np.arange(n) + 2)
    with gpumem.concurrent():
        gpumem.kernels.saxpy(n, 1.0, x1, x1)    # device 1, queued
        z0 = gpumem.empty(n, device=0)
        gpumem.copy(z0, x1)                     # after device 1's work
        gpumem.kernels.saxpy(n, 1.0, x1, x1)    # after the copy read x1
        gpumem.kernels.saxpy(n, 1.0, z0, z0)    # device 0, queued
        out = np.empty(n, np.float32)
        gpumem.copy_from_gpu(z0, out, n)
        back = np.empty(n, np.float32)
        gpumem.copy(back, x1)
    assert np.array_equal(out, 4 * (np.arange(n) + 2)), out[:4]
    assert np.array_equal(back, 4 * (np.arange(n) + 2)), back[:4]
    # A kernel on device 0 writing device 1's array, between two kernels
    # of device 1 on it: ordered both ways.
    x1.copy_from_host(np.arange(n, dtype=np.float32))
    got = np.empty(n, np.float32)
    with gpumem.concurrent():
        gpumem.kernels.saxpy(n, 1.0, x1, x1)    # device 1: 2 i
        gpumem.kernels.saxpy(n, 3.0, y0, x1)    # device 0: + 3
        gpumem.kernels.saxpy(n, 1.0, x1, x1)    # device 1: twice that
        gpumem.copy_from_gpu(x1, got, n)
    assert np.array_equal(got, 2 * (2 * np.arange(n) + 3)), got[:4]
    del x1, y0, z0
    after = [gpumem.memory_stats(d)["allocated_bytes"] for d in (0, 1)]
    assert after == before, (before, after)


@case
def a_kernel_without_peer_access_raises():
    need_devices(2)
    if CUDA:
        if gpumem.Device(0).can_access_peer(1):
            gmtest.skip("devices 0 and 1 can access each other here")
        env = None
    else:
        env = dict(os.environ, GPUMEM_HOST_PEER_ACCESS="0")
    got = run_test_program(
        "import gpumem, numpy as np\n"
        "a = gpumem.zeros(4, device=0)\n"
        "b = gpumem.zeros(4, device=1)\n"
        "assert not gpumem.Device(0).can_access_peer(1)\n"
        "try:\n"
        "    gpumem.kernels.saxpy(4, 1.0, b, a)\n"
        "except ValueError as e:\n"
        "    print('refused:', e)\n"
        "c = gpumem.to_device(np.arange(4, dtype=np.float32), device=1)\n"
        "gpumem.copy(a, c)\n"
        "print('copied', a.copy_to_host().tolist())\n", env=env)
    assert got.returncode == 0, got
    assert "refused:" in got.stdout and "can_access_peer(0) is False" \
        in got.stdout, got.stdout
    assert "copied [0.0, 1.0, 2.0, 3.0]" in got.stdout, got.stdout


@case
def peer_copies_go_over_the_link():
    """256 MiB between devices 0 and 1 each way: with peer access the
    pools are mapped to each other and the copy is direct (388 GB/s
    over an H200 pair's NVLink; through host memory it was 38)."""
    need_devices(2)
    if not CUDA:
        gmtest.skip("host devices share host memory: no link to measure")
    if not gpumem.Device(0).can_access_peer(1):
        gmtest.skip("devices 0 and 1 cannot access each other")
    n = (256 << 20) // 4
    bufs = [gpumem.zeros(n, device=d) for d in (0, 1)]
    gpumem.copy(bufs[0], np.full(n, 1.5, np.float32))
    for src, dst in ((0, 1), (1, 0)):
        times = []
        for _ in range(8):
            t0 = time.perf_counter()
            gpumem.copy(bufs[dst], bufs[src])
            times.append(time.perf_counter() - t0)
        rate = (256 << 20) / sorted(times)[len(times) // 2] / 1e9
        print(f"# peer copy {src} -> {dst}: {rate:.0f} GB/s")
        assert rate > 100, f"{src} -> {dst}: {rate:.1f} GB/s: not direct"
    assert float(bufs[0].copy_to_host()[n - 1]) == 1.5


@case
def stream_blocks_and_concurrent_blocks_do_not_nest():
    """A `with stream:` block inside a concurrent() block, or the other
    way round, in one thread, is RuntimeError: the stream would take the
    block's calls for its device, unordered with the block's queues and
    not waited for by its end.  The refusal leaves both as they were."""
    s = gpumem.Stream()
    x = gpumem.to_device(np.ones(4, np.float32))
    with gpumem.concurrent() as block:
        raises(RuntimeError, s.__enter__, match="inside a gpumem.concurrent")
        assert gpumem.current_stream() is None
        # A graph recorded inside the block does not hide it.
        with gpumem.graph():
            raises(RuntimeError, s.__enter__,
                   match="inside a gpumem.concurrent")
            assert gpumem.current_stream() is None
        # Explicit streams stay allowed (the caller orders them).
        gpumem.kernels.saxpy(4, 1.0, x, x, stream=s)
        s.synchronize()
        gpumem.kernels.saxpy(4, 1.0, x, x)       # the block's queue
        block.wait()
        assert block.open
    assert not block.open
    assert x.copy_to_host().tolist() == [4.0] * 4
    with s:
        block = gpumem.concurrent()
        raises(RuntimeError, block.__enter__,
               match="inside a `with stream:` block")
        assert not block.open
        assert gpumem.current_stream() is s
    assert gpumem.current_stream() is None
    # Closed, each opens again; and another thread's blocks are its own.
    with gpumem.concurrent():
        done = []
        def other_thread():
            with s:
                done.append(gpumem.current_stream() is s)
        t = threading.Thread(target=other_thread)
        t.start()
        t.join()
        assert done == [True], done
    with s:
        assert gpumem.current_stream() is s


SPIN_ON_TWO = """
import time, gpumem
flags = [gpumem.zeros(1, 'int32', device=d) for d in (0, 1)]
gpumem.kernels.spin(1, flags[0]); gpumem.kernels.spin(1, flags[1])
t0 = time.perf_counter()
{body}
print('elapsed', time.perf_counter() - t0)
"""


@case
def two_devices_work_at_the_same_time():
    need_devices(2)
    if not CUDA:
        gmtest.skip("host kernels run to their end in the launching call")
    got = run_test_program(SPIN_ON_TWO.format(body=(
        "with gpumem.concurrent():\n"
        "    for d in (0, 1):\n"
        "        gpumem.kernels.spin(500, flags[d])\n"
        "print('flags', [int(f.copy_to_host()[0]) for f in flags])")))
    assert got.returncode == 0, got
    elapsed = float(got.stdout.split("elapsed")[1])
    assert "flags [1, 1]" in got.stdout, got.stdout
    # Serial would be 1.0 s: both 500 ms kernels ran together.
    assert 0.45 < elapsed < 0.8, got.stdout


@case
def an_exception_waits_for_running_kernels():
    need_devices(2)
    got = run_test_program(SPIN_ON_TWO.format(body=(
        "try:\n"
        "    with gpumem.concurrent():\n"
        "        for d in (0, 1):\n"
        "            flags[d].free()\n"
        "            flags[d] = gpumem.zeros(1, 'int32', device=d)\n"
        "            gpumem.kernels.spin(400, flags[d])\n"
        "        raise KeyError('inside')\n"
        "except KeyError:\n"
        "    print('after', time.perf_counter() - t0)\n"
        "print('flags', [int(f.copy_to_host()[0]) for f in flags])")))
    assert got.returncode == 0, got
    after = float(got.stdout.split("after")[1].split()[0])
    assert after >= 0.39, got.stdout
    assert "flags [1, 1]" in got.stdout, got.stdout


@case
def ctrl_c_at_the_block_end_waits_for_the_work():
    need_devices(2)
    if not CUDA:
        gmtest.skip("host kernels run to their end in the launching call: "
                    "no block end waits on one")
    got = gmtest.interrupt([gmtest.GPUMEM_TEST, "--backend=cuda", "-q", "-c",
                            "import gpumem\n"
                            "f = [gpumem.zeros(1, 'int32', device=d) "
                            "for d in (0, 1)]\n"
                            "with gpumem.concurrent():\n"
                            "    for d in (0, 1):\n"
                            "        gpumem.kernels.spin(3000, f[d])\n"
                            "    print('ready', flush=True)\n"
                            "print('not reached')\n"], delay=0.5)
    gmtest.assert_interrupted(got, within=6)
    assert "not reached" not in got.out, got
    # SIGINT came 0.5 s into the 3 s kernels: the block's end went on
    # waiting for them before the exception left it.
    assert got.elapsed >= 2.0, got


gmtest.main()
