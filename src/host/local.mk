## src/host: the host backend, devices simulated in host memory: the
## same table as the CUDA backend's, plain C.
noinst_LTLIBRARIES += src/host/libgm-host.la
src_host_libgm_host_la_SOURCES = \
	src/host/host-backend.c src/host/host-graph.c src/host/host-graph.h \
	src/host/host-reduce.c src/host/host-reduce.h src/host/host-share.c \
	src/host/host-memory.c src/host/host-memory.h src/host/host-managed.c
src_host_libgm_host_la_CPPFLAGS = $(GM_CORE_CPPFLAGS) -I$(top_srcdir)/src/host \
	-I$(top_srcdir)/src/share
