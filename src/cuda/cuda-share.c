/* cuda-share.c -- the CUDA backend's sharing: shareable blocks come from a
   second, exportable stream-ordered pool per device (cudaMemPoolCreate
   with POSIX file descriptor handles), not from the default pool that
   gpumem's other arrays use, since the default pool's handle type
   cannot be changed.  The pool's descriptor goes to consumers through
   the share server (share-server.c); a block travels as
   cudaMemPoolExportPointer's data, with an interprocess event recorded
   at export that a consumer's default stream waits for when it opens.

   The rule from cudaMemPoolImportPointer: every importer frees an
   imported pointer before its exporter frees it.  The share server
   releases a block only after every lease has ended, and unmap frees
   with cudaFree, which completes before the lease's connection closes.
   Where the device cannot export pools (cudaDevAttrMemoryPoolSupported-
   HandleTypes lacks POSIX descriptors), allocation fails with
   GM_ERR_UNAVAILABLE saying so.  */

#define _POSIX_C_SOURCE 200809L
#include "config.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "cuda-internal.h"
#include "cuda-status.h"
#include "share.h"

#define CUDA_IPC_MAX_DEVICES 64
/* Pools imported from producers, kept for the next handle of the same
   producer: importing a pool costs far more than importing a pointer.  */
#define CUDA_IPC_POOL_CACHE 64

/* One block's record: the event its exports record.  */
typedef struct cuda_block
{
  cudaEvent_t event;
} cuda_block;

typedef struct imported_pool
{
  uint32_t pid;
  uint64_t server;
  int device;
  cudaMemPool_t pool;
} imported_pool;

static pthread_mutex_t pools_lock = PTHREAD_MUTEX_INITIALIZER;
static cudaMemPool_t export_pools[CUDA_IPC_MAX_DEVICES];
static int export_fds[CUDA_IPC_MAX_DEVICES];
static bool uuid_known[CUDA_IPC_MAX_DEVICES];
static uint8_t uuids[CUDA_IPC_MAX_DEVICES][16];
static imported_pool imported[CUDA_IPC_POOL_CACHE];
static size_t nimported;

/* DEVICE's exportable pool and its descriptor, made on first use; under
   pools_lock, DEVICE current.  */
static gm_status
export_pool (int device, cudaMemPool_t *pool, int *fd)
{
  gm_status status = GM_OK;
  struct cudaMemPoolProps props;
  cudaMemPool_t created = NULL;
  int types = 0, shared_fd = -1;

  if (device >= CUDA_IPC_MAX_DEVICES)
    return gm_error_set (GM_ERR_UNAVAILABLE, 0, NULL, "device %d: gpumem "
                         "shares memory of the first %d devices only",
                         device, CUDA_IPC_MAX_DEVICES);
  if (export_pools[device] != NULL)
    {
      *pool = export_pools[device];
      *fd = export_fds[device];
      return GM_OK;
    }
  GM_CUDA_CHECK (cudaDeviceGetAttribute (
      &types, cudaDevAttrMemoryPoolSupportedHandleTypes, device));
  if ((types & cudaMemHandleTypePosixFileDescriptor) == 0)
    return gm_error_set (GM_ERR_UNAVAILABLE, 0, NULL, "device %d cannot "
                         "share pool memory between processes (its driver "
                         "offers no POSIX descriptor handles for pools)",
                         device);
  memset (&props, 0, sizeof props);
  props.allocType = cudaMemAllocationTypePinned;
  props.handleTypes = cudaMemHandleTypePosixFileDescriptor;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = device;
  GM_CUDA_CHECK (cudaMemPoolCreate (&created, &props));
  GM_CUDA_CHECK (cudaMemPoolExportToShareableHandle (
      &shared_fd, created, cudaMemHandleTypePosixFileDescriptor, 0));
  export_pools[device] = *pool = created;
  export_fds[device] = *fd = shared_fd;
  created = NULL;
done:
  if (created != NULL)
    cudaMemPoolDestroy (created);
  return status;
}

