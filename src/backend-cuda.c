/* backend-cuda.c -- the CUDA backend.

   Device memory comes from each device's stream-ordered pool
   (cudaMallocAsync on the device's default memory pool, which keeps
   freed memory cached), so repeated allocations cost microseconds.
   Every CUDA call goes through GM_CUDA_CHECK (cuda-status.h), which
   records the error and maps it to a gm_status; an error that loses the
   context (an illegal address in a kernel, say) is remembered, and every
   later call refuses with a message that says so.

   Ordering: the rule every call without a stream keeps.  A call with a
   NULL gm_stream (Python: no stream=) is complete when it returns and
   sees all work queued before it on any of gpumem's streams.  It rests
   on one property of CUDA: every stream gpumem makes is a blocking
   stream (cudaStreamCreate, never cudaStreamNonBlocking), and blocking
   streams are ordered both ways with their device's legacy default
   stream: work queued on the legacy stream waits for everything queued
   before it on every blocking stream of the device, and work queued
   afterwards on a blocking stream waits for the legacy stream's work.
   So, on every path:
   - the work of a NULL-stream call goes on the legacy default stream
     (cudaStreamLegacy, named so, so that a build with per-thread
     default streams cannot change it): copies (cudaMemcpyAsync there
     and a synchronize, or cudaMemcpy), memsets, kernels, allocations
     and frees, the small copies' bounce buffer and the ring of the
     staged pageable copies (cuda-staging.c).  It starts after every earlier
     write on any gpumem stream, and a copy into memory that a stream
     is still reading starts after that read;
   - a copy between two devices also makes the legacy stream it runs on
     wait for an event recorded on the other device's legacy stream
     (follow_device): a device's legacy stream orders only its own
     device's streams;
   - it returns only once its work is done (cudaStreamSynchronize, or
     the ring's events), so that whatever is queued after it, on any
     stream or by the host, sees the result.  cudaMemcpy returns early
     for copies into device memory (from pageable memory once the
     driver holds the bytes, between devices at once), so those are
     followed by a synchronize of the legacy stream.
   Streams other libraries make non-blocking are outside this rule;
   DLPack's stream handshake and the CUDA Array Interface's stream
   order those.  Collectives keep the rule too: MPI's (comm-mpi.c)
   synchronize the device first and stage through this backend with
   NULL streams; NCCL's (comm-nccl.c) run on a stream that first waits
   for an event recorded on the legacy stream, and are waited for when
   they have no stream.  The host
   backend runs all work synchronously in the calling thread, so the
   same contract holds there trivially.  */

#define _POSIX_C_SOURCE 200809L
#include "config.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>

#include "cuda-staging.h"
#include "cuda-status.h"
#include "dlpack-abi.h"
#include "gm.h"
#include "jit.h"
#include "pinned-ranges.h"

#define CUDA_MAX_DEVICES 1024

struct gm_stream
{
  int device;
  cudaStream_t handle;
  bool owned;           /* made by stream_create, not wrapped */
};

struct gm_event
{
  int device;
  cudaEvent_t handle;
};

static int device_count;
static gm_device_props *props_cache;
/* Per device: whether its pool is set up; per pair, whether the first
   can access the second's memory (map_peers).  */
static bool *device_ready;
static signed char *peer_state;   /* 0 not asked yet, 1 mapped, -1 none */

/* Per device: the event cuda_wait records on the legacy default stream
   to see when the work queued there, and in every stream it follows,
   is done.  Made on first use under marks_lock, since waits run without
   the GIL in any thread; destroyed at shutdown.  */
static cudaEvent_t *queue_marks;
static pthread_mutex_t marks_lock = PTHREAD_MUTEX_INITIALIZER;

/* Per device, so that a wait on the default stream pays for the event
   only when gpumem's streams may hold work: how many operations were
   queued on a gpumem stream (handle_of counts them), the count that the
   last completed mark covered, and whether a stream's handle went out
   to other code (which may queue work on it unseen: then every wait
   uses the mark).  */
static atomic_ulong *stream_ops;
static atomic_ulong *marked_ops;
static atomic_bool *handles_out;

/* Per device, so that a wait finds an idle device without asking CUDA:
   how many operations that may still run after their call returns were
   queued on the legacy default stream (legacy_ops: kernels and waits for
   events; the synchronous copies and memsets, complete on return, are
   not counted), and the count of all such operations, these and
   stream_ops, that the last wait to see the device idle covered
   (idle_ops).  While queued_ops () equals idle_ops and no stream handle
   went out, gpumem has nothing running on the device: cuda_wait returns
   at once.  */
static atomic_ulong *legacy_ops;
static atomic_ulong *idle_ops;

/* Whether small copies to the host take the bounce buffer:
   GPUMEM_SMALL_COPIES (a boolean, read by cuda_init; false sends them
   straight to cudaMemcpy, for comparing the two paths).  */
static bool small_copies = true;

/* Makes DEVICE current for this thread, setting its pool up on first
   use: the pool keeps freed memory (release threshold: no limit) so the
   next allocation of a like size is served without the driver.  */
