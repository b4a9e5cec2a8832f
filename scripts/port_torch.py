"""A typical PyTorch script ported to gpumem (docs/from-pytorch.md).

    gpumem scripts/port_torch.py [--out FILE.npy]

The PyTorch original: a memory fraction, a pinned host tensor, its
non-blocking copy to the device on a side stream while a kernel runs on
another, events that time the copy, 2-D slicing and a transposed view,
reductions, a custom CUDA kernel, and the result saved to a file.  Here
gpumem owns the memory, the streams, the copies and the kernels; the
array math (the reductions) stays PyTorch's, on gpumem's memory without
a copy (torch.from_dlpack(a)).  On the host backend, or where PyTorch
has no GPU, NumPy does the math: numpy.from_dlpack(a) on the host
backend (the same memory), a host copy on a GPU without PyTorch.  Each
step's PyTorch line is in the comment above it.  The last line is "ok" when every result matches NumPy's; the exit
status is 1 otherwise.
"""

import argparse
import os
import sys
import tempfile

import numpy as np

import gpumem

ROWS, COLS = 256, 1024


def array_math():
    """The library that does the array math, its name, and how a
    DeviceArray becomes one of its arrays."""
    if gpumem.backend == "cuda":
        try:
            import torch
            if torch.cuda.is_available():
                return torch, "torch", torch.from_dlpack
        except Exception:
            pass
        return np, "numpy (host copies: no PyTorch with CUDA here)", \
            lambda a: a.copy_to_host()
    return np, "numpy", np.from_dlpack


def main(argv):
    parser = argparse.ArgumentParser(prog="gpumem scripts/port_torch.py")
    parser.add_argument("--out", help="where to save the result (.npy; "
                        "default: a temporary file, removed)")
    args = parser.parse_args(argv)
    xp, library, view = array_math()
    print(f"gpumem {gpumem.__version__}, {gpumem.backend} backend")
    print(f"array math: {library}")

    # torch.cuda.set_per_process_memory_fraction(0.5)
    gpumem.set_memory_limit(fraction=0.5)

    # host = torch.empty((ROWS, COLS), pin_memory=True)
    host = gpumem.pinned_empty((ROWS, COLS), "float32")
    host[:] = np.arange(ROWS * COLS, dtype=np.float32).reshape(ROWS, COLS)
    # d = torch.empty((ROWS, COLS), device="cuda")
    d = gpumem.empty((ROWS, COLS), "float32")

    # copy_stream = torch.cuda.Stream(); work = torch.cuda.Stream()
    copy_stream = gpumem.Stream()
    work = gpumem.Stream()
    # start = torch.cuda.Event(enable_timing=True); copied = ...(same)
    start = gpumem.Event()
    copied = gpumem.Event()

    x = gpumem.to_device(np.ones(ROWS * COLS, np.float32))
    y = gpumem.zeros(ROWS * COLS)
    # with torch.cuda.stream(copy_stream):
    #     start.record(); d.copy_(host, non_blocking=True); copied.record()
    start.record(copy_stream)
    gpumem.copy(d, host, stream=copy_stream)        # dst, src (copy_'s order)
    copied.record(copy_stream)
    # Meanwhile a kernel on the other stream.  In gpumem a call without
    # stream= waits for every gpumem stream, so the overlapping kernel
    # takes stream= (PyTorch's would run on the current stream).
    gpumem.kernels.saxpy(ROWS * COLS, 3.0, x, y, stream=work)
    # work.wait_event(copied): the copy is done before WORK reads D.
    work.wait_event(copied)
    # copied.synchronize(); start.elapsed_time(copied)
    copied.synchronize()
    print(f"copy to the device: {start.elapsed_ms(copied):.3f} ms")
    work.synchronize()

    # sub = d[8:16, ::4]; t = d.T           (views: no copy)
    sub = d[8:16, ::4]
    t = d.T
    assert sub.shape == (8, COLS // 4) and t.shape == (COLS, ROWS)
    # column_sums = d.sum(dim=0); largest = t[3].max(); mean = sub.mean()
    # gpumem does no array math: PyTorch does it on the same memory.
    column_sums = view(d).sum(0)
    largest = float(view(t)[3].max())
    mean = float(view(sub).mean())

    # A custom kernel (torch.utils.cpp_extension.load_inline, or a
    # pybind11 module): a native kernel instead, a built-in one here; gpumem.jit(source,
    # "scale", "int64 n, float32 a, float32 *x[n]") compiles your own.
    flat = d.reshape(ROWS * COLS)
    gpumem.kernels.saxpy(ROWS * COLS, 2.0, x, flat)  # d = 2 * 1 + d

    # torch.save(d.cpu(), path): the host copy is explicit
    result = d.copy_to_host()
    with tempfile.TemporaryDirectory() as folder:
        path = args.out or os.path.join(folder, "result.npy")
        np.save(path, result)
        saved = np.load(path)

    expect = np.arange(ROWS * COLS, dtype=np.float32).reshape(ROWS, COLS)
    ok = True
    for what, got, want in (
            ("column sums", np.asarray(column_sums.cpu() if library == "torch"
                                       else column_sums),
             expect.sum(axis=0)),
            ("largest of t[3]", largest, expect.T[3].max()),
            ("mean of d[8:16, ::4]", mean, expect[8:16, ::4].mean()),
            ("saxpy on the other stream", y.copy_to_host(),
             np.full(ROWS * COLS, 3.0, np.float32)),
            ("the saved result", saved, expect + 2)):
        same = bool(np.allclose(got, want, rtol=1e-5))
        print(f"{'  ok  ' if same else '  FAIL'} {what}")
        ok &= same
    gpumem.set_memory_limit(None)
    print("ok" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
