/* cuda-managed.c -- the CUDA backend's managed memory: a stream-ordered
   pool of managed memory per device (cudaMemPoolCreate with
   cudaMemAllocationTypeManaged, the device its preferred location),
   made at the device's first managed allocation and keeping freed
   memory as the device pools do; where the driver refuses such a pool,
   or makes one that serves no block, cudaMallocManaged and cudaFree,
   decided once a device before its first block.  Prefetching, discarding and advice (cudaMemPrefetchAsync
   and its batch, cudaMemDiscardBatchAsync, cudaMemAdvise, all with
   CUDA 13's cudaMemLocation).

   The batch calls refuse the legacy default stream, on which gpumem's
   calls without a stream run.  Such a call goes on a stream of the
   device's own made for it (the side stream) between two events: the
   side stream waits for the legacy stream, which follows every blocking
   stream of gpumem, and the legacy stream waits for the side stream's
   batch, so that the ordering rule (cuda-backend.c) holds as for any
   call on the legacy stream.  */

#define _POSIX_C_SOURCE 200809L
#include "config.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "cuda-internal.h"
#include "cuda-status.h"

#define CUDA_MANAGED_DEVICES 1024

/* Under MANAGED_LOCK: whether a device's pool was tried, and what came
   of it; the side streams and their events.  */
static pthread_mutex_t managed_lock = PTHREAD_MUTEX_INITIALIZER;
static bool pool_tried[CUDA_MANAGED_DEVICES];
static _Atomic (cudaMemPool_t) pools[CUDA_MANAGED_DEVICES];
static cudaStream_t side_streams[CUDA_MANAGED_DEVICES];
static cudaEvent_t side_before[CUDA_MANAGED_DEVICES];
static cudaEvent_t side_after[CUDA_MANAGED_DEVICES];
/* Whether a device's pool has served a block: until then a pool whose
   allocations the driver refuses is dropped for cudaMallocManaged.  */
static _Atomic bool pool_served[CUDA_MANAGED_DEVICES];
/* cudaDevAttrConcurrentManagedAccess of each device: 0 unknown, 1 no,
   2 yes.  */
static _Atomic int concurrent_access[CUDA_MANAGED_DEVICES];

/* DEVICE's pool of managed memory, made at the first call (DEVICE
   current); NULL where the driver refused one, and managed memory
   comes from cudaMallocManaged.  */
static cudaMemPool_t
managed_pool (int device)
{
  cudaMemPool_t pool = atomic_load (&pools[device]);
  struct cudaMemPoolProps props;
  uint64_t keep_all = UINT64_MAX;

  if (pool != NULL || device >= CUDA_MANAGED_DEVICES)
    return pool;
  pthread_mutex_lock (&managed_lock);
  if (!pool_tried[device])
    {
      pool_tried[device] = true;
      memset (&props, 0, sizeof props);
      props.allocType = cudaMemAllocationTypeManaged;
      props.handleTypes = cudaMemHandleTypeNone;
      props.location.type = cudaMemLocationTypeDevice;
      props.location.id = device;
      if (cudaMemPoolCreate (&pool, &props) != cudaSuccess)
        {
          /* Not an error: the allocator of every driver serves.  */
          cudaGetLastError ();
          pool = NULL;
        }
      else if (cudaMemPoolSetAttribute (pool,
                                        cudaMemPoolAttrReleaseThreshold,
                                        &keep_all) != cudaSuccess)
        cudaGetLastError ();
      atomic_store (&pools[device], pool);
    }
  pool = atomic_load (&pools[device]);
  pthread_mutex_unlock (&managed_lock);
  return pool;
}

/* Whether DEVICE moves managed pages while the host may use them
   (concurrentManagedAccess): prefetches and discards mean something
   there only.  */
static bool
concurrent (int device)
{
  int known, value = 0;

  if (device < 0 || device >= CUDA_MANAGED_DEVICES)
    return false;
  known = atomic_load (&concurrent_access[device]);
  if (known != 0)
    return known == 2;
  if (cudaDeviceGetAttribute (&value, cudaDevAttrConcurrentManagedAccess,
                              device) != cudaSuccess)
    {
      cudaGetLastError ();
      value = 0;
    }
  atomic_store (&concurrent_access[device], value ? 2 : 1);
  return value != 0;
}

