## src/cuda: the CUDA backend (devices, streams, memory, copies, staging,
## launches, graphs, sharing, its reduce kernel).  The only folder of
## src/ whose files see CUDA's headers.
if GM_HAVE_CUDA
noinst_LTLIBRARIES += src/cuda/libgm-cuda.la
src_cuda_libgm_cuda_la_SOURCES = \
	src/cuda/cuda-backend.c src/cuda/cuda-internal.h \
	src/cuda/cuda-devices.c src/cuda/cuda-streams.c src/cuda/cuda-memory.c \
	src/cuda/cuda-copy.c src/cuda/cuda-launch.c src/cuda/cuda-staging.c \
	src/cuda/cuda-staging.h src/cuda/cuda-status.c src/cuda/cuda-status.h \
	src/cuda/cuda-nvtx.c src/cuda/cuda-graph.c src/cuda/cuda-share.c \
	src/cuda/cuda-batch-copy.c src/cuda/cuda-pools.c src/cuda/cuda-managed.c \
	src/cuda/cuda-host-numa.c \
	$(BACKEND_CUDA_SOURCES) src/cuda/cuda-reduce.h
src_cuda_libgm_cuda_la_CPPFLAGS = $(GM_CUDA_CPPFLAGS)
endif
## The reduce member's kernel (nvcc, by the .cu.lo rule in Makefile.am).
BACKEND_CUDA_SOURCES = src/cuda/cuda-reduce.cu
GM_CUDA_CPPFLAGS = $(GM_CORE_CPPFLAGS) -I$(top_srcdir)/src/cuda \
	-I$(top_srcdir)/src/share -I$(top_srcdir)/src/plugin $(CUDA_CFLAGS)
