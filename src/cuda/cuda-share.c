/* cuda-share.c -- the CUDA backend's sharing: shareable blocks come from
   the device's exportable stream-ordered pool (cuda-pools.c), the pool
   every gpumem allocation comes from unless GPUMEM_DEVICE_POOL=default
   keeps arrays in the default pool, whose handle type cannot be
   changed; any block of the exportable pool is shared where it lies
   (adopt).  The pool's descriptor goes to consumers through
   the share server (share-server.c); a block travels as
   cudaMemPoolExportPointer's data, with an interprocess event recorded
   at export that a consumer's default stream waits for when it opens.

   The rule from cudaMemPoolImportPointer: every importer frees an
   imported pointer before its exporter frees it.  The share server
   releases a block only after every lease has ended, and unmap frees
   with cudaFree, which completes before the lease's connection closes.
   Where the device cannot export pools (cudaDevAttrMemoryPoolSupported-
   HandleTypes lacks POSIX descriptors), allocation fails with
   GM_ERR_UNAVAILABLE saying so.

   An imported pool is kept for the next handle of its producer, and
   destroyed once no block of it is mapped here and its producer has
   exited.  */

#define _POSIX_C_SOURCE 200809L
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "cuda-internal.h"
#include "cuda-status.h"
#include "share.h"

#define CUDA_IPC_MAX_DEVICES 64
/* Pools imported from producers are kept for the next handle of the
   same producer (importing a pool costs far more than importing a
   pointer); past this many, those with no block mapped are destroyed,
   oldest first.  */
#define CUDA_IPC_POOL_CACHE 64

/* One block's record: the event its exports record.  */
typedef struct cuda_block
{
  cudaEvent_t event;
} cuda_block;

/* One imported pool, in the list IMPORTED (newest first).  */
typedef struct imported_pool
{
  struct imported_pool *next;
  uint32_t pid;
  uint64_t server;
  int device;
  cudaMemPool_t pool;
  size_t blocks;             /* its pointers mapped here now */
} imported_pool;

static pthread_mutex_t pools_lock = PTHREAD_MUTEX_INITIALIZER;
static bool uuid_known[CUDA_IPC_MAX_DEVICES];
static uint8_t uuids[CUDA_IPC_MAX_DEVICES][16];
static imported_pool *imported;
static size_t nimported;

/* A block's record and a duplicate of its pool's descriptor POOL_FD for
   the share server: both made (in *CTX and *FD), or neither.  */
static gm_status
cuda_block_new (int pool_fd, int *fd, void **ctx)
{
  gm_status status = GM_OK;
  cuda_block *block = calloc (1, sizeof *block);

  if (block == NULL)
    return gm_error_set (GM_ERR_HOST_NOMEM, 0, NULL,
                         "no memory for a shared block's record");
  GM_CUDA_CHECK (cudaEventCreateWithFlags (&block->event,
                                           cudaEventInterprocess
                                           | cudaEventDisableTiming));
  *fd = dup (pool_fd);
  if (*fd < 0)
    {
      status = gm_error_set (GM_ERR_FAILED, 0, NULL, "cannot share memory: "
                             "no file descriptor left");
      goto done;
    }
  *ctx = block;
  block = NULL;
done:
  if (block != NULL)
    {
      if (block->event != NULL)
        cudaEventDestroy (block->event);
      free (block);
    }
  return status;
}

static gm_status
cuda_ipc_alloc (int device, size_t nbytes, gm_stream *stream, void **ptr,
                int *fd, void **ctx)
{
  gm_status status = gm_cuda_use_device (device);
  cudaMemPool_t pool = NULL;
  int pool_fd = -1;

  *fd = -1;
  if (status == GM_OK)
    status = gm_cuda_join (device, stream);
  if (status != GM_OK)
    return status;
  status = gm_cuda_export_pool (device, &pool, &pool_fd);
  if (status != GM_OK)
    return status;
  GM_CUDA_CHECK (cudaMallocFromPoolAsync (ptr, nbytes, pool,
                                          gm_cuda_queue_on (device, stream)));
  status = cuda_block_new (pool_fd, fd, ctx);
  if (status != GM_OK)
    cudaFreeAsync (*ptr, gm_cuda_queue_on (device, stream));
done:
  return status;
}

