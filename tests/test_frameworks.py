"""gpumem.use_pool and gpumem.torch_mem_pool (py-frameworks.c,
frameworks.py, pool-hooks.c, torch-shim.c): PyTorch, CuPy and Numba
allocating from gpumem's pool, with the real libraries.

Each scenario runs in a fresh gpumem process of its own: a library's
allocator can be switched only before its first CUDA allocation.  On the
host backend the hooks refuse; on the cuda backend a case whose library
is not installed reports SKIP with the reason."""

import os
import subprocess
import sys
import textwrap

import gmtest
from gmtest import case, raises

import gpumem

CUDA = gpumem.backend == "cuda"
MiB = 1 << 20


# What a library's hook imports: Numba's CUDA target fails to import
# where the installed NumPy is newer than Numba supports.
IMPORTS = {"numba": "from numba import cuda"}


def have(name):
    """Whether NAME's hook can import it, in a child (importing torch here
    would take this process's CUDA state with it): None, or the error."""
    result = run(IMPORTS.get(name, f"import {name}"), check=False)
    if result.returncode == 0:
        return None
    lines = result.stderr.strip().splitlines()
    return lines[-1] if lines else f"exit status {result.returncode}"


def run(code, check=True, env=None, timeout=240):
    """CODE (dedented) in a new gpumem process on this backend; its
    CompletedProcess.  CHECK: fail with its output unless it exits 0."""
    full_env = dict(os.environ, **(env or {}))
    result = subprocess.run(
        [gmtest.GPUMEM, f"--backend={gpumem.backend}", "-q", "-c",
         textwrap.dedent(code)],
        capture_output=True, text=True, env=full_env, timeout=timeout)
    if check and result.returncode != 0:
        raise AssertionError(f"child exited {result.returncode}:\n"
                             f"{result.stdout}\n{result.stderr}")
    return result


@case
def the_build_trees_program_finds_its_torch_library():
    """Run from the build tree (src/gpumem, not installed), the program
    opens the build tree's libgpumem-torch.so, as it finds its own
    extension module there; after a chdir too.  The extension module in
    src/.libs, imported by a plain python, the same.  Binding needs no
    GPU and no PyTorch."""
    program = os.path.realpath(gmtest.GPUMEM)
    built = os.path.join(os.path.dirname(program), ".libs",
                         "libgpumem-torch.so")
    if not os.path.isfile(built):
        gmtest.skip(f"{gmtest.GPUMEM} is not a build tree's program")
    env = {k: v for k, v in os.environ.items() if k != "GPUMEM_TORCH_SHIM"}
    code = "import os, gpumem; os.chdir('/'); print(gpumem._torch_shim())"
    got = subprocess.run([program, f"--backend={gpumem.backend}", "-q",
                          "-c", code], capture_output=True, text=True,
                         env=env, timeout=120)
    assert got.returncode == 0, (got.stdout, got.stderr)
    assert got.stdout.strip() == built, (got.stdout, built)
    if gmtest.sanitized():
        return
    env.update(PYTHONPATH=os.path.dirname(built), GPUMEM_BACKEND="host")
    got = subprocess.run([sys.executable, "-c", code], capture_output=True,
                         text=True, env=env, timeout=120)
    assert got.returncode == 0, (got.stdout, got.stderr)
    assert got.stdout.strip() == built, (got.stdout, built)


def need_cuda(*names):
    if not CUDA:
        gmtest.skip("the hooks need the cuda backend (the host backend's "
                    "refusal is its own case)")
    for name in names:
        error = have(name)
        if error is not None:
            gmtest.skip(f"{name} cannot be imported here: {error}")


@case
def host_backend_refuses():
    if CUDA:
        gmtest.skip("the cuda backend serves the hooks")
    for name in ("torch", "cupy", "numba"):
        raises(gpumem.Error, gpumem.use_pool, name, match="host backend")
    raises(gpumem.Error, gpumem._pool_block, 1024, "cupy", 0, None,
           match="host backend")
    raises(gpumem.Error, gpumem.torch_mem_pool, match="host backend")
    raises(gpumem.Error, gpumem._cupy_allocator, len, len, None, len, len,
           match="no CUDA memory")
    assert gpumem.pool_users() == ()


@case
def bad_arguments():
    raises(ValueError, gpumem.use_pool, "jax", match="unknown library")
    raises(TypeError, gpumem.use_pool, match="at least one")
    raises(ValueError, gpumem._pool_block, 16, "tensorflow", 0, None,
           match="unknown owner")
    raises(ValueError, gpumem._pool_block, -1, "cupy", 0, None)
    raises(ValueError, gpumem._pool_block, 16, "cupy",
           gpumem.device_count(), None)


