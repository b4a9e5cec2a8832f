/* cuda-memory.c -- the CUDA backend's memory: device memory from each
   device's stream-ordered pool (the exportable pool of cuda-pools.c, or
   cudaMallocAsync's current pool; both keep freed memory cached, so
   repeated allocations cost microseconds), what the pools hold (the
   pool of managed memory too, cuda-managed.c), page-locked host memory
   (on the device's NUMA node where cuda-host-numa.c can), and which
   device an address belongs to.  */

#define _POSIX_C_SOURCE 200809L
#include "config.h"

#include <stdint.h>

#include <cuda_runtime_api.h>

#include "cuda-internal.h"
#include "cuda-status.h"
#include "pinned-ranges.h"

gm_status
gm_cuda_malloc (int device, size_t nbytes, gm_stream *stream, void **ptr)
{
  gm_status status = gm_cuda_use_device (device);
  cudaMemPool_t pool;

  if (status != GM_OK)
    return status;
  status = gm_cuda_join (device, stream);
  if (status != GM_OK)
    return status;
  pool = gm_cuda_pool (device);
  if (pool != NULL)
    GM_CUDA_CHECK (cudaMallocFromPoolAsync (ptr, nbytes, pool,
                                            gm_cuda_handle_of (stream)));
  else
    GM_CUDA_CHECK (cudaMallocAsync (ptr, nbytes, gm_cuda_handle_of (stream)));
done:
  return status;
}

gm_status
gm_cuda_free (int device, void *ptr, size_t nbytes, gm_stream *stream)
{
  gm_status status = GM_OK;
  cudaError_t err;
  (void) nbytes;

  /* A lost context took its memory with it; freeing is moot, and
     deallocs must stay quiet about it, as they must while the runtime
     unloads at exit.  */
  if (gm_cuda_lost ())
    return GM_OK;
  status = gm_cuda_use_device (device);
  if (status != GM_OK)
    return status;
  status = gm_cuda_join (device, stream);
  if (status != GM_OK)
    return status;
  err = cudaFreeAsync (ptr, gm_cuda_handle_of (stream));
  if (err == cudaErrorCudartUnloading)
    return GM_OK;
  GM_CUDA_CHECK (err);
done:
  return status;
}

gm_status
gm_cuda_reserved (int device, size_t *bytes)
{
  gm_status status = GM_OK;
  cudaMemPool_t pools[2];
  size_t managed = 0;
  int npools;

  *bytes = 0;
  if (gm_cuda_lost () || !gm_cuda_device_ready (device))
    return GM_OK;
  npools = gm_cuda_pools_of (device, pools);
  for (int i = 0; i < npools; i++)
    {
      uint64_t value = 0;
      GM_CUDA_CHECK (cudaMemPoolGetAttribute (
          pools[i], cudaMemPoolAttrReservedMemCurrent, &value));
      *bytes += (size_t) value;
    }
  status = gm_cuda_managed_reserved (device, &managed);
  *bytes += managed;
done:
  return status;
}

gm_status
gm_cuda_release_cached (int device, size_t *reserved_after)
{
  gm_status status = gm_cuda_use_device (device);
  cudaMemPool_t pools[2];
  int npools;

  if (status != GM_OK)
    return status;
  /* Frees queued on streams must land before the pool can give their
     memory back.  */
  GM_CUDA_CHECK (cudaDeviceSynchronize ());
  npools = gm_cuda_pools_of (device, pools);
  for (int i = 0; i < npools; i++)
    GM_CUDA_CHECK (cudaMemPoolTrimTo (pools[i], 0));
  status = gm_cuda_managed_trim (device);
  if (status == GM_OK)
    status = gm_cuda_reserved (device, reserved_after);
done:
  return status;
}

gm_status
gm_cuda_host_alloc (size_t nbytes, void **ptr)
{
  gm_status status = GM_OK;
  size_t size = nbytes ? nbytes : 1;

  GM_CUDA_CHECK_ALIVE ();
  /* On the current device's NUMA node where the machine has several.  */
  if (!gm_cuda_numa_host_alloc (size, ptr))
    GM_CUDA_CHECK (cudaMallocHost (ptr, size));
  /* Not listed (out of memory): copies ask CUDA about it instead.  */
  gm_pinned_ranges_add (*ptr, size);
done:
  return status;
}

void
gm_cuda_host_free (void *ptr)
{
  cudaError_t err;

  gm_pinned_ranges_remove (ptr);
  if (gm_cuda_numa_host_free (ptr) || gm_cuda_lost ())
    return;
  err = cudaFreeHost (ptr);
  if (err != cudaSuccess)
    cudaGetLastError ();
}

gm_status
gm_cuda_pointer_device (const void *ptr, int *device)
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