static gm_status
cuda_ipc_describe (int device, void *ctx, void *ptr, gm_stream *stream,
                   uint8_t opaque[GM_IPC_OPAQUE])
{
  cuda_block *block = ctx;
  struct cudaMemPoolPtrExportData data;
  cudaIpcEventHandle_t event_handle;
  gm_status status = gm_cuda_use_device (device);

  if (status == GM_OK)
    status = gm_cuda_join (device, stream);
  if (status != GM_OK)
    return status;
  _Static_assert (sizeof data + sizeof event_handle <= GM_IPC_OPAQUE,
                  "a handle has room for CUDA's export data");
  GM_CUDA_CHECK (cudaMemPoolExportPointer (&data, ptr));
  GM_CUDA_CHECK (cudaEventRecord (block->event,
                                  gm_cuda_queue_on (device, stream)));
  GM_CUDA_CHECK (cudaIpcGetEventHandle (&event_handle, block->event));
  memset (opaque, 0, GM_IPC_OPAQUE);
  memcpy (opaque, &data, sizeof data);
  memcpy (opaque + 64, &event_handle, sizeof event_handle);
done:
  return status;
}

/* A block of the exportable pool, from gpumem's allocator, made
   shareable where it lies: its record and the pool's descriptor.  */
static gm_status
cuda_ipc_adopt (int device, void *ptr, size_t nbytes, int *fd, void **ctx)
{
  gm_status status = gm_cuda_use_device (device);
  cudaMemPool_t pool = NULL;
  int pool_fd = -1;
  (void) ptr;
  (void) nbytes;

  *fd = -1;
  if (status != GM_OK)
    return status;
  if (!gm_cuda_pool_exports (device))
    return gm_error_set (GM_ERR_UNAVAILABLE, 0, NULL, "device %d's arrays "
                         "come from CUDA's default pool, which cannot "
                         "export", device);
  status = gm_cuda_export_pool (device, &pool, &pool_fd);
  if (status != GM_OK)
    return status;
  return cuda_block_new (pool_fd, fd, ctx);
}

static void
cuda_ipc_disown (int device, void *ctx)
{
  cuda_block *block = ctx;

  if (!gm_cuda_lost () && gm_cuda_use_device (device) == GM_OK)
    {
      cudaError_t err = cudaEventDestroy (block->event);
      if (err != cudaSuccess && err != cudaErrorCudartUnloading)
        gm_cuda_status (err, "cudaEventDestroy", __FILE__, __LINE__);
    }
  free (block);
}

/* Called by the share server once no importer maps the block.  */
static void
cuda_ipc_release (int device, void *ctx, void *ptr, size_t nbytes)
{
  (void) nbytes;

  if (!gm_cuda_lost () && gm_cuda_use_device (device) == GM_OK)
    {
      cudaError_t err;

      /* Work still queued on a non-blocking stream may read it: joined
         first, as before every free.  */
      if (gm_cuda_join (device, NULL) != GM_OK)
        cudaGetLastError ();
      err = cudaFreeAsync (ptr, cudaStreamLegacy);
      if (err != cudaSuccess && err != cudaErrorCudartUnloading)
        gm_cuda_status (err, "cudaFreeAsync", __FILE__, __LINE__);
    }
  cuda_ipc_disown (device, ctx);
}

/* Whether the process PID has exited.  A pid the kernel gave to another
   process since reads as alive: the pool is then kept, never destroyed
   under a mapping.  */
static bool
producer_gone (uint32_t pid)
{
  return kill ((pid_t) pid, 0) != 0 && errno == ESRCH;
}

/* Destroys the imported pools with no block mapped whose producer has
   exited, and, past CUDA_IPC_POOL_CACHE pools, the oldest with no block
   mapped; under pools_lock.  */