gm_status
gm_cuda_managed_malloc (int device, size_t nbytes, gm_stream *stream,
                        void **ptr)
{
  gm_status status = gm_cuda_use_device (device);
  /* Counted as work that may outlast the call (gm_cuda_queue_on): the
     host may touch the block (np.asarray) only once the stream reached
     the allocation, and the wait before that then waits for it.  */
  cudaStream_t handle = gm_cuda_queue_on (device, stream);
  cudaError_t err = cudaSuccess;
  cudaMemPool_t pool;

  if (status != GM_OK)
    return status;
  status = gm_cuda_join (device, stream);
  if (status != GM_OK)
    return status;
  pool = managed_pool (device);
  if (pool != NULL && atomic_load (&pool_served[device]))
    {
      GM_CUDA_CHECK (cudaMallocFromPoolAsync (ptr, nbytes, pool, handle));
      goto done;
    }
  if (pool != NULL)
    {
      /* Until the pool has served a block, one thread at a time asks
         it, and a pool the driver made but serves no block from is
         dropped for cudaMallocManaged before any block of it exists, so
         that every free finds its way.  */
      pthread_mutex_lock (&managed_lock);
      pool = atomic_load (&pools[device]);
      if (pool != NULL)
        {
          err = cudaMallocFromPoolAsync (ptr, nbytes, pool, handle);
          if (err == cudaSuccess)
            atomic_store (&pool_served[device], true);
          else if ((err == cudaErrorNotSupported
                    || err == cudaErrorInvalidValue)
                   && !atomic_load (&pool_served[device]))
            {
              cudaGetLastError ();
              cudaMemPoolDestroy (pool);
              atomic_store (&pools[device], NULL);
              pool = NULL;
              err = cudaSuccess;
            }
        }
      pthread_mutex_unlock (&managed_lock);
      GM_CUDA_CHECK (err);
      if (pool != NULL)
        goto done;
    }
  GM_CUDA_CHECK (cudaMallocManaged (ptr, nbytes, cudaMemAttachGlobal));
done:
  return status;
}

gm_status
gm_cuda_managed_free (int device, void *ptr, size_t nbytes, gm_stream *stream)
{
  gm_status status = GM_OK;
  cudaError_t err;
  (void) nbytes;

  if (gm_cuda_lost ())
    return GM_OK;
  status = gm_cuda_use_device (device);
  if (status != GM_OK)
    return status;
  /* A free on the default stream comes after the non-blocking streams'
     work so far, as gm_cuda_free's; cudaFree waits for the device's
     work, as a free on the default stream must.  */
  status = gm_cuda_join (device, stream);
  if (status != GM_OK)
    return status;
  err = managed_pool (device) != NULL
        ? cudaFreeAsync (ptr, gm_cuda_handle_of (stream)) : cudaFree (ptr);
  if (err == cudaErrorCudartUnloading)
    return GM_OK;
  GM_CUDA_CHECK (err);
done:
  return status;
}

gm_status
gm_cuda_managed_reserved (int device, size_t *bytes)
{
  gm_status status = GM_OK;
  cudaMemPool_t pool = device < CUDA_MANAGED_DEVICES
                       ? atomic_load (&pools[device]) : NULL;
  uint64_t value = 0;

  *bytes = 0;
  if (pool == NULL || gm_cuda_lost ())
    return GM_OK;
  GM_CUDA_CHECK (cudaMemPoolGetAttribute (
      pool, cudaMemPoolAttrReservedMemCurrent, &value));
  *bytes = (size_t) value;
done:
  return status;
}

gm_status
gm_cuda_managed_trim (int device)
{
  gm_status status = GM_OK;
  cudaMemPool_t pool = device < CUDA_MANAGED_DEVICES
                       ? atomic_load (&pools[device]) : NULL;

  if (pool != NULL && !gm_cuda_lost ())
    GM_CUDA_CHECK (cudaMemPoolTrimTo (pool, 0));
done:
  return status;
}

