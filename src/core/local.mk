## src/core: the plain-C interface every layer shares (status, dtypes,
## the backend table, kernel descriptions and their length expressions,
## memory books, history, graph dependencies, the NVTX switch, the pool
## hooks), one header a concern, gm.h including them all.  No Python, no CUDA, no MPI headers:
## its flags name none of theirs.
noinst_LTLIBRARIES += src/core/libgm-core.la
src_core_libgm_core_la_SOURCES = \
	src/core/gm.h src/core/gm-status.h src/core/gm-env.h src/core/gm-dtype.h \
	src/core/gm-kernel.h src/core/gm-backend.h src/core/gm-memory.h \
	src/core/gm-launch.h src/core/dlpack-abi.h \
	src/core/error.c src/core/backend.c src/core/kernel.c src/core/dtype.c \
	src/core/env.c \
	src/core/memory.c src/core/block-record.c src/core/block-record.h \
	src/core/spill.c src/core/spill.h src/core/spill-settings.c \
	src/core/spill-state.h \
	src/core/mem-history.c src/core/mem-history.h \
	src/core/mem-report.c src/core/strided.c src/core/reduce.c \
	src/core/graph-deps.c src/core/graph-deps.h \
	src/core/pinned-ranges.c src/core/pinned-ranges.h \
	src/core/pinned-pool.c src/core/pinned-pool.h \
	src/core/managed-cache.c src/core/managed-cache.h \
	src/core/nvtx.c src/core/nvtx.h \
	src/core/pool-hooks.c src/core/pool-hooks.h src/core/pool-blocks.c \
	src/core/config-facts.c src/core/config-facts.h
src_core_libgm_core_la_CPPFLAGS = $(GM_CORE_CPPFLAGS)

## The library PyTorch's CUDAPluggableAllocator opens by path, bound to
## the pool at run time (src/core/torch-shim.cc, C++ to throw a refusal
## as PyTorch's allocator needs): no dependency of its own.
pkglib_LTLIBRARIES = src/libgpumem-torch.la
src_libgpumem_torch_la_SOURCES = src/core/torch-shim.cc
src_libgpumem_torch_la_CPPFLAGS = $(GM_CORE_CPPFLAGS)
src_libgpumem_torch_la_LDFLAGS = -module -avoid-version -shared