static void
sweep_pools (void)
{
  imported_pool **link = &imported;
  size_t kept = 0;

  while (*link != NULL)
    {
      imported_pool *entry = *link;
      if (entry->blocks == 0
          && (kept >= CUDA_IPC_POOL_CACHE || producer_gone (entry->pid)))
        {
          cudaError_t err = gm_cuda_lost () ? cudaSuccess
                            : cudaMemPoolDestroy (entry->pool);
          if (err != cudaSuccess && err != cudaErrorCudartUnloading)
            gm_cuda_status (err, "cudaMemPoolDestroy", __FILE__, __LINE__);
          *link = entry->next;
          nimported--;
          free (entry);
          continue;
        }
      kept++;
      link = &entry->next;
    }
}

/* The pool of HANDLE's producer on DEVICE, imported from FD (closed in
   every case) or found among those imported before, with one more block
   counted on it: *ENTRY.  */
static gm_status
producer_pool (int device, int fd, const gm_ipc_handle *handle,
               imported_pool **out)
{
  gm_status status = GM_OK;
  imported_pool *entry;
  cudaMemPool_t pool;

  pthread_mutex_lock (&pools_lock);
  for (entry = imported; entry != NULL; entry = entry->next)
    if (entry->pid == handle->pid && entry->server == handle->server
        && entry->device == device)
      goto done;
  sweep_pools ();
  entry = calloc (1, sizeof *entry);
  if (entry == NULL)
    {
      status = gm_error_set (GM_ERR_HOST_NOMEM, 0, NULL, "no memory for an "
                             "imported pool's record");
      goto done;
    }
  GM_CUDA_CHECK (cudaMemPoolImportFromShareableHandle (
      &pool, (void *) (uintptr_t) fd, cudaMemHandleTypePosixFileDescriptor,
      0));
  entry->pid = handle->pid;
  entry->server = handle->server;
  entry->device = device;
  entry->pool = pool;
  entry->next = imported;
  imported = entry;
  nimported++;
done:
  if (status == GM_OK)
    {
      entry->blocks++;
      *out = entry;
    }
  else if (entry != NULL && entry != imported)
    free (entry);
  pthread_mutex_unlock (&pools_lock);
  close (fd);
  return status;
}

/* One block of ENTRY fewer mapped; its pool goes when it was the last
   and the producer has exited.  */
static void
pool_block_done (imported_pool *entry)
{
  pthread_mutex_lock (&pools_lock);
  entry->blocks--;
  sweep_pools ();
  pthread_mutex_unlock (&pools_lock);
}

static size_t
cuda_ipc_imported_pools (void)
{
  size_t n;

  pthread_mutex_lock (&pools_lock);
  sweep_pools ();
  n = nimported;
  pthread_mutex_unlock (&pools_lock);
  return n;
}

static gm_status
cuda_ipc_import (int device, int fd, const gm_ipc_handle *handle, void **ptr,
                 void **ctx)
{
  gm_status status = gm_cuda_use_device (device);
  struct cudaMemPoolPtrExportData data;
  cudaIpcEventHandle_t event_handle;
  cudaEvent_t event = NULL;
  imported_pool *entry = NULL;

  *ptr = NULL;
  *ctx = NULL;
  if (status != GM_OK)
    {
      close (fd);
      return status;
    }
  status = producer_pool (device, fd, handle, &entry);
  if (status != GM_OK)
    return status;
  memcpy (&data, handle->opaque, sizeof data);
  memcpy (&event_handle, handle->opaque + 64, sizeof event_handle);
  GM_CUDA_CHECK (cudaMemPoolImportPointer (ptr, entry->pool, &data));
  /* The first use waits for the producer's work queued before the
     export: gpumem's streams all follow the legacy default stream.  */
  GM_CUDA_CHECK (cudaIpcOpenEventHandle (&event, event_handle));
  GM_CUDA_CHECK (cudaStreamWaitEvent (cudaStreamLegacy, event, 0));
done:
  if (event != NULL)
    cudaEventDestroy (event);
  if (status != GM_OK && *ptr != NULL)
    {
      cudaFree (*ptr);
      *ptr = NULL;
    }
  if (status != GM_OK)
    pool_block_done (entry);
  else
    *ctx = entry;
  return status;
}

