/* gm.h -- gpumem's internal C interface, shared by every layer.

   Data flows one way: the Python layer (py-*.c, module.c) checks
   arguments and calls the functions declared here; memory.c keeps the
   books; a backend (cuda-backend.c or host-backend.c) moves bytes.
   Nothing declared here knows about Python or includes CUDA headers.  */

#ifndef GM_H
#define GM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "gm-launch.h"

/* Status of every backend and memory function.  Details of the last
   failure are in gm_last_error ().  */
typedef enum gm_status
{
  GM_OK = 0,
  GM_ERR_VALUE,        /* a bad argument value (ValueError) */
  GM_ERR_TYPE,         /* an argument of the wrong type (TypeError) */
  GM_ERR_NOMEM,        /* device memory or the set limit exhausted */
  GM_ERR_HOST_NOMEM,   /* host memory exhausted (MemoryError) */
  GM_ERR_CUDA,         /* a CUDA call failed (gpumem.CudaError) */
  GM_ERR_UNAVAILABLE,  /* the backend cannot run here */
  GM_ERR_NOT_READY,    /* work is still pending (not an error) */
  GM_ERR_FAILED        /* the work itself was refused, for the reason the
                          message gives: neither a bad argument nor this
                          machine's fault (source that does not compile, a
                          plugin library whose table is wrong): gpumem.Error */
} gm_status;

/* Room for an out-of-memory message: the request, the free and idle
   bytes, each owner's totals and the five largest blocks with the line
   that made each.  */
#define GM_ERROR_MESSAGE_MAX 2048

typedef struct gm_error
{
  gm_status status;
  int cuda_code;             /* cudaError_t, or 0 */
  char cuda_name[64];        /* e.g. "cudaErrorIllegalAddress", or "" */
  char message[GM_ERROR_MESSAGE_MAX];
} gm_error;

/* Record STATUS with a printf-style message as the calling thread's last
   error, and return STATUS.  CUDA_CODE and CUDA_NAME may be 0 / NULL.  */
gm_status gm_error_set (gm_status status, int cuda_code,
                        const char *cuda_name, const char *fmt, ...)
  __attribute__ ((format (printf, 4, 5)));

/* The calling thread's last error (never NULL).  */
const gm_error *gm_last_error (void);

/* The most dimensions an array may have.  */
#define GM_MAX_NDIM 32

/* Reads the environment variable NAME as a boolean setting into *VALUE
   (env.c, the one parser of every such setting): 1, yes, true or on
   (in any case) are true, 0, no, false or off false; unset or empty
   gives FALLBACK.  Any other value: GM_ERR_VALUE naming the variable,
   its value and the spellings accepted (*VALUE is FALLBACK then).  */
gm_status gm_env_bool (const char *name, bool fallback, bool *value);

/* Reads the environment variable NAME as a size setting into *VALUE
   (env.c, the one parser of every such setting): a whole number of
   decimal digits, alone (bytes, or a count) or followed by one suffix
   K, M or G, or KiB, MiB or GiB (times 1024, 1024^2, 1024^3), in any
   case: "65536", "64K", "64KiB", "16m".  Nothing else: no sign, space,
   point, hex, or kB/MB (ambiguous between 1000 and 1024).  Unset or
   empty gives FALLBACK.  A value outside MIN..MAX, or any other
   spelling: GM_ERR_VALUE naming the variable, its value, the spellings
   accepted and the range (*VALUE is FALLBACK then).  */
gm_status gm_env_size (const char *name, size_t fallback, size_t min,
                       size_t max, size_t *value);
/* Reads NAME, a switch or a count: a true spelling of gm_env_bool gives
   ON_VALUE, a false one or none 0, a size as gm_env_size reads it (MIN
   to MAX) itself.  GM_ERR_VALUE, naming the variable, for anything
   else.  */
gm_status gm_env_switch_size (const char *name, size_t on_value, size_t min,
                              size_t max, size_t *value);

/* Element types.  */
typedef enum gm_dtype
{
  GM_BOOL,
  GM_INT8, GM_INT16, GM_INT32, GM_INT64,
  GM_UINT8, GM_UINT16, GM_UINT32, GM_UINT64,
  GM_FLOAT16, GM_FLOAT32, GM_FLOAT64,
  GM_COMPLEX64, GM_COMPLEX128,
  GM_NDTYPES
} gm_dtype;

