/* host-backend.c -- the host backend: devices simulated in host memory.

   A real second backend, not a mock: buffers live in host memory, kernels
   run their C references (kernels/NAME-ref.c), and GPUMEM_HOST_DEVICES
   devices (default 4) each keep their own accounting, so multi-device
   scripts run on machines without a GPU and device results can be
   checked against it.  All work is synchronous: streams and events are
   complete as soon as they are used.  A stream that records a graph
   (graph_begin) keeps its calls in the graph instead (host-graph.c),
   and graph_launch runs them in order.  */

#define _POSIX_C_SOURCE 200809L
#include "config.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dlpack-abi.h"
#include "gm.h"
#include "host-graph.h"
#include "host-memory.h"
#include "host-reduce.h"
#include "managed-cache.h"
#include "pinned-pool.h"
#include "spill.h"
#include "share.h"

#define HOST_MAX_DEVICES GM_HOST_MAX_DEVICES
/* Device allocations are aligned as cudaMalloc's are (at least), so
   kernels' C references see the same alignment as the CUDA kernels.  */
#define HOST_ALIGN 256

struct gm_stream
{
  int device;
  void *handle;         /* what stream_wrap was given; NULL for our own */
  unsigned flags;       /* stream_create's: GM_STREAM_NON_BLOCKING or 0 */
  gm_graph *recording;  /* graph_begin's graph until graph_end, or NULL */
};

struct gm_event
{
  int device;
  bool timing;          /* GM_EVENT_TIMING: elapsed_ms may measure it */
  bool recorded;
  struct timespec when;
  /* A shared event's word in shared memory (event_export, event_import):
     the count of its records in every process, else NULL.  */
  uint64_t *word;
};

static int host_devices = 4;

/* GPUMEM_HOST_PEER_ACCESS, a boolean (gm_env_bool), true by default:
   false makes the simulated devices unable to access each other's
   memory, as GPUs without a link between them are (copies between them
   still work, as CUDA's do through host memory); by default they all
   can, since their memory is all host memory.  Read at start.  */
static bool host_peer_access = true;

static gm_status
host_init (void)
{
  char why[GM_ERROR_MESSAGE_MAX];
  size_t count;
  gm_status status;

  status = gm_env_bool ("GPUMEM_HOST_PEER_ACCESS", true, &host_peer_access);
  if (status != GM_OK)
    return status;
  if (gm_env_count ("GPUMEM_HOST_DEVICES", (size_t) host_devices, 1,
                    HOST_MAX_DEVICES, &count) != GM_OK)
    {
      snprintf (why, sizeof why, "%s", gm_last_error ()->message);
      return gm_error_set (GM_ERR_UNAVAILABLE, 0, NULL, "%s", why);
    }
  host_devices = (int) count;
  return GM_OK;
}

static int
host_device_count (void)
{
  return host_devices;
}

static size_t
physical_memory (void)
{
  long pages = sysconf (_SC_PHYS_PAGES), size = sysconf (_SC_PAGESIZE);
  return pages > 0 && size > 0 ? (size_t) pages * (size_t) size : 0;
}

static gm_status
host_device_props (int device, gm_device_props *props)
{
  memset (props, 0, sizeof *props);
  snprintf (props->name, sizeof props->name, "host device %d", device);
  props->total_memory = physical_memory ();
  props->sm_count = 1;
  props->max_threads_per_block = 1024;
  props->max_block[0] = props->max_block[1] = 1024;
  props->max_block[2] = 64;
  props->max_grid[0] = INT32_MAX;
  props->max_grid[1] = props->max_grid[2] = 65535;
  /* Shared between processes by host-share.c; no pools, no managed
     memory.  */
  props->ipc = true;
  return GM_OK;
}

static gm_status
host_mem_info (int device, size_t *free_bytes, size_t *total)
{
  long pages = sysconf (_SC_AVPHYS_PAGES), size = sysconf (_SC_PAGESIZE);
  (void) device;
  *total = physical_memory ();
  *free_bytes = pages > 0 && size > 0 ? (size_t) pages * (size_t) size : 0;
  return GM_OK;
}


/* The host backend has no CUDA driver or runtime.  */
static void
host_versions (int *driver, int *runtime)
{
  *driver = 0;
  *runtime = 0;
}

static gm_status
host_can_access_peer (int device, int peer, bool *can)
{
  *can = device == peer || host_peer_access;
  return GM_OK;
}

