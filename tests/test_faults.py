"""Faults (docs/RELIABILITY.md): out of memory in the middle of a
workload, an exception with many live buffers, Ctrl-C during a long
copy, arrays freed while queued work still uses them, a script that
ends by os._exit or is killed, and leaks over repeated calls.

Runs on both backends; what only CUDA can show is guarded by
gpumem.backend == 'cuda'.  Children run the backend under test (the
test program $GPUMEM_TEST where they need its spin kernel).
"""

import ctypes
import gc
import os
import re
import signal
import subprocess
import tempfile
import threading
import time
import tracemalloc

import numpy as np

import gmtest
from gmtest import case, raises

import gpumem

CUDA = gpumem.backend == "cuda"
MiB = 1 << 20


def run_child(code, *options, program=None, timeout=120, cwd=None):
    """Runs CODE in a child gpumem on this backend; CompletedProcess."""
    return subprocess.run([program or gmtest.GPUMEM,
                           f"--backend={gpumem.backend}", "-q", *options,
                           "-c", code],
                          capture_output=True, text=True, timeout=timeout,
                          cwd=cwd, stdin=subprocess.DEVNULL)


def show(proc):
    return (f"exit {proc.returncode}\nstdout: {proc.stdout[-2000:]!r}\n"
            f"stderr: {proc.stderr[-2000:]!r}")


def stats_balance(before, dev=0):
    gc.collect()
    now = gpumem.memory_stats(dev)
    for key in ("allocated_bytes", "allocations"):
        assert now[key] == before[key], (key, now[key], before[key])


def live_gpumem_objects():
    """How many DeviceArray, Stream and Event objects are alive."""
    kinds = (gpumem.DeviceArray, gpumem.Stream, gpumem.Event)
    return sum(1 for o in gc.get_objects() if isinstance(o, kinds))