typedef struct gm_dtype_info
{
  const char *name;       /* NumPy's name: "float32" */
  size_t itemsize;
  char kind;              /* NumPy's kind: b i u f c */
  uint8_t dlpack_code;    /* DLDataTypeCode */
} gm_dtype_info;

extern const gm_dtype_info gm_dtypes[GM_NDTYPES];

/* The dtype called NAME ("float32", ...), of LEN bytes; -1 if none.  */
int gm_dtype_from_name (const char *name, size_t len);

/* The dtype of a NumPy array-interface type string such as "<f4";
   -1 if gpumem has none.  */
int gm_dtype_from_typestr (const char *typestr);

/* The dtype of a buffer-protocol (struct module) FORMAT whose items are
   ITEMSIZE bytes ("f", "<i" of 4, "Zd"; NULL means "B"); -1 if gpumem
   has none or the byte order is not native little-endian.  */
int gm_dtype_from_format (const char *format, size_t itemsize);

/* Writes the little-endian array-interface type string of DTYPE
   ("<f4", "|b1", "<c16") into BUF.  */
void gm_dtype_typestr (gm_dtype dtype, char buf[8]);

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

/* The kernel registry (kernels/registry.c).  */
typedef enum gm_param_kind
{
  GM_PARAM_IN, GM_PARAM_OUT, GM_PARAM_INOUT, GM_PARAM_SCALAR
} gm_param_kind;

typedef struct gm_kernel_param
{
  const char *name;
  gm_param_kind kind;
  gm_dtype dtype;
  const char *length;       /* minimum length expression, NULL for scalars */
} gm_kernel_param;

typedef struct gm_kernel
{
  const char *name;
  const char *doc;
  int nparams;
  gm_kernel_param params[GM_MAX_KERNEL_PARAMS];
  /* Run the C reference on host memory; NULL when the kernel has none
     (the host backend then refuses it).  */
  void (*run_host) (const gm_arg *args);
  /* Enqueue the CUDA kernel; returns a cudaError_t.  STREAM is a
     cudaStream_t.  NULL when built without CUDA, for a kernel with only
     a C reference, and for JIT kernels (the backend launches JIT).  */
  int (*launch_cuda) (const gm_arg *args, const gm_launch_cfg *cfg,
                      void *stream);
  /* Where the kernel comes from: NULL for one built in, else the
     plugin's file, the embedding program's name or "jit".  */
  const char *origin;
  /* A kernel compiled at run time (jit.c): its code, which the CUDA
     backend loads on first launch; NULL for every other kernel.  */
  struct gm_jit_code *jit;
} gm_kernel;

/* The kernels built into this program, in registry order.  */
extern const gm_kernel gm_kernel_table[];
extern const int gm_kernel_count;

/* The built-in kernel called NAME, or NULL (plugin.h's gm_kernels_get
   lists the preloaded plugins' kernels too).  */
const gm_kernel *gm_kernel_find (const char *name);

/* Writes "name: dtype[length] in" (or "name: dtype" for scalars) for
   PARAM into BUF of SIZE bytes.  */
void gm_kernel_param_format (const gm_kernel_param *param, char *buf,
                             size_t size);

/* Evaluates the length expression EXPR of KERNEL, with the scalar
   arguments ARGS, into *VALUE.  GM_ERR_VALUE when EXPR is malformed,
   names no scalar parameter, divides by zero or overflows.  ARGS may be
   NULL to check only the syntax and names (then *VALUE is 0).  */
gm_status gm_kernel_eval_length (const gm_kernel *kernel, const char *expr,
                                 const gm_arg *args, int64_t *value);

/* Where a backend's device memory lives.  */
typedef enum gm_memory_kind
{
  GM_MEMORY_HOST,      /* plain host memory (the host backend's devices) */
  GM_MEMORY_CUDA       /* CUDA device memory */
} gm_memory_kind;

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

  /* Waits up to TIMEOUT_US for all work in STREAM (NULL: the device's
     default stream and the streams it waits for) to finish: GM_OK when
     done, GM_ERR_NOT_READY when the time ran out, else the error the
     work ended with.  Called without the GIL; callers loop, checking
     for signals between calls.  */
  gm_status (*wait) (int device, gm_stream *stream, long timeout_us);
  gm_status (*device_synchronize) (int device);

  gm_status (*stream_create) (int device, gm_stream **stream);
  void (*stream_destroy) (gm_stream *stream);
  gm_status (*stream_query) (gm_stream *stream, bool *done);
  void *(*stream_handle) (gm_stream *stream);   /* cudaStream_t, or NULL */
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