@case
def pool_block_books_and_free():
    """A block is booked to its owner and given back once."""
    if not CUDA:
        gmtest.skip("blocks come from CUDA memory")
    before = gpumem.memory_stats()["owners"]["cupy"]["allocated_bytes"]
    block = gpumem._pool_block(3 * MiB, "cupy", 0, None)
    assert block.ptr != 0 and block.size == 3 * MiB and block.owner == "cupy"
    stats = gpumem.memory_stats()["owners"]["cupy"]
    assert stats["allocated_bytes"] == before + 3 * MiB
    block.free()
    block.free()                            # once only
    assert gpumem.memory_stats()["owners"]["cupy"]["allocated_bytes"] \
        == before
    assert "freed" in repr(block)
    block = gpumem._pool_block(MiB, "numba", 0, None)
    del block                               # freed with the object
    assert gpumem.memory_stats()["owners"]["numba"]["allocated_bytes"] == 0


# Each library's cache no longer holds what the next one needs: 60% of
# the device, freed by one owner, then taken by another.
HANDOVER = """
import gpumem
total = gpumem.Device(0).total_memory
big = int(total * 0.6) // (1 << 20) * (1 << 20)
"""


def handover(snippet):
    """HANDOVER's set-up, then SNIPPET."""
    return HANDOVER + textwrap.dedent(snippet)


@case
def torch_then_gpumem_and_back():
    need_cuda("torch")
    run(handover("""
    import torch
    gpumem.use_pool("torch")
    t = torch.empty(big, dtype=torch.uint8, device="cuda")
    owners = gpumem.memory_stats()["owners"]
    assert owners["torch"]["allocated_bytes"] >= big, owners
    del t
    torch.cuda.synchronize()
    a = gpumem.empty(big, "uint8")           # PyTorch's cache is gpumem's
    a.free()
    t = torch.ones(big // 4, dtype=torch.float32, device="cuda")
    assert float(t[-1]) == 1.0
    print("pool_users", gpumem.pool_users())
    """))


@case
def cupy_then_gpumem_and_back():
    need_cuda("cupy")
    run(handover("""
    import cupy
    gpumem.use_pool("cupy")
    c = cupy.empty(big, dtype=cupy.uint8)
    owners = gpumem.memory_stats()["owners"]
    assert owners["cupy"]["allocated_bytes"] == big, owners
    del c
    a = gpumem.empty(big, "uint8")
    a.free()
    c = cupy.ones(big // 4, dtype=cupy.float32)
    assert float(c[-1]) == 1.0
    del c
    assert gpumem.memory_stats()["owners"]["cupy"]["allocated_bytes"] == 0
    # Page-locked host memory from gpumem's pinned blocks.
    pinned = cupy.cuda.alloc_pinned_memory(1 << 20)
    assert pinned.size() == 1 << 20
    """))


@case
def torch_too_late():
    need_cuda("torch")
    result = run("""
    import torch, gpumem
    torch.zeros(1, device="cuda")
    try:
        gpumem.use_pool("torch")
    except gpumem.Error as exc:
        print("refused:", exc)
    else:
        raise SystemExit("use_pool('torch') after PyTorch's first "
                         "allocation was taken")
    """)
    assert "too late" in result.stdout, result.stdout


@case
def torch_mem_pool_scoped():
    """A scoped pool at any time; PyTorch's statistics are recorded as
    they are (docs/frameworks.md names them)."""
    need_cuda("torch")
    result = run("""
    import torch, gpumem
    torch.zeros(1, device="cuda")            # PyTorch's own allocator is up
    if not hasattr(torch.cuda, "MemPool"):
        print("no MemPool")
        raise SystemExit(0)
    pool = gpumem.torch_mem_pool()
    with torch.cuda.use_mem_pool(pool):
        x = torch.arange(1 << 20, dtype=torch.float32, device="cuda")
    owners = gpumem.memory_stats()["owners"]
    assert owners["torch"]["allocated_bytes"] >= 4 << 20, owners
    assert float(x.sum()) == float(sum(range(1 << 20)))
    y = torch.ones(1 << 20, device="cuda")   # outside: PyTorch's own
    assert gpumem.memory_stats()["owners"]["torch"]["allocated_bytes"] \\
        == owners["torch"]["allocated_bytes"]
    del x
    torch.cuda.synchronize()
    print("torch stats:", torch.cuda.memory_allocated())
    """)
    print(result.stdout.strip())