static gm_status
use_device (int device)
{
  gm_status status = GM_OK;

  int current = -1;

  GM_CUDA_CHECK_ALIVE ();
  /* Asked every time: other libraries in the script (CuPy, PyTorch)
     change the current device too.  */
  GM_CUDA_CHECK (cudaGetDevice (&current));
  if (current != device)
    GM_CUDA_CHECK (cudaSetDevice (device));
  if (!device_ready[device])
    {
      cudaMemPool_t pool;
      uint64_t threshold = UINT64_MAX;
      GM_CUDA_CHECK (cudaDeviceGetDefaultMemPool (&pool, device));
      GM_CUDA_CHECK (cudaMemPoolSetAttribute (pool,
                                           cudaMemPoolAttrReleaseThreshold,
                                           &threshold));
      device_ready[device] = true;
    }
done:
  return status;
}

static gm_status
cuda_init (void)
{
  gm_status status = GM_OK;
  cudaError_t err = cudaGetDeviceCount (&device_count);

  if (err != cudaSuccess)
    {
      cudaGetLastError ();
      device_count = 0;
      if (err == cudaErrorInsufficientDriver)
        return gm_error_set (GM_ERR_UNAVAILABLE, err, cudaGetErrorName (err),
                             "no CUDA driver is installed, or it is older "
                             "than this program's CUDA runtime (%s)",
                             cudaGetErrorName (err));
      return gm_error_set (GM_ERR_UNAVAILABLE, err, cudaGetErrorName (err),
                           "%s", cudaGetErrorString (err));
    }
  if (device_count == 0)
    return gm_error_set (GM_ERR_UNAVAILABLE, cudaErrorNoDevice,
                         "cudaErrorNoDevice", "no CUDA-capable device");
  /* A bad setting is GM_ERR_VALUE, which gm_backend_init does not hide
     behind the host backend.  */
  if (gm_env_bool ("GPUMEM_SMALL_COPIES", true, &small_copies) != GM_OK
      || gm_staging_init () != GM_OK)
    return GM_ERR_VALUE;
  if (device_count > CUDA_MAX_DEVICES)
    device_count = CUDA_MAX_DEVICES;
  props_cache = calloc ((size_t) device_count, sizeof *props_cache);
  device_ready = calloc ((size_t) device_count, sizeof *device_ready);
  peer_state = calloc ((size_t) device_count * (size_t) device_count, 1);
  queue_marks = calloc ((size_t) device_count, sizeof *queue_marks);
  stream_ops = calloc ((size_t) device_count, sizeof *stream_ops);
  marked_ops = calloc ((size_t) device_count, sizeof *marked_ops);
  handles_out = calloc ((size_t) device_count, sizeof *handles_out);
  legacy_ops = calloc ((size_t) device_count, sizeof *legacy_ops);
  idle_ops = calloc ((size_t) device_count, sizeof *idle_ops);
  if (props_cache == NULL || device_ready == NULL || peer_state == NULL
      || queue_marks == NULL || stream_ops == NULL || marked_ops == NULL
      || handles_out == NULL || legacy_ops == NULL || idle_ops == NULL)
    return gm_error_set (GM_ERR_UNAVAILABLE, 0, NULL, "out of host memory");
  for (int d = 0; d < device_count; d++)
    {
      struct cudaDeviceProp p;
      gm_device_props *out = &props_cache[d];
      GM_CUDA_CHECK (cudaGetDeviceProperties (&p, d));
      snprintf (out->name, sizeof out->name, "%s", p.name);
      out->total_memory = p.totalGlobalMem;
      out->cc_major = p.major;
      out->cc_minor = p.minor;
      out->sm_count = p.multiProcessorCount;
      out->max_threads_per_block = p.maxThreadsPerBlock;
      for (int i = 0; i < 3; i++)
        {
          out->max_block[i] = p.maxThreadsDim[i];
          out->max_grid[i] = p.maxGridSize[i];
        }
    }
done:
  if (status != GM_OK)
    return gm_error_set (GM_ERR_UNAVAILABLE, gm_last_error ()->cuda_code,
                         gm_last_error ()->cuda_name, "%s",
                         gm_last_error ()->message);
  return status;
}

static int
cuda_device_count (void)
{
  return device_count;
}

static gm_status
cuda_device_props (int device, gm_device_props *props)
{
  *props = props_cache[device];
  return GM_OK;
}

static gm_status
cuda_mem_info (int device, size_t *free_bytes, size_t *total)
{
  gm_status status = use_device (device);

  if (status != GM_OK)
    return status;
  GM_CUDA_CHECK (cudaMemGetInfo (free_bytes, total));
done:
  return status;
}

/* The CUDA stream to queue work on for STREAM: the legacy default
   stream for NULL (see Ordering above).  Counts the work queued on
   gpumem's own streams, for cuda_wait.  */
static cudaStream_t
handle_of (gm_stream *stream)
{
  if (stream == NULL)
    return cudaStreamLegacy;
  atomic_fetch_add (&stream_ops[stream->device], 1);
  return stream->handle;
}

/* As handle_of, for work that may still run when its call returns
   (a kernel, a wait for an event): on the legacy default stream of
   DEVICE, it is counted too (legacy_ops).  */
static cudaStream_t
queue_on (int device, gm_stream *stream)
{
  if (stream != NULL)
    return handle_of (stream);
  atomic_fetch_add (&legacy_ops[device], 1);
  return cudaStreamLegacy;
}

/* The operations that may still run after their call returned, queued
   so far on DEVICE: on gpumem's streams and on the legacy stream.  */
