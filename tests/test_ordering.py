"""Ordering (cuda-backend.c, "Ordering"): a call without stream= sees all
work queued before it on any gpumem.Stream, and is complete when it
returns, on every copy path.

Each case queues long work on a user stream -- the test build's spin
kernel, then a saxpy that writes (or reads) the array -- and then copies
without stream=, checking exact values.  The sizes sit below, at and
above each threshold of the CUDA backend's copy paths: 64 KiB (the
bounce buffer of small copies), 1 MiB (the GIL is released), 16 MiB
(the staged pageable path and its 16 MiB ring chunks; 4 chunks fill the
ring) and 256 MiB (py-copy.c's chunks).  On the host backend all work is
synchronous; the same cases run there with sizes up to 16 MiB.

The spin kernel is only in the test build: run under gpumem, this file
starts itself again under $GPUMEM_TEST.
"""


import numpy as np

import gmtest
from gmtest import case

import gpumem

gmtest.need_spin_kernel(__file__)

CUDA = gpumem.backend == "cuda"
KiB, MiB = 1 << 10, 1 << 20
# How long the stream's work waits before it touches the array: far
# longer than the copy itself takes, so a copy that does not wait for
# the stream sees the old contents.
SPIN_MS = 150 if CUDA else 1
SIZES = [4 * KiB, 64 * KiB, 64 * KiB + 4, MiB - 4, MiB, 16 * MiB - 4,
         16 * MiB, 16 * MiB + 4]
if CUDA:
    SIZES += [64 * MiB + 4, 256 * MiB + 4]
LARGEST = max(SIZES) // 4
# Patterns whose saxpy results are exact in float32.
X = (np.arange(LARGEST, dtype=np.int64) % 5 + 1).astype(np.float32)
Y = (np.arange(LARGEST, dtype=np.int64) % 7).astype(np.float32)
Z = (np.arange(LARGEST, dtype=np.int64) % 3 + 10).astype(np.float32)
flag = gpumem.zeros(1, "int32")


# Whether the cases' streams are non-blocking (Stream(non_blocking=True)):
# CUDA does not order those with the default stream, gpumem does.
NON_BLOCKING = False


def new_stream(device=None):
    return gpumem.Stream(device=device, non_blocking=NON_BLOCKING)


def busy(stream):
    """Queues SPIN_MS of waiting on STREAM."""
    gpumem.kernels.spin(SPIN_MS, flag, stream=stream)


def expect(got, want, what):
    got = np.asarray(got).reshape(-1)
    if not np.array_equal(got, want):
        bad = np.flatnonzero(got != want)
        raise AssertionError(f"{what}: {bad.size} of {want.size} elements "
                             f"wrong, first at {bad[0]}: {got[bad[0]]} "
                             f"instead of {want[bad[0]]}")


def pinned_copy(src):
    out = gpumem.pinned_empty(src.size, "float32")
    out[:] = src
    return out


# How a plain copy reads a device array into host memory: each returns
# the host array it filled.
def read_copy_to_host(y, n):
    return y.copy_to_host()


def read_copy_to_host_out(y, n):
    out = np.empty(n, np.float32)
    y.copy_to_host(out=out)
    return out


def read_copy_from_gpu(y, n):
    out = np.empty(n, np.float32)
    gpumem.copy_from_gpu(y, out, n)
    return out


def read_copy(y, n):
    out = np.empty(n, np.float32)
    gpumem.copy(out, y)
    return out


def read_pinned(y, n):
    out = gpumem.pinned_empty(n, "float32")
    gpumem.copy(out, y)
    return out


READERS = [read_copy_to_host, read_copy_to_host_out, read_copy_from_gpu,
           read_copy, read_pinned]


# How a plain copy writes host data SRC into device array X.
def write_copy_to_gpu(x, src):
    gpumem.copy_to_gpu(src, x, src.size)


