"""`with stream:`, waits between streams, foreign streams and event flags
(py-stream.c, py-stream-context.c)."""

import contextlib
import ctypes
import gc
import threading

import numpy as np

import gmtest
from gmtest import case, raises, random_array

import gpumem

N = 1 << 20


@case
def with_block_sets_the_current_stream_per_device_and_nests():
    s1, s2 = gpumem.Stream(), gpumem.Stream()
    assert gpumem.current_stream() is None
    with s1 as entered:
        assert entered is s1
        assert gpumem.current_stream() is s1
        with s2:
            assert gpumem.current_stream() is s2
            with s1:
                assert gpumem.current_stream() is s1
            assert gpumem.current_stream() is s2
        assert gpumem.current_stream() is s1
    assert gpumem.current_stream() is None
    # An exception leaving the block restores the previous stream too.
    try:
        with s1:
            raise KeyError("out")
    except KeyError:
        pass
    assert gpumem.current_stream() is None
    if gpumem.device_count() > 1:
        other = gpumem.Stream(device=1)
        with other:
            assert gpumem.current_stream(1) is other
            assert gpumem.current_stream(0) is None
            assert gpumem.current_stream() is None    # device 0 is current
            with gpumem.Device(1):
                assert gpumem.current_stream() is other
        assert gpumem.current_stream(1) is None


@case
def with_block_is_per_thread():
    s = gpumem.Stream()
    seen = []
    with s:
        t = threading.Thread(target=lambda: seen.append(
            gpumem.current_stream()))
        t.start()
        t.join()
        assert gpumem.current_stream() is s
    assert seen == [None]


def launch_blocks():
    """The C API's count of open blocks that pick the launch stream
    (gm_c_api_table.launch_blocks, the last field of the table)."""
    get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
    get_pointer.restype = ctypes.c_void_p
    get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
    table = get_pointer(gpumem._C_API, b"gpumem._C_API")
    # Fields are only ever added after it: abi, size, 10 pointer-sized
    # fields, then launch_blocks (test_capi.py's Table).
    pointer = ctypes.c_void_p.from_address(table + 8 + 10 * 8).value
    return ctypes.c_uint32.from_address(pointer).value


def all_closed():
    """The thread has no block open: no current stream, launch_blocks
    back to 0, and gpumem.concurrent() may open."""
    assert gpumem.current_stream() is None
    assert launch_blocks() == 0, launch_blocks()
    with gpumem.concurrent():
        pass


@case
def blocks_end_in_any_order():
    # Each block ends as if it had never opened: the current stream is
    # the innermost block's still open.  Exiting a stream with no open
    # block is a RuntimeError.
    s1, s2 = gpumem.Stream(), gpumem.Stream()
    s1.__enter__()
    s2.__enter__()
    assert launch_blocks() == 2
    s1.__exit__(None, None, None)
    assert gpumem.current_stream() is s2 and launch_blocks() == 1
    s2.__exit__(None, None, None)
    raises(RuntimeError, s1.__exit__, None, None, None, match="no open")
    all_closed()
    # Entered and ended through contextlib's frames, not the caller's.
    outer, inner = contextlib.ExitStack(), contextlib.ExitStack()
    outer.enter_context(s1)
    inner.enter_context(s2)
    outer.close()
    assert gpumem.current_stream() is s2
    inner.close()
    all_closed()


def holding(stream, log=None):
    """A generator that holds a `with STREAM:` block across its yields."""
    with stream:
        while True:
            if log is not None:
                log.append(gpumem.current_stream())
            yield