static unsigned long
queued_ops (int device)
{
  return atomic_load (&stream_ops[device]) + atomic_load (&legacy_ops[device]);
}

/* Raises COUNTS[DEVICE] to OPS, the count a completed wait covered,
   unless a wait noted a later count meanwhile.  */
static void
note_covered (atomic_ulong *counts, int device, unsigned long ops)
{
  unsigned long seen = atomic_load (&counts[device]);

  while (seen < ops
         && !atomic_compare_exchange_weak (&counts[device], &seen, ops))
    continue;
}

static gm_status
cuda_malloc (int device, size_t nbytes, gm_stream *stream, void **ptr)
{
  gm_status status = use_device (device);

  if (status != GM_OK)
    return status;
  GM_CUDA_CHECK (cudaMallocAsync (ptr, nbytes, handle_of (stream)));
done:
  return status;
}

static gm_status
cuda_free (int device, void *ptr, gm_stream *stream)
{
  gm_status status = GM_OK;
  cudaError_t err;

  /* A lost context took its memory with it; freeing is moot, and
     deallocs must stay quiet about it, as they must while the runtime
     unloads at exit.  */
  if (gm_cuda_lost ())
    return GM_OK;
  status = use_device (device);
  if (status != GM_OK)
    return status;
  err = cudaFreeAsync (ptr, handle_of (stream));
  if (err == cudaErrorCudartUnloading)
    return GM_OK;
  GM_CUDA_CHECK (err);
done:
  return status;
}

static gm_status
cuda_reserved (int device, size_t *bytes)
{
  gm_status status = GM_OK;
  cudaMemPool_t pool;
  uint64_t value = 0;

  *bytes = 0;
  if (gm_cuda_lost () || !device_ready[device])
    return GM_OK;
  GM_CUDA_CHECK (cudaDeviceGetDefaultMemPool (&pool, device));
  GM_CUDA_CHECK (cudaMemPoolGetAttribute (pool, cudaMemPoolAttrReservedMemCurrent,
                                       &value));
  *bytes = (size_t) value;
done:
  return status;
}

static gm_status
cuda_release_cached (int device, size_t *reserved_after)
{
  gm_status status = use_device (device);
  cudaMemPool_t pool;

  if (status != GM_OK)
    return status;
  /* Frees queued on streams must land before the pool can give their
     memory back.  */
  GM_CUDA_CHECK (cudaDeviceSynchronize ());
  GM_CUDA_CHECK (cudaDeviceGetDefaultMemPool (&pool, device));
  GM_CUDA_CHECK (cudaMemPoolTrimTo (pool, 0));
  status = cuda_reserved (device, reserved_after);
done:
  return status;
}

/* Maps every pair of devices that can reach each other, both ways,
   once (the first time any caller needs a peer): each device's default
   pool gives the other read and write access (cudaMemPoolSetAccess: the
   pool's memory, which cudaDeviceEnablePeerAccess does not cover, now
   and later), and peer access is enabled for memory from elsewhere
   (cudaMalloc'd by another library).  Copies between such devices then
   go over their link instead of through host memory, and a kernel may
   read a peer's array.  peer_state[D * device_count + P] says whether D
   can access P's memory.  Leaves the calling thread's current device as
   it was.  A pair the driver refuses to map is left unmapped (not an
   error); GM_ERR_CUDA when a query fails or the context is lost.  */
static gm_status
map_peers (void)
{
  static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
  static atomic_bool mapped;
  gm_status status = GM_OK;
  int current = -1;

  if (atomic_load (&mapped))
    return GM_OK;
  pthread_mutex_lock (&lock);
  if (atomic_load (&mapped))
    goto unlock;
  GM_CUDA_CHECK_ALIVE ();
  GM_CUDA_CHECK (cudaGetDevice (&current));
  for (int d = 0; d < device_count; d++)
    for (int p = 0; p < device_count; p++)
      {
        int can = 0;
        if (p != d)
          GM_CUDA_CHECK (cudaDeviceCanAccessPeer (&can, d, p));
        peer_state[d * device_count + p] = can ? 1 : -1;
      }
  for (int owner = 0; owner < device_count; owner++)
    for (int user = 0; user < device_count; user++)
      {
        cudaMemPool_t pool;
        struct cudaMemAccessDesc desc;
        cudaError_t err;

        if (peer_state[user * device_count + owner] != 1)
          continue;
        status = use_device (owner);
        if (status != GM_OK)
          goto done;
        GM_CUDA_CHECK (cudaDeviceGetDefaultMemPool (&pool, owner));
        memset (&desc, 0, sizeof desc);
        desc.location.type = cudaMemLocationTypeDevice;
        desc.location.id = user;
        desc.flags = cudaMemAccessFlagsProtReadWrite;
        err = cudaMemPoolSetAccess (pool, &desc, 1);
        if (err == cudaSuccess)
          {
            status = use_device (user);
            if (status != GM_OK)
              goto done;
            err = cudaDeviceEnablePeerAccess (owner, 0);
            if (err == cudaErrorPeerAccessAlreadyEnabled)
              {
                cudaGetLastError ();
                err = cudaSuccess;
              }
          }
        /* A pair the driver will not map after all (a MIG instance, a
           hypervisor's policy) is left unmapped: its copies go through
           host memory, as before, and can_access_peer says False.  */
        if (err != cudaSuccess)
          {
            if (gm_cuda_is_sticky (err))
              GM_CUDA_CHECK (err);
            cudaGetLastError ();
            peer_state[user * device_count + owner] = -1;
          }
      }
  atomic_store (&mapped, true);
done:
  if (current >= 0 && cudaSetDevice (current) != cudaSuccess)
    cudaGetLastError ();
unlock:
  pthread_mutex_unlock (&lock);
  return status;
}