static gm_status
host_copy (void *dst, int dst_device, const void *src, int src_device,
           size_t nbytes, gm_stream *stream)
{
  (void) dst_device;
  (void) src_device;
  if (stream != NULL && stream->recording != NULL)
    return gm_host_graph_add (stream->recording, &(gm_host_op) {
        .kind = GM_HOST_OP_COPY, .dst = dst, .src = src, .dpitch = nbytes,
        .spitch = nbytes, .width = nbytes, .height = 1});
  pthread_mutex_lock (&gm_host_work_lock);
  if (nbytes > 0)
    memmove (dst, src, nbytes);
  pthread_mutex_unlock (&gm_host_work_lock);
  return GM_OK;
}

static gm_status
host_copy2d (void *dst, size_t dpitch, int dst_device, const void *src,
             size_t spitch, int src_device, size_t width, size_t height,
             gm_stream *stream)
{
  (void) dst_device;
  (void) src_device;
  if (stream != NULL && stream->recording != NULL)
    return gm_host_graph_add (stream->recording, &(gm_host_op) {
        .kind = GM_HOST_OP_COPY, .dst = dst, .src = src, .dpitch = dpitch,
        .spitch = spitch, .width = width, .height = height});
  pthread_mutex_lock (&gm_host_work_lock);
  for (size_t row = 0; row < height && width > 0; row++)
    memmove ((char *) dst + row * dpitch, (const char *) src + row * spitch,
             width);
  pthread_mutex_unlock (&gm_host_work_lock);
  return GM_OK;
}

static gm_status
host_memset (void *dst, int device, int value, size_t nbytes,
             gm_stream *stream)
{
  (void) device;
  if (stream != NULL && stream->recording != NULL)
    return gm_host_graph_add (stream->recording, &(gm_host_op) {
        .kind = GM_HOST_OP_MEMSET, .dst = dst, .value = value,
        .width = nbytes, .height = 1});
  pthread_mutex_lock (&gm_host_work_lock);
  if (nbytes > 0)
    memset (dst, value, nbytes);
  pthread_mutex_unlock (&gm_host_work_lock);
  return GM_OK;
}

static gm_status
host_launch (const gm_kernel *kernel, const gm_arg *args,
             const gm_launch_cfg *cfg, int device, gm_stream *stream)
{
  (void) cfg;
  (void) device;
  if (kernel->jit != NULL)
    return gm_error_set (GM_ERR_UNAVAILABLE, 0, NULL, "%s: the host backend "
                         "cannot launch JIT kernels (gpumem.jit compiles "
                         "CUDA code, which needs the cuda backend)",
                         kernel->name);
  if (kernel->run_host == NULL)
    return gm_error_set (GM_ERR_UNAVAILABLE, 0, NULL, "kernel '%s' (%s) has "
                         "no C reference: the host backend cannot run it; "
                         "run on the cuda backend", kernel->name,
                         kernel->origin ? kernel->origin : "built in");
  if (stream != NULL && stream->recording != NULL)
    {
      gm_host_op op = {.kind = GM_HOST_OP_LAUNCH, .kernel = kernel};

      for (int i = 0; i < kernel->nparams; i++)
        op.args[i] = args[i];
      return gm_host_graph_add (stream->recording, &op);
    }
  pthread_mutex_lock (&gm_host_work_lock);
  kernel->run_host (args);
  pthread_mutex_unlock (&gm_host_work_lock);
  return GM_OK;
}

static gm_status
host_reduce (void *dst, void *const *srcs, int n, size_t count,
             gm_dtype dtype, gm_reduce_op op, int device, gm_stream *stream)
{
  gm_status status = gm_reduce_check (n, dtype, op);

  (void) device;
  if (status != GM_OK)
    return status;
  if (stream != NULL && stream->recording != NULL)
    {
      gm_host_op record = {.kind = GM_HOST_OP_REDUCE, .dst = dst,
                           .reduce = {.n = n, .count = count,
                                      .dtype = dtype, .op = op}};

      for (int k = 0; k < n; k++)
        record.reduce.srcs[k] = srcs[k];
      return gm_host_graph_add (stream->recording, &record);
    }
  pthread_mutex_lock (&gm_host_work_lock);
  gm_host_reduce_run (dst, srcs, n, count, dtype, op);
  pthread_mutex_unlock (&gm_host_work_lock);
  return GM_OK;
}

static gm_status
host_wait (int device, gm_stream *stream, long timeout_us)
{
  (void) device;
  (void) stream;
  (void) timeout_us;
  return GM_OK;
}

static gm_status
host_device_synchronize (int device)
{
  (void) device;
  return GM_OK;
}

/* All work runs in the calling thread: a non-blocking stream is
   ordered as every other, and only says what it was made as.  */