@case
def generators_closed_out_of_order_restore():
    # The case: a generator holding `with s0:` closed while
    # `with s1:` is innermost once raised "not the innermost" and left
    # s0 current for good (and concurrent() refused).
    s0, s1, s2 = gpumem.Stream(), gpumem.Stream(), gpumem.Stream()
    g = holding(s0)
    next(g)
    assert gpumem.current_stream() is s0
    with s1:
        g.close()
        assert gpumem.current_stream() is s1
    all_closed()
    # Two generators of the same stream and a third, closed in the
    # opposite order, and a block of the same stream in this frame.
    log = []
    gens = [holding(s0, log), holding(s1, log), holding(s0, log)]
    for g in gens:
        next(g)
    assert log == [s0, s1, s0] and launch_blocks() == 3
    with s2:
        with s0:
            gens[0].close()
            assert gpumem.current_stream() is s0
        assert gpumem.current_stream() is s2
        gens[2].close()
        assert gpumem.current_stream() is s2
    assert gpumem.current_stream() is s1
    next(gens[1])
    assert log[-1] is s1
    gens[1].close()
    all_closed()
    # A generator dropped without close(): the garbage collector ends
    # its block.
    g = holding(s2)
    next(g)
    with s1:
        del g
        gc.collect()
        assert gpumem.current_stream() is s1
    all_closed()


