/* gm-backend.h -- the backend interface: devices, streams and events, the
   table of operations every backend fills, the backend in use, and
   strided copies composed from the table (strided.c).  */

#ifndef GM_BACKEND_H
#define GM_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "gm-dtype.h"
#include "gm-kernel.h"
#include "gm-status.h"

/* Devices.  */
typedef struct gm_device_props
{
  char name[256];
  size_t total_memory;
  int cc_major, cc_minor;
  int sm_count;
  int max_threads_per_block;
  int max_block[3];
  int max_grid[3];
  /* What the device offers (gpumem --config reports it): stream-ordered
     memory pools; memory another process may map (gpumem.share: a pool
     that exports POSIX file descriptors, or the host backend's shared
     memory); managed memory, and managed memory the host and the device
     may touch at once.  */
  bool pools;
  bool ipc;
  bool managed;
  bool concurrent_managed;
} gm_device_props;

/* A stream of work on one device.  NULL everywhere means the device's
   default stream with synchronous semantics.  */
typedef struct gm_stream gm_stream;
typedef struct gm_event gm_event;
/* One device's recorded work, ready to run again (gpumem.graph).  */
typedef struct gm_graph gm_graph;

/* Flags of the backend's event_create.  */
#define GM_EVENT_TIMING 1u
#define GM_EVENT_BLOCKING 2u
/* Another process may open the event (event_export); never with
   GM_EVENT_TIMING.  */
#define GM_EVENT_INTERPROCESS 4u

/* Flags of the backend's stream_create.  A non-blocking stream is not
   ordered with the device's default stream by the device (CUDA's
   cudaStreamNonBlocking); the backend keeps the ordering rule for it
   (a NULL-stream call sees the work queued on it: join_streams).  */
#define GM_STREAM_NON_BLOCKING 1u
/* With GM_STREAM_NON_BLOCKING: a stream that NULL-stream calls do not
   join; its maker orders its work with events (the spill engine's
   write-behind, whose copies run beside the calls that follow).  */
#define GM_STREAM_UNJOINED 2u

/* Where a backend's device memory lives.  */
typedef enum gm_memory_kind
{
  GM_MEMORY_HOST,      /* plain host memory (the host backend's devices) */
  GM_MEMORY_CUDA       /* CUDA device memory */
} gm_memory_kind;

/* Where managed memory is moved to (managed_prefetch) or meant to
   live (managed_advise): a device index, or this for host memory.  */
#define GM_LOCATION_HOST (-1)

/* The advice managed_advise gives the driver about a range of managed
   memory, and the advice that undoes each.  */
typedef enum gm_advice
{
  GM_ADVISE_READ_MOSTLY,           /* copies may be kept where read */
  GM_ADVISE_UNSET_READ_MOSTLY,
  GM_ADVISE_PREFERRED_LOCATION,    /* pages live at the location */
  GM_ADVISE_UNSET_PREFERRED_LOCATION,
  GM_ADVISE_ACCESSED_BY,           /* the location keeps them mapped */
  GM_ADVISE_UNSET_ACCESSED_BY
} gm_advice;

/* The operations of the backends' reduce, and of gpumem.comm's
   allreduce (comm-job.h's gm_comm_op is this type).  */
typedef enum gm_reduce_op
{
  GM_REDUCE_SUM, GM_REDUCE_MAX, GM_REDUCE_MIN
} gm_reduce_op;

/* OP's name: "sum", "max", "min" ("?" for another number).  */
const char *gm_reduce_op_name (gm_reduce_op op);

/* The most arrays one reduce call combines.  */
#define GM_REDUCE_MAX_INPUTS 8

/* Whether a reduce of N arrays of DTYPE with OP is one the backends
   run (reduce.c, the one check both use): GM_OK, GM_ERR_VALUE for N
   outside 1 .. GM_REDUCE_MAX_INPUTS or an unknown OP, GM_ERR_TYPE for
   float16, an unknown DTYPE, and a complex DTYPE with an OP other than
   GM_REDUCE_SUM; the error says which.  */
gm_status gm_reduce_check (int n, gm_dtype dtype, gm_reduce_op op);

/* The backend interface.  Device indexes are 0 .. device_count - 1 and
   are checked by the caller.  "Host" addresses have device -1.  */
