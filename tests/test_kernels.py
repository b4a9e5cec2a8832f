"""Native kernels: results against their C references, checked launches
that leave outputs untouched, streams, launch shapes, faults
(py-kernels.c, kernels/)."""

import os
import subprocess
import tempfile

import numpy as np

import gmtest
from gmtest import case, raises, random_array, poison

import gpumem
from gpumem import kernels

SIZES = [1, 10, 4097, 2**24 + 5]
CUDA = gpumem.backend == "cuda"


def expected(name, images, update, partial):
    """The kernels' formulas in NumPy (as the C references compute)."""
    n = len(images)
    if name == "algo_seed":
        return partial.copy() if n == 0 else images[-1] + update
    mean = images.astype(np.float64).mean() if n else 0.0
    return (mean + update.astype(np.float64)).astype(np.float32)


def host_backend_results(inputs):
    """Runs each (name, images, update) through the host backend, i.e.
    the kernels' C references, in a child gpumem; returns the outputs."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "io.npz")
        arrays = {}
        for i, (name, images, update) in enumerate(inputs):
            arrays[f"images{i}"] = images
            arrays[f"update{i}"] = update
        np.savez(path, **arrays)
        code = (
            "import sys, numpy as np, gpumem\n"
            "d = dict(np.load(sys.argv[1]))\n"
            "names = sys.argv[2].split(',')\n"
            "out = {}\n"
            "for i, name in enumerate(names):\n"
            "    im = gpumem.to_device(d[f'images{i}'])\n"
            "    up = gpumem.to_device(d[f'update{i}'])\n"
            "    p = gpumem.zeros(4)\n"
            "    getattr(gpumem.kernels, name)(im, up, p, im.size)\n"
            "    out[f'p{i}'] = p.copy_to_host()\n"
            "np.savez(sys.argv[1] + '.out.npz', **out)\n")
        subprocess.run([gmtest.GPUMEM, "--backend=host", "-q", "-c", code,
                        path, ",".join(name for name, _, _ in inputs)],
                       check=True, timeout=600)
        out = np.load(path + ".out.npz")
        return [out[f"p{i}"] for i in range(len(inputs))]


@case
def kernels_match_references():
    inputs = []
    for name in ("algo_seed", "algo"):
        for n in SIZES:
            if name == "algo_seed" and n > 4097 and CUDA:
                n = 65537      # one GPU thread: keep the serial loop short
            inputs.append((name, random_array(n, "float32"),
                           random_array(4, "float32")))
    refs = host_backend_results(inputs) if CUDA else None
    for i, (name, images, update) in enumerate(inputs):
        d_images = gpumem.to_device(images)
        d_update = gpumem.to_device(update)
        d_partial = gpumem.to_device(poison(4, "float32"))
        getattr(kernels, name)(d_images, d_update, d_partial, len(images))
        got = d_partial.copy_to_host()
        want = expected(name, images, update, poison(4, "float32"))
        assert np.allclose(got, want, rtol=1e-6, atol=1e-6), (name, got, want)
        if refs is not None:
            # Against the C reference itself: same formula, other order
            # of summation, so at most a unit in the last place apart.
            assert np.allclose(got, refs[i], rtol=2e-7, atol=1e-7), \
                (name, len(images), got, refs[i])


@case
def algo_on_views_any_offset_and_launch_shape():
    images = random_array(100003, "float32")
    d = gpumem.to_device(images)
    update = gpumem.to_device(random_array(4, "float32"))
    up = update.copy_to_host()
    for offset in (0, 1, 2, 3, 5):
        for shape in (None, (1, 1), (3, 33), (7, 1000), ((2, 2), (8, 4, 2)),
                      (1, 1024)):
            view = d[offset:]
            p = gpumem.to_device(poison(4, "float32"))
            if shape is None:
                kernels.algo(view, update, p, view.size)
            else:
                kernels.algo(view, update, p, view.size, grid=shape[0],
                             block=shape[1])
            want = expected("algo", images[offset:], up, None)
            assert np.allclose(p.copy_to_host(), want, rtol=1e-6), \
                (offset, shape)
    # fewer images than the array holds
    p = gpumem.zeros(4)
    kernels.algo(d, update, p, 10)
    assert np.allclose(p.copy_to_host(), expected("algo", images[:10], up, None))
    kernels.algo(d, update, p, 0)
    assert np.array_equal(p.copy_to_host(), up)


@case
def saxpy_matches():
    for n in (1, 1000, 65537):
        x = random_array(n, "float32")
        y = random_array(n, "float32")
        dx, dy = gpumem.to_device(x), gpumem.to_device(y)
        kernels.saxpy(n, 2.5, dx, dy)
        want = (np.float32(2.5) * x + y).astype(np.float32)
        assert np.allclose(dy.copy_to_host(), want, rtol=1e-6, atol=1e-6)
    # n smaller than the arrays: the rest stays
    dy = gpumem.to_device(poison(10, "float32"))
    kernels.saxpy(3, 1.0, gpumem.zeros(10), dy)
    assert (dy.copy_to_host() == 77).all()
    kernels.saxpy(n=2, a=3, x=gpumem.to_device(np.ones(2, np.float32)), y=dy)
    assert dy.copy_to_host()[:3].tolist() == [80, 80, 77]


@case
def rejected_calls_launch_nothing():
    images = gpumem.to_device(random_array(10, "float32"))
    update = gpumem.to_device(random_array(4, "float32"))
    out = gpumem.to_device(poison(4, "float32"))
    f64 = gpumem.zeros(10, "float64")
    freed = gpumem.zeros(10)
    freed.free()
    bad = [
        (TypeError, (images, update, out, 1.5), "number_of_images"),
        (TypeError, (images, update, out, "10"), "number_of_images"),
        (ValueError, (images, update, out, 11), "images"),
        (ValueError, (images, update, out, -1), "images"),
        (ValueError, (images, update, out, 2**63), "number_of_images"),
        (TypeError, (f64, update, out, 10), "images"),
        (TypeError, (np.zeros(10, np.float32), update, out, 10), "images"),
        (TypeError, (None, update, out, 10), "images"),
        (ValueError, (images, update[:3], out, 10), "update"),
        (ValueError, (images, update, out[:2], 10), "partial_update"),
        (ValueError, (freed, update, out, 10), "freed"),
        (TypeError, (images, update, out), "number_of_images"),
        (TypeError, (images, update, out, 10, 5), "at most"),
    ]
    for name in ("algo", "algo_seed"):
        fn = getattr(kernels, name)
        for exc, args, word in bad:
            raises(exc, fn, *args, match=word)
        raises(TypeError, fn, images, update, out, 10, bogus=1)
        raises(TypeError, fn, images, update, out, 10, grid=1)
        raises(ValueError, fn, images, update, out, 10, grid=1, block=4096)
        raises(ValueError, fn, images, update, out, 10, grid=0, block=32)
        raises(TypeError, fn, images, update, out, 10, grid="a", block=1)
        raises(TypeError, fn, images, update, out, 10, stream=1)
    if gpumem.device_count() > 1:
        other = gpumem.to_device(random_array(4, "float32"), device=1)
        # With peer access a kernel may use a peer's array
        # (test_concurrent); without, the launch is refused.
        if not gpumem.Device(0).can_access_peer(1):
            raises(ValueError, kernels.algo, images, other, out, 10,
                   match="can_access_peer")
        s1 = gpumem.Stream(device=1)
        raises(ValueError, kernels.algo, images, update, out, 10, stream=s1)
    raises(ValueError, kernels.saxpy, 5, 1.0, images, images[:4], match="y")
    assert (out.copy_to_host() == 77).all()


@case
def kernel_in_a_stream():
    images = random_array(1 << 20, "float32")
    d = gpumem.to_device(images)
    update = gpumem.to_device(np.zeros(4, np.float32))
    s = gpumem.Stream()
    outs = [gpumem.to_device(poison(4, "float32")) for _ in range(4)]
    for p in outs:
        kernels.algo(d, update, p, d.size, stream=s)
    s.synchronize()
    assert s.query()
    want = expected("algo", images, np.zeros(4, np.float32), None)
    for p in outs:
        assert np.allclose(p.copy_to_host(), want, rtol=1e-6)


@case
def list_and_list_kernels_agree():
    listed = kernels.list()
    assert [name for name, _ in listed][:3] == ["algo_seed", "algo", "saxpy"]
    for name, sig in listed:
        assert sig.startswith(name + "(")
    text = subprocess.run([gmtest.GPUMEM, "-k"], capture_output=True,
                          text=True, timeout=60, check=True).stdout
    for name, sig in listed:
        assert sig in text, sig
    assert "images: float32[number_of_images] in" in text
    assert "partial_update: float32[4] out" in text


def run_test_program(code, timeout=120, **kwargs):
    return subprocess.run([gmtest.GPUMEM_TEST, "-q", "-c", code],
                          capture_output=True, text=True, timeout=timeout,
                          **kwargs)


@case
def faulting_kernel_raises_cuda_error():
    if not CUDA:
        gmtest.skip("the host backend cannot fault: fault's C reference "
                    "does nothing")
    code = (
        "import gpumem, sys\n"
        "a = gpumem.zeros(4)\n"
        "try:\n"
        "    gpumem.kernels.fault(a)\n"
        "except gpumem.CudaError as e:\n"
        "    print('caught', e.name, e.code)\n"
        "    print('message', e)\n"
        "try:\n"
        "    gpumem.zeros(4)\n"
        "except gpumem.CudaError as e:\n"
        "    print('refused', e)\n"
        "sys.exit(5)\n")
    proc = run_test_program(code)
    out = proc.stdout
    assert proc.returncode == 5, (proc.returncode, out, proc.stderr)
    assert "caught cudaErrorIllegalAddress 700" in out, out
    assert "context is lost" in out, out
    assert "refused" in out and "start it again" in out, out


def interrupt_test_program(code):
    """Runs CODE in the test program (spin kernel) on this backend and
    interrupts it once it prints 'ready' (gmtest.interrupt)."""
    return gmtest.interrupt([gmtest.GPUMEM_TEST, f"--backend={gpumem.backend}",
                             "-q", "-c", code], delay=0.5)


@case
def ctrl_c_while_waiting_on_a_kernel():
    if not CUDA:
        gmtest.skip("host kernels run to their end in the launching call, "
                    "holding the GIL: there is no wait to interrupt")
    got = interrupt_test_program(
        "import gpumem\n"
        "out = gpumem.zeros(1, 'int32')\n"
        "print('ready', flush=True)\n"
        "gpumem.kernels.spin(20000, out)\n"
        "print('finished')\n")
    gmtest.assert_interrupted(got, within=5)
    assert "finished" not in got.out, got


# A small synchronous copy queued behind a long kernel in a stream: the
# legacy default stream, on which copies without stream= run, follows the
# stream, so the copy waits 20 s for the kernel; small copies keep the
# GIL, so the wait must answer Ctrl-C itself (gmpy_copy_enter).
SMALL_COPY_BEHIND_A_KERNEL = """
import gpumem, numpy as np
s = gpumem.Stream()
flag = gpumem.zeros(1, 'int32')
small = gpumem.zeros(4)
gpumem.kernels.spin(20000, flag, stream=s)
print('ready', flush=True)
{copy}
print('finished', flush=True)
"""


@case
def ctrl_c_while_a_small_copy_waits_behind_a_kernel():
    if not CUDA:
        gmtest.skip("host kernels run to their end in the launching call, "
                    "holding the GIL: no copy can wait behind one")
    for copy in ("small.copy_to_host()",
                 "small.copy_from_host(np.ones(4, np.float32))",
                 "gpumem.copy_from_gpu(flag, np.empty(1, np.int32), 1)",
                 # strided copies, fill and copy() (py-array-copy.c) keep the
                 # GIL while they copy, after the same wait
                 "small[::2].copy_to_host()",
                 "small[::2] = np.ones(2, np.float32)",
                 "small.fill(1.5)",
                 "small[::2].fill(1.5)",
                 "small.copy()",
                 "small[::2].copy()",
                 "gpumem.copy(small[::2], small[1::2])",
                 # not a copy, but the same wait for the default stream
                 "gpumem.synchronize()"):
        got = interrupt_test_program(
            SMALL_COPY_BEHIND_A_KERNEL.format(copy=copy))
        gmtest.assert_interrupted(got, within=5)
        assert "finished" not in got.out, (copy, got)
        # Interrupted in the copy, not in the launch: the traceback
        # names its line (the 8th of the script).
        assert "line 8" in got.err, (copy, got)


gmtest.main()