def write_copy_from_host(x, src):
    x.copy_from_host(src)


def write_copy(x, src):
    gpumem.copy(x, src)


def write_pinned(x, src):
    gpumem.copy(x, pinned_copy(src))


WRITERS = [write_copy_to_gpu, write_copy_from_host, write_copy,
           write_pinned]


@case
def batched_uploads_wait_for_a_stream_that_reads():
    """GPUMEM_COPY_BATCH=1: every staged upload goes through
    cudaMemcpyBatchAsync on a stream of its own (cuda-staging.c), which
    must wait for gpumem's streams as the ring's copies do: the upload
    case again in a child with the setting."""
    if not CUDA:
        gmtest.skip("GPUMEM_COPY_BATCH is the cuda backend's")
    import os
    import subprocess
    env = dict(os.environ, GPUMEM_COPY_BATCH="1",
               GM_TEST_ONLY="plain_uploads_wait_for_a_stream_that_reads")
    proc = subprocess.run([gmtest.GPUMEM_TEST, "-q", os.path.abspath(
        __file__)], env=env, capture_output=True, text=True, timeout=600)
    if proc.returncode == 3 and "needs cudaMemcpyBatchAsync" in proc.stderr:
        gmtest.skip("this build's CUDA has no cudaMemcpyBatchAsync")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 passed, 0 failed" in proc.stdout, proc.stdout


@case
def plain_reads_wait_for_a_stream_that_writes():
    s = new_stream()
    for nbytes in SIZES:
        n = nbytes // 4
        want = 2 * X[:n] + Y[:n]
        for read in READERS:
            x, y = gpumem.to_device(X[:n]), gpumem.to_device(Y[:n])
            busy(s)
            gpumem.kernels.saxpy(n, 2.0, x, y, stream=s)
            expect(read(y, n), want, f"{read.__name__}, {nbytes} bytes")
            del x, y


@case
def plain_uploads_wait_for_a_stream_that_reads():
    s = new_stream()
    for nbytes in SIZES:
        n = nbytes // 4
        for write in WRITERS:
            x, y = gpumem.to_device(X[:n]), gpumem.to_device(Y[:n])
            busy(s)
            # Reads x once the stream's wait is over ...
            gpumem.kernels.saxpy(n, 2.0, x, y, stream=s)
            # ... which this copy must not overwrite before.
            write(x, Z[:n])
            s.synchronize()
            what = f"{write.__name__}, {nbytes} bytes"
            expect(y.copy_to_host(), 2 * X[:n] + Y[:n],
                   what + ": the stream read the overwritten array")
            expect(x.copy_to_host(), Z[:n], what)
            # And the other way: work queued after the copy sees it.
            gpumem.kernels.saxpy(n, 1.0, x, y, stream=s)
            s.synchronize()
            expect(y.copy_to_host(), 2 * X[:n] + Y[:n] + Z[:n],
                   what + ": later work missed the copy")
            del x, y


@case
def to_device_and_zeros_are_complete_on_return():
    s = new_stream()
    for nbytes in SIZES:
        n = nbytes // 4
        busy(s)
        x = gpumem.to_device(X[:n])
        y = gpumem.zeros(n)
        gpumem.kernels.saxpy(n, 1.0, x, y, stream=s)
        s.synchronize()
        expect(y.copy_to_host(), X[:n], f"{nbytes} bytes")


@case
def device_copies_wait_both_ways():
    s = new_stream()
    for nbytes in SIZES:
        n = nbytes // 4
        x, y = gpumem.to_device(X[:n]), gpumem.to_device(Y[:n])
        z = gpumem.empty(n)
        busy(s)
        gpumem.kernels.saxpy(n, 2.0, x, y, stream=s)
        gpumem.copy(z, y)                       # reads what s writes
        expect(z.copy_to_host(), 2 * X[:n] + Y[:n], f"read, {nbytes} bytes")
        w = gpumem.to_device(Z[:n])
        busy(s)
        gpumem.kernels.saxpy(n, 1.0, x, y, stream=s)
        gpumem.copy(x, w)                       # overwrites what s reads
        s.synchronize()
        expect(y.copy_to_host(), 3 * X[:n] + Y[:n],
               f"overwrite, {nbytes} bytes")
        del x, y, z, w