@case
def numba_plugin():
    need_cuda("numba")
    result = run("""
    import numpy as np, gc, gpumem
    gpumem.use_pool("numba")
    from numba import cuda
    assert type(cuda.current_context().memory_manager).__name__ \\
        == "GpumemMemoryManager"
    # Device memory only, no kernel: the numba-cuda of the GPU machine
    # cannot compile kernels under its NumPy 2.5 (np.row_stack is gone).
    d = cuda.to_device(np.arange(1000, dtype=np.float32))
    e = cuda.device_array(1000, dtype=np.float32)
    assert gpumem.memory_stats()["owners"]["numba"]["allocated_bytes"] \
        >= 8000
    e.copy_to_device(d)
    assert (e.copy_to_host() == np.arange(1000)).all()
    # The memory is gpumem's: gpumem reads it through the CUDA Array
    # Interface.
    assert (gpumem.asarray(e).copy_to_host() == np.arange(1000)).all()
    free, total = cuda.current_context().get_memory_info()
    assert 0 < free <= total
    del d, e
    gc.collect()
    cuda.current_context().deallocations.clear()
    assert gpumem.memory_stats()["owners"]["numba"]["allocated_bytes"] == 0
    print("numba ok")
    """)
    assert "numba ok" in result.stdout


@case
def numba_too_late():
    need_cuda("numba")
    result = run("""
    import numpy as np, gpumem
    from numba import cuda
    cuda.to_device(np.zeros(4))
    try:
        gpumem.use_pool("numba")
    except gpumem.Error as exc:
        print("refused:", exc)
    """)
    assert "too late" in result.stdout, result.stdout + result.stderr


@case
def cupy_allocator_checks_its_parts():
    """gpumem._cupy_allocator refuses what is not CuPy's before anything
    is called, and leaves a stream capsule of another signature
    unused."""
    if not CUDA:
        gmtest.skip("the cuda backend's checks (the host backend refuses "
                    "first: host_backend_refuses)")
    import ctypes
    raises(TypeError, gpumem._cupy_allocator, 1, 2, 3, match="5 arguments")
    raises(TypeError, gpumem._cupy_allocator, len, len, None, 12, len,
           match="argument 4 must be callable")
    new = ctypes.pythonapi.PyCapsule_New
    new.restype = ctypes.py_object
    new.argtypes = (ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p)
    name = ctypes.create_string_buffer(b"int (int)")
    other = new(ctypes.addressof(name), name, None)
    malloc = gpumem._cupy_allocator(
        len, len, {"get_current_stream_ptr": other}, len, len)
    assert not gpumem._cupy_allocator_reads_capsule(malloc)
    raises(TypeError, gpumem._cupy_allocator_reads_capsule, len,
           match="needs an allocator")
    raises(ValueError, malloc, -1, match="nbytes must be >= 0")


@case
def cupy_allocates_without_python():
    """With this CuPy, no Python function of gpumem's runs for CuPy's
    allocations and frees; they land in the books on CuPy's current
    stream, read through CuPy's C function."""
    need_cuda("cupy")
    result = run("""
    import sys, cupy, gpumem
    gpumem.use_pool("cupy")
    fw = sys.modules["gpumem._frameworks"]
    print("stream read", fw.cupy_stream_read)
    calls = []
    def profile(frame, event, arg):
        if event == "call" and "gpumem" in frame.f_code.co_filename:
            calls.append(frame.f_code.co_name)
    with cupy.cuda.Stream() as s:
        sys.setprofile(profile)
        c = cupy.empty(1 << 20, dtype=cupy.uint8)
        owners = gpumem.memory_stats()["owners"]
        c.fill(3)
        del c
        sys.setprofile(None)
    s.synchronize()
    assert not calls, calls
    assert owners["cupy"]["allocated_bytes"] == 1 << 20, owners
    assert gpumem.memory_stats()["owners"]["cupy"]["allocated_bytes"] == 0
    """, check=False)
    assert result.returncode == 0 and "stream read C" in result.stdout, \
        (result.stdout, result.stderr)