static gm_status
cuda_can_access_peer (int device, int peer, bool *can)
{
  gm_status status = GM_OK;

  *can = device == peer;
  if (device == peer)
    return GM_OK;
  status = map_peers ();
  if (status == GM_OK)
    *can = peer_state[device * device_count + peer] == 1;
  return status;
}

/* Makes the legacy default stream of DEVICE wait, without blocking
   the host, for the work queued so far on OTHER's legacy default stream,
   and so for all work on OTHER's blocking streams; DEVICE is current on
   return.  */
static gm_status
follow_device (int device, int other)
{
  gm_status status = use_device (other);
  cudaEvent_t event = NULL;

  if (status != GM_OK)
    return status;
  GM_CUDA_CHECK (cudaEventCreateWithFlags (&event, cudaEventDisableTiming));
  GM_CUDA_CHECK (cudaEventRecord (event, cudaStreamLegacy));
  status = use_device (device);
  if (status != GM_OK)
    goto done;
  GM_CUDA_CHECK (cudaStreamWaitEvent (cudaStreamLegacy, event, 0));
done:
  /* The wait already enqueued holds what it needs.  */
  if (event != NULL && cudaEventDestroy (event) != cudaSuccess)
    cudaGetLastError ();
  return status;
}

static gm_status
cuda_copy (void *dst, int dst_device, const void *src, int src_device,
           size_t nbytes, gm_stream *stream)
{
  gm_status status = GM_OK;
  int device = dst_device >= 0 ? dst_device : src_device;
  cudaStream_t handle = handle_of (stream);

  GM_CUDA_CHECK_ALIVE ();
  if (nbytes == 0)
    goto done;
  if (stream != NULL)
    device = stream->device;
  if (device >= 0)
    {
      status = use_device (device);
      if (status != GM_OK)
        goto done;
    }
  if (dst_device >= 0 && src_device >= 0 && dst_device != src_device)
    {
      /* Across devices: over the link where the two are mapped to
         each other, else the driver stages the copy through host
         memory.  */
      status = map_peers ();
      if (status != GM_OK)
        goto done;
      if (stream == NULL)
        status = follow_device (device, device == dst_device ? src_device
                                                             : dst_device);
      else
        status = use_device (device);
      if (status != GM_OK)
        goto done;
      GM_CUDA_CHECK (cudaMemcpyPeerAsync (dst, dst_device, src, src_device,
                                       nbytes, handle));
      if (stream == NULL)
        GM_CUDA_CHECK (cudaStreamSynchronize (handle));
      goto done;
    }
  if (stream != NULL)
    {
      GM_CUDA_CHECK (cudaMemcpyAsync (dst, src, nbytes, cudaMemcpyDefault,
                                   handle));
      goto done;
    }
  if ((dst_device < 0) != (src_device < 0)
      && gm_staging_pageable (dst_device < 0 ? dst : src))
    {
      /* Pageable host memory: small copies through the bounce buffer,
         large ones through the staging ring, the sizes between to
         cudaMemcpy, which from pageable memory returns before the
         bytes land in the device (see Ordering): a synchronize follows
         it.  The thresholds are measured (bench/NOTES.md, "The engine
         remade for mid sizes").  */
      bool to_device = dst_device >= 0;

      if (nbytes <= GM_SMALL_MAX && small_copies)
        status = gm_staging_small_copy (dst, src, nbytes, device,
                                        device_count, to_device);
      else if (gm_staging_wanted (nbytes))
        status = gm_staging_copy (dst, src, nbytes, device, device_count,
                                  to_device);
      else
        {
          GM_CUDA_CHECK (cudaMemcpy (dst, src, nbytes, cudaMemcpyDefault));
          if (to_device)
            GM_CUDA_CHECK (cudaStreamSynchronize (cudaStreamLegacy));
        }
      goto done;
    }
  if (dst_device < 0 && src_device < 0)
    {
      GM_CUDA_CHECK (cudaMemcpy (dst, src, nbytes, cudaMemcpyDefault));
      goto done;
    }
  /* Page-locked host memory, or a copy within one device: queued on the
     legacy stream and waited for, which costs less than cudaMemcpy (5.6
     us against 6.9 for 16 bytes from page-locked memory, and cudaMemcpy
     into device memory needs a synchronize after it too;
     bench/NOTES.md).  */
  GM_CUDA_CHECK (cudaMemcpyAsync (dst, src, nbytes, cudaMemcpyDefault,
                               cudaStreamLegacy));
  GM_CUDA_CHECK (cudaStreamSynchronize (cudaStreamLegacy));
done:
  return status;
}

static gm_status
cuda_memset (void *dst, int device, int value, size_t nbytes,
             gm_stream *stream)
{
  gm_status status = use_device (device);

  if (status != GM_OK || nbytes == 0)
    return status;
  GM_CUDA_CHECK (cudaMemsetAsync (dst, value, nbytes, handle_of (stream)));
  if (stream == NULL)
    GM_CUDA_CHECK (cudaStreamSynchronize (cudaStreamLegacy));
done:
  return status;
}

