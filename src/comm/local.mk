## src/comm: the processes of a job working together: the job's facts,
## collectives and their engines, the watchdog, collectives over the
## devices of one process, the ranks' agreement, the one-GPU shared
## windows, staging through host memory, a transport the Python layer
## lends (comm-net.c); with MPI, MPI itself.  The only folder whose files see
## MPI's and NCCL's headers.
noinst_LTLIBRARIES += src/comm/libgm-comm.la
src_comm_libgm_comm_la_SOURCES = \
	src/comm/comm.c src/comm/comm.h src/comm/comm-job.c src/comm/comm-job.h \
	src/comm/comm-engine.c src/comm/comm-engine.h \
	src/comm/comm-watchdog.c src/comm/comm-watchdog.h \
	src/comm/comm-devices.c src/comm/comm-devices.h src/comm/comm-nccl.h \
	src/comm/comm-nccl-load.c src/comm/comm-nccl-load.h \
	src/comm/comm-agree.c src/comm/comm-agree.h \
	src/comm/comm-windows.c src/comm/comm-windows.h \
	src/comm/comm-stage.c src/comm/comm-stage.h \
	src/comm/comm-net.c src/comm/comm-net.h
if GM_HAVE_MPI
src_comm_libgm_comm_la_SOURCES += src/comm/comm-mpi.c src/comm/comm-mpi.h \
	src/comm/comm-mpi-types.c src/comm/comm-mpi-types.h
endif
src_comm_libgm_comm_la_CPPFLAGS = $(GM_COMM_CPPFLAGS) $(MPI_CFLAGS)
GM_COMM_CPPFLAGS = $(GM_CORE_CPPFLAGS) -I$(top_srcdir)/src/comm \
	-I$(top_srcdir)/src/share
## The NCCL engine: NCCL's interface takes CUDA streams and its header
## includes CUDA's, so this one file of src/comm is built with CUDA's
## flags too (docs/architecture.md names it).
if GM_HAVE_CUDA
if GM_HAVE_NCCL
noinst_LTLIBRARIES += src/comm/libgm-comm-nccl.la
src_comm_libgm_comm_nccl_la_SOURCES = src/comm/comm-nccl.c
src_comm_libgm_comm_nccl_la_CPPFLAGS = $(GM_COMM_CPPFLAGS) \
	-I$(top_srcdir)/src/cuda $(CUDA_CFLAGS) $(NCCL_CFLAGS)
GM_FOLDER_LIBS += src/comm/libgm-comm-nccl.la
endif
endif