@case
def cupy_stream_read_through_python():
    """Where CuPy exports no stream function, the allocator asks
    cupy.cuda.get_current_stream, and the stream order of a freed block
    holds as on the C path (stream_order_of_a_freed_block)."""
    need_cuda("cupy")
    run("""
    import sys, cupy, gpumem
    gpumem.pool_users()                    # makes gpumem._frameworks
    fw = sys.modules["gpumem._frameworks"]
    fw._cupy_stream_capi = lambda cupy: None
    gpumem.use_pool("cupy")
    assert fw.cupy_stream_read == "Python", fw.cupy_stream_read
    """ + STREAM_ORDER)


@case
def limit_reached_by_another_owner():
    """gpumem's limit holds for the sum; the message names the owners."""
    need_cuda("cupy")
    result = run("""
    import cupy, gpumem
    gpumem.use_pool("cupy")
    gpumem.set_memory_limit(64 << 20)
    held = gpumem.empty(48 << 20, "uint8")
    try:
        cupy.empty(32 << 20, dtype=cupy.uint8)
    except gpumem.OutOfMemoryError as exc:
        print("refused:", exc)
    else:
        raise SystemExit("CuPy went past gpumem's limit")
    c = cupy.empty(8 << 20, dtype=cupy.uint8)  # within the limit
    """)
    assert "refused" in result.stdout and "cupy" in result.stdout \
        and "gpumem" in result.stdout, result.stdout


@case
def limit_holds_for_torch():
    """The limit over every holder: a 3 GiB tensor past a 1 GiB limit is
    refused after use_pool('torch'), also when PyTorch took (and freed)
    that much before the limit was set; and inside torch_mem_pool()
    the idle segments PyTorch's cache keeps are given back when the
    limit is set."""
    need_cuda("torch")
    result = run("""
    import torch, gpumem
    gpumem.use_pool("torch")
    big = torch.empty(3 << 30, dtype=torch.uint8, device="cuda")
    del big
    torch.cuda.synchronize()
    gpumem.set_memory_limit(1 << 30)
    try:
        torch.empty(3 << 30, dtype=torch.uint8, device="cuda")
    except (torch.OutOfMemoryError, RuntimeError, gpumem.Error) as exc:
        print("refused:", type(exc).__name__)
    else:
        raise SystemExit("a 3 GiB tensor went past a 1 GiB limit")
    small = torch.ones(1 << 20, device="cuda")
    assert float(small.sum()) == float(1 << 20)
    """)
    assert "refused: RuntimeError" in result.stdout, result.stdout
    # The scoped pool (PyTorch's caching allocator on gpumem's pool; it
    # cannot sit beside use_pool's, so in a process of its own).
    result = run("""
    import torch, gpumem
    torch.zeros(1, device="cuda")
    if not hasattr(torch.cuda, "MemPool"):
        print("no MemPool")
        raise SystemExit(0)
    pool = gpumem.torch_mem_pool()
    with torch.cuda.use_mem_pool(pool):
        x = torch.empty(2 << 30, dtype=torch.uint8, device="cuda")
    del x
    torch.cuda.synchronize()
    gpumem.set_memory_limit(1 << 30)
    held = gpumem.memory_stats()["owners"]["torch"]["allocated_bytes"]
    print("torch after the limit:", held)
    with torch.cuda.use_mem_pool(pool):
        # A segment PyTorch's cache kept is booked as torch's, and
        # serves a tensor again without a new block...
        y = torch.empty(2 << 30, dtype=torch.uint8, device="cuda")
        assert gpumem.memory_stats()["owners"]["torch"]["allocated_bytes"] \
            == held, "a cached segment took a new block"
        # ...but no new block passes the limit.
        try:
            torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
        except (torch.OutOfMemoryError, RuntimeError, gpumem.Error):
            print("pool refused")
        else:
            raise SystemExit("a new segment went past the limit")
    """)
    assert "pool refused" in result.stdout or "no MemPool" in result.stdout, \
        result.stdout
    print(result.stdout.strip())


@case
def stream_order_of_a_freed_block():
    """A block CuPy frees on one stream is not handed to work on another
    before the first stream's work on it ends."""
    need_cuda("cupy")
    run("""
    import sys, cupy, gpumem
    gpumem.use_pool("cupy")
    fw = sys.modules["gpumem._frameworks"]
    assert fw.cupy_stream_read == "C", fw.cupy_stream_read
    """ + STREAM_ORDER)


