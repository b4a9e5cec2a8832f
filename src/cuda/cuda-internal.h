/* cuda-internal.h -- the private interface between the files of the CUDA
   backend: cuda-backend.c (the table of operations, start and shutdown)
   on top; cuda-nvtx.c (the annotated operations) beneath it;
   cuda-copy.c, cuda-launch.c, cuda-graph.c and cuda-memory.c beneath
   those;
   cuda-streams.c beneath those; cuda-devices.c at the bottom.  Calls
   run downward only.  The gm_cuda_* functions named after a gm_backend
   member do what that member says (gm.h).  Nothing outside the CUDA
   backend includes this.  */

#ifndef GM_CUDA_BACKEND_H
#define GM_CUDA_BACKEND_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include <cuda_runtime_api.h>

#include "gm.h"

struct gm_stream
{
  int device;
  cudaStream_t handle;
  bool owned;           /* made by stream_create, not wrapped */
  /* A non-blocking stream (cudaStreamNonBlocking), made so or wrapped:
     not ordered with the legacy default stream by CUDA, so joined to
     it by gm_cuda_join (cuda-streams.c), through these: the operations
     queued on it (gm_cuda_handle_of counts them), the count the last
     join covered, whether its handle went out to other code (then
     every join covers it), the join's event, and the next stream of
     the list of non-blocking streams.  */
  bool non_blocking;
  bool joined;          /* on the list (not GM_STREAM_UNJOINED) */
  atomic_ulong ops;
  unsigned long joined_ops;
  atomic_bool handle_out;
  cudaEvent_t join_event;
  struct gm_stream *next;
  /* While graph_begin's capture lasts: the nodes that end each call
     graph_order numbered (cuda-graph.c); else NULL.  */
  struct gm_cuda_capture *capture;
};

struct gm_event
{
  int device;
  cudaEvent_t handle;
};

/* cuda-devices.c */

/* Finds the devices: GM_OK, or GM_ERR_UNAVAILABLE saying why there are
   none (no driver, or one too old; no device).  First of all.  */
gm_status gm_cuda_devices_find (void);

/* Reads every device's properties, after gm_cuda_devices_find: GM_OK,
   or GM_ERR_UNAVAILABLE saying why not.  */
gm_status gm_cuda_devices_init (void);

/* Frees what gm_cuda_devices_init took.  */
void gm_cuda_devices_shutdown (void);

/* DEVICE's properties, read once by gm_cuda_devices_init.  */
const gm_device_props *gm_cuda_props (int device);

/* Whether DEVICE was made current once (its pool is set up).  */
bool gm_cuda_device_ready (int device);

gm_status gm_cuda_use_device (int device);
gm_status gm_cuda_map_peers (void);
int gm_cuda_device_count (void);
gm_status gm_cuda_device_props (int device, gm_device_props *props);
/* The driver's and runtime's versions (the table's versions): callable
   before the backend starts and where it cannot, 0 for what does not
   answer.  */
void gm_cuda_versions (int *driver, int *runtime);
gm_status gm_cuda_mem_info (int device, size_t *free_bytes, size_t *total);
gm_status gm_cuda_can_access_peer (int device, int peer, bool *can);

/* cuda-streams.c */

/* Takes the per-device counts and marks for COUNT devices: GM_OK, or
   GM_ERR_UNAVAILABLE (no host memory).  */
gm_status gm_cuda_streams_init (int count);

/* Destroys DEVICE's mark (DEVICE current, its work done).  */
void gm_cuda_streams_device_done (int device);

/* Frees what gm_cuda_streams_init took.  */
void gm_cuda_streams_shutdown (void);

/* How many non-blocking streams gpumem has, on all devices.  */
extern atomic_int gm_cuda_non_blocking_streams;

/* The join_streams member (gm-backend.h): makes the work queued from
   now on DEVICE's legacy default stream wait for the work gpumem
   queued so far on DEVICE's non-blocking streams; DEVICE is current on
   return when there are any.  */
gm_status gm_cuda_join_streams (int device);

/* The ordering rule's part for non-blocking streams (Ordering,
   cuda-backend.c): every operation of a NULL-STREAM call joins them to
   the legacy stream of each DEVICE it queues work on before it queues
   anything.  While gpumem has no non-blocking stream it costs one
   atomic load.  */
static inline gm_status
gm_cuda_join (int device, gm_stream *stream)
{
  if (stream != NULL || device < 0
      || atomic_load (&gm_cuda_non_blocking_streams) == 0)
    return GM_OK;
  return gm_cuda_join_streams (device);
}