/* cudaFree, not cudaFreeAsync: the free must be complete before the
   lease ends and the producer frees (cudaMemPoolImportPointer's rule).  */
static void
cuda_ipc_unmap (int device, void *ctx, void *ptr, size_t nbytes)
{
  (void) nbytes;
  if (!gm_cuda_lost () && gm_cuda_use_device (device) == GM_OK)
    {
      cudaError_t err = cudaFree (ptr);
      if (err != cudaSuccess && err != cudaErrorCudartUnloading)
        gm_cuda_status (err, "cudaFree", __FILE__, __LINE__);
    }
  pool_block_done (ctx);
}

static gm_status
cuda_ipc_device_uuid (int device, uint8_t uuid[16])
{
  gm_status status = GM_OK;
  struct cudaDeviceProp props;

  if (device >= CUDA_IPC_MAX_DEVICES)
    return gm_error_set (GM_ERR_UNAVAILABLE, 0, NULL, "device %d: gpumem "
                         "shares memory of the first %d devices only",
                         device, CUDA_IPC_MAX_DEVICES);
  pthread_mutex_lock (&pools_lock);
  if (!uuid_known[device])
    {
      GM_CUDA_CHECK (cudaGetDeviceProperties (&props, device));
      memcpy (uuids[device], props.uuid.bytes, 16);
      uuid_known[device] = true;
    }
  memcpy (uuid, uuids[device], 16);
done:
  pthread_mutex_unlock (&pools_lock);
  return status;
}

/* A shared event is CUDA's interprocess event (created with
   cudaEventInterprocess | cudaEventDisableTiming): its handle travels
   in DATA; WORD (the lease's block) is not used.  */
gm_status
gm_cuda_event_export (gm_event *event, void *word, uint8_t data[64])
{
  cudaIpcEventHandle_t event_handle;
  gm_status status = gm_cuda_use_device (event->device);
  (void) word;

  if (status != GM_OK)
    return status;
  _Static_assert (sizeof event_handle <= 64,
                  "a handle has room for CUDA's event handle");
  GM_CUDA_CHECK (cudaIpcGetEventHandle (&event_handle, event->handle));
  memset (data, 0, 64);
  memcpy (data, &event_handle, sizeof event_handle);
done:
  return status;
}

gm_status
gm_cuda_event_import (int device, const uint8_t data[64], void *word,
                      gm_event **event)
{
  cudaIpcEventHandle_t event_handle;
  gm_status status = gm_cuda_use_device (device);
  gm_event *opened = NULL;
  cudaError_t err;
  (void) word;

  if (status != GM_OK)
    return status;
  opened = calloc (1, sizeof *opened);
  if (opened == NULL)
    return gm_error_set (GM_ERR_HOST_NOMEM, 0, NULL, "no memory for an "
                         "event");
  opened->device = device;
  memcpy (&event_handle, data, sizeof event_handle);
  err = cudaIpcOpenEventHandle (&opened->handle, event_handle);
  if (err == cudaErrorDeviceUninitialized)
    {
      /* CUDA opens an event's handle only in another process than the
         one that made the event (seen on an H200, CUDA 13.0).  */
      (void) cudaGetLastError ();
      status = gm_error_set (GM_ERR_FAILED, 0, NULL, "CUDA opens an event "
                             "handle only in another process than the one "
                             "that shared the event (cudaIpcOpenEventHandle: "
                             "%s): use the Event itself in this process",
                             cudaGetErrorName (err));
      goto done;
    }
  GM_CUDA_CHECK (err);
  *event = opened;
  opened = NULL;
done:
  free (opened);
  return status;
}

const gm_ipc_ops gm_cuda_ipc_ops = {
  .kind = GM_IPC_KIND_CUDA,
  .alloc = cuda_ipc_alloc,
  .describe = cuda_ipc_describe,
  .release = cuda_ipc_release,
  .readonly_fd = NULL,
  .import = cuda_ipc_import,
  .unmap = cuda_ipc_unmap,
  .device_uuid = cuda_ipc_device_uuid,
  .adopt = cuda_ipc_adopt,
  .disown = cuda_ipc_disown,
  .imported_pools = cuda_ipc_imported_pools,
};
