"""Streams and events (py-stream.c)."""

import numpy as np

import gmtest
from gmtest import case, raises, random_array

import gpumem


@case
def async_copies_and_kernels_in_a_stream():
    for dev in range(gpumem.device_count()):
        s = gpumem.Stream(device=dev)
        assert s.device.index == dev
        host = gpumem.pinned_empty(1 << 18, "float32")
        host[:] = random_array(1 << 18, "float32")
        a = gpumem.empty(1 << 18, device=dev)
        gpumem.copy(a, host, stream=s)
        gpumem.kernels.saxpy(a.size, 2.0, a, a, stream=s)
        out = gpumem.pinned_empty(1 << 18, "float32")
        gpumem.copy(out, a, stream=s)
        s.synchronize()
        assert s.query() is True
        assert np.allclose(out, 3 * host)
        b = gpumem.to_device(host, device=dev, stream=s)
        back = b.copy_to_host(stream=s)
        s.synchronize()
        assert np.array_equal(back, host)
    assert "Stream" in repr(s)
    assert isinstance(s.handle, int)


@case
def stream_device_mismatch():
    if gpumem.device_count() < 2:
        gmtest.skip(f"needs 2 devices, {gpumem.device_count()} here")
    s = gpumem.Stream(device=1)
    a = gpumem.empty(4, device=0)
    raises(ValueError, gpumem.copy, a, np.zeros(4, np.float32), stream=s)
    raises(ValueError, a.copy_to_host, stream=s)
    raises(ValueError, gpumem.Event(device=0).record, s)
    b = gpumem.empty(4, device=1)
    gpumem.copy(b, a, stream=s)             # either side's device will do
    s.synchronize()


@case
def bad_stream_arguments():
    raises(TypeError, gpumem.copy, gpumem.empty(2), np.zeros(2, np.float32),
           stream=0)
    raises(TypeError, gpumem.Stream, device="x")
    raises(ValueError, gpumem.Stream, device=gpumem.device_count())


@case
def non_blocking_streams():
    """Stream(non_blocking=True), CuPy's name: checked arguments, the
    property, and the ordering rule kept (test_ordering.py has the cases
    that can fail on the cuda backend)."""
    for bad in (1, None, "yes", np.bool_(True)):
        raises(TypeError, gpumem.Stream, non_blocking=bad,
               match="non_blocking must be True or False")
    raises(TypeError, gpumem.Stream, None, True)    # keyword only
    raises(ValueError, gpumem.Stream, device=gpumem.device_count(),
           non_blocking=True)
    assert gpumem.Stream().non_blocking is False
    assert gpumem.Stream(non_blocking=False).non_blocking is False
    n = 1 << 18
    host = random_array(n, "float32")
    for dev in range(gpumem.device_count()):
        s = gpumem.Stream(device=dev, non_blocking=True)
        assert s.non_blocking is True and s.device.index == dev
        assert "Stream" in repr(s)
        a = gpumem.to_device(host, device=dev)
        b = gpumem.zeros(n, device=dev)
        gpumem.kernels.saxpy(n, 2.0, a, b, stream=s)
        with s:
            gpumem.kernels.saxpy(n, 1.0, a, b)
        # No synchronize: the plain call sees the stream's work.
        assert np.array_equal(b.copy_to_host(), np.float32(3) * host)
        s.synchronize()
        assert s.query() is True
    # A wrapped stream says what it is (the host backend's are blocking).
    w = gpumem.Stream.from_handle(0)
    assert w.non_blocking is False


@case
def events_time_and_order():
    s = gpumem.Stream()
    start, end = gpumem.Event(), gpumem.Event()
    raises(ValueError, start.elapsed_ms, end)
    start.record(s)
    a = gpumem.to_device(random_array(1 << 20, "float32"))
    for _ in range(10):
        gpumem.kernels.saxpy(a.size, 1.0, a, a, stream=s)
    end.record(s)
    end.synchronize()
    assert end.query() and start.query()
    ms = start.elapsed_ms(end)
    assert isinstance(ms, float) and ms >= 0.0
    raises(TypeError, start.elapsed_ms, 3)
    e = gpumem.Event()
    e.record()
    e.synchronize()


gmtest.main()