/* Launches JIT KERNEL (jit.c compiled it) with ARGS on STREAM of the
   current device: its code is loaded on first use, into every device
   (cudaLibraryLoadData), and found by its lowered name.  Without grid
   and block in CFG, blocks of 256 threads, and enough of them for one
   thread per element of the longest minimum length among the arrays.
   GM_ERR_CUDA when the code does not load (another architecture) or the
   launch fails.  */
static gm_status
launch_jit (const gm_kernel *kernel, const gm_arg *args,
            const gm_launch_cfg *cfg, int device, gm_stream *stream)
{
  gm_jit_code *code = kernel->jit;
  unsigned int grid[3], block[3];
  void *params[GM_MAX_KERNEL_PARAMS];
  gm_status status = GM_OK;
  uint64_t n = 0;

  if (code->function == NULL)
    {
      cudaLibrary_t library;
      cudaKernel_t function;
      GM_CUDA_CHECK (cudaLibraryLoadData (&library, code->image, NULL, NULL, 0,
                                       NULL, NULL, 0));
      if (cudaLibraryGetKernel (&function, library, code->entry)
          != cudaSuccess)
        {
          cudaGetLastError ();
          cudaLibraryUnload (library);
          return gm_error_set (GM_ERR_VALUE, 0, NULL, "jit: kernel '%s': the "
                               "compiled code has no kernel '%s'",
                               kernel->name, code->entry);
        }
      code->library = library;
      code->function = function;
    }
  for (int i = 0; i < kernel->nparams; i++)
    {
      int64_t need = 0;
      if (kernel->params[i].kind != GM_PARAM_SCALAR
          && gm_kernel_eval_length (kernel, kernel->params[i].length, args,
                                    &need) == GM_OK
          && need > 0 && (uint64_t) need > n)
        n = (uint64_t) need;
      params[i] = (void *) &args[i];
    }
  if (gm_launch_shape (cfg, n, 256, 0, grid, block) != 0)
    return gm_error_set (GM_ERR_VALUE, 0, NULL, "%s: %llu threads need more "
                         "than 2^31 - 1 blocks: give grid= and block=",
                         kernel->name, (unsigned long long) n);
  {
    dim3 grid_dim = {grid[0], grid[1], grid[2]};
    dim3 block_dim = {block[0], block[1], block[2]};
    GM_CUDA_CHECK (cudaLaunchKernel ((const void *) code->function, grid_dim,
                                  block_dim, params, 0,
                                  queue_on (device, stream)));
  }
done:
  return status;
}

static gm_status
cuda_copy2d (void *dst, size_t dpitch, int dst_device, const void *src,
             size_t spitch, int src_device, size_t width, size_t height,
             gm_stream *stream)
{
  gm_status status = GM_OK;
  int device = stream != NULL ? stream->device
               : dst_device >= 0 ? dst_device : src_device;

  GM_CUDA_CHECK_ALIVE ();
  if (width == 0 || height == 0)
    goto done;
  if (device >= 0)
    {
      status = use_device (device);
      if (status != GM_OK)
        goto done;
    }
  /* cudaMemcpy2D wants pitches of at least WIDTH; one row has none.  */
  if (height == 1)
    dpitch = spitch = width;
  if (stream == NULL)
    GM_CUDA_CHECK (cudaMemcpy2D (dst, dpitch, src, spitch, width, height,
                              cudaMemcpyDefault));
  else
    GM_CUDA_CHECK (cudaMemcpy2DAsync (dst, dpitch, src, spitch, width, height,
                                   cudaMemcpyDefault, stream->handle));
  /* Into device memory cudaMemcpy2D may return before the bytes land,
     as cudaMemcpy may (see Ordering).  */
  if (stream == NULL && dst_device >= 0)
    GM_CUDA_CHECK (cudaStreamSynchronize (cudaStreamLegacy));
done:
  return status;
}

static gm_status
cuda_launch (const gm_kernel *kernel, const gm_arg *args,
             const gm_launch_cfg *cfg, int device, gm_stream *stream)
{
  gm_status status = use_device (device);
  gm_launch_cfg full = *cfg;
  cudaError_t err;

  if (status != GM_OK)
    return status;
  full.sm_count = props_cache[device].sm_count;
  full.max_threads_per_block = props_cache[device].max_threads_per_block;
  if (kernel->jit != NULL)
    return launch_jit (kernel, args, &full, device, stream);
  if (kernel->launch_cuda == NULL)
    return gm_error_set (GM_ERR_UNAVAILABLE, 0, NULL, "kernel '%s' (%s) has "
                         "only a C reference, no CUDA launcher: the cuda "
                         "backend cannot run it (the host backend can)",
                         kernel->name,
                         kernel->origin ? kernel->origin : "built in");
  err = (cudaError_t) kernel->launch_cuda (args, &full,
                                           (void *) queue_on (device, stream));
  if (err != cudaSuccess)
    status = gm_cuda_status (err, kernel->name, __FILE__, __LINE__);
  return status;
}

static void
sleep_us (long us)
{
  struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
  nanosleep (&ts, NULL);
}