/* Memory accounting (memory.c): every device allocation goes through
   here, so statistics and limits hold for both backends.  */

/* Who asked for a block: gpumem's own arrays, a library allocating
   from gpumem's pool, or another process whose block this process
   opened (an import: memory it maps, not memory it allocated).  The
   limit holds for their sum.  */
typedef enum gm_mem_owner
{
  GM_MEM_OWNER_GPUMEM,
  GM_MEM_OWNER_TORCH,
  GM_MEM_OWNER_CUPY,
  GM_MEM_OWNER_NUMBA,
  GM_MEM_OWNER_IMPORTED,
  GM_MEM_NOWNERS
} gm_mem_owner;

/* "gpumem", "torch", "cupy", "numba", "imported", indexed by
   gm_mem_owner.  */
extern const char *const gm_mem_owner_names[GM_MEM_NOWNERS];

/* One owner's books on one device.  */
typedef struct gm_mem_owner_stats
{
  size_t allocated_bytes;
  size_t peak_allocated_bytes;
  size_t allocations;
  size_t total_allocations;
} gm_mem_owner_stats;

/* One device's books: the first five fields are the sums over owners
   (the peak is the sum's own peak, not the sum of the owners' peaks).  */
typedef struct gm_mem_stats
{
  size_t allocated_bytes;
  size_t peak_allocated_bytes;
  size_t reserved_bytes;
  size_t allocations;
  size_t total_allocations;
  size_t limit;              /* SIZE_MAX: none */
  /* Of ALLOCATED_BYTES, this process's blocks that other processes may
     open (made shareable, or shared since): the share server's.  */
  size_t shared_bytes;
  size_t shared_blocks;
  gm_mem_owner_stats owners[GM_MEM_NOWNERS];
} gm_mem_stats;

/* Allocates NBYTES on DEVICE ordered on STREAM for OWNER; *PTR is NULL
   for 0 bytes.  When the device refuses, the pool's idle cache is given
   back and the request tried once more.  GM_ERR_NOMEM, naming the
   request, the free and idle bytes, each owner's totals and (with the
   history on) the five largest live blocks, when the limit or the
   device refuses.  */
gm_status gm_mem_alloc_as (gm_mem_owner owner, int device, size_t nbytes,
                           gm_stream *stream, void **ptr);
/* Frees what gm_mem_alloc_as returned to OWNER.  */
gm_status gm_mem_free_as (gm_mem_owner owner, int device, void *ptr,
                          size_t nbytes, gm_stream *stream);
/* How gm_mem_alloc_with gets memory, and gm_mem_free_with gives it
   back, where the backend's pool is not the one asked: CTX is the
   caller's.  */
typedef gm_status (*gm_mem_get_fn) (void *ctx, int device, size_t nbytes,
                                    gm_stream *stream, void **ptr);
typedef gm_status (*gm_mem_put_fn) (void *ctx, int device, void *ptr,
                                    size_t nbytes, gm_stream *stream);
/* gm_mem_alloc_as with GET (CTX) instead of the backend's malloc: the
   same limit, books, retry and history, for memory the share server
   makes or maps.  */
gm_status gm_mem_alloc_with (gm_mem_owner owner, int device, size_t nbytes,
                             gm_stream *stream, gm_mem_get_fn get,
                             void *ctx, void **ptr);
/* gm_mem_free_as with PUT (CTX) instead of the backend's free.  */
gm_status gm_mem_free_with (gm_mem_owner owner, int device, void *ptr,
                            size_t nbytes, gm_stream *stream,
                            gm_mem_put_fn put, void *ctx);
/* Counts NBYTES of DEVICE's booked memory as shared (SHARED), or as no
   longer shared; never fails.  */
void gm_mem_note_shared (int device, size_t nbytes, bool shared);
/* gm_mem_alloc_as and gm_mem_free_as for gpumem's own arrays.  */
gm_status gm_mem_alloc (int device, size_t nbytes, gm_stream *stream,
                        void **ptr);