STREAM_ORDER = """
    spin = cupy.RawKernel(r'''
    extern "C" __global__ void spin_fill(float *x, int n, long long cycles) {
      long long start = clock64();
      while (clock64() - start < cycles) {}
      for (int i = threadIdx.x; i < n; i += blockDim.x) x[i] = 7.0f;
    }''', "spin_fill")
    n = 1 << 20
    a_stream, b_stream = cupy.cuda.Stream(), cupy.cuda.Stream()
    for _ in range(5):
        with a_stream:
            x = cupy.empty(n, dtype=cupy.float32)
            spin((1,), (256,), (x, cupy.int32(n), cupy.int64(200_000_000)))
            kept = cupy.empty(n, dtype=cupy.float32)
            kept[...] = x                 # reads x after the spin
            del x                         # freed on a_stream
        with b_stream:
            y = cupy.empty(n, dtype=cupy.float32)
            y.fill(-1.0)                  # must not land in x early
        a_stream.synchronize()
        b_stream.synchronize()
        assert float(kept.min()) == 7.0 and float(kept.max()) == 7.0
"""


WORKLOAD_TORCH = """
import hashlib, os, sys, torch
import gpumem
if sys.argv[-1] == "pool":
    gpumem.use_pool("torch")
torch.manual_seed(0)
torch.use_deterministic_algorithms(True)
model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(),
                            torch.nn.Linear(256, 10)).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.05)
x = torch.randn(512, 64, device="cuda")
y = torch.randint(0, 10, (512,), device="cuda")
for _ in range(100):
    opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
digest = hashlib.sha256()
for p in model.parameters():
    digest.update(p.detach().cpu().numpy().tobytes())
print("digest", digest.hexdigest(), float(loss))
"""

WORKLOAD_CUPY = """
import hashlib, sys, cupy
import gpumem
if sys.argv[-1] == "pool":
    gpumem.use_pool("cupy")
rng = cupy.random.default_rng(1)
a = rng.standard_normal((512, 512), dtype=cupy.float32)
f = cupy.fft.fft2(a)
m = a @ a.T
digest = hashlib.sha256(cupy.asnumpy(f).tobytes() + cupy.asnumpy(m).tobytes())
print("digest", digest.hexdigest())
"""


def digests(code):
    """The digest line of CODE run with its own allocator, and with
    gpumem's pool."""
    out = []
    for mode in ("own", "pool"):
        full_env = dict(os.environ, CUBLAS_WORKSPACE_CONFIG=":4096:8")
        result = subprocess.run(
            [gmtest.GPUMEM, "--backend=cuda", "-q", "-c", code, mode],
            capture_output=True, text=True, env=full_env, timeout=240)
        assert result.returncode == 0, result.stderr
        out.append([l for l in result.stdout.splitlines()
                    if l.startswith("digest")][0])
    return out


@case
def torch_training_identical():
    need_cuda("torch")
    own, pool = digests(WORKLOAD_TORCH)
    assert own == pool, (own, pool)


@case
def cupy_fft_cublas_identical():
    need_cuda("cupy")
    own, pool = digests(WORKLOAD_CUPY)
    assert own == pool, (own, pool)


@case
def clean_exit_with_live_blocks():
    """Process exit with live blocks of every library: no crash, nothing
    on standard error."""
    names = [n for n in ("torch", "cupy", "numba")
             if CUDA and have(n) is None]
    if not names:
        gmtest.skip("needs the cuda backend and one of torch, cupy, numba")
    code = "import gpumem, numpy as np\ngpumem.use_pool(%s)\n" \
        % ", ".join(repr(n) for n in names)
    if "torch" in names:
        code += "import torch\nt = torch.ones(1 << 20, device='cuda')\n"
    if "cupy" in names:
        code += "import cupy\nc = cupy.ones(1 << 20)\n"
    if "numba" in names:
        code += "from numba import cuda\nd = cuda.to_device(np.ones(1 << 20))\n"
    code += "a = gpumem.zeros(1 << 20)\nprint('live')\n"
    result = run(code)
    assert result.stdout.strip() == "live"
    assert result.stderr.strip() == "", result.stderr


@case
def jax_beside_gpumem():
    """JAX takes no external allocator: a fixed budget
    (XLA_PYTHON_CLIENT_MEM_FRACTION) leaves gpumem the rest."""
    need_cuda("jax")
    run(handover("""
    import jax, jax.numpy as jnp
    x = jnp.ones((1 << 20,), dtype=jnp.float32)
    x.block_until_ready()
    a = gpumem.empty(big, "uint8")          # 60% beside JAX's 25%
    a.free()
    print(jax.devices())
    """), env={"XLA_PYTHON_CLIENT_PREALLOCATE": "true",
              "XLA_PYTHON_CLIENT_MEM_FRACTION": "0.25"})


gmtest.main()
