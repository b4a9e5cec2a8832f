## src/share: memory shared between processes of one node
## (docs/sharing.md): the share handle's bytes (fuzzed), the share
## server, its books, the consumer, the settings and what a process
## keeps once (one way: settings and process, books, server and
## consumer).  The backends' halves are src/cuda/cuda-share.c and
## src/host/host-share.c; the Python side src/python/py-share*.c.
noinst_LTLIBRARIES += src/share/libgm-share.la
src_share_libgm_share_la_SOURCES = \
	src/share/share.h src/share/share-handle.c src/share/share-server.c \
	src/share/share-client.c src/share/share-records.c \
	src/share/share-settings.c src/share/share-process.c \
	src/share/share-books.c
src_share_libgm_share_la_CPPFLAGS = $(GM_CORE_CPPFLAGS) -I$(top_srcdir)/src/share