@case
def out_of_memory_in_the_middle_of_a_workload():
    dev = 0
    gc.collect()
    before = gpumem.memory_stats(dev)
    host = np.arange(MiB // 4, dtype=np.float32)        # 1 MiB
    gpumem.set_memory_limit(before["allocated_bytes"] + 64 * MiB, dev)
    arrays = []
    try:
        # The workload: allocate, fill, compute, until the limit says no.
        for i in range(1000):
            try:
                a = gpumem.empty(host.size, device=dev)
            except gpumem.OutOfMemoryError as exc:
                oom = exc
                break
            a.copy_from_host(host)
            gpumem.kernels.saxpy(host.size, 1.0, a, a)
            arrays.append(a)
        else:
            raise AssertionError("the limit never refused an allocation")
        assert len(arrays) == 64, len(arrays)
        assert isinstance(oom, MemoryError) and isinstance(oom, gpumem.Error)
        text = str(oom)
        assert f"device {dev}" in text and "limit" in text, text
        assert f"{MiB} bytes" in text, text
        # It goes on working: the arrays hold their data, kernels run,
        # what is freed can be had again, and copies of every kind work.
        for a in arrays[::16]:
            assert np.array_equal(a.copy_to_host(), 2 * host)
        for a in arrays[:8]:
            a.free()
        more = [gpumem.to_device(host, device=dev) for _ in range(8)]
        raises(gpumem.OutOfMemoryError, gpumem.empty, host.size, device=dev)
        gpumem.copy(more[0], arrays[-1])
        assert np.array_equal(more[0].copy_to_host(), 2 * host)
        del a, more
        arrays.clear()
        stats_balance(before, dev)
        # Room again for the whole 64 MiB.
        big = gpumem.zeros(64 * MiB // 4, device=dev)
        del big
    finally:
        gpumem.set_memory_limit(None, dev)
    stats_balance(before, dev)


@case
def out_of_memory_from_the_device_itself():
    # More than the device (or, on the host backend, the machine) has:
    # refused at once, under no limit, and nothing is left behind.
    dev = 0
    gc.collect()
    before = gpumem.memory_stats(dev)
    total = gpumem.Device(dev).total_memory
    # 2^60 bytes: more than any address space maps, so refused even where
    # the host overcommits memory (vm.overcommit_memory=1).
    exc = raises(gpumem.OutOfMemoryError, gpumem.empty,
                 max(4 * total, 1 << 60), "uint8", device=dev)
    assert f"device {dev}" in str(exc), str(exc)
    a = gpumem.to_device(np.arange(10, dtype=np.int64), device=dev)
    assert a.copy_to_host().sum() == 45
    del a
    stats_balance(before, dev)


@case
def an_exception_with_many_live_buffers():
    code = ("import gpumem, numpy as np\n"
            "arrays = [gpumem.to_device(np.full(256, i, np.float32))\n"
            "          for i in range(1000)]\n"
            "views = [a[1:10] for a in arrays[::10]]\n"
            "streams = [gpumem.Stream() for _ in range(8)]\n"
            "def deep(n):\n"
            "    local = gpumem.zeros(1000)\n"
            "    if n == 0:\n"
            "        raise RuntimeError('boom with 1000 arrays alive')\n"
            "    deep(n - 1)\n"
            "deep(20)\n")
    start = time.monotonic()
    proc = run_child(code, "--stats", timeout=120)
    elapsed = time.monotonic() - start
    assert proc.returncode == 1, show(proc)
    assert "Traceback (most recent call last)" in proc.stderr, show(proc)
    assert "RuntimeError: boom with 1000 arrays alive" in proc.stderr, \
        show(proc)
    # Every buffer went back: device 0's row of --stats shows nothing
    # allocated and nothing live, after 1021 allocations.
    row = re.search(r"^0\s+(\S+ \S+)\s+\S+ \S+\s+\S+ \S+\s+(\d+)\s+(\d+)$",
                    proc.stderr, re.M)
    assert row, show(proc)
    assert row.group(1) == "0 B" and row.group(2) == "0", row.group(0)
    assert int(row.group(3)) == 1021, row.group(0)
    assert "LeakSanitizer" not in proc.stderr, show(proc)
    assert elapsed < 60, elapsed


@case
def ctrl_c_during_a_long_copy():
    # A copy of 1 GiB (host backend) or 2 GiB (CUDA) host to device, over
    # and over; SIGINT must raise KeyboardInterrupt within seconds (large
    # copies move in pieces, with Ctrl-C checked between them: py-copy.c).
    nbytes = (2 if CUDA else 1) << 30
    code = ("import gpumem, numpy as np\n"
            f"n = {nbytes // 4}\n"
            "host = np.ones(n, np.float32)\n"
            "dev = gpumem.empty(n)\n"
            "gpumem.copy_to_gpu(host, dev, n)\n"
            "print('ready', flush=True)\n"
            "while True:\n"
            "    gpumem.copy_to_gpu(host, dev, n)\n")
    got = gmtest.interrupt([gmtest.GPUMEM, f"--backend={gpumem.backend}",
                            "-q", "-c", code], delay=0.5, limit=30)
    gmtest.assert_interrupted(got, within=5)


FREED_WHILE_QUEUED = """
import gpumem, numpy as np, sys
n = 1 << 20
x_host = np.arange(n, dtype=np.float32)
y_host = np.ones(n, np.float32)
fill = np.full(n, -7.0, np.float32)
reused = 0
for attempt in range(3):
    s = gpumem.Stream()
    flag = gpumem.zeros(1, "int32")
    x = gpumem.to_device(x_host)
    y = gpumem.to_device(y_host)
    # In s: wait 300 ms, then y = 2 x + y.  Nothing of it has run yet
    # when x is freed: the free must wait for it.
    gpumem.kernels.spin(300, flag, stream=s)
    gpumem.kernels.saxpy(n, 2.0, x, y, stream=s)
    old = x.ptr
    x.free()
    # The pool may hand x's memory out again at once: overwrite it.
    b = gpumem.empty(n)
    b.copy_from_host(fill)
    reused += b.ptr == old
    s.synchronize()
    assert np.array_equal(y.copy_to_host(), 2 * x_host + y_host), "saxpy read freed memory"
    assert np.array_equal(b.copy_to_host(), fill), "the queued kernel wrote a new array"
    # The same for an output: y freed while the kernel will write it.
    gpumem.kernels.spin(300, flag, stream=s)
    y2 = gpumem.to_device(y_host)
    gpumem.kernels.saxpy(n, 2.0, b, y2, stream=s)
    old = y2.ptr
    y2.free()
    c = gpumem.empty(n)
    c.copy_from_host(fill)
    reused += c.ptr == old
    s.synchronize()
    assert np.array_equal(c.copy_to_host(), fill), "a queued kernel wrote freed memory"
    del b, c, x, y, flag, s
print("reused", reused)
"""


@case
def arrays_freed_while_queued_work_uses_them():
    proc = run_child(FREED_WHILE_QUEUED, program=gmtest.GPUMEM_TEST)
    assert proc.returncode == 0, show(proc)
    reused = int(re.search(r"reused (\d+)", proc.stdout).group(1))
    if CUDA:
        # Frees go to the legacy default stream (cudaFreeAsync on stream
        # 0), which waits for the work every blocking stream queued
        # before; the pool then reuses the block at once, so the check
        # above saw the very memory the kernel used.
        assert reused >= 1, proc.stdout


@case
def array_freed_from_another_thread_during_a_kernel():
    # The kernel runs without the GIL while its launcher waits; another
    # thread frees its output meanwhile.  The block must not be reused
    # before the kernel is done with it (CUDA: the free and the next
    # allocation are ordered after the kernel), so the kernel's write
    # at its end does not land in the array allocated after the free.
    if not CUDA:
        gmtest.skip("host kernels run to their end in the launching call, "
                    "holding the GIL: no other thread can free an array "
                    "while one runs")
    code = ("import gpumem, numpy as np, threading, time\n"
            "out = gpumem.zeros(1, 'int32')\n"
            "t = threading.Thread(target=gpumem.kernels.spin,\n"
            "                     args=(2000, out))\n"
            "t.start()\n"
            "time.sleep(0.5)\n"
            "assert t.is_alive(), 'the kernel ended before the free'\n"
            "old = out.ptr\n"
            "out.free()\n"
            "b = gpumem.empty(1, 'int32')\n"
            "b.copy_from_host(np.array([77], np.int32))\n"
            "t.join()\n"
            "assert b.copy_to_host()[0] == 77, 'kernel wrote freed memory'\n"
            "print('done', 'reused' if b.ptr == old else 'fresh')\n")
    proc = run_child(code, program=gmtest.GPUMEM_TEST)
    assert proc.returncode == 0 and "done" in proc.stdout, show(proc)


def stays_empty(code, kill=None):
    """Runs CODE in an empty folder, optionally killed by signal KILL
    once it says 'ready'; returns the exit status, and asserts that the
    folder is empty afterwards (gpumem writes nothing on disk)."""
    with tempfile.TemporaryDirectory(prefix="gm-faults-") as folder:
        proc = subprocess.Popen([gmtest.GPUMEM, f"--backend={gpumem.backend}",
                                 "-q", "-c", code], cwd=folder,
                                stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        try:
            if kill is not None:
                assert proc.stdout.readline().strip() == "ready"
                proc.send_signal(kill)
            out, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        left = os.listdir(folder)
        assert left == [], (left, err)
        return proc.returncode


WORKING = ("import gpumem, numpy as np, os, time\n"
           "arrays = [gpumem.to_device(np.arange(1000.0)) for _ in range(50)]\n"
           "s = gpumem.Stream()\n"
           "gpumem.copy(arrays[0], arrays[1], stream=s)\n")


@case
def os_exit_and_kills_write_nothing():
    assert stays_empty(WORKING + "os._exit(3)\n") == 3
    assert stays_empty(WORKING + "print('ready', flush=True)\n"
                       "time.sleep(60)\n", kill=signal.SIGKILL) \
        == -signal.SIGKILL
    assert stays_empty(WORKING + "print('ready', flush=True)\n"
                       "time.sleep(60)\n", kill=signal.SIGTERM) \
        == -signal.SIGTERM
    assert stays_empty(WORKING + "raise SystemExit(4)\n") == 4


def churn(rounds):
    """Calls that succeed and calls that fail, ROUNDS times."""
    host = np.arange(100, dtype=np.float32)
    for _ in range(rounds):
        a = gpumem.to_device(host)
        b = gpumem.zeros(100)
        a.copy_to_host()
        a[10:20].copy_to_host()
        a.reshape(10, 10)[3].copy_to_host(out=np.empty(10, np.float32))
        gpumem.copy(b, a)
        gpumem.copy_to_gpu(host, b, 50)
        gpumem.copy_from_gpu(a, np.empty(100, np.float64), 100)
        gpumem.kernels.saxpy(100, 2.0, a, b)
        s = gpumem.Stream()
        e = gpumem.Event()
        e.record(s)
        s.synchronize()
        gpumem.memory_stats()
        for bad in (lambda: gpumem.empty(-1), lambda: gpumem.empty("x"),
                    lambda: gpumem.empty(3, "U3"),
                    lambda: gpumem.copy_to_gpu(host, b, 101),
                    lambda: gpumem.copy_to_gpu(host.astype(complex), b, 10),
                    lambda: gpumem.copy(a, gpumem.zeros(100, "int8")),
                    lambda: gpumem.kernels.saxpy(101, 1.0, a, b),
                    lambda: gpumem.kernels.saxpy(100, 1.0, a,
                                                 gpumem.zeros(100, "int32")),
                    lambda: a[[0, 2]],
                    lambda: a.reshape(7),
                    lambda: gpumem.Device(99),
                    lambda: gpumem.copy(None, None)):
            try:
                bad()
            except (TypeError, ValueError, IndexError):
                pass
            else:
                raise AssertionError("a bad call passed")
        b.free()
        raises(ValueError, b.copy_to_host)
        raises(ValueError, gpumem.copy, b, a)


class _Mallinfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
        "fsmblks", "uordblks", "fordblks", "keepcost")]


def _malloc_counter():
    """A function returning the bytes the C library's malloc has handed
    out and not had back (glibc's mallinfo2), or None where there is no
    such count."""
    try:
        mallinfo2 = ctypes.CDLL(None).mallinfo2
    except (OSError, AttributeError):
        return None
    mallinfo2.restype = _Mallinfo2

    def in_use():
        info = mallinfo2()
        return info.uordblks + info.hblkhd
    return in_use


# A leak grows memory by the same amount in every stretch of rounds, for
# ever; Python's and NumPy's caches and free lists (NumPy 1.24's grow
# for some thousand rounds) grow in fits and then stop.  So the rounds
# go on, in stretches, until three stretches in a row together grew
# less than LEAK_BOUND bytes, or fail after LEAK_STRETCHES stretches: one
# small object (16 bytes or more) leaked every 5 rounds is 4800 bytes in
# three stretches, and never passes.
LEAK_ROUNDS = 500
LEAK_BOUND = 4096
LEAK_STRETCHES = 24


@case
def no_leaks_over_repeated_calls():
    churn(30)                       # warm caches and free lists
    gc.collect()
    objects = live_gpumem_objects()
    before = gpumem.memory_stats()
    malloc_in_use = _malloc_counter()
    # Python objects (tracemalloc: whatever the Python allocator holds)
    # and the C library's heap (gpumem's own C structures, NumPy's data).
    measures = {"python": lambda: tracemalloc.get_traced_memory()[0]}
    if malloc_in_use is not None:
        measures["malloc"] = malloc_in_use
    growth = {name: [] for name in measures}
    tracemalloc.start()
    try:
        churn(1000)
        for _ in range(LEAK_STRETCHES):
            gc.collect()
            base = {name: measure() for name, measure in measures.items()}
            churn(LEAK_ROUNDS)
            gc.collect()
            for name, measure in measures.items():
                growth[name].append(measure() - base[name])
            if all(len(g) >= 3 and sum(g[-3:]) < LEAK_BOUND
                   for g in growth.values()):
                break
        else:
            raise AssertionError(f"memory grew in every stretch of "
                                 f"{LEAK_ROUNDS} rounds: {growth}")
    finally:
        tracemalloc.stop()
    # gpumem's own books are exact: every array, stream and event gone,
    # every byte given back.
    assert live_gpumem_objects() == objects
    stats_balance(before)


gmtest.main()
