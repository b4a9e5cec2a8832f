"""gpumem._frameworks: PyTorch, CuPy and Numba allocating from gpumem's
pool (docs/frameworks.md).

Built into gpumem (src/python/py-frameworks.c compiles this file's text at the
first gpumem.use_pool or gpumem.torch_mem_pool call); it imports each
library only when asked to hook it.  Every block comes from the same
stream-ordered pool as gpumem's own arrays, is booked under its library's
name in gpumem.memory_stats()["owners"], and counts towards
gpumem.set_memory_limit.
"""

import ctypes

import sys

import gpumem

LIBRARIES = ("torch", "cupy", "numba")
_hooked = set()
_torch_allocator = None


def _require_cuda(what):
    if gpumem.backend != "cuda":
        raise gpumem.Error(
            f"{what}: the {gpumem.backend} backend has no CUDA memory for "
            "other libraries to allocate; run on the cuda backend")


def _import(name, what):
    try:
        return __import__(name)
    except ImportError as exc:
        raise gpumem.Error(f"{what}: {name} cannot be imported ({exc})") \
            from None


# PyTorch: a CUDAPluggableAllocator over libgpumem-torch, the shim that
# gpumem binds to its pool (src/core/torch-shim.c).

def _torch_pluggable():
    global _torch_allocator
    if _torch_allocator is None:
        torch = _import("torch", "gpumem.use_pool('torch')")
        path = gpumem._torch_shim()
        _torch_allocator = torch.cuda.memory.CUDAPluggableAllocator(
            path, "gpumem_torch_alloc", "gpumem_torch_free")
    return _torch_allocator


def _hook_torch():
    torch = _import("torch", "gpumem.use_pool('torch')")
    allocator = _torch_pluggable()
    try:
        torch.cuda.memory.change_current_allocator(allocator)
    except RuntimeError as exc:
        raise gpumem.Error(
            "gpumem.use_pool('torch') comes too late: PyTorch has already "
            f"set up its own CUDA allocator ({exc}).  Call it before "
            "PyTorch's first CUDA allocation, or allocate inside "
            "`with torch.cuda.use_mem_pool(gpumem.torch_mem_pool()):`") \
            from None


def release_caches():
    """Asks the caches that other libraries keep on gpumem's pool to give
    their idle blocks back (gpumem.empty_cache, set_memory_limit):
    PyTorch's caching allocator keeps the segments of a
    torch_mem_pool() and serves tensors from them without asking
    gpumem again."""
    torch = sys.modules.get("torch")
    if (_torch_allocator is not None and torch is not None
            and torch.cuda.is_initialized()):
        torch.cuda.empty_cache()


def torch_mem_pool():
    """A torch.cuda.MemPool whose blocks come from gpumem's pool, for
    `with torch.cuda.use_mem_pool(pool):`, at any time."""
    _require_cuda("gpumem.torch_mem_pool")
    torch = _import("torch", "gpumem.torch_mem_pool")
    if not hasattr(torch.cuda, "MemPool"):
        raise gpumem.Error(
            f"gpumem.torch_mem_pool: PyTorch {torch.__version__} has no "
            "torch.cuda.MemPool; use gpumem.use_pool('torch') instead")
    return torch.cuda.MemPool(_torch_pluggable().allocator())


# CuPy: an allocator function in C (src/python/py-cupy-alloc.c) on
# CuPy's current device and stream, and page-locked host memory from
# gpumem.pinned_empty.

#: How CuPy's allocations read its current stream once hooked: "C" (the
#: function CuPy's Cython modules call) or "Python" (get_current_stream).
cupy_stream_read = None


class _PinnedHolder:
    """What CuPy's PinnedMemoryPointer holds: ptr and size, and the
    NumPy array over gpumem's page-locked block, freed with it."""

    __slots__ = ("ptr", "size", "array")

    def __init__(self, nbytes):
        self.array = gpumem.pinned_empty(max(nbytes, 1), "uint8")
        self.ptr = self.array.ctypes.data
        self.size = nbytes


def _cupy_stream_capi(cupy):
    """The C functions CuPy's stream module exports to other Cython
    modules (a dict of capsules), or None."""
    return getattr(cupy.cuda.stream, "__pyx_capi__", None)


def _hook_cupy():
    global cupy_stream_read
    cupy = _import("cupy", "gpumem.use_pool('cupy')")
    memory = cupy.cuda.memory
    malloc = gpumem._cupy_allocator(
        cupy.cuda.runtime.getDevice, cupy.cuda.get_current_stream,
        _cupy_stream_capi(cupy), memory.UnownedMemory, memory.MemoryPointer)

    def pinned_malloc(nbytes):
        return cupy.cuda.PinnedMemoryPointer(_PinnedHolder(nbytes), 0)

    cupy.cuda.set_allocator(malloc)
    cupy.cuda.set_pinned_memory_allocator(pinned_malloc)
    cupy_stream_read = ("C" if gpumem._cupy_allocator_reads_capsule(malloc)
                        else "Python")


# Numba: an External Memory Management plugin.

def _numba_manager():
    from numba import cuda
    from numba.cuda.cudadrv import driver

    def device_pointer(address):
        # The handle type of Numba's binding: CUdeviceptr of NVIDIA's
        # bindings, else ctypes.
        binding = getattr(driver, "binding", None)
        if getattr(driver, "USE_NV_BINDING", True) and binding is not None:
            return binding.CUdeviceptr(address)
        return ctypes.c_uint64(address)

    class GpumemMemoryManager(cuda.GetIpcHandleMixin,
                              cuda.HostOnlyCUDAMemoryManager):
        """Numba's device memory from gpumem's pool (booked as numba);
        page-locked host memory as Numba makes it."""

        def initialize(self):
            pass

        def memalloc(self, nbytes):
            block = gpumem._pool_block(nbytes, "numba",
                                       self.context.device.id, None)
            return cuda.MemoryPointer(self.context,
                                      device_pointer(block.ptr), nbytes,
                                      owner=block, finalizer=block.free)

        def get_memory_info(self):
            free, total = gpumem.Device(self.context.device.id).mem_info()
            return cuda.MemoryInfo(free=free, total=total)

        @property
        def interface_version(self):
            return 1

    return GpumemMemoryManager


def _hook_numba():
    _import("numba", "gpumem.use_pool('numba')")
    from numba import cuda
    manager = _numba_manager()
    cuda.set_memory_manager(manager)
    context = cuda.current_context()
    if not isinstance(context.memory_manager, manager):
        raise gpumem.Error(
            "gpumem.use_pool('numba') comes too late: Numba's CUDA context "
            "already has its own memory manager.  Call it before Numba's "
            "first use of the GPU")


_HOOKS = {"torch": _hook_torch, "cupy": _hook_cupy, "numba": _hook_numba}


def use_pool(*libraries):
    """gpumem.use_pool(*libraries): see its docstring in py-frameworks.c."""
    names = libraries or ()
    for name in names:
        if name not in _HOOKS:
            raise ValueError(
                f"gpumem.use_pool: unknown library {name!r} (known: "
                f"{', '.join(LIBRARIES)})")
    if not names:
        raise TypeError("gpumem.use_pool() needs at least one of "
                        f"{', '.join(map(repr, LIBRARIES))}")
    _require_cuda("gpumem.use_pool")
    for name in names:
        if name not in _hooked:
            _HOOKS[name]()
            _hooked.add(name)


def hooked():
    """The libraries use_pool switched over, as a sorted tuple."""
    return tuple(sorted(_hooked))