static double
now_us (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (double) ts.tv_sec * 1e6 + (double) ts.tv_nsec / 1e3;
}

/* Polls QUERY on HANDLE until it is no longer cudaErrorNotReady or
   TIMEOUT_US passes.  It spins for the first 20 ms of each call, as a
   spinning cudaStreamSynchronize does, so that a kernel's end is seen
   within a microsecond or two (sleeping earlier cost the 4 x 2^28
   workload 9%, bench/NOTES.md); after that it polls every 100 us, which
   costs nothing on waits that long.  Callers wait in calls of 50 ms,
   checking for Ctrl-C between them.  */
static gm_status
poll_until (cudaError_t (*query) (void *), void *handle, long timeout_us)
{
  gm_status status = GM_OK;
  double start = now_us (), elapsed;

  for (;;)
    {
      cudaError_t err = query (handle);
      if (err == cudaSuccess)
        goto done;
      if (err != cudaErrorNotReady)
        GM_CUDA_CHECK (err);
      elapsed = now_us () - start;
      if (elapsed >= (double) timeout_us)
        return GM_ERR_NOT_READY;
      if (elapsed >= 20000.0)
        sleep_us (100);
    }
done:
  return status;
}

static cudaError_t
query_stream (void *handle)
{
  return cudaStreamQuery ((cudaStream_t) handle);
}

static cudaError_t
query_event (void *handle)
{
  return cudaEventQuery ((cudaEvent_t) handle);
}

/* STREAM NULL: cudaStreamQuery of it says done while the legacy default
   stream's own queue is empty, even when streams it follows are busy,
   and a synchronous copy queued behind those would then block its
   caller with nothing to answer Ctrl-C.  Recording an event on it is an
   action in the legacy stream, which first waits for every blocking
   stream: the event completes once all the work queued on the device
   so far has.  Another thread's record of the same event only makes
   the wait cover more work.  While no gpumem stream got work since the
   last mark completed (and no stream handle went out), the plain query
   of the legacy stream says the same, a microsecond cheaper; and while
   nothing was queued since a wait saw the device idle (queued_ops ()),
   no query is needed at all.  (handle_of and queue_on count an operation
   just before it is queued, so another thread's operation may be
   counted as marked and queued after the mark: a later wait then
   misses it, and a copy queued behind it blocks until it is done, as
   before; the order of the work is CUDA's and stays right.)  */
static gm_status
cuda_wait (int device, gm_stream *stream, long timeout_us)
{
  gm_status status = GM_OK;
  cudaError_t err = cudaSuccess;
  cudaEvent_t mark;
  unsigned long ops, all_ops;

  GM_CUDA_CHECK_ALIVE ();
  if (stream != NULL)
    {
      status = use_device (stream->device);
      if (status != GM_OK)
        return status;
      return poll_until (query_stream, (void *) stream->handle, timeout_us);
    }
  /* Nothing of gpumem's can be running: no call to CUDA (the wait before
     every synchronous copy, after a kernel's own wait, costs nothing).
     Work that other libraries queued on the legacy stream is not seen
     here; a copy queued behind it still waits for it, on the stream.  */
  all_ops = queued_ops (device);
  if (all_ops == atomic_load (&idle_ops[device])
      && !atomic_load (&handles_out[device]))
    return GM_OK;
  status = use_device (device);
  if (status != GM_OK)
    return status;
  ops = atomic_load (&stream_ops[device]);
  if (ops == atomic_load (&marked_ops[device])
      && !atomic_load (&handles_out[device]))
    {
      status = poll_until (query_stream, (void *) cudaStreamLegacy,
                           timeout_us);
      if (status == GM_OK)
        note_covered (idle_ops, device, all_ops);
      return status;
    }
  pthread_mutex_lock (&marks_lock);
  if (queue_marks[device] == NULL)
    err = cudaEventCreateWithFlags (&queue_marks[device],
                                    cudaEventDisableTiming);
  if (err == cudaSuccess)
    err = cudaEventRecord (queue_marks[device], cudaStreamLegacy);
  mark = queue_marks[device];
  pthread_mutex_unlock (&marks_lock);
  GM_CUDA_CHECK (err);
  status = poll_until (query_event, (void *) mark, timeout_us);
  if (status == GM_OK)
    {
      /* The mark covered the OPS operations counted before it.  */
      note_covered (marked_ops, device, ops);
      note_covered (idle_ops, device, all_ops);
    }
done:
  return status;
}

static gm_status
cuda_device_synchronize (int device)
{
  gm_status status = use_device (device);
  unsigned long all_ops;

  if (status != GM_OK)
    return status;
  all_ops = queued_ops (device);
  GM_CUDA_CHECK (cudaDeviceSynchronize ());
  note_covered (idle_ops, device, all_ops);
done:
  return status;
}

static gm_status
cuda_stream_create (int device, gm_stream **stream)
{
  gm_status status = use_device (device);
  gm_stream *created = NULL;

  if (status != GM_OK)
    return status;
  created = malloc (sizeof *created);
  if (created == NULL)
    return gm_error_set (GM_ERR_HOST_NOMEM, 0, NULL, "no memory for a stream");
  created->device = device;
  created->owned = true;
  GM_CUDA_CHECK (cudaStreamCreate (&created->handle));
  *stream = created;
  created = NULL;
done:
  free (created);
  return status;
}