typedef struct gm_backend
{
  const char *name;                      /* "cuda" or "host": for messages */

  /* What the backend is: callers decide by these, never by NAME.  */
  /* Its device memory: GM_MEMORY_CUDA offers __cuda_array_interface__
     and reads other libraries' CUDA memory.  */
  gm_memory_kind device_memory;
  /* The DLDeviceType of its device memory (dlpack-abi.h): kDLCUDA, or
     kDLCPU (whose one device id is 0).  */
  int dlpack_device_type;
  /* Whether an MPI library that is not CUDA-aware must see its device
     memory through host copies.  */
  bool mpi_needs_staging;
  /* Whether launch () runs kernels compiled by gpumem.jit (jit.c).  */
  bool launches_jit;

  /* Starts the backend: GM_OK, GM_ERR_UNAVAILABLE saying why, or
     GM_ERR_VALUE for a bad setting in the environment (which no
     fallback to another backend may hide).  */
  gm_status (*init) (void);
  int (*device_count) (void);
  gm_status (*device_props) (int device, gm_device_props *props);
  gm_status (*mem_info) (int device, size_t *free_bytes, size_t *total);

  /* Pool allocation, ordered on STREAM (NULL: default stream); free
     takes the NBYTES malloc was asked for.  */
  gm_status (*malloc) (int device, size_t nbytes, gm_stream *stream,
                       void **ptr);
  gm_status (*free) (int device, void *ptr, size_t nbytes,
                     gm_stream *stream);
  gm_status (*release_cached) (int device, size_t *reserved_after);
  gm_status (*reserved) (int device, size_t *bytes);

  /* Copy NBYTES from SRC on SRC_DEVICE to DST on DST_DEVICE (-1 for
     host memory).  STREAM NULL: the copy starts after all work queued
     before it on the devices' streams and is complete on return (the
     Ordering rule, cuda-backend.c).  */
  gm_status (*copy) (void *dst, int dst_device, const void *src,
                     int src_device, size_t nbytes, gm_stream *stream);
  gm_status (*memset) (void *dst, int device, int value, size_t nbytes,
                       gm_stream *stream);
  /* Copies HEIGHT rows of WIDTH bytes from SRC (rows SPITCH bytes apart)
     on SRC_DEVICE to DST (rows DPITCH bytes apart) on DST_DEVICE, either
     of them -1 for host memory, but not two different devices (callers
     stage those through a contiguous buffer).  Pitches may be smaller
     than WIDTH only when HEIGHT is 1.  STREAM NULL: complete on return,
     after the work queued before it on the default stream.  */
  gm_status (*copy2d) (void *dst, size_t dpitch, int dst_device,
                       const void *src, size_t spitch, int src_device,
                       size_t width, size_t height, gm_stream *stream);

  /* Enqueue KERNEL with ARGS on DEVICE.  With STREAM NULL the caller
     waits for the device afterwards (wait ()).  */
  gm_status (*launch) (const gm_kernel *kernel, const gm_arg *args,
                       const gm_launch_cfg *cfg, int device,
                       gm_stream *stream);
  /* Loads the code of KERNEL, a JIT kernel (jit.c), into DEVICE, as its
     first launch would, and checks the parameters the loaded kernel
     reports against KERNEL's signature (their count and sizes):
     GM_ERR_VALUE at a mismatch.  NULL for a backend that does not
     launch JIT kernels.  */
  gm_status (*jit_load) (const gm_kernel *kernel, int device);

  /* Waits up to TIMEOUT_US for all work in STREAM (NULL: the device's
     default stream and the streams it waits for) to finish: GM_OK when
     done, GM_ERR_NOT_READY when the time ran out, else the error the
     work ended with.  Called without the GIL; callers loop, checking
     for signals between calls.  */
  gm_status (*wait) (int device, gm_stream *stream, long timeout_us);
  gm_status (*device_synchronize) (int device);

  /* FLAGS: GM_STREAM_NON_BLOCKING (with GM_STREAM_UNJOINED) or 0.  */
  gm_status (*stream_create) (int device, unsigned flags,
                              gm_stream **stream);
  void (*stream_destroy) (gm_stream *stream);
  gm_status (*stream_query) (gm_stream *stream, bool *done);
  void *(*stream_handle) (gm_stream *stream);   /* cudaStream_t, or NULL */
  /* GM_STREAM_NON_BLOCKING for a non-blocking stream (made so, or a
     wrapped one that is), else 0.  */
  unsigned (*stream_flags) (gm_stream *stream);
  /* Makes the work that DEVICE's default stream gets from now on wait
     for the work queued so far on the backend's non-blocking streams
     of DEVICE, as every operation with a NULL stream does itself; for
     code that queues work on the default stream on its own (NCCL's
     lanes, the C API's callers).  NULL where streams need no join.  */
  gm_status (*join_streams) (int device);
  /* Wraps HANDLE, a stream made by other code (a cudaStream_t; 0, 1 and
     2 name CUDA's default, legacy and per-thread streams), as a stream
     of DEVICE.  gpumem does not own it: stream_destroy frees only the
     wrapper.  GM_ERR_VALUE when the backend can tell that HANDLE belongs
     to another device.  */
  gm_status (*stream_wrap) (int device, void *handle, gm_stream **stream);
  /* Makes STREAM (NULL: DEVICE's default stream) wait, without blocking
     the host, until EVENT's recorded work is done (nothing when EVENT was
     never recorded).  */
  gm_status (*stream_wait_event) (int device, gm_stream *stream,
                                  gm_event *event);

  /* FLAGS: GM_EVENT_TIMING (elapsed_ms may measure it), GM_EVENT_BLOCKING
     (a wait for it sleeps rather than spins, where the backend can).  */
  gm_status (*event_create) (int device, unsigned flags, gm_event **event);
  void (*event_destroy) (gm_event *event);
  gm_status (*event_record) (gm_event *event, gm_stream *stream);
  gm_status (*event_query) (gm_event *event, bool *done);
  gm_status (*event_wait) (gm_event *event, long timeout_us);
  gm_status (*event_elapsed_ms) (gm_event *start, gm_event *end,
                                 float *ms);
  /* Fills DATA (64 bytes) so that event_import in another process of
     this node opens EVENT (made with GM_EVENT_INTERPROCESS); WORD is 8
     bytes of memory shared with that process, which EVENT's records
     publish to from now on (where the backend keeps its own state
     there).  */
  gm_status (*event_export) (gm_event *event, void *word, uint8_t data[64]);
  /* Opens the event DATA describes (from event_export in another
     process) as *EVENT on DEVICE, its records published to WORD, the
     same shared memory; event_destroy lets go of it.  */
  gm_status (*event_import) (int device, const uint8_t data[64], void *word,
                             gm_event **event);

  /* Page-locked host memory.  */
  gm_status (*host_alloc) (size_t nbytes, void **ptr);
  void (*host_free) (void *ptr);

  /* Waits for all work queued on a stream another library made
     (a cudaStream_t; 1 and 2 name CUDA's legacy and per-thread default
     streams, as the CUDA Array Interface says).  */
  gm_status (*foreign_stream_sync) (void *handle);

  /* Makes the stream another library made (HANDLE, numbered as for
     foreign_stream_sync) wait, without blocking the host, for the work
     gpumem queued on DEVICE so far: an event is recorded on STREAM
     (NULL: the device's legacy default stream, which follows every
     stream gpumem made) and HANDLE waits for it.  The producer's half of
     the DLPack stream handshake.  */
  gm_status (*foreign_stream_wait) (int device, gm_stream *stream,
                                    void *handle);

  /* The device an address belongs to, or -1 for host memory.  */
  gm_status (*pointer_device) (const void *ptr, int *device);

  /* Whether kernels on DEVICE may use memory of PEER and copies between
     the two go directly, in *CAN (true when DEVICE == PEER).  The first
     call (and the first copy between devices) maps every pair of devices
     that can reach each other, both ways, once.  */
  gm_status (*can_access_peer) (int device, int peer, bool *can);

  /* Graphs (gpumem.graph).  graph_begin makes STREAM, one stream_create
     made, record the copies, memsets and launches queued on it from now
     on instead of running them, to run in the order queued; graph_end
     stops recording and makes *GRAPH, which graph_launch queues on
     STREAM as many times as wanted and graph_destroy frees.  With
     STREAM NULL it runs after the work queued before it on the device's
     default stream, and the caller waits for the device afterwards
     (wait ()), as for launch.  Host
     memory a recorded copy touches must be page-locked (host_alloc) and
     outlive the graph.  A failed graph_end leaves STREAM as it was
     before graph_begin.  */
  gm_status (*graph_begin) (gm_stream *stream);
  gm_status (*graph_end) (gm_stream *stream, gm_graph **graph);
  gm_status (*graph_launch) (gm_graph *graph, gm_stream *stream);
  void (*graph_destroy) (gm_graph *graph);
  /* Before each call queued on a recording STREAM, the recorder may say
     which of the stream's earlier calls it needs done first: the calls
     numbered AFTER[0 .. NAFTER) (from 0, in the order of this stream's
     graph_order calls, each followed by its one call), none when NAFTER
     is 0.  The call may then run at the same time as the others.  A
     call with graph_order before it numbers every call queued since the
     previous graph_order as one.  NULL where the backend runs a graph's
     calls in the order queued (which is one order these allow).  */
  gm_status (*graph_order) (gm_stream *stream, const size_t *after,
                            size_t nafter);
  /* DST[i] = SRCS[0][i] OP SRCS[1][i] OP ... OP SRCS[N-1][i] for I < COUNT,
     always in that order (so that every caller gets the same bits), on
     DEVICE (every pointer is memory DEVICE's kernels can read, aligned
     to its element; DST may be one of SRCS, but overlap none otherwise),
     ordered on STREAM (NULL: after the work queued before on the
     device's default stream, and complete on return).  1 <= N <=
     GM_REDUCE_MAX_INPUTS (8).  DTYPE is any gm_dtype but float16
     (GM_ERR_TYPE); on bool, SUM and MAX are a logical or, MIN a logical
     and (the result 0 or 1, also for N 1); integer sums wrap around as
     unsigned ones do; complex dtypes take SUM only (GM_ERR_TYPE
     otherwise); MAX/MIN take a > b / a < b, keeping the earlier operand
     on ties and NaN comparisons exactly as  x = (y > x) ? y : x  does in
     that order.  Refused arguments (gm_reduce_check) leave DST as it
     was.  NULL where the backend has none.  */
  gm_status (*reduce) (void *dst, void *const *srcs, int n, size_t count,
                       gm_dtype dtype, gm_reduce_op op, int device,
                       gm_stream *stream);

  /* Sharing memory with other processes on the node (share.h); NULL where
     the backend cannot.  */
  const struct gm_ipc_ops *ipc;

  void (*shutdown) (void);

  /* The CUDA driver's and runtime's versions, as
     gm_backend_cuda_versions says; 0 and 0 where the backend has none.  */
  void (*versions) (int *driver, int *runtime);
  /* Managed memory (memory="managed"): one address that the host and
     every device may use, whose pages the driver moves to where they
     are used.  On the host backend it is host memory and the
     operations below check nothing more than their callers did.  */
  /* The DLDeviceType of managed memory: kDLCUDAManaged, or kDLCPU.  */
  int managed_dlpack_device_type;
  /* As malloc and free, for managed memory whose home is DEVICE (the
     pool of managed memory that the device keeps, where it offers one;
     the driver's allocator otherwise).  */
  gm_status (*managed_malloc) (int device, size_t nbytes, gm_stream *stream,
                               void **ptr);
  gm_status (*managed_free) (int device, void *ptr, size_t nbytes,
                             gm_stream *stream);
  /* Moves the N ranges PTRS[i] of SIZES[i] bytes of managed memory to
     LOCATION (a device, or GM_LOCATION_HOST), as one batch where the
     driver offers it, ordered on STREAM of DEVICE (NULL: after the work
     queued before it on DEVICE's default stream and the streams that
     stream waits for; the caller then waits with wait ()).  A device
     that cannot move pages while the host may use them
     (concurrentManagedAccess 0) ignores it: its pages move at each
     launch.  */
  gm_status (*managed_prefetch) (int device, void *const *ptrs,
                                 const size_t *sizes, size_t n, int location,
                                 gm_stream *stream);
  /* Says that the contents of the N ranges are no longer needed (a read
     before the next write finds any value), ordered as
     managed_prefetch.  Ignored where the driver cannot discard.  */
  gm_status (*managed_discard) (int device, void *const *ptrs,
                                const size_t *sizes, size_t n,
                                gm_stream *stream);
  /* Gives ADVICE for the NBYTES of managed memory at PTR, about LOCATION
     (a device or GM_LOCATION_HOST; unused by the read-mostly advice).
     Takes effect at once; moves no byte.  */
  gm_status (*managed_advise) (void *ptr, size_t nbytes, gm_advice advice,
                               int location);
} gm_backend;

