/* cuda-backend.c -- the CUDA backend: its table of operations, starting
   it and shutting it down.  The operations live beneath it, one concern
   a file: cuda-devices.c (devices, peers), cuda-streams.c (streams,
   events, waits), cuda-memory.c (device and page-locked memory),
   cuda-copy.c (copies; cuda-staging.c for pageable memory) and
   cuda-launch.c (kernels; cuda-reduce.cu for reduce); cuda-internal.h
   is their private interface.
   The table's copies, memsets, launches, waits, allocations and frees go
   through cuda-nvtx.c, which annotates them for NVTX when asked (nvtx.h)
   and otherwise calls straight through.

   Every CUDA call goes through GM_CUDA_CHECK (cuda-status.h), which
   records the error and maps it to a gm_status; an error that loses the
   context (an illegal address in a kernel, say) is remembered, and every
   later call refuses with a message that says so.

   Ordering: the rule every call without a stream keeps.  A call with a
   NULL gm_stream (Python: no stream=) is complete when it returns and
   sees all work queued before it on any of gpumem's streams.  It rests
   on one property of CUDA: every stream gpumem makes is a blocking
   stream unless asked for a non-blocking one (below), and blocking
   streams are ordered both ways with their device's legacy default
   stream: work queued on the legacy stream waits for everything queued
   before it on every blocking stream of the device, and work queued
   afterwards on a blocking stream waits for the legacy stream's work.
   So, on every path:
   - the work of a NULL-stream call goes on the legacy default stream
     (cudaStreamLegacy, named so, so that a build with per-thread
     default streams cannot change it): copies (cudaMemcpyAsync there
     and a synchronize, or cudaMemcpy), memsets, kernels, a graph's
     replay, allocations and frees, the small copies' bounce buffer and
     the ring of the staged pageable copies (cuda-staging.c).  It
     starts after every earlier write on any gpumem stream, and a copy
     into memory that a stream is still reading starts after that read;
   - a copy between two devices also makes the legacy stream it runs on
     wait for an event recorded on the other device's legacy stream
     (follow_device, cuda-copy.c): a device's legacy stream orders only
     its own device's streams;
   - it returns only once its work is done (cudaStreamSynchronize, or
     the ring's events; for a kernel or a graph's replay, the caller's
     wait (device, NULL), which for a replay comes after it queued on
     every device the graph uses, so that the devices run at the same
     time), so that whatever is queued after it, on any stream or by
     the host, sees the result.  cudaMemcpy returns early for copies
     into device memory (from pageable memory once the driver holds the
     bytes, between devices at once), so those are followed by a
     synchronize of the legacy stream.
   Non-blocking streams (Stream(non_blocking=True), or a wrapped
   handle CUDA made non-blocking) are not ordered with the legacy
   stream by CUDA, so gpumem orders them one way, the way the rule
   needs: every operation of a NULL-stream call first makes the legacy
   stream of each device it queues on wait for an event recorded on
   each non-blocking stream of that device that got work since its
   last join (gm_cuda_join, cuda-streams.c; one atomic load while
   there is no such stream); the other way, work queued on them after
   the call, holds as for every stream, since the call is complete
   when it returns.  A non-blocking stream destroyed with work not yet
   joined is joined as it goes.  Other libraries' work on non-blocking
   streams is outside this rule (but for a stream whose handle went
   out through gpumem, joined at every join); DLPack's stream
   handshake and the CUDA Array Interface's stream order those.  Collectives keep the rule too: MPI's (comm-mpi.c)
   synchronize the device first and stage through this backend with
   NULL streams; NCCL's (comm-nccl.c) run on a stream that first waits
   for an event recorded on the legacy stream, and are waited for when
   they have no stream.  The host
   backend runs all work synchronously in the calling thread, so the
   same contract holds there trivially.  */

#define _POSIX_C_SOURCE 200809L
#include "config.h"

#include <cuda_runtime_api.h>

#include "cuda-internal.h"
#include "cuda-staging.h"
#include "cuda-status.h"
#include "share.h"
#include "dlpack-abi.h"
#include "managed-cache.h"
#include "pinned-pool.h"
#include "spill.h"
#include "pinned-ranges.h"

static gm_status
cuda_init (void)
{
  gm_status status = gm_cuda_devices_find ();

  if (status != GM_OK)
    return status;
  /* A bad setting is GM_ERR_VALUE, which gm_backend_init does not hide
     behind the host backend.  */
  if (gm_cuda_copy_init () != GM_OK || gm_staging_init () != GM_OK
      || gm_cuda_pools_init () != GM_OK)
    return GM_ERR_VALUE;
  status = gm_cuda_streams_init (gm_cuda_device_count ());
  if (status == GM_OK)
    status = gm_cuda_devices_init ();
  /* Only a backend that started annotates: after a failure the process
     may go on with the host backend, whose work NVTX must not see.
     Nothing above pushes a range.  */
  if (status == GM_OK)
    gm_cuda_nvtx_attach ();
  return status;
}

