"""The gpumem module itself: names, exceptions, submodules (module.c)."""

import sys

import gmtest
from gmtest import case, raises

import gpumem


@case
def backend_and_version():
    assert gpumem.backend in ("cuda", "host")
    assert gpumem.backend == gmtest.os.environ["GPUMEM_BACKEND"]
    assert isinstance(gpumem.__version__, str) and gpumem.__version__[0].isdigit()
    assert gpumem.device_count() >= 1


@case
def exception_hierarchy():
    assert issubclass(gpumem.Error, RuntimeError)
    assert issubclass(gpumem.CudaError, gpumem.Error)
    assert issubclass(gpumem.OutOfMemoryError, gpumem.Error)
    assert issubclass(gpumem.OutOfMemoryError, MemoryError)
    assert gpumem.CudaError.__module__ == "gpumem"
    err = gpumem.CudaError("x")
    assert err.code == 0 and err.name == ""
    # The extension module's fallback notice: a warning, not an error.
    assert issubclass(gpumem.BackendWarning, UserWarning)
    assert not issubclass(gpumem.BackendWarning, gpumem.Error)
    assert gpumem.BackendWarning.__module__ == "gpumem"


@case
def kernels_submodule():
    import gpumem.kernels
    assert sys.modules["gpumem.kernels"] is gpumem.kernels
    from gpumem import kernels
    names = [name for name, _ in kernels.list()]
    for name in ("algo_seed", "algo", "saxpy"):
        assert name in names
        assert callable(getattr(kernels, name))
        fn = getattr(kernels, name)
        assert name + "(" in fn.__doc__ and "Parameters" in fn.__doc__
        assert fn.__text_signature__.endswith("stream=None)")


@case
def api_names():
    for name in ("Device", "DeviceArray", "Stream", "Event", "empty",
                 "zeros", "to_device", "asarray", "alloc_gpu_memory",
                 "copy_to_gpu", "copy_from_gpu", "copy", "pinned_empty",
                 "memory_stats", "set_memory_limit", "empty_cache",
                 "current_device", "device_count", "full", "ones",
                 "empty_like", "zeros_like", "ones_like", "full_like",
                 "BackendWarning", "_rebuild"):
        assert hasattr(gpumem, name), name


@case
def wrong_arguments_raise():
    raises(TypeError, gpumem.device_count, 1)
    raises(TypeError, gpumem.empty)
    raises(TypeError, gpumem.copy_to_gpu, 1)
    raises(TypeError, gpumem.copy_to_gpu, 1, 2, 3, 4)
    raises(TypeError, gpumem.copy, dst=1, src=2, bogus=3)


@case
def a_second_import_holds_the_first_ones_state():
    # del sys.modules["gpumem"]; import gpumem (test runners, autoreload)
    # in this process: the new module holds the first one's types and
    # functions, and an array made before works with its calls (it once
    # crashed: ASan saw gmpy_copy_device_to_host reach freed type data).
    # test_extension.py runs the longer script in a plain python and in
    # the program; this case runs in check-sanitizers too.
    import gc
    import importlib
    first = sys.modules["gpumem"]
    a = gpumem.zeros(6, "int32")
    del sys.modules["gpumem"]
    try:
        second = importlib.import_module("gpumem")
    finally:
        sys.modules["gpumem"] = first
    for name in ("DeviceArray", "Error", "zeros", "copy", "Stream"):
        assert getattr(second, name) is getattr(first, name), name
    gc.collect()
    b = second.ones(6, "int32")
    second.copy(a, b)
    assert a.copy_to_host().tolist() == [1] * 6
    assert isinstance(a, second.DeviceArray)
    raises(first.OutOfMemoryError, second.empty, 1 << 62, "uint8")
    del second
    gc.collect()
    assert a.copy_to_host().sum() == 6


gmtest.main()
