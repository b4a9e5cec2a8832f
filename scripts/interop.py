"""gpumem's native kernels on CuPy arrays and PyTorch tensors, and their
operations on gpumem's memory, without a copy either way.

    gpumem scripts/interop.py

Kernels take any object with __cuda_array_interface__ directly;
gpumem.from_dlpack and gpumem.asarray wrap another library's memory as a
DeviceArray; cupy.from_dlpack and torch.from_dlpack wrap a DeviceArray.
Work queued on another library's stream is ordered before gpumem's (and
the other way round) by the DLPack stream handshake.

A library that is not installed is skipped with a message.  On the host
backend, where neither can run, the same exchange is shown with NumPy:
DLPack reports host memory there, and numpy.from_dlpack takes it.
"""

import sys
from typing import Any

import numpy as np

import gpumem

N = 1 << 20


def check(what, ok):
    print(f"  {'ok  ' if ok else 'FAIL'} {what}")
    return ok


def with_numpy():
    """The host backend: NumPy's memory under gpumem, and back."""
    print("NumPy (host backend, through DLPack):")
    x = np.arange(N, dtype=np.float32)
    y = np.ones(N, dtype=np.float32)
    gpumem.kernels.saxpy(N, 2.0, gpumem.from_dlpack(x), gpumem.from_dlpack(y))
    ok = check("saxpy on NumPy's memory", np.array_equal(y, 2 * x + 1))
    a = gpumem.to_device(x)
    view: np.ndarray[Any, Any] = np.from_dlpack(a)
    if not view.flags.writeable:
        # NumPy 1.x makes every DLPack import read-only; NumPy 2 does not.
        ok &= check("NumPy reads gpumem's memory (NumPy 1.x: read-only)",
                    np.array_equal(view, x))
        a[...] = 3 * x
        return ok & check("NumPy sees gpumem's write",
                          np.array_equal(view, 3 * x))
    view *= 3
    ok &= check("NumPy on gpumem's memory",
                np.array_equal(a.copy_to_host(), 3 * x))
    return ok


def with_cupy():
    try:
        import cupy
    except ImportError:
        print("CuPy is not installed: skipped")
        return True
    print(f"CuPy {cupy.__version__}:")
    x = cupy.arange(N, dtype=cupy.float32)
    y = cupy.ones(N, dtype=cupy.float32)
    gpumem.kernels.saxpy(N, 2.0, x, y)              # CuPy arrays, no copy
    ok = check("saxpy on CuPy arrays", bool(cupy.allclose(y, 2 * x + 1)))

    a = gpumem.to_device(np.linspace(0, 1, N, dtype=np.float32))
    c = cupy.from_dlpack(a)                          # gpumem memory in CuPy
    c *= 4
    ok &= check("a CuPy kernel on a DeviceArray",
                c.data.ptr == a.ptr
                and np.allclose(a.copy_to_host(),
                                4 * np.linspace(0, 1, N, dtype=np.float32)))

    # CuPy's work on its own stream, then gpumem's kernel on the result.
    with cupy.cuda.Stream(non_blocking=True):
        z = cupy.sqrt(x) + 1
        g = gpumem.from_dlpack(z)                    # ordered after it
        out = gpumem.zeros(N)
        gpumem.kernels.saxpy(N, 1.0, g, out)
    ok &= check("gpumem after CuPy's stream",
                np.allclose(out.copy_to_host(), cupy.asnumpy(z)))
    return ok


def with_torch():
    try:
        import torch
    except ImportError:
        print("PyTorch is not installed: skipped")
        return True
    if not torch.cuda.is_available():
        print("PyTorch has no CUDA here: skipped")
        return True
    print(f"PyTorch {torch.__version__}:")
    x = torch.arange(N, dtype=torch.float32, device="cuda")
    y = torch.ones(N, dtype=torch.float32, device="cuda")
    gpumem.kernels.saxpy(N, 2.0, x, y)              # tensors, no copy
    ok = check("saxpy on PyTorch tensors", bool(torch.allclose(y, 2 * x + 1)))

    a = gpumem.to_device(np.arange(N, dtype=np.float32))
    t = torch.from_dlpack(a)                         # gpumem memory in torch
    t.mul_(0.5)
    ok &= check("a PyTorch operation on a DeviceArray",
                t.data_ptr() == a.ptr
                and np.array_equal(a.copy_to_host(),
                                   np.arange(N, dtype=np.float32) * 0.5))

    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        w = torch.cumsum(torch.ones(N, device="cuda"), 0)
        g = gpumem.from_dlpack(w)                    # ordered after it
        out = gpumem.zeros(N)
        gpumem.kernels.saxpy(N, 2.0, g, out)
    ok &= check("gpumem after PyTorch's stream",
                np.array_equal(out.copy_to_host(),
                               2 * np.arange(1, N + 1, dtype=np.float32)))
    return ok


def main():
    print(f"gpumem {gpumem.__version__}, {gpumem.backend} backend")
    if gpumem.backend != "cuda":
        print("CuPy and PyTorch need the cuda backend: skipped")
        ok = with_numpy()
    else:
        ok = with_cupy()
        ok &= with_torch()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