static void
cuda_shutdown (void)
{
  /* The primary context of each device is shared with every other
     library in the process (CuPy, PyTorch, JAX, Numba), and some of them
     keep threads that use it until their own static destructors run,
     after main returns: XLA's stream monitor polls cuStreamIsCapturing on
     its streams.  cudaDeviceReset here destroyed those streams under that
     thread and crashed the process at exit (docs/RELIABILITY.md, "Crash at
     exit").  So gpumem never resets a device: it waits for its work,
     releases what it owns (staging buffers, the kernels' scratch, the
     pool's cached memory) and leaves the context to the driver, which ends it with the process.  */
  gm_spill_release_streams ();
  gm_pinned_release_cached ();
  gm_managed_cache_release (-1);
  gm_staging_shutdown (!gm_cuda_lost ());
  gm_pinned_ranges_clear ();
  if (gm_cuda_lost ())
    return;
  for (int d = 0; d < gm_cuda_device_count (); d++)
    if (gm_cuda_device_ready (d) && cudaSetDevice (d) == cudaSuccess)
      {
        cudaMemPool_t pools[2];
        int npools;

        cudaDeviceSynchronize ();
        gm_kernels_release (d);
        gm_cuda_streams_device_done (d);
        gm_cuda_managed_device_done (d);
        npools = gm_cuda_pools_of (d, pools);
        for (int i = 0; i < npools; i++)
          cudaMemPoolTrimTo (pools[i], 0);
      }
  gm_cuda_streams_shutdown ();
  gm_cuda_devices_shutdown ();
}

const gm_backend gm_backend_cuda = {
  .name = "cuda",
  .device_memory = GM_MEMORY_CUDA,
  .dlpack_device_type = GM_DL_CUDA,
  .mpi_needs_staging = true,
  .launches_jit = true,
  .init = cuda_init,
  .device_count = gm_cuda_device_count,
  .device_props = gm_cuda_device_props,
  .mem_info = gm_cuda_mem_info,
  .malloc = gm_cuda_nvtx_malloc,
  .free = gm_cuda_nvtx_free,
  .release_cached = gm_cuda_release_cached,
  .reserved = gm_cuda_reserved,
  .copy = gm_cuda_nvtx_copy,
  .copy2d = gm_cuda_nvtx_copy2d,
  .memset = gm_cuda_nvtx_memset,
  .launch = gm_cuda_nvtx_launch,
  .jit_load = gm_cuda_jit_load,
  .reduce = gm_cuda_reduce,
  .wait = gm_cuda_nvtx_wait,
  .device_synchronize = gm_cuda_nvtx_device_synchronize,
  .stream_create = gm_cuda_stream_create,
  .stream_destroy = gm_cuda_stream_destroy,
  .stream_wrap = gm_cuda_stream_wrap,
  .stream_wait_event = gm_cuda_stream_wait_event,
  .stream_query = gm_cuda_stream_query,
  .stream_handle = gm_cuda_stream_handle,
  .stream_flags = gm_cuda_stream_flags,
  .join_streams = gm_cuda_join_streams,
  .event_create = gm_cuda_event_create,
  .event_destroy = gm_cuda_event_destroy,
  .event_record = gm_cuda_event_record,
  .event_query = gm_cuda_event_query,
  .event_wait = gm_cuda_nvtx_event_wait,
  .event_elapsed_ms = gm_cuda_event_elapsed_ms,
  .event_export = gm_cuda_event_export,
  .event_import = gm_cuda_event_import,
  .host_alloc = gm_cuda_host_alloc,
  .host_free = gm_cuda_host_free,
  .foreign_stream_sync = gm_cuda_foreign_stream_sync,
  .foreign_stream_wait = gm_cuda_foreign_stream_wait,
  .pointer_device = gm_cuda_pointer_device,
  .graph_begin = gm_cuda_graph_begin,
  .graph_end = gm_cuda_graph_end,
  .graph_launch = gm_cuda_graph_launch,
  .graph_destroy = gm_cuda_graph_destroy,
  .graph_order = gm_cuda_graph_order,
  .ipc = &gm_cuda_ipc_ops,
  .can_access_peer = gm_cuda_can_access_peer,
  .shutdown = cuda_shutdown,
  .versions = gm_cuda_versions,
  .managed_dlpack_device_type = GM_DL_CUDA_MANAGED,
  .managed_malloc = gm_cuda_managed_malloc,
  .managed_free = gm_cuda_managed_free,
  .managed_prefetch = gm_cuda_managed_prefetch,
  .managed_discard = gm_cuda_managed_discard,
  .managed_advise = gm_cuda_managed_advise,
};