static gm_status
host_stream_create (int device, unsigned flags, gm_stream **stream)
{
  *stream = malloc (sizeof **stream);
  if (*stream == NULL)
    return gm_error_set (GM_ERR_HOST_NOMEM, 0, NULL, "no memory for a stream");
  (*stream)->device = device;
  (*stream)->handle = NULL;
  (*stream)->flags = flags;
  (*stream)->recording = NULL;
  return GM_OK;
}

static gm_status
host_stream_wrap (int device, void *handle, gm_stream **stream)
{
  gm_status status = host_stream_create (device, 0, stream);

  if (status == GM_OK)
    (*stream)->handle = handle;
  return status;
}

/* All host work is complete when its call returns: nothing to wait for.  */
static gm_status
host_stream_wait_event (int device, gm_stream *stream, gm_event *event)
{
  (void) device;
  (void) stream;
  (void) event;
  return GM_OK;
}

static void
host_stream_destroy (gm_stream *stream)
{
  gm_host_graph_free (stream->recording);
  free (stream);
}

static gm_status
host_stream_query (gm_stream *stream, bool *done)
{
  (void) stream;
  *done = true;
  return GM_OK;
}

static unsigned
host_stream_flags (gm_stream *stream)
{
  return stream->flags;
}

static void *
host_stream_handle (gm_stream *stream)
{
  return stream != NULL ? stream->handle : NULL;
}

static gm_status
host_event_create (int device, unsigned flags, gm_event **event)
{
  *event = calloc (1, sizeof **event);
  if (*event == NULL)
    return gm_error_set (GM_ERR_HOST_NOMEM, 0, NULL, "no memory for an event");
  (*event)->device = device;
  (*event)->timing = (flags & GM_EVENT_TIMING) != 0;
  return GM_OK;
}

static void
host_event_destroy (gm_event *event)
{
  free (event);
}

static gm_status
host_event_record (gm_event *event, gm_stream *stream)
{
  (void) stream;
  clock_gettime (CLOCK_MONOTONIC, &event->when);
  event->recorded = true;
  if (event->word != NULL)
    __atomic_add_fetch (event->word, 1, __ATOMIC_RELEASE);
  return GM_OK;
}

/* A shared host event is the word its records count in: the work it
   marks is complete when record returns, in any process.  */
static gm_status
host_event_export (gm_event *event, void *word, uint8_t data[64])
{
  memset (data, 0, 64);
  event->word = word;
  return GM_OK;
}

static gm_status
host_event_import (int device, const uint8_t data[64], void *word,
                   gm_event **event)
{
  gm_status status = host_event_create (device, GM_EVENT_INTERPROCESS,
                                        event);
  (void) data;
  if (status == GM_OK)
    (*event)->word = word;
  return status;
}

static gm_status
host_event_query (gm_event *event, bool *done)
{
  (void) event;
  *done = true;
  return GM_OK;
}

static gm_status
host_event_wait (gm_event *event, long timeout_us)
{
  (void) event;
  (void) timeout_us;
  return GM_OK;
}

static gm_status
host_event_elapsed_ms (gm_event *start, gm_event *end, float *ms)
{
  if (!start->recorded || !end->recorded)
    return gm_error_set (GM_ERR_VALUE, 0, NULL,
                         "both events must be recorded before elapsed_ms");
  if (!start->timing || !end->timing)
    return gm_error_set (GM_ERR_VALUE, 0, NULL, "elapsed_ms needs events "
                         "made with timing=True");
  *ms = (float) ((double) (end->when.tv_sec - start->when.tv_sec) * 1e3
                 + (double) (end->when.tv_nsec - start->when.tv_nsec) / 1e6);
  return GM_OK;
}

static gm_status
host_host_alloc (size_t nbytes, void **ptr)
{
  *ptr = aligned_alloc (HOST_ALIGN, (nbytes + HOST_ALIGN) / HOST_ALIGN
                                    * HOST_ALIGN);
  if (*ptr == NULL)
    return gm_error_set (GM_ERR_HOST_NOMEM, 0, NULL,
                         "host memory exhausted allocating %zu bytes",
                         nbytes);
  return GM_OK;
}

static void
host_host_free (void *ptr)
{
  free (ptr);
}

static gm_status
host_foreign_stream_sync (void *handle)
{
  (void) handle;
  return GM_OK;
}

/* All host work is complete when it returns: nothing to wait for.  */
static gm_status
host_foreign_stream_wait (int device, gm_stream *stream, void *handle)
{
  (void) device;
  (void) stream;
  (void) handle;
  return GM_OK;
}