static gm_status
cuda_stream_wrap (int device, void *handle, gm_stream **stream)
{
  gm_status status = use_device (device);
  gm_stream *created = NULL;
  unsigned int flags;

  if (status != GM_OK)
    return status;
  /* Asking for the flags checks that the handle names a live stream.  */
  GM_CUDA_CHECK (cudaStreamGetFlags ((cudaStream_t) handle, &flags));
#if CUDART_VERSION >= 12080
  if ((uintptr_t) handle > 2)
    {
      int owner;
      GM_CUDA_CHECK (cudaStreamGetDevice ((cudaStream_t) handle, &owner));
      if (owner != device)
        {
          status = gm_error_set (GM_ERR_VALUE, 0, NULL, "stream %p belongs "
                                 "to device %d, not %d", handle, owner,
                                 device);
          goto done;
        }
    }
#endif
  created = malloc (sizeof *created);
  if (created == NULL)
    return gm_error_set (GM_ERR_HOST_NOMEM, 0, NULL, "no memory for a stream");
  created->device = device;
  created->handle = (cudaStream_t) handle;
  created->owned = false;
  *stream = created;
done:
  return status;
}

static void
cuda_stream_destroy (gm_stream *stream)
{
  if (stream->owned && !gm_cuda_lost ()
      && cudaStreamDestroy (stream->handle) != cudaSuccess)
    cudaGetLastError ();
  free (stream);
}

static gm_status
cuda_stream_query (gm_stream *stream, bool *done_flag)
{
  gm_status status = GM_OK;
  cudaError_t err;

  GM_CUDA_CHECK_ALIVE ();
  err = cudaStreamQuery (stream->handle);
  *done_flag = err == cudaSuccess;
  if (err != cudaErrorNotReady)
    GM_CUDA_CHECK (err);
done:
  return status;
}

static void *
cuda_stream_handle (gm_stream *stream)
{
  if (stream == NULL)
    return NULL;
  /* Others may queue work on it now, which stream_ops cannot count.  */
  atomic_store (&handles_out[stream->device], true);
  return (void *) stream->handle;
}

static gm_status
cuda_stream_wait_event (int device, gm_stream *stream, gm_event *event)
{
  gm_status status = use_device (stream != NULL ? stream->device : device);

  if (status != GM_OK)
    return status;
  GM_CUDA_CHECK (cudaStreamWaitEvent (queue_on (device, stream), event->handle,
                                   0));
done:
  return status;
}

static gm_status
cuda_event_create (int device, unsigned flags, gm_event **event)
{
  gm_status status = use_device (device);
  gm_event *created = NULL;

  if (status != GM_OK)
    return status;
  created = malloc (sizeof *created);
  if (created == NULL)
    return gm_error_set (GM_ERR_HOST_NOMEM, 0, NULL, "no memory for an event");
  created->device = device;
  GM_CUDA_CHECK (cudaEventCreateWithFlags (
    &created->handle,
    ((flags & GM_EVENT_TIMING) ? 0u : cudaEventDisableTiming)
      | ((flags & GM_EVENT_BLOCKING) ? cudaEventBlockingSync : 0u)));
  *event = created;
  created = NULL;
done:
  free (created);
  return status;
}

static void
cuda_event_destroy (gm_event *event)
{
  if (!gm_cuda_lost ()
      && cudaEventDestroy (event->handle) != cudaSuccess)
    cudaGetLastError ();
  free (event);
}

static gm_status
cuda_event_record (gm_event *event, gm_stream *stream)
{
  gm_status status = use_device (event->device);

  if (status != GM_OK)
    return status;
  GM_CUDA_CHECK (cudaEventRecord (event->handle, handle_of (stream)));
done:
  return status;
}

static gm_status
cuda_event_query (gm_event *event, bool *done_flag)
{
  gm_status status = GM_OK;
  cudaError_t err;

  GM_CUDA_CHECK_ALIVE ();
  err = cudaEventQuery (event->handle);
  *done_flag = err == cudaSuccess;
  if (err != cudaErrorNotReady)
    GM_CUDA_CHECK (err);
done:
  return status;
}

static gm_status
cuda_event_wait (gm_event *event, long timeout_us)
{
  gm_status status = GM_OK;

  GM_CUDA_CHECK_ALIVE ();
  return poll_until (query_event, (void *) event->handle, timeout_us);
done:
  return status;
}

static gm_status
cuda_event_elapsed_ms (gm_event *start, gm_event *end, float *ms)
{
  gm_status status = GM_OK;

  GM_CUDA_CHECK_ALIVE ();
  GM_CUDA_CHECK (cudaEventElapsedTime (ms, start->handle, end->handle));
done:
  return status;
}

static gm_status
cuda_host_alloc (size_t nbytes, void **ptr)
{
  gm_status status = GM_OK;
  size_t size = nbytes ? nbytes : 1;

  GM_CUDA_CHECK_ALIVE ();
  GM_CUDA_CHECK (cudaMallocHost (ptr, size));
  /* Not listed (out of memory): copies ask CUDA about it instead.  */
  gm_pinned_ranges_add (*ptr, size);
done:
  return status;
}

static void
cuda_host_free (void *ptr)
{
  cudaError_t err;

  gm_pinned_ranges_remove (ptr);
  if (gm_cuda_lost ())
    return;
  err = cudaFreeHost (ptr);
  if (err != cudaSuccess)
    cudaGetLastError ();
}

