"""Devices: gpumem.Device, device_count, current_device (py-device.c)."""

import gmtest
from gmtest import case, raises

import gpumem


@case
def attributes():
    for i in range(gpumem.device_count()):
        dev = gpumem.Device(i)
        assert dev.index == i
        assert isinstance(dev.name, str) and dev.name
        assert dev.total_memory > 0
        cc = dev.compute_capability
        assert isinstance(cc, tuple) and len(cc) == 2
        if gpumem.backend == "cuda":
            assert cc[0] >= 3
        free, total = dev.mem_info()
        assert 0 < free <= total
        dev.synchronize()
        assert f"Device {i}" in repr(dev)
        assert gpumem.Device(i) is dev


@case
def index_out_of_range_names_valid_range():
    n = gpumem.device_count()
    exc = raises(ValueError, gpumem.Device, n)
    assert f"0 to {n - 1}" in str(exc)
    raises(ValueError, gpumem.Device, -1)
    raises(ValueError, gpumem.Device, 2**70)
    raises(TypeError, gpumem.Device, "0")
    raises(TypeError, gpumem.Device, 1.0)
    raises(ValueError, gpumem.empty, 3, device=n)


@case
def current_device_and_context():
    assert gpumem.current_device().index == 0
    last = gpumem.device_count() - 1
    with gpumem.Device(last) as dev:
        assert gpumem.current_device() is dev
        a = gpumem.empty(4)
        assert a.device.index == last
        with gpumem.Device(0):
            assert gpumem.current_device().index == 0
        assert gpumem.current_device().index == last
    assert gpumem.current_device().index == 0
    assert gpumem.empty(4).device.index == 0


@case
def device_as_index():
    dev = gpumem.Device(0)
    assert int(dev.__index__()) == 0
    a = gpumem.zeros(3, device=dev)
    assert a.device is dev


gmtest.main()
