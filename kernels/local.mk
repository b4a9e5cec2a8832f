## kernels: one .cu a kernel and its C reference (kernels/README says
## how to add one); the registry (registry.c) goes into each program and
## library of its own (tests/ add test kernels to theirs).
noinst_LTLIBRARIES += kernels/libgm-kernels.la
KERNEL_CUDA_SOURCES = kernels/algo_seed.cu kernels/algo.cu kernels/saxpy.cu \
	kernels/launchers.cu
KERNEL_REF_SOURCES = kernels/algo_seed-ref.c kernels/algo-ref.c \
	kernels/saxpy-ref.c
kernels_libgm_kernels_la_SOURCES = kernels/kernels.h kernels/kernel-decls.h \
	$(KERNEL_REF_SOURCES)
if GM_HAVE_CUDA
kernels_libgm_kernels_la_SOURCES += $(KERNEL_CUDA_SOURCES)
endif
kernels_libgm_kernels_la_CPPFLAGS = $(GM_CORE_CPPFLAGS) -I$(top_srcdir)/kernels
EXTRA_DIST += kernels/kernels.def kernels/README kernels/kernel-launchers.h \
	$(KERNEL_CUDA_SOURCES)