/* The cudaStream_t a foreign stream number HANDLE names: 1 and 2 are
   CUDA's legacy and per-thread default streams, as the CUDA Array
   Interface and DLPack number them; anything else is a cudaStream_t.  */
static cudaStream_t
foreign_stream (void *handle)
{
  uintptr_t value = (uintptr_t) handle;

  return value == 1 ? cudaStreamLegacy
         : value == 2 ? cudaStreamPerThread
         : (cudaStream_t) handle;
}

static gm_status
cuda_foreign_stream_sync (void *handle)
{
  gm_status status = GM_OK;
  cudaStream_t stream = foreign_stream (handle);

  GM_CUDA_CHECK_ALIVE ();
  GM_CUDA_CHECK (cudaStreamSynchronize (stream));
done:
  return status;
}

static gm_status
cuda_foreign_stream_wait (int device, gm_stream *stream, void *handle)
{
  gm_status status = use_device (stream ? stream->device : device);
  cudaStream_t waiter = foreign_stream (handle);
  cudaStream_t source = stream ? stream->handle : cudaStreamLegacy;
  cudaEvent_t event = NULL;

  if (status != GM_OK)
    return status;
  /* A stream is ordered after its own work already.  */
  if (waiter == source)
    return GM_OK;
  GM_CUDA_CHECK (cudaEventCreateWithFlags (&event, cudaEventDisableTiming));
  GM_CUDA_CHECK (cudaEventRecord (event, source));
  /* The legacy default stream now waits for SOURCE's work: see
     legacy_ops.  */
  if (waiter == cudaStreamLegacy)
    atomic_fetch_add (&legacy_ops[stream ? stream->device : device], 1);
  GM_CUDA_CHECK (cudaStreamWaitEvent (waiter, event, 0));
done:
  /* The wait already enqueued holds on to what it needs: the event can
     go at once.  */
  if (event != NULL && cudaEventDestroy (event) != cudaSuccess)
    cudaGetLastError ();
  return status;
}

static gm_status
cuda_pointer_device (const void *ptr, int *device)
{
  gm_status status = GM_OK;
  struct cudaPointerAttributes attr;

  GM_CUDA_CHECK_ALIVE ();
  *device = -1;
  GM_CUDA_CHECK (cudaPointerGetAttributes (&attr, ptr));
  if (attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged)
    *device = attr.device;
done:
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
     releases what it owns (staging buffers, the pool's cached memory) and
     leaves the context to the driver, which ends it with the process.  */
  gm_staging_shutdown (!gm_cuda_lost ());
  gm_pinned_ranges_clear ();
  if (gm_cuda_lost ())
    return;
  for (int d = 0; d < device_count; d++)
    if (device_ready[d] && cudaSetDevice (d) == cudaSuccess)
      {
        cudaMemPool_t pool;

        cudaDeviceSynchronize ();
        if (queue_marks[d] != NULL)
          cudaEventDestroy (queue_marks[d]);
        if (cudaDeviceGetDefaultMemPool (&pool, d) == cudaSuccess)
          cudaMemPoolTrimTo (pool, 0);
      }
  free (queue_marks);
  free (stream_ops);
  free (marked_ops);
  free (handles_out);
  free (legacy_ops);
  free (idle_ops);
  queue_marks = NULL;
  stream_ops = marked_ops = legacy_ops = idle_ops = NULL;
  handles_out = NULL;
  free (props_cache);
  free (device_ready);
  free (peer_state);
  props_cache = NULL;
  device_ready = NULL;
  peer_state = NULL;
}

const gm_backend gm_backend_cuda = {
  .name = "cuda",
  .device_memory = GM_MEMORY_CUDA,
  .dlpack_device_type = GM_DL_CUDA,
  .mpi_needs_staging = true,
  .launches_jit = true,
  .init = cuda_init,
  .device_count = cuda_device_count,
  .device_props = cuda_device_props,
  .mem_info = cuda_mem_info,
  .malloc = cuda_malloc,
  .free = cuda_free,
  .release_cached = cuda_release_cached,
  .reserved = cuda_reserved,
  .copy = cuda_copy,
  .copy2d = cuda_copy2d,
  .memset = cuda_memset,
  .launch = cuda_launch,
  .wait = cuda_wait,
  .device_synchronize = cuda_device_synchronize,
  .stream_create = cuda_stream_create,
  .stream_destroy = cuda_stream_destroy,
  .stream_wrap = cuda_stream_wrap,
  .stream_wait_event = cuda_stream_wait_event,
  .stream_query = cuda_stream_query,
  .stream_handle = cuda_stream_handle,
  .event_create = cuda_event_create,
  .event_destroy = cuda_event_destroy,
  .event_record = cuda_event_record,
  .event_query = cuda_event_query,
  .event_wait = cuda_event_wait,
  .event_elapsed_ms = cuda_event_elapsed_ms,
  .host_alloc = cuda_host_alloc,
  .host_free = cuda_host_free,
  .foreign_stream_sync = cuda_foreign_stream_sync,
  .foreign_stream_wait = cuda_foreign_stream_wait,
  .pointer_device = cuda_pointer_device,
  .can_access_peer = cuda_can_access_peer,
  .shutdown = cuda_shutdown,
};