cudaStream_t gm_cuda_handle_of (gm_stream *stream);
cudaStream_t gm_cuda_queue_on (int device, gm_stream *stream);
gm_status gm_cuda_wait (int device, gm_stream *stream, long timeout_us);
gm_status gm_cuda_device_synchronize (int device);
gm_status gm_cuda_stream_create (int device, unsigned flags,
                                 gm_stream **stream);
gm_status gm_cuda_stream_wrap (int device, void *handle, gm_stream **stream);
void gm_cuda_stream_destroy (gm_stream *stream);
gm_status gm_cuda_stream_query (gm_stream *stream, bool *done_flag);
void *gm_cuda_stream_handle (gm_stream *stream);
unsigned gm_cuda_stream_flags (gm_stream *stream);
gm_status gm_cuda_stream_wait_event (int device, gm_stream *stream,
                                     gm_event *event);
gm_status gm_cuda_event_create (int device, unsigned flags,
                                gm_event **event);
void gm_cuda_event_destroy (gm_event *event);
gm_status gm_cuda_event_record (gm_event *event, gm_stream *stream);
gm_status gm_cuda_event_query (gm_event *event, bool *done_flag);
gm_status gm_cuda_event_wait (gm_event *event, long timeout_us);
gm_status gm_cuda_event_elapsed_ms (gm_event *start, gm_event *end,
                                    float *ms);
gm_status gm_cuda_foreign_stream_sync (void *handle);
gm_status gm_cuda_foreign_stream_wait (int device, gm_stream *stream,
                                       void *handle);

/* cuda-pools.c */

/* Reads GPUMEM_DEVICE_POOL ("exportable", the default, or "default")
   and GPUMEM_SHARE_HANDLE ("posix", the default, or "fabric"), once, at
   start: GM_OK, or GM_ERR_VALUE naming the bad setting.  */
gm_status gm_cuda_pools_init (void);
/* Sets DEVICE's pools up at its first use (DEVICE current): both keep
   freed memory; the exportable one is made when arrays come from it (a
   device that cannot export keeps its arrays in the default pool).  */
gm_status gm_cuda_pool_setup (int device);
/* DEVICE's exportable pool when gpumem's allocations there come from
   it, else NULL: they come from the device's current pool
   (cudaMallocAsync), its default one unless another library set one.  */
cudaMemPool_t gm_cuda_pool (int device);
/* Whether gm_cuda_pool (DEVICE) is not NULL.  */
bool gm_cuda_pool_exports (int device);
/* DEVICE's exportable pool and its POSIX descriptor (the pool keeps
   it), made on first use (DEVICE current).  GM_ERR_UNAVAILABLE saying
   why where the device cannot export pools.  */
gm_status gm_cuda_export_pool (int device, cudaMemPool_t *pool, int *fd);
/* DEVICE's pools that hold gpumem's memory (the default one, and the
   exportable one once made) into POOLS; how many.  */
int gm_cuda_pools_of (int device, cudaMemPool_t pools[2]);
/* Whether DEVICE's exportable pool takes fabric handles too.  */
bool gm_cuda_pool_fabric (int device);

/* cuda-memory.c */

gm_status gm_cuda_malloc (int device, size_t nbytes, gm_stream *stream,
                          void **ptr);
gm_status gm_cuda_free (int device, void *ptr, size_t nbytes,
                        gm_stream *stream);
gm_status gm_cuda_reserved (int device, size_t *bytes);
gm_status gm_cuda_release_cached (int device, size_t *reserved_after);
gm_status gm_cuda_host_alloc (size_t nbytes, void **ptr);
void gm_cuda_host_free (void *ptr);
gm_status gm_cuda_pointer_device (const void *ptr, int *device);

/* cuda-copy.c */

/* Reads GPUMEM_SMALL_COPIES (a boolean; false sends small copies to the
   host straight to cudaMemcpy, for comparing the two paths): GM_OK, or
   GM_ERR_VALUE with the error set.  */
gm_status gm_cuda_copy_init (void);

gm_status gm_cuda_copy (void *dst, int dst_device, const void *src,
                        int src_device, size_t nbytes, gm_stream *stream);
gm_status gm_cuda_copy2d (void *dst, size_t dpitch, int dst_device,
                          const void *src, size_t spitch, int src_device,
                          size_t width, size_t height, gm_stream *stream);
gm_status gm_cuda_memset (void *dst, int device, int value, size_t nbytes,
                          gm_stream *stream);

