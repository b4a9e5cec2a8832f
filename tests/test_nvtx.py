"""gpumem.nvtx and GPUMEM_NVTX (nvtx.c, py-nvtx.c; the CUDA backend's
annotated operations in cuda-nvtx.c).  What compute-sanitizer sees with
annotation on and off is tests/gpu-sanitize-nvtx.sh's business, on a GPU;
here: the switch, its setting, and that every
operation gives the same results with annotation on."""

import gc
import os
import subprocess

import numpy as np

import gmtest
from gmtest import case, raises

import gpumem


def child(code, value):
    """Runs CODE in a fresh gpumem on this backend with GPUMEM_NVTX set to
    VALUE (None: unset)."""
    env = dict(os.environ)
    env.pop("GPUMEM_NVTX", None)
    if value is not None:
        env["GPUMEM_NVTX"] = value
    return subprocess.run([gmtest.GPUMEM, f"--backend={gpumem.backend}", "-q",
                           "-c", code], env=env, capture_output=True,
                          text=True, timeout=120)


@case
def switch_toggles_and_reports():
    start = gpumem.nvtx()
    assert start is (os.environ.get("GPUMEM_NVTX", "").lower()
                     in ("1", "yes", "true", "on"))
    try:
        assert gpumem.nvtx(True) is True
        assert gpumem.nvtx() is True
        assert gpumem.nvtx(enabled=False) is False
        assert gpumem.nvtx() is False
        assert gpumem.nvtx(None) is False
    finally:
        gpumem.nvtx(start)


@case
def switch_refuses_what_is_not_a_bool():
    for value in (1, 0, "yes", 1.0):
        raises(TypeError, gpumem.nvtx, value, match="True, False or None")
    raises(TypeError, gpumem.nvtx, True, False)
    raises(TypeError, gpumem.nvtx, on=True)
    assert gpumem.nvtx() in (True, False)


@case
def setting_is_read_at_start():
    code = "import gpumem; print(gpumem.nvtx())"
    for value, want in (("1", "True"), ("on", "True"), ("YES", "True"),
                        ("0", "False"), ("off", "False"), ("", "False"),
                        (None, "False")):
        proc = child(code, value)
        assert proc.returncode == 0, (value, proc.stderr)
        assert proc.stdout == want + "\n", (value, proc.stdout)


@case
def bad_setting_is_a_clear_error():
    proc = child("print('ran')", "maybe")
    assert proc.returncode == 3, proc
    assert "ran" not in proc.stdout
    assert "GPUMEM_NVTX='maybe'" in proc.stderr, proc.stderr
    assert "neither true" in proc.stderr, proc.stderr


def workload():
    """Copies both ways, 2-D copies, fills, kernels on both paths of algo,
    a stream, waits, allocations and frees: what the annotated operations
    wrap.  Returns what it computed, on the host."""
    images = np.arange(100_000, dtype=np.float32) / 7
    update = np.array([1, 2, 3, 4], np.float32)
    d_images = gpumem.to_device(images)
    d_update = gpumem.to_device(update)
    partial = gpumem.zeros(4, "float32")
    gpumem.kernels.algo(d_images, d_update, partial, images.size)
    small = gpumem.zeros(4, "float32")
    gpumem.kernels.algo(d_images, d_update, small, 100)
    y = gpumem.to_device(np.ones(1000, np.float32))
    gpumem.kernels.saxpy(1000, 2.0, d_images[:1000], y)
    grid = gpumem.to_device(np.arange(64.0).reshape(8, 8))
    column = grid[:, 3].copy()
    block = gpumem.zeros((4, 4))
    block[:, :] = grid[2:6, 2:6]
    stream = gpumem.Stream()
    with stream:
        on_stream = gpumem.to_device(images[:1000])
        on_stream.fill(5)
        gpumem.kernels.saxpy(1000, 1.0, y, on_stream)
    stream.synchronize()
    gpumem.synchronize()
    return (partial.copy_to_host(), small.copy_to_host(), y.copy_to_host(),
            column.copy_to_host(), block.copy_to_host(),
            on_stream.copy_to_host(stream=stream))


@case
def results_do_not_depend_on_the_switch():
    start = gpumem.nvtx()
    try:
        gpumem.nvtx(False)
        off = workload()
        gpumem.nvtx(True)
        on = workload()
    finally:
        gpumem.nvtx(start)
    for a, b in zip(off, on):
        assert np.array_equal(a, b)


@case
def memory_allocated_on_is_freed_whatever_the_switch():
    # Allocations made and freed with the switch in any state, in any
    # order, are freed exactly once: the books must come back.
    start = gpumem.nvtx()
    gc.collect()
    before = gpumem.memory_stats()
    try:
        gpumem.nvtx(True)
        arrays = [gpumem.to_device(np.full(n + 1, n, np.float32)) for n in range(300)]
        gpumem.nvtx(False)
        more = [gpumem.zeros(n + 1) for n in range(50)]
        for i in range(0, 300, 3):
            arrays[i] = None
        gpumem.nvtx(True)
        for i in range(1, 300, 3):
            arrays[i] = None
        again = [gpumem.zeros(n + 1) for n in range(100)]
        gpumem.nvtx(False)
        for i in range(2, 300, 3):
            assert arrays[i].copy_to_host().tolist() == [float(i)] * (i + 1)
        del arrays, more, again
        gc.collect()
    finally:
        gpumem.nvtx(start)
    after = gpumem.memory_stats()
    assert after["allocated_bytes"] == before["allocated_bytes"]
    assert after["allocations"] == before["allocations"]


gmtest.main()