/* LOCATION (a device or GM_LOCATION_HOST) as CUDA's.  */
static struct cudaMemLocation
location_of (int location)
{
  struct cudaMemLocation where;

  memset (&where, 0, sizeof where);
  if (location == GM_LOCATION_HOST)
    where.type = cudaMemLocationTypeHost;
  else
    {
      where.type = cudaMemLocationTypeDevice;
      where.id = location;
    }
  return where;
}

/* Starts a call without a stream on DEVICE's side stream (made at the
   first one): takes MANAGED_LOCK, which side_end lets go, and makes the
   side stream wait for the legacy stream's work.  *SIDE is the stream
   to queue on.  On failure the lock is not held.  */
static gm_status
side_begin (int device, cudaStream_t *side)
{
  gm_status status = GM_OK;

  pthread_mutex_lock (&managed_lock);
  if (side_streams[device] == NULL)
    {
      GM_CUDA_CHECK (cudaStreamCreateWithFlags (&side_streams[device],
                                                cudaStreamNonBlocking));
      GM_CUDA_CHECK (cudaEventCreateWithFlags (&side_before[device],
                                               cudaEventDisableTiming));
      GM_CUDA_CHECK (cudaEventCreateWithFlags (&side_after[device],
                                               cudaEventDisableTiming));
    }
  GM_CUDA_CHECK (cudaEventRecord (side_before[device],
                                  gm_cuda_queue_on (device, NULL)));
  GM_CUDA_CHECK (cudaStreamWaitEvent (side_streams[device],
                                      side_before[device], 0));
  *side = side_streams[device];
done:
  if (status != GM_OK)
    pthread_mutex_unlock (&managed_lock);
  return status;
}

/* Ends what side_begin began: the legacy stream waits for the side
   stream's work (STATUS GM_OK), and MANAGED_LOCK is let go.  Returns
   STATUS, or the error of that wait.  */
static gm_status
side_end (int device, gm_status status)
{
  if (status != GM_OK)
    goto done;
  GM_CUDA_CHECK (cudaEventRecord (side_after[device], side_streams[device]));
  GM_CUDA_CHECK (cudaStreamWaitEvent (gm_cuda_queue_on (device, NULL),
                                      side_after[device], 0));
done:
  pthread_mutex_unlock (&managed_lock);
  return status;
}

/* Whether HANDLE is one of CUDA's default streams, which the batch calls
   refuse.  */
static bool
is_default_stream (cudaStream_t handle)
{
  return handle == 0 || handle == cudaStreamLegacy
         || handle == cudaStreamPerThread;
}

gm_status
gm_cuda_managed_prefetch (int device, void *const *ptrs, const size_t *sizes,
                          size_t n, int location, gm_stream *stream)
{
  gm_status status = gm_cuda_use_device (device);
  struct cudaMemLocation where = location_of (location);
  size_t first = 0;
  cudaStream_t handle;
  cudaError_t err;

  if (status != GM_OK || n == 0)
    return status;
  if (!concurrent (device)
      || (location != GM_LOCATION_HOST && !concurrent (location)))
    return GM_OK;
  if (n == 1)
    {
      GM_CUDA_CHECK (cudaMemPrefetchAsync (ptrs[0], sizes[0], where, 0,
                                           gm_cuda_queue_on (device,
                                                             stream)));
      goto done;
    }
  handle = stream != NULL ? gm_cuda_handle_of (stream) : NULL;
  if (handle != NULL && !is_default_stream (handle))
    {
      err = cudaMemPrefetchBatchAsync ((void **) ptrs, (size_t *) sizes, n,
                                       &where, &first, 1, 0, handle);
      if (err != cudaErrorNotSupported)
        {
          GM_CUDA_CHECK (err);
          goto done;
        }
      cudaGetLastError ();
    }
  else
    {
      cudaStream_t side;

      status = side_begin (device, &side);
      if (status != GM_OK)
        return status;
      err = cudaMemPrefetchBatchAsync ((void **) ptrs, (size_t *) sizes, n,
                                       &where, &first, 1, 0, side);
      if (err != cudaErrorNotSupported)
        {
          if (err != cudaSuccess)
            status = gm_cuda_status (err, "cudaMemPrefetchBatchAsync",
                                     __FILE__, __LINE__);
          return side_end (device, status);
        }
      cudaGetLastError ();
      status = side_end (device, GM_OK);
      if (status != GM_OK)
        return status;
    }
  /* A driver without the batch: one range at a time, in order.  */
  handle = gm_cuda_queue_on (device, stream);
  for (size_t i = 0; i < n; i++)
    GM_CUDA_CHECK (cudaMemPrefetchAsync (ptrs[i], sizes[i], where, 0,
                                         handle));
done:
  return status;
}