typedef enum gm_backend_choice
{
  GM_BACKEND_AUTO, GM_BACKEND_CUDA, GM_BACKEND_HOST
} gm_backend_choice;

/* Sets *CHOICE from NAME ("auto", "cuda" or "host"); false for another
   name.  */
bool gm_backend_parse_name (const char *name, gm_backend_choice *choice);

/* Selects and initializes the backend (src/backend-choice.c).  With
   GM_BACKEND_AUTO, falls back to the host backend when CUDA has no
   device, and writes one notice to standard error unless QUIET.
   GM_ERR_UNAVAILABLE when the requested backend cannot run (last error
   says why).  */
gm_status gm_backend_init (gm_backend_choice choice, bool quiet);
/* The notice of gm_backend_init's fallback to the host backend ("no
   CUDA device (...); using the host backend"), written or not, for a
   caller that reports it its own way (QUIET, then a Python warning);
   NULL when the last gm_backend_init chose without falling back.  */
const char *gm_backend_notice (void);

/* Why the last gm_backend_init chose the backend it did ("asked for
   by --backend=host or GPUMEM_BACKEND=host", "auto: a CUDA device
   answered", the fallback's notice); "" before it.  */
const char *gm_backend_reason (void);

/* The CUDA driver's and runtime's versions (1000 * major + 10 * minor,
   as CUDA writes them), whichever backend runs: 0 for a driver that is
   absent and for a build without CUDA.  */