gm_status gm_mem_free (int device, void *ptr, size_t nbytes,
                       gm_stream *stream);
gm_status gm_mem_stats_get (int device, gm_mem_stats *stats);
gm_status gm_mem_set_limit (int device, size_t limit);
gm_status gm_mem_empty_cache (int device);
/* Prints the per-device table of --stats to standard error.  */
void gm_mem_print_stats (void);

/* The memory history (memory.c keeps it, mem-history.c holds it): every
   allocation and free while it is on, and the blocks still live.  Off,
   it costs each allocation and free one predictable branch.  */

/* The deepest call stack recorded with a block.  */
#define GM_MEM_STACK_DEPTH 8

/* One frame of a recorded call stack, opaque to the core: the stack
   hooks' code object and instruction offset, turned into file, line and
   function only when asked.  */
typedef struct gm_mem_frame
{
  const void *code;
  int32_t offset;
} gm_mem_frame;

/* How the layer above records call stacks; the core calls these, never
   the other way, and names no Python.  */
typedef struct gm_mem_stack_hooks
{
  /* Writes the caller's stack, innermost frame first, into FRAMES (room
     for GM_MEM_STACK_DEPTH); returns how many, 0 where it cannot (the
     calling thread holds no GIL).  Called outside the books' lock.  */
  int (*capture) (gm_mem_frame *frames);
  /* Keeps the N FRAMES of a stack the history keeps for the first time
     alive; called by the thread whose capture returned them, under the
     books' lock.  */
  void (*retain) (const gm_mem_frame *frames, size_t n);
  /* Lets go of what retain kept; called outside the books' lock by the
     thread that stops the history.  */
  void (*release) (const gm_mem_frame *frames, size_t n);
  /* Writes FRAME as "FILE:LINE in FUNCTION" into BUF of SIZE; false
     where it cannot (no GIL).  Called outside the books' lock.  */
  bool (*describe) (const gm_mem_frame *frame, char *buf, size_t size);
} gm_mem_stack_hooks;

/* Installs HOOKS (NULL: none; stacks are then not recorded).  */
void gm_mem_set_stack_hooks (const gm_mem_stack_hooks *hooks);

typedef enum gm_mem_action
{
  GM_MEM_ACTION_ALLOC,
  GM_MEM_ACTION_FREE
} gm_mem_action;

/* One allocation or free.  */
typedef struct gm_mem_event
{
  uint64_t time_ns;          /* CLOCK_MONOTONIC */
  uintptr_t address;
  size_t size;
  uintptr_t stream;          /* the gm_stream's address, 0 for none */
  size_t allocated_bytes;    /* the device's sum over owners, after it */
  size_t reserved_bytes;     /* the device's pool, after it */
  int32_t device;
  int32_t stack;             /* index in gm_mem_history_copy's stacks, -1 */
  uint8_t action;            /* gm_mem_action */
  uint8_t owner;             /* gm_mem_owner */
} gm_mem_event;

/* A block allocated while the history was on and not freed since.  */
typedef struct gm_mem_block
{
  uint64_t time_ns;
  uintptr_t address;
  size_t size;
  uintptr_t stream;
  int32_t device;
  int32_t stack;
  uint8_t owner;
} gm_mem_block;

/* What gm_mem_history_get copies out: plain arrays the caller frees with
   gm_mem_history_copy_free.  Stack I is FRAMES[STACK_START[I]] to
   FRAMES[STACK_START[I + 1] - 1].  */
typedef struct gm_mem_history_copy
{
  gm_mem_block *blocks;
  size_t nblocks;
  gm_mem_event *events;      /* oldest first */
  size_t nevents;
  size_t dropped;            /* events the ring overwrote */
  size_t max_entries;
  bool stacks_on;
  gm_mem_frame *frames;
  size_t *stack_start;       /* NSTACKS + 1 entries */
  size_t nstacks;
} gm_mem_history_copy;

/* Starts the history afresh (forgetting any), keeping the last
   MAX_ENTRIES (at least 1) events, with call stacks when STACKS and
   stack hooks are installed.  GM_ERR_VALUE for more than
   GM_MEM_HISTORY_MAX_ENTRIES, GM_ERR_HOST_NOMEM where its ring cannot
   be allocated; the history is then as it was.  */