@case
def blocks_ended_from_another_thread_restore_their_own():
    # A generator started in a worker holds a block of the worker's; the
    # main thread closes it (as the garbage collector may): the worker's
    # stack loses the block, the main thread's is untouched.
    s0, s1 = gpumem.Stream(), gpumem.Stream()
    made, closed, seen, errors = (threading.Event(), threading.Event(),
                                  [], [])
    box = []

    def worker():
        try:
            g = holding(s0)
            next(g)
            box.append(g)
            made.set()
            closed.wait(60)
            seen.append(gpumem.current_stream())
            with gpumem.concurrent():
                pass
        except Exception as exc:
            errors.append(exc)
            made.set()

    t = threading.Thread(target=worker)
    t.start()
    made.wait(60)
    with s1:
        box.pop().close()
        assert gpumem.current_stream() is s1
    closed.set()
    t.join(60)
    assert not errors and seen == [None], (errors, seen)
    all_closed()
    # The garbage collector, in this thread, ends a block a worker left
    # open in a generator kept by a cycle; the worker goes on.
    made.clear()
    closed.clear()
    seen.clear()

    def leaves_a_cycle():
        g = holding(s0)
        next(g)
        cycle = [g]
        cycle.append(cycle)
        del g, cycle
        made.set()
        closed.wait(60)
        seen.append((gpumem.current_stream(), launch_blocks()))

    t = threading.Thread(target=leaves_a_cycle)
    t.start()
    made.wait(60)
    with s1:
        gc.collect()
        assert gpumem.current_stream() is s1 and launch_blocks() == 1
    closed.set()
    t.join(60)
    assert seen == [(None, 0)], seen
    all_closed()
    # Threads that each hand their generator to the next: every block
    # ends in a thread that did not open it.
    gens, lock = [], threading.Lock()

    def start_and_close():
        g = holding(gpumem.Stream())
        next(g)
        with lock:
            gens.append(g)
            other = gens.pop(0) if len(gens) > 1 else None
        if other is not None:
            other.close()

    threads = [threading.Thread(target=start_and_close) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    for g in gens:
        g.close()
    all_closed()


@case
def calls_in_a_with_block_run_on_its_stream():
    """Copies, kernels, to_device and copy_to_host inside `with s:` are
    queued on s: after s.synchronize() every result is right."""
    host = random_array(N, "float32")
    s = gpumem.Stream()
    with s:
        x = gpumem.to_device(host)
        y = gpumem.zeros(N)
        gpumem.copy(y, host)
        for _ in range(3):
            gpumem.kernels.saxpy(N, 2.0, x, y)
        out = gpumem.pinned_empty(N, "float32")
        gpumem.copy(out, y)
        s.synchronize()
    assert np.allclose(out, 7 * host, rtol=1e-5)
    assert np.allclose(y.copy_to_host(), 7 * host, rtol=1e-5)


@case
def with_block_calls_are_not_complete_on_return():
    """The contract: inside `with s:` calls are queued, not complete when
    they return (the host backend completes them anyway: all its work is
    synchronous)."""
    n = 1 << 24
    s = gpumem.Stream()
    x = gpumem.to_device(np.ones(n, np.float32))
    y = gpumem.zeros(n)
    with s:
        for _ in range(200):
            gpumem.kernels.saxpy(n, 1.0, x, y)
        pending = not s.query()
    s.synchronize()
    if gpumem.backend == "cuda":
        # 200 passes over 128 MiB take far longer than queueing them.
        assert pending, "the with block's kernels ran synchronously"
    else:
        assert not pending
    out = y.copy_to_host()
    assert out.min() == 200 and out.max() == 200


@case
def wait_stream_and_wait_event_order_work():
    n = 1 << 24
    x = gpumem.to_device(np.ones(n, np.float32))
    for how in ("stream", "event"):
        y = gpumem.zeros(n)
        producer, consumer = gpumem.Stream(), gpumem.Stream()
        for _ in range(100):
            gpumem.kernels.saxpy(n, 1.0, x, y, stream=producer)
        if how == "stream":
            consumer.wait_stream(producer)
        else:
            e = gpumem.Event(timing=False)
            e.record(producer)
            consumer.wait_event(e)
        out = gpumem.pinned_empty(n, "float32")
        gpumem.copy(out, y, stream=consumer)
        consumer.synchronize()
        assert out.min() == 100 and out.max() == 100, (how, out.min())
    raises(TypeError, consumer.wait_event, producer)
    raises(TypeError, consumer.wait_stream, gpumem.Event())
    gpumem.Stream().wait_event(gpumem.Event())        # never recorded: no-op


@case
def from_handle_wraps_without_owning():
    s = gpumem.Stream()
    ext = gpumem.Stream.from_handle(s.handle)
    assert ext.external and not s.external
    assert ext.handle == s.handle
    assert "external" in repr(ext)
    host = random_array(N, "float32")
    a = gpumem.to_device(host, stream=ext)
    ext.synchronize()
    del ext                      # must not destroy s's stream
    b = gpumem.empty(N)
    gpumem.copy(b, a, stream=s)
    s.synchronize()
    assert np.array_equal(b.copy_to_host(), host)
    legacy = gpumem.Stream.from_handle(1)
    with legacy:
        c = gpumem.to_device(host)
    legacy.synchronize()
    assert np.array_equal(c.copy_to_host(), host)
    raises(TypeError, gpumem.Stream.from_handle, "0x1")
    raises(TypeError, gpumem.Stream.from_handle, True)
    for junk in (-5, 2**63, 2**64 - 1, -2**70):
        raises(ValueError, gpumem.Stream.from_handle, junk,
               match="not a CUDA stream")
    raises(ValueError, gpumem.Stream.from_handle, 1,
           device=gpumem.device_count())
    if gpumem.backend == "host":
        assert gpumem.Stream.from_handle(12345).handle == 12345


@case
def event_flags_and_query():
    start, end = gpumem.Event(), gpumem.Event(blocking=True)
    start.record()
    gpumem.kernels.saxpy(N, 1.0, gpumem.zeros(N), gpumem.zeros(N))
    end.record()
    end.synchronize()
    assert end.query() is True
    assert start.elapsed_ms(end) >= 0
    light = gpumem.Event(timing=False)
    light.record()
    light.synchronize()
    assert light.query() is True
    raises(ValueError, start.elapsed_ms, light, match="timing=True")
    raises(ValueError, light.elapsed_ms, end, match="timing=True")
    raises(TypeError, gpumem.Event, None, True)       # flags are keywords
    s = gpumem.Stream()
    with s:
        e = gpumem.Event()
        e.record()                                    # on s
        s.synchronize()
        assert e.query() is True


gmtest.main()
