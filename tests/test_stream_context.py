"""`with stream:`, waits between streams, foreign streams and event flags
(py-stream.c, py-stream-context.c)."""

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


@case
def blocks_must_end_innermost_first():
    s1, s2 = gpumem.Stream(), gpumem.Stream()
    s1.__enter__()
    s2.__enter__()
    raises(RuntimeError, s1.__exit__, None, None, None, match="innermost")
    s2.__exit__(None, None, None)
    s1.__exit__(None, None, None)
    raises(RuntimeError, s1.__exit__, None, None, None)
    assert gpumem.current_stream() is None


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
