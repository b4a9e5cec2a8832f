/* cuda-devices.c -- the CUDA backend's devices: finding them and their
   properties, making one current (and its memory pool ready), their
   free memory, and mapping pairs of them to each other (peer access).  */

#define _POSIX_C_SOURCE 200809L
#include "config.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "cuda-internal.h"
#include "cuda-status.h"

#define CUDA_MAX_DEVICES 1024

static int device_count;
static gm_device_props *props_cache;
/* Per device: whether its pool is set up; per pair, whether the first
   can access the second's memory (gm_cuda_map_peers).  */
static bool *device_ready;
static signed char *peer_state;   /* 0 not asked yet, 1 mapped, -1 none */

/* Makes DEVICE current for this thread, setting its pools up on first
   use (cuda-pools.c).  */
gm_status
gm_cuda_use_device (int device)
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
      status = gm_cuda_pool_setup (device);
      if (status != GM_OK)
        goto done;
      device_ready[device] = true;
    }
done:
  return status;
}

int
gm_cuda_device_count (void)
{
  return device_count;
}

gm_status
gm_cuda_device_props (int device, gm_device_props *props)
{
  *props = props_cache[device];
  return GM_OK;
}

void
gm_cuda_versions (int *driver, int *runtime)
{
  *driver = 0;
  *runtime = 0;
  if (cudaDriverGetVersion (driver) != cudaSuccess)
    {
      cudaGetLastError ();
      *driver = 0;
    }
  if (cudaRuntimeGetVersion (runtime) != cudaSuccess)
    {
      cudaGetLastError ();
      *runtime = 0;
    }
}

gm_status
gm_cuda_mem_info (int device, size_t *free_bytes, size_t *total)
{
  gm_status status = gm_cuda_use_device (device);

  if (status != GM_OK)
    return status;
  GM_CUDA_CHECK (cudaMemGetInfo (free_bytes, total));
done:
  return status;
}

/* Maps every pair of devices that can reach each other, both ways,
   once (the first time any caller needs a peer): each device's pools
   (cuda-pools.c) give the other read and write access (cudaMemPoolSetAccess: the
   pool's memory, which cudaDeviceEnablePeerAccess does not cover, now
   and later), and peer access is enabled for memory from elsewhere
   (cudaMalloc'd by another library).  Copies between such devices then
   go over their link instead of through host memory, and a kernel may
   read a peer's array.  peer_state[D * device_count + P] says whether D
   can access P's memory.  Leaves the calling thread's current device as
   it was.  A pair the driver refuses to map is left unmapped (not an
   error); GM_ERR_CUDA when a query fails or the context is lost.  */
gm_status
gm_cuda_map_peers (void)
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
        cudaMemPool_t pools[2];
        struct cudaMemAccessDesc desc;
        cudaError_t err = cudaSuccess;
        int npools;

        if (peer_state[user * device_count + owner] != 1)
          continue;
        status = gm_cuda_use_device (owner);
        if (status != GM_OK)
          goto done;
        npools = gm_cuda_pools_of (owner, pools);
        memset (&desc, 0, sizeof desc);
        desc.location.type = cudaMemLocationTypeDevice;
        desc.location.id = user;
        desc.flags = cudaMemAccessFlagsProtReadWrite;
        for (int i = 0; i < npools && err == cudaSuccess; i++)
          err = cudaMemPoolSetAccess (pools[i], &desc, 1);
        if (err == cudaSuccess)
          {
            status = gm_cuda_use_device (user);
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

gm_status
gm_cuda_can_access_peer (int device, int peer, bool *can)
{
  gm_status status = GM_OK;

  *can = device == peer;
  if (device == peer)
    return GM_OK;
  status = gm_cuda_map_peers ();
  if (status == GM_OK)
    *can = peer_state[device * device_count + peer] == 1;
  return status;
}

/* Finds the devices: GM_OK, or GM_ERR_UNAVAILABLE saying why there are
   none (no driver, or one too old; no device).  */
gm_status
gm_cuda_devices_find (void)
{
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
  if (device_count > CUDA_MAX_DEVICES)
    device_count = CUDA_MAX_DEVICES;
  return GM_OK;
}

gm_status
gm_cuda_devices_init (void)
{
  gm_status status = GM_OK;
  int value = 0;

  props_cache = calloc ((size_t) device_count, sizeof *props_cache);
  device_ready = calloc ((size_t) device_count, sizeof *device_ready);
  peer_state = calloc ((size_t) device_count * (size_t) device_count, 1);
  if (props_cache == NULL || device_ready == NULL || peer_state == NULL)
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
      GM_CUDA_CHECK (cudaDeviceGetAttribute (&value,
                                             cudaDevAttrMemoryPoolsSupported,
                                             d));
      out->pools = value != 0;
      GM_CUDA_CHECK (cudaDeviceGetAttribute
                     (&value, cudaDevAttrMemoryPoolSupportedHandleTypes, d));
      out->ipc = out->pools
                 && (value & cudaMemHandleTypePosixFileDescriptor) != 0;
      GM_CUDA_CHECK (cudaDeviceGetAttribute (&value,
                                             cudaDevAttrManagedMemory, d));
      out->managed = value != 0;
      GM_CUDA_CHECK (cudaDeviceGetAttribute
                     (&value, cudaDevAttrConcurrentManagedAccess, d));
      out->concurrent_managed = value != 0;
    }
done:
  if (status != GM_OK)
    return gm_error_set (GM_ERR_UNAVAILABLE, gm_last_error ()->cuda_code,
                         gm_last_error ()->cuda_name, "%s",
                         gm_last_error ()->message);
  return status;
}

const gm_device_props *
gm_cuda_props (int device)
{
  return &props_cache[device];
}

bool
gm_cuda_device_ready (int device)
{
  return device_ready[device];
}

void
gm_cuda_devices_shutdown (void)
{
  free (props_cache);
  free (device_ready);
  free (peer_state);
  props_cache = NULL;
  device_ready = NULL;
  peer_state = NULL;
}