void gm_backend_cuda_versions (int *driver, int *runtime);

/* The backend in use; NULL before gm_backend_init.  */
extern const gm_backend *gm_backend_current;

/* Ends the backend: frees its pools, destroys contexts.  After
   Py_FinalizeEx.  */
void gm_backend_shutdown (void);

extern const gm_backend gm_backend_host;
#ifdef GM_HAVE_CUDA
extern const gm_backend gm_backend_cuda;
#endif

/* Strided copies (strided.c), composed from the backend's copy and
   copy2d.  A plan says how a copy of SHAPE between two strided layouts
   (strides in bytes, negative for reversed axes) breaks into backend
   calls.  */
typedef struct gm_copy_plan
{
  bool empty;                  /* a dimension is 0: nothing to copy */
  int nloop;                   /* outer dimensions, one call per index */
  int64_t dims[GM_MAX_NDIM];   /* their lengths */
  int64_t dst[GM_MAX_NDIM], src[GM_MAX_NDIM];   /* and strides */
  size_t width;                /* bytes of a row */
  int64_t height;              /* rows per call (1: a plain copy) */
  int64_t dpitch, spitch;      /* bytes between rows */
  int64_t calls;               /* backend calls the copy takes */
} gm_copy_plan;

/* Fills PLAN for copying NDIM-dimensional SHAPE of ITEMSIZE-byte
   elements from the layout with SRC_STRIDES to the one with DST_STRIDES
   (element-wise, in index order).  GM_ERR_VALUE for a bad NDIM.  */
gm_status gm_strided_plan (int ndim, const int64_t *shape, size_t itemsize,
                           const int64_t *dst_strides,
                           const int64_t *src_strides, gm_copy_plan *plan);
/* Runs PLAN from SRC (element 0's address) on SRC_DEVICE to DST on
   DST_DEVICE (-1: host memory; not two different devices) on STREAM
   (NULL: complete on return).  Layouts must not overlap.  */
gm_status gm_strided_copy (const gm_copy_plan *plan, char *dst,
                           int dst_device, const char *src, int src_device,
                           gm_stream *stream);

#endif /* GM_BACKEND_H */
