## src/plugin: kernels beyond the built-in registry: plugin libraries
## and their tables, kernel signatures, the NVRTC JIT and its disk cache
## (SHA-256 keys).
noinst_LTLIBRARIES += src/plugin/libgm-plugin.la
src_plugin_libgm_plugin_la_SOURCES = \
	src/plugin/kernel-signature.c src/plugin/kernel-signature.h \
	src/plugin/plugin.c src/plugin/plugin-table.c src/plugin/plugin.h \
	src/plugin/jit.c src/plugin/jit.h src/plugin/jit-cache.c \
	src/plugin/jit-cache.h src/plugin/nvrtc-abi.h \
	src/plugin/sha256.c src/plugin/sha256.h
src_plugin_libgm_plugin_la_CPPFLAGS = $(GM_CORE_CPPFLAGS) -I$(top_srcdir)/src/plugin