@case
def plain_kernels_wait_for_a_stream():
    s = new_stream()
    n = MiB // 4
    x, y = gpumem.to_device(X[:n]), gpumem.to_device(Y[:n])
    z = gpumem.zeros(n)
    busy(s)
    gpumem.kernels.saxpy(n, 2.0, x, y, stream=s)
    gpumem.kernels.saxpy(n, 1.0, y, z)
    expect(z.copy_to_host(), 2 * X[:n] + Y[:n], "plain kernel")


@case
def copies_across_devices_wait_for_both():
    if gpumem.device_count() < 2:
        gmtest.skip("needs two devices")
    for nbytes in (64 * KiB, 16 * MiB + 4):
        n = nbytes // 4
        s1 = new_stream(device=1)
        x1 = gpumem.to_device(X[:n], device=1)
        y1 = gpumem.to_device(Y[:n], device=1)
        z0 = gpumem.empty(n, device=0)
        flag1 = gpumem.zeros(1, "int32", device=1)
        gpumem.kernels.spin(SPIN_MS, flag1, stream=s1)
        gpumem.kernels.saxpy(n, 2.0, x1, y1, stream=s1)
        gpumem.copy(z0, y1)           # runs on device 0, s1 is device 1's
        expect(z0.copy_to_host(), 2 * X[:n] + Y[:n],
               f"device 1 to 0, {nbytes} bytes")
        s0 = new_stream(device=0)
        w0 = gpumem.to_device(Z[:n], device=0)
        gpumem.kernels.spin(SPIN_MS, flag, stream=s0)
        gpumem.kernels.saxpy(n, 1.0, z0, w0, stream=s0)   # w0 = z0 + Z
        gpumem.copy(y1, w0)           # runs on device 1, s0 is device 0's
        expect(y1.copy_to_host(), 2 * X[:n] + Y[:n] + Z[:n],
               f"device 0 to 1, {nbytes} bytes")


@case
def non_blocking_streams_keep_the_rule():
    """The cases above again with non-blocking streams, which CUDA does
    not order with the legacy default stream: gpumem joins them to it
    (cuda-streams.c, gm_cuda_join)."""
    global NON_BLOCKING
    NON_BLOCKING = True
    try:
        assert new_stream().non_blocking
        for fn in (plain_reads_wait_for_a_stream_that_writes,
                   plain_uploads_wait_for_a_stream_that_reads,
                   to_device_and_zeros_are_complete_on_return,
                   device_copies_wait_both_ways,
                   plain_kernels_wait_for_a_stream,
                   copies_across_devices_wait_for_both):
            try:
                fn()
            except gmtest.Skip:
                pass
    finally:
        NON_BLOCKING = False


@case
def non_blocking_stream_work_seen_by_every_default_path():
    """What the cases above do not cover, with a non-blocking stream:
    Event.record() without a stream, a stream dropped with its work
    pending, and the stream's work after a plain call."""
    n = MiB // 4
    s = gpumem.Stream(non_blocking=True)
    x, y = gpumem.to_device(X[:n]), gpumem.to_device(Y[:n])
    busy(s)
    gpumem.kernels.saxpy(n, 2.0, x, y, stream=s)
    e = gpumem.Event()
    e.record()                      # on the default stream
    e.synchronize()
    assert s.query(), "Event.record() without stream= missed the stream"
    busy(s)
    gpumem.kernels.saxpy(n, 1.0, x, y, stream=s)
    expect(y.copy_to_host(), 3 * X[:n] + Y[:n], "after a second write")
    # A stream dropped with work pending: the next plain call sees it.
    t = gpumem.Stream(non_blocking=True)
    busy(t)
    gpumem.kernels.saxpy(n, 1.0, x, y, stream=t)
    del t
    expect(y.copy_to_host(), 4 * X[:n] + Y[:n], "a dropped stream's work")
    # Writes by a plain call that a non-blocking stream reads after it.
    gpumem.copy_to_gpu(Z[:n], x, n)
    gpumem.kernels.saxpy(n, 1.0, x, y, stream=s)
    s.synchronize()
    expect(y.copy_to_host(), 4 * X[:n] + Y[:n] + Z[:n], "stream after plain")