static gm_status
host_pointer_device (const void *ptr, int *device)
{
  (void) ptr;
  *device = -1;
  return GM_OK;
}

static gm_status
host_graph_begin (gm_stream *stream)
{
  if (stream->recording != NULL)
    return gm_error_set (GM_ERR_VALUE, 0, NULL, "the stream already "
                         "records a graph");
  stream->recording = gm_host_graph_new (stream->device);
  return stream->recording != NULL ? GM_OK : GM_ERR_HOST_NOMEM;
}

static gm_status
host_graph_end (gm_stream *stream, gm_graph **graph)
{
  *graph = stream->recording;
  stream->recording = NULL;
  if (*graph == NULL)
    return gm_error_set (GM_ERR_VALUE, 0, NULL, "the stream records no "
                         "graph");
  return GM_OK;
}

/* Runs GRAPH's calls in the order they were recorded, through the
   calls themselves (host_copy2d, host_memset, host_launch, host_reduce)
   with no stream, each under gm_host_work_lock as when called.  */
static gm_status
host_graph_launch (gm_graph *graph, gm_stream *stream)
{
  gm_status status = GM_OK;

  (void) stream;
  for (size_t i = 0; i < graph->nops && status == GM_OK; i++)
    {
      const gm_host_op *op = &graph->ops[i];

      switch (op->kind)
        {
        case GM_HOST_OP_COPY:
          status = host_copy2d (op->dst, op->dpitch, graph->device, op->src,
                                op->spitch, graph->device, op->width,
                                op->height, NULL);
          break;
        case GM_HOST_OP_MEMSET:
          status = host_memset (op->dst, graph->device, op->value,
                                op->width, NULL);
          break;
        case GM_HOST_OP_LAUNCH:
          status = host_launch (op->kernel, op->args, NULL, graph->device,
                                NULL);
          break;
        case GM_HOST_OP_REDUCE:
          status = host_reduce (op->dst, op->reduce.srcs, op->reduce.n,
                                op->reduce.count, op->reduce.dtype,
                                op->reduce.op, graph->device, NULL);
          break;
        }
    }
  return status;
}

static void
host_graph_destroy (gm_graph *graph)
{
  gm_host_graph_free (graph);
}

static void
host_shutdown (void)
{
  gm_spill_release_streams ();
  gm_pinned_release_cached ();
  gm_managed_cache_release (-1);
}

const gm_backend gm_backend_host = {
  .name = "host",
  .device_memory = GM_MEMORY_HOST,
  .dlpack_device_type = GM_DL_CPU,
  .mpi_needs_staging = false,
  .init = host_init,
  .device_count = host_device_count,
  .device_props = host_device_props,
  .mem_info = host_mem_info,
  .malloc = gm_host_malloc,
  .free = gm_host_free,
  .release_cached = gm_host_release_cached,
  .reserved = gm_host_reserved,
  .copy = host_copy,
  .copy2d = host_copy2d,
  .memset = host_memset,
  .launch = host_launch,
  .reduce = host_reduce,
  .wait = host_wait,
  .device_synchronize = host_device_synchronize,
  .stream_create = host_stream_create,
  .stream_flags = host_stream_flags,
  .stream_destroy = host_stream_destroy,
  .stream_query = host_stream_query,
  .stream_handle = host_stream_handle,
  .stream_wrap = host_stream_wrap,
  .stream_wait_event = host_stream_wait_event,
  .event_create = host_event_create,
  .event_destroy = host_event_destroy,
  .event_record = host_event_record,
  .event_query = host_event_query,
  .event_wait = host_event_wait,
  .event_elapsed_ms = host_event_elapsed_ms,
  .event_export = host_event_export,
  .event_import = host_event_import,
  .host_alloc = host_host_alloc,
  .host_free = host_host_free,
  .foreign_stream_sync = host_foreign_stream_sync,
  .foreign_stream_wait = host_foreign_stream_wait,
  .can_access_peer = host_can_access_peer,
  .pointer_device = host_pointer_device,
  .graph_begin = host_graph_begin,
  .graph_end = host_graph_end,
  .graph_launch = host_graph_launch,
  .graph_destroy = host_graph_destroy,
  .ipc = &gm_host_ipc_ops,
  .shutdown = host_shutdown,
  .versions = host_versions,
  .managed_dlpack_device_type = GM_DL_CPU,
  .managed_malloc = gm_host_managed_malloc,
  .managed_free = gm_host_managed_free,
  .managed_prefetch = gm_host_managed_prefetch,
  .managed_discard = gm_host_managed_discard,
  .managed_advise = gm_host_managed_advise,
};