gm_status
gm_cuda_managed_discard (int device, void *const *ptrs, const size_t *sizes,
                         size_t n, gm_stream *stream)
{
  gm_status status = gm_cuda_use_device (device);
  cudaStream_t handle, side;
  cudaError_t err;

  if (status != GM_OK || n == 0 || !concurrent (device))
    return status;
  handle = stream != NULL ? gm_cuda_handle_of (stream) : NULL;
  if (handle != NULL && !is_default_stream (handle))
    {
      err = cudaMemDiscardBatchAsync ((void **) ptrs, (size_t *) sizes, n, 0,
                                      handle);
      if (err == cudaErrorNotSupported)
        cudaGetLastError ();
      else
        GM_CUDA_CHECK (err);
      goto done;
    }
  status = side_begin (device, &side);
  if (status != GM_OK)
    return status;
  err = cudaMemDiscardBatchAsync ((void **) ptrs, (size_t *) sizes, n, 0,
                                  side);
  if (err == cudaErrorNotSupported)
    cudaGetLastError ();
  else if (err != cudaSuccess)
    status = gm_cuda_status (err, "cudaMemDiscardBatchAsync", __FILE__,
                             __LINE__);
  return side_end (device, status);
done:
  return status;
}

gm_status
gm_cuda_managed_advise (void *ptr, size_t nbytes, gm_advice advice,
                        int location)
{
  static const enum cudaMemoryAdvise advices[] = {
    [GM_ADVISE_READ_MOSTLY] = cudaMemAdviseSetReadMostly,
    [GM_ADVISE_UNSET_READ_MOSTLY] = cudaMemAdviseUnsetReadMostly,
    [GM_ADVISE_PREFERRED_LOCATION] = cudaMemAdviseSetPreferredLocation,
    [GM_ADVISE_UNSET_PREFERRED_LOCATION]
      = cudaMemAdviseUnsetPreferredLocation,
    [GM_ADVISE_ACCESSED_BY] = cudaMemAdviseSetAccessedBy,
    [GM_ADVISE_UNSET_ACCESSED_BY] = cudaMemAdviseUnsetAccessedBy
  };
  gm_status status = GM_OK;

  GM_CUDA_CHECK_ALIVE ();
  if ((unsigned) advice >= sizeof advices / sizeof advices[0])
    return gm_error_set (GM_ERR_VALUE, 0, NULL, "advice %d does not exist",
                         (int) advice);
  {
    /* Advice is a hint: what the driver does not take for this memory
       or location here (accessed-by the host without HMM, seen on an
       H100 with CUDA 13.0) is ignored, as CUDA documents such hints.  */
    cudaError_t err = cudaMemAdvise (ptr, nbytes, advices[advice],
                                     location_of (location));
    if (err == cudaErrorNotSupported || err == cudaErrorInvalidDevice)
      (void) cudaGetLastError ();
    else if (err != cudaSuccess)
      status = gm_cuda_status (err, "cudaMemAdvise", __FILE__, __LINE__);
  }
  goto done;
done:
  return status;
}

void
gm_cuda_managed_device_done (int device)
{
  if (device >= CUDA_MANAGED_DEVICES)
    return;
  gm_cuda_managed_trim (device);
  pthread_mutex_lock (&managed_lock);
  if (side_streams[device] != NULL)
    {
      cudaStreamDestroy (side_streams[device]);
      cudaEventDestroy (side_before[device]);
      cudaEventDestroy (side_after[device]);
      side_streams[device] = NULL;
    }
  pthread_mutex_unlock (&managed_lock);
}
