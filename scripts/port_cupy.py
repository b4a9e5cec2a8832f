"""A typical CuPy script ported to gpumem (docs/from-cupy.md).

    gpumem scripts/port_cupy.py [--out FILE.npy]

The CuPy original: a pool limit, a pinned host buffer, its copy to the
device on a second stream while a kernel runs on another, events that
time the copy, 2-D slicing and a transposed view, reductions, a
RawKernel, and the result saved to a file.  Here gpumem owns the memory,
the streams, the copies and the kernels; the array math (the reductions)
stays CuPy's, on gpumem's memory without a copy (cupy.asarray(a)).  On
the host backend, or where CuPy is missing, NumPy does the math:
numpy.from_dlpack(a) on the host backend (the same memory), a host copy
on a GPU without CuPy.  Each step's CuPy line is in the comment above
it.  The last line is "ok" when every result matches NumPy's; the exit
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
            import cupy
            if cupy.cuda.runtime.getDeviceCount() > 0:
                return cupy, "cupy", cupy.asarray
        except Exception:
            pass
        return np, "numpy (host copies: no CuPy here)", \
            lambda a: a.copy_to_host()
    return np, "numpy", np.from_dlpack


def main(argv):
    parser = argparse.ArgumentParser(prog="gpumem scripts/port_cupy.py")
    parser.add_argument("--out", help="where to save the result (.npy; "
                        "default: a temporary file, removed)")
    args = parser.parse_args(argv)
    xp, library, view = array_math()
    print(f"gpumem {gpumem.__version__}, {gpumem.backend} backend")
    print(f"array math: {library}")

    # cupy.get_default_memory_pool().set_limit(size=1024**3)
    gpumem.set_memory_limit("1GiB")

    # host = cupyx.empty_pinned((ROWS, COLS), dtype=cupy.float32)
    host = gpumem.pinned_empty((ROWS, COLS), "float32")
    host[:] = np.arange(ROWS * COLS, dtype=np.float32).reshape(ROWS, COLS)
    # d = cupy.empty((ROWS, COLS), dtype=cupy.float32)
    d = gpumem.empty((ROWS, COLS), "float32")

    # copy_stream = cupy.cuda.Stream(); work = cupy.cuda.Stream()
    copy_stream = gpumem.Stream()
    work = gpumem.Stream()
    # start = cupy.cuda.Event(); copied = cupy.cuda.Event()
    start = gpumem.Event()
    copied = gpumem.Event()

    x = gpumem.to_device(np.ones(ROWS * COLS, np.float32))
    y = gpumem.zeros(ROWS * COLS)
    # start.record(copy_stream); d.set(host, stream=copy_stream)
    start.record(copy_stream)
    gpumem.copy(d, host, stream=copy_stream)        # dst, src (copyto's order)
    copied.record(copy_stream)
    # Meanwhile a kernel on the other stream.  In gpumem a call without
    # stream= waits for every gpumem stream, so the overlapping kernel
    # takes stream= (CuPy's would run on the null stream).
    gpumem.kernels.saxpy(ROWS * COLS, 3.0, x, y, stream=work)
    # work.wait_event(copied): the copy is done before WORK reads D.
    work.wait_event(copied)
    # copied.synchronize(); cupy.cuda.get_elapsed_time(start, copied)
    copied.synchronize()
    print(f"copy to the device: {start.elapsed_ms(copied):.3f} ms")
    work.synchronize()

    # sub = d[8:16, ::4]; t = d.T           (views: no copy)
    sub = d[8:16, ::4]
    t = d.T
    assert sub.shape == (8, COLS // 4) and t.shape == (COLS, ROWS)
    # column_sums = d.sum(axis=0); largest = t[3].max(); mean = sub.mean()
    # gpumem does no array math: CuPy does it on the same memory.
    column_sums = view(d).sum(axis=0)
    largest = float(view(t)[3].max())
    mean = float(view(sub).mean())

    # scale = cupy.RawKernel(source, "scale"); scale((blocks,), (256,), ...)
    # A native kernel instead: a built-in one here; gpumem.jit(source,
    # "scale", "int64 n, float32 a, float32 *x[n]") compiles your own.
    flat = d.reshape(ROWS * COLS)
    gpumem.kernels.saxpy(ROWS * COLS, 2.0, x, flat)  # d = 2 * 1 + d

    # cupy.save(path, d): the host copy is explicit
    result = d.copy_to_host()
    with tempfile.TemporaryDirectory() as folder:
        path = args.out or os.path.join(folder, "result.npy")
        np.save(path, result)
        saved = np.load(path)

    expect = np.arange(ROWS * COLS, dtype=np.float32).reshape(ROWS, COLS)
    ok = True
    for what, got, want in (
            ("column sums", np.asarray(column_sums.get() if library == "cupy"
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
