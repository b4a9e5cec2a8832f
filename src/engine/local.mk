## src/engine: the engines beneath the Python layer, plain C that any C
## caller may use: the concurrent queue (queue.c), the graph recorder
## (recorder.c) and the chunked copy (chunked-copy.c).  Core's flags:
## no Python, no CUDA, no MPI headers.
noinst_LTLIBRARIES += src/engine/libgm-engine.la
src_engine_libgm_engine_la_SOURCES = \
	src/engine/queue.h src/engine/queue.c \
	src/engine/recorder.h src/engine/recorder.c \
	src/engine/chunked-copy.h src/engine/chunked-copy.c
src_engine_libgm_engine_la_CPPFLAGS = $(GM_CORE_CPPFLAGS)
