## src/app: the program gpumem: main, the command line's parser
## (getopt_long, usage, exit codes), what its child processes inherit.
## The registry goes in as an object, not from an archive: the core
## refers to it (the plugin lookup), and an archive linked before the
## core would not be searched again.
bin_PROGRAMS = src/gpumem
GM_APP_CPPFLAGS = $(GM_CORE_CPPFLAGS) -I$(top_srcdir)/src/app \
	-I$(top_srcdir)/src/python \
	-I$(top_srcdir)/src/comm -I$(top_srcdir)/src/plugin \
	-I$(top_srcdir)/kernels
GM_APP_SOURCES = src/app/main.c src/app/cli.c src/app/cli.h \
	src/app/child-env.c src/app/child-env.h
src_gpumem_SOURCES = $(GM_APP_SOURCES) kernels/registry.c
src_gpumem_CPPFLAGS = $(GM_APP_CPPFLAGS)
nodist_src_gpumem_SOURCES = gm-paths.h
src_gpumem_LDADD = src/python/libgm-embed.la src/libgpumem-core.la \
	$(GM_LIBS)
