"""What a CuPy or PyTorch user meets first (docs/from-cupy.md,
docs/from-pytorch.md): array math on a DeviceArray is refused with a
TypeError that names the zero-copy way (cupy.asarray(a),
torch.from_dlpack(a)) and the kernel way, while identity, hashing and a
sequence's repeat stay as for any object; and the guides' ported
examples (scripts/port_cupy.py, scripts/port_torch.py) run: with NumPy
on the host backend, with the real CuPy or PyTorch where one is
importable and sees the GPU (skipped otherwise, saying why)."""

import operator
import os
import subprocess

import numpy as np

import gmtest
from gmtest import case

import gpumem

WAYS = ("cupy.asarray(a)", "torch.from_dlpack(a)", "kernel")


def refused(fn, *args):
    exc = gmtest.raises(TypeError, fn, *args)
    for way in WAYS:
        assert way in str(exc), (way, str(exc))
    return exc


@case
def operators_name_the_zero_copy_and_kernel_ways():
    a = gpumem.to_device(np.arange(6, dtype=np.float32))
    b = gpumem.zeros(6)
    for op in (operator.add, operator.sub, operator.mul, operator.truediv,
               operator.floordiv, operator.mod, operator.pow,
               operator.matmul, divmod, operator.lt, operator.le,
               operator.gt, operator.ge):
        refused(op, a, 1)
        refused(op, 1, a)
        refused(op, a, b)
        refused(op, np.float32(2), a)
    for op in (operator.lshift, operator.rshift, operator.and_,
               operator.or_, operator.xor):
        refused(op, gpumem.zeros(4, np.int32), 1)
    for op in (operator.neg, operator.pos, abs, operator.invert):
        refused(op, a)
    exc = refused(operator.add, a, 1)
    assert "a + b" in str(exc), str(exc)

    def iadd():
        c = a
        c += 1
    refused(iadd)
    # Nothing moved: the array is as it was.
    assert np.array_equal(a.copy_to_host(), np.arange(6, dtype=np.float32))


@case
def numpy_operand_on_the_left_is_refused_too():
    a = gpumem.zeros(3)
    gmtest.raises(TypeError, operator.add, np.ones(3, np.float32), a)


@case
def reductions_name_the_ways():
    a = gpumem.to_device(np.arange(6, dtype=np.float32).reshape(2, 3))
    for name in ("sum", "mean", "max", "min", "prod", "std", "argmax",
                 "cumsum", "all", "any", "dot"):
        exc = refused(getattr, a, name)
        assert f"a.{name}()" in str(exc), str(exc)
    # np.sum(a) looks up a.sum: the same message.
    refused(np.sum, a)
    # Other missing attributes stay AttributeError, and real ones work.
    gmtest.raises(AttributeError, getattr, a, "no_such_attribute")
    assert not hasattr(a, "no_such_attribute")
    assert a.shape == (2, 3) and a.T.shape == (3, 2)


@case
def identity_hash_and_sequence_repeat_stay():
    a = gpumem.zeros(2)
    b = gpumem.zeros(2)
    assert a == a and a != b and not (a == b)
    assert len({a, b, a}) == 2
    n = gpumem.to_device(np.array(3, np.int64))
    assert [0] * n == [0, 0, 0] and n * (1,) == (1, 1, 1)


@case
def a_strided_kernel_argument_says_what_takes_strided_views():
    images = gpumem.to_device(np.arange(16, dtype=np.float32))
    update = gpumem.zeros(4)
    partial = gpumem.zeros(4)
    exc = gmtest.raises(ValueError, gpumem.kernels.algo, images[::2],
                        update, partial, 8, match="strided")
    text = str(exc)
    assert "kernels and copies take contiguous" not in text, text
    assert ".copy()" in text and "gpumem.copy" in text, text
    # The copy it names takes the view as it is.
    host = np.empty(8, np.float32)
    gpumem.copy(host, images[::2])
    assert np.array_equal(host, np.arange(0, 16, 2, dtype=np.float32))


@case
def the_copies_say_their_argument_order_first():
    """copy takes the destination first (numpy.copyto's order),
    copy_to_gpu and copy_from_gpu the source: each docstring's first
    line after the signature says which."""
    def first_line(fn):
        return fn.__doc__.split("\n--\n\n", 1)[-1].splitlines()[0]
    assert first_line(gpumem.copy).startswith("Destination first"), \
        gpumem.copy.__doc__
    for fn in (gpumem.copy_to_gpu, gpumem.copy_from_gpu):
        assert first_line(fn).startswith("Source first"), fn.__doc__


def run_port(script, *args):
    path = os.path.join(gmtest.SRCDIR, "scripts", script)
    got = subprocess.run(
        [gmtest.GPUMEM, f"--backend={gpumem.backend}", path, *args],
        capture_output=True, text=True, timeout=300)
    return got


def check_port(script, library=None):
    got = run_port(script)
    assert got.returncode == 0, (got.returncode, got.stdout, got.stderr)
    lines = got.stdout.splitlines()
    assert lines and lines[-1] == "ok", got.stdout
    used = [l for l in lines if l.startswith("array math: ")]
    assert len(used) == 1, got.stdout
    return used[0].split(": ", 1)[1], got.stdout


def importable_with_gpu(module):
    """Why MODULE cannot run the ported example on the GPU here, or
    None."""
    if gpumem.backend != "cuda":
        return f"{module} needs the CUDA backend (this is {gpumem.backend})"
    probe = ("import sys, " + module + "\n"
             + ("sys.exit(0 if cupy.cuda.runtime.getDeviceCount() else 1)"
                if module == "cupy" else
                "sys.exit(0 if torch.cuda.is_available() else 1)"))
    try:
        got = subprocess.run([gmtest.GPUMEM, "--backend=cuda", "-q", "-c",
                              probe], capture_output=True, text=True,
                             timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"could not start {gmtest.GPUMEM}: {exc}"
    if got.returncode != 0:
        lines = got.stderr.strip().splitlines()
        return (f"{module} cannot be imported with a GPU here"
                + (f": {lines[-1]}" if lines else ""))
    return None


@case
def cupy_port_runs_on_this_backend():
    """NumPy on the host backend's memory; on a GPU whichever library
    is there (host copies without it)."""
    library, out = check_port("port_cupy.py", "numpy")
    if gpumem.backend == "host":
        assert library == "numpy", out


@case
def cupy_port_runs_with_cupy_on_the_gpu():
    why = importable_with_gpu("cupy")
    if why:
        gmtest.skip(why)
    library, out = check_port("port_cupy.py", "cupy")
    assert library == "cupy", out


@case
def torch_port_runs_on_this_backend():
    """NumPy on the host backend's memory; on a GPU whichever library
    is there (host copies without it)."""
    library, out = check_port("port_torch.py", "numpy")
    if gpumem.backend == "host":
        assert library == "numpy", out


@case
def torch_port_runs_with_torch_on_the_gpu():
    why = importable_with_gpu("torch")
    if why:
        gmtest.skip(why)
    library, out = check_port("port_torch.py", "torch")
    assert library == "torch", out


gmtest.main()