FAILED_STAGED_COPY = """
import gpumem, numpy as np, threading, time
n = (256 << 20) // 4
x = gpumem.zeros(n)
host = np.ones(n, np.float32)
s = gpumem.Stream()
flag = gpumem.zeros(1)
def fault_soon():
    time.sleep(0.05)
    gpumem.kernels.fault(flag, stream=s)
threading.Thread(target=fault_soon).start()
try:
    # Staged copies of 16 MiB chunks, back to back: the fault queued
    # meanwhile runs between two chunks of one of them.
    for _ in range(400):
        x.copy_from_host(host)
except gpumem.CudaError as exc:
    print("raised", exc.name)
else:
    print("no error")
"""


@case
def a_staged_copy_that_fails_half_way_raises():
    # A fault on a user stream lands between the chunks of a staged copy
    # (which run on the legacy stream, ordered with it): the copy fails
    # with the error, returns only once none of its chunks still moves
    # (cuda-staging.c), and the process then ends cleanly.
    if not CUDA:
        gmtest.skip("the fault kernel does nothing on the host backend")
    import subprocess
    proc = subprocess.run([gmtest.GPUMEM_TEST, "--backend=cuda", "-q", "-c",
                           FAILED_STAGED_COPY], capture_output=True,
                          text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert "raised cudaError" in proc.stdout, (proc.returncode, proc.stdout,
                                               proc.stderr[-2000:])
    assert proc.returncode in (0, 1), (proc.returncode, proc.stderr[-2000:])


CTRL_C_BEHIND_A_KERNEL = """
import gpumem, numpy as np
n = {n}
y = gpumem.zeros(n)
out = np.empty(n, np.float32)
s = gpumem.Stream()
flag = gpumem.zeros(1, "int32")
gpumem.kernels.spin(20000, flag, stream=s)
print("ready", flush=True)
gpumem.{call}
"""


@case
def plain_copies_behind_a_long_kernel_answer_ctrl_c():
    # A plain copy waits for the stream's 20 s kernel; Ctrl-C must end
    # that wait at once, whatever the copy's path.
    if not CUDA:
        gmtest.skip("host kernels run in the calling thread; nothing waits")
    import selectors
    import signal
    import subprocess
    import time
    for n, call in ((1024, "copy_from_gpu(y, out, n)"),
                    (4 * MiB, "copy(out, y)"),
                    (8 * MiB, "copy_to_gpu(out, y, n)")):
        code = CTRL_C_BEHIND_A_KERNEL.format(n=n, call=call)
        proc = subprocess.Popen(
            [gmtest.GPUMEM_TEST, "--backend=cuda", "-q", "-c", code],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        try:
            with selectors.DefaultSelector() as sel:
                sel.register(proc.stdout, selectors.EVENT_READ)
                assert sel.select(timeout=60), "no 'ready' in time"
            assert proc.stdout.readline() == "ready\n"
            time.sleep(0.5)             # inside the copy's wait by now
            start = time.monotonic()
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=30)
            elapsed = time.monotonic() - start
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        assert "KeyboardInterrupt" in err, (call, proc.returncode, err)
        assert elapsed < 5, (call, elapsed)


gmtest.main()