static gm_status
cuda_ipc_alloc (int device, size_t nbytes, gm_stream *stream, void **ptr,
                int *fd, void **ctx)
{
  gm_status status = gm_cuda_use_device (device);
  cudaMemPool_t pool = NULL;
  cuda_block *block = NULL;
  int pool_fd = -1;

  *fd = -1;
  if (status != GM_OK)
    return status;
  pthread_mutex_lock (&pools_lock);
  status = export_pool (device, &pool, &pool_fd);
  pthread_mutex_unlock (&pools_lock);
  if (status != GM_OK)
    return status;
  block = calloc (1, sizeof *block);
  if (block == NULL)
    return gm_error_set (GM_ERR_HOST_NOMEM, 0, NULL,
                         "no memory for a shared block's record");
  GM_CUDA_CHECK (cudaEventCreateWithFlags (&block->event,
                                           cudaEventInterprocess
                                           | cudaEventDisableTiming));
  GM_CUDA_CHECK (cudaMallocFromPoolAsync (ptr, nbytes, pool,
                                          gm_cuda_queue_on (device, stream)));
  *fd = dup (pool_fd);
  if (*fd < 0)
    {
      cudaFreeAsync (*ptr, gm_cuda_queue_on (device, stream));
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
cuda_ipc_describe (int device, void *ctx, void *ptr, gm_stream *stream,
                   uint8_t opaque[GM_IPC_OPAQUE])
{
  cuda_block *block = ctx;
  struct cudaMemPoolPtrExportData data;
  cudaIpcEventHandle_t event_handle;
  gm_status status = gm_cuda_use_device (device);

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

/* Called by the share server once no importer maps the block.  */
static void
cuda_ipc_release (int device, void *ctx, void *ptr, size_t nbytes)
{
  cuda_block *block = ctx;
  (void) nbytes;

  if (!gm_cuda_lost () && gm_cuda_use_device (device) == GM_OK)
    {
      cudaError_t err = cudaFreeAsync (ptr, cudaStreamLegacy);
      if (err != cudaSuccess && err != cudaErrorCudartUnloading)
        gm_cuda_status (err, "cudaFreeAsync", __FILE__, __LINE__);
      err = cudaEventDestroy (block->event);
      if (err != cudaSuccess && err != cudaErrorCudartUnloading)
        gm_cuda_status (err, "cudaEventDestroy", __FILE__, __LINE__);
    }
  free (block);
}

/* The pool of HANDLE's producer on DEVICE, imported from FD (closed in
   every case) or found among those imported before.  */
static gm_status
producer_pool (int device, int fd, const gm_ipc_handle *handle,
               cudaMemPool_t *pool)
{
  gm_status status = GM_OK;

  pthread_mutex_lock (&pools_lock);
  for (size_t i = 0; i < nimported; i++)
    if (imported[i].pid == handle->pid && imported[i].server == handle->server
        && imported[i].device == device)
      {
        *pool = imported[i].pool;
        goto done;
      }
  GM_CUDA_CHECK (cudaMemPoolImportFromShareableHandle (
      pool, (void *) (uintptr_t) fd, cudaMemHandleTypePosixFileDescriptor,
      0));
  if (nimported == CUDA_IPC_POOL_CACHE)
    {
      /* The oldest entry's pool stays imported (its pointers may still be
         mapped); only the cache forgets it.  */
      memmove (imported, imported + 1,
               (CUDA_IPC_POOL_CACHE - 1) * sizeof imported[0]);
      nimported--;
    }
  imported[nimported].pid = handle->pid;
  imported[nimported].server = handle->server;
  imported[nimported].device = device;
  imported[nimported].pool = *pool;
  nimported++;
done:
  pthread_mutex_unlock (&pools_lock);
  close (fd);
  return status;
}

static gm_status
cuda_ipc_import (int device, int fd, const gm_ipc_handle *handle, void **ptr,
                 void **ctx)
{
  gm_status status = gm_cuda_use_device (device);
  struct cudaMemPoolPtrExportData data;
  cudaIpcEventHandle_t event_handle;
  cudaEvent_t event = NULL;
  cudaMemPool_t pool;

  *ptr = NULL;
  *ctx = NULL;
  if (status != GM_OK)
    {
      close (fd);
      return status;
    }
  status = producer_pool (device, fd, handle, &pool);
  if (status != GM_OK)
    return status;
  memcpy (&data, handle->opaque, sizeof data);
  memcpy (&event_handle, handle->opaque + 64, sizeof event_handle);
  GM_CUDA_CHECK (cudaMemPoolImportPointer (ptr, pool, &data));
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
  return status;
}

/* cudaFree, not cudaFreeAsync: the free must be complete before the
   lease ends and the producer frees (cudaMemPoolImportPointer's rule).  */
static void
cuda_ipc_unmap (int device, void *ctx, void *ptr, size_t nbytes)
{
  (void) ctx;
  (void) nbytes;
  if (!gm_cuda_lost () && gm_cuda_use_device (device) == GM_OK)
    {
      cudaError_t err = cudaFree (ptr);
      if (err != cudaSuccess && err != cudaErrorCudartUnloading)
        gm_cuda_status (err, "cudaFree", __FILE__, __LINE__);
    }
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
};
