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