gm_status gm_mem_history_start (size_t max_entries, bool stacks);
/* Stops the history and forgets what it kept.  */
void gm_mem_history_stop (void);
/* Whether the history is on.  */
bool gm_mem_history_on (void);
/* Copies the history and live blocks into *COPY.  GM_ERR_HOST_NOMEM
   where the copy cannot be allocated (*COPY is then empty).  */
gm_status gm_mem_history_get (gm_mem_history_copy *copy);
void gm_mem_history_copy_free (gm_mem_history_copy *copy);
/* The installed stack hooks, or NULL.  */
const gm_mem_stack_hooks *gm_mem_stack_hooks_get (void);
/* The history's size when GPUMEM_MEMORY_HISTORY or --memory-report
   turn it on without a count.  */
#define GM_MEM_HISTORY_DEFAULT_ENTRIES 100000
/* The most entries a history keeps, however it is started (the
   environment, memory_history, the C API): its ring is allocated whole,
   so the count is bounded before it multiplies.  */
#define GM_MEM_HISTORY_MAX_ENTRIES ((size_t) 1 << 30)
/* Starts the history as GPUMEM_MEMORY_HISTORY says (a switch, or the
   number of entries; env.c's gm_env_switch_size), with call stacks; read
   once, at the first call.  GM_ERR_VALUE for a bad value.  */
gm_status gm_mem_history_from_env (void);

/* Opens PATH to write an output file of gpumem's (a report, a
   snapshot), made with mode 0666 less the umask when there is none.  A
   symbolic link is not followed, and a regular file is written into
   only when it is the user's own and has no other hard link, so that a
   name planted in a shared folder cannot make a run overwrite another
   file; a regular file is emptied once those checks pass.  The
   descriptor, or -1 with errno set and *WHY saying why in words (a
   static string: strerror's, or one that names the fix).  */
int gm_output_create (const char *path, const char **why);

/* The memory report (mem-report.c).  Writes the HTML page of the
   history and books to PATH, opened as gm_output_create does
   (GM_ERR_FAILED, naming PATH and why, where it cannot); the stack
   hooks' describe must be able to run.  */
gm_status gm_mem_report_write (const char *path);
/* Writes the page to OUT, which stays open (its errors are OUT's).  */
gm_status gm_mem_report_to (FILE *out);
/* Prints the blocks the history saw allocated and still live, largest
   first, with where each was made (control characters escaped), to OUT;
   nothing with the history off or no such block.  */
void gm_mem_print_leaks (FILE *out);
/* What the layer above does as its interpreter ends: write the HTML
   report to HTML_PATH (NULL: none), print the leaks (LEAKS).  Set by
   the program's options before the interpreter starts.  */
void gm_mem_report_at_exit (const char *html_path, bool leaks);
const char *gm_mem_exit_report_path (void);
bool gm_mem_exit_leaks (void);

/* Formats NBYTES as "1.5 GiB" into BUF.  */
void gm_format_bytes (size_t nbytes, char *buf, size_t size);

/* The interpreter (interp.c).  */
typedef enum gm_run_mode
{
  GM_RUN_STDIN,     /* SCRIPT omitted or "-": standard input or console */
  GM_RUN_FILE,
  GM_RUN_COMMAND,
  GM_RUN_MODULE
} gm_run_mode;

typedef struct gm_run_options
{
  gm_run_mode mode;
  const char *target;     /* file, command or module; NULL for stdin */
  int argc;               /* arguments after the target */
  char **argv;
  bool inspect;           /* -i */
  bool stdin_is_dash;     /* SCRIPT was "-" */
  const char *python;     /* interpreter whose environment to use */
} gm_run_options;

/* Runs Python as OPTIONS say and returns the exit status: 0, the
   script's SystemExit code, 1 for an uncaught exception (its traceback
   printed), 2 when the script cannot be opened, 120 when finalizing
   failed.  Python is finalized on return.  *INTERRUPTED tells whether
   the script ended by an uncaught KeyboardInterrupt, which python
   answers by ending itself with SIGINT.  The interactive console ends
   the process itself on SystemExit, as CPython's does.  */
int gm_interp_run (const gm_run_options *options, bool *interrupted);

#endif /* GM_H */