/* cuda-launch.c */

gm_status gm_cuda_jit_load (const gm_kernel *kernel, int device);
gm_status gm_cuda_launch (const gm_kernel *kernel, const gm_arg *args,
                          const gm_launch_cfg *cfg, int device,
                          gm_stream *stream);
gm_status gm_cuda_reduce (void *dst, void *const *srcs, int n, size_t count,
                          gm_dtype dtype, gm_reduce_op op, int device,
                          gm_stream *stream);

/* cuda-nvtx.c: the operations of the same names without nvtx_,
   annotated with NVTX ranges (and, for memory, registrations) while the
   switch of nvtx.h is on; above the files they call.  */

/* Makes NVTX3 the tool behind nvtx.h's ranges.  */
void gm_cuda_nvtx_attach (void);

gm_status gm_cuda_nvtx_malloc (int device, size_t nbytes, gm_stream *stream,
                               void **ptr);
gm_status gm_cuda_nvtx_free (int device, void *ptr, size_t nbytes,
                             gm_stream *stream);
gm_status gm_cuda_nvtx_copy (void *dst, int dst_device, const void *src,
                             int src_device, size_t nbytes,
                             gm_stream *stream);
gm_status gm_cuda_nvtx_copy2d (void *dst, size_t dpitch, int dst_device,
                               const void *src, size_t spitch,
                               int src_device, size_t width, size_t height,
                               gm_stream *stream);
gm_status gm_cuda_nvtx_memset (void *dst, int device, int value,
                               size_t nbytes, gm_stream *stream);
gm_status gm_cuda_nvtx_launch (const gm_kernel *kernel, const gm_arg *args,
                               const gm_launch_cfg *cfg, int device,
                               gm_stream *stream);
gm_status gm_cuda_nvtx_wait (int device, gm_stream *stream, long timeout_us);
gm_status gm_cuda_nvtx_device_synchronize (int device);
/* cuda-share.c: shared events (cudaIpcGetEventHandle,
   cudaIpcOpenEventHandle).  */
gm_status gm_cuda_event_export (gm_event *event, void *word,
                                uint8_t data[64]);
gm_status gm_cuda_event_import (int device, const uint8_t data[64],
                                void *word, gm_event **event);

gm_status gm_cuda_nvtx_event_wait (gm_event *event, long timeout_us);
/* cuda-graph.c */
gm_status gm_cuda_graph_begin (gm_stream *stream);
gm_status gm_cuda_graph_end (gm_stream *stream, gm_graph **graph);
gm_status gm_cuda_graph_launch (gm_graph *graph, gm_stream *stream);
void gm_cuda_graph_destroy (gm_graph *graph);
gm_status gm_cuda_graph_order (gm_stream *stream, const size_t *after,
                               size_t nafter);

/* cuda-host-numa.c: page-locked memory of at least NBYTES on the NUMA
   node of the current device, where the machine has several, in *PTR;
   false (no error set) where it is not made, for cudaMallocHost.
   gm_cuda_numa_host_free frees such a block and returns true, or
   returns false for a block it did not make.  */
bool gm_cuda_numa_host_alloc (size_t nbytes, void **ptr);
bool gm_cuda_numa_host_free (void *ptr);

/* cuda-managed.c: the table's managed_* members, and beneath them
   what cuda-memory.c and cuda-backend.c ask of the managed pools.  */
gm_status gm_cuda_managed_malloc (int device, size_t nbytes,
                                  gm_stream *stream, void **ptr);
gm_status gm_cuda_managed_free (int device, void *ptr, size_t nbytes,
                                gm_stream *stream);
gm_status gm_cuda_managed_prefetch (int device, void *const *ptrs,
                                    const size_t *sizes, size_t n,
                                    int location, gm_stream *stream);
gm_status gm_cuda_managed_discard (int device, void *const *ptrs,
                                   const size_t *sizes, size_t n,
                                   gm_stream *stream);
gm_status gm_cuda_managed_advise (void *ptr, size_t nbytes, gm_advice advice,
                                  int location);
/* What DEVICE's pool of managed memory holds (0 without one).  */
gm_status gm_cuda_managed_reserved (int device, size_t *bytes);
/* Gives back what DEVICE's pool of managed memory keeps idle.  */
gm_status gm_cuda_managed_trim (int device);
/* Trims DEVICE's managed pool and destroys its side stream (DEVICE
   current, its work done), at shutdown.  */
void gm_cuda_managed_device_done (int device);

#endif /* GM_CUDA_BACKEND_H */
