/* cuda-pools.c -- the stream-ordered pools gpumem's device memory comes
   from.  By default every allocation of gpumem (arrays, shared_empty,
   the libraries switched over by use_pool) comes from one exportable
   pool per device (cudaMemPoolCreate with POSIX file descriptor
   handles), so any block can be shared with another process where it
   lies (cuda-share.c).  GPUMEM_DEVICE_POOL=default keeps arrays in the
   device's default pool, which cannot export, and makes the exportable
   pool for shared_empty only.  GPUMEM_SHARE_HANDLE=fabric adds fabric
   handles to the exportable pool, where the device offers them for
   pools.  Both pools keep freed memory (release threshold: no limit),
   so the next allocation of a like size is served without the driver.  */

#define _POSIX_C_SOURCE 200809L
#include "config.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "cuda-internal.h"
#include "cuda-status.h"

#define CUDA_POOL_DEVICES 1024

static bool arrays_exportable = true;
static bool want_fabric;

static pthread_mutex_t pools_lock = PTHREAD_MUTEX_INITIALIZER;
/* Written once a device, under POOLS_LOCK; read without it by every
   allocation (gm_cuda_pool).  */
static _Atomic (cudaMemPool_t) export_pools[CUDA_POOL_DEVICES];
static int export_fds[CUDA_POOL_DEVICES];
static bool export_fabric[CUDA_POOL_DEVICES];
/* Devices whose exportable pool could not be made: the reason stays in
   EXPORT_WHY and arrays there come from the default pool.  */
static bool export_refused[CUDA_POOL_DEVICES];
static char export_why[CUDA_POOL_DEVICES][160];

/* Reads NAME, one of the two spellings FIRST (false) or SECOND (true),
   into *VALUE; unset or empty leaves FALLBACK.  */
static gm_status
env_choice (const char *name, const char *first, const char *second,
            bool fallback, bool *value)
{
  const char *text = getenv (name);

  *value = fallback;
  if (text == NULL || *text == '\0')
    return GM_OK;
  if (strcmp (text, first) == 0)
    *value = false;
  else if (strcmp (text, second) == 0)
    *value = true;
  else
    return gm_error_set (GM_ERR_VALUE, 0, NULL, "%s='%s' is neither '%s' "
                         "nor '%s'", name, text, first, second);
  return GM_OK;
}

gm_status
gm_cuda_pools_init (void)
{
  gm_status status = env_choice ("GPUMEM_DEVICE_POOL", "default",
                                 "exportable", true, &arrays_exportable);

  if (status == GM_OK)
    status = env_choice ("GPUMEM_SHARE_HANDLE", "posix", "fabric", false,
                         &want_fabric);
  /* A pool made with fabric handles as well cannot export its POSIX
     descriptor where no IMEX channel serves the fabric
     (cudaErrorNotPermitted, bench/probes/fabric_pool.c), and under
     gpumem such a process aborted on a corrupted heap: the setting is
     refused (docs/sharing.md).  */
  if (status == GM_OK && want_fabric)
    status = gm_error_set (GM_ERR_VALUE, 0, NULL, "GPUMEM_SHARE_HANDLE="
                           "fabric is not supported: a pool with fabric "
                           "handles could not export its descriptor "
                           "(cudaErrorNotPermitted: no IMEX channel) and "
                           "corrupted the heap on the machines it was "
                           "tried on; unset GPUMEM_SHARE_HANDLE");
  return status;
}

/* Keeps POOL's freed memory for the next allocation.  */
static gm_status
keep_freed (cudaMemPool_t pool)
{
  gm_status status = GM_OK;
  uint64_t threshold = UINT64_MAX;

  GM_CUDA_CHECK (cudaMemPoolSetAttribute (pool,
                                          cudaMemPoolAttrReleaseThreshold,
                                          &threshold));
done:
  return status;
}

/* Makes DEVICE's exportable pool and its descriptor; under pools_lock.
   GM_ERR_UNAVAILABLE saying why where the device cannot export pools.  */
static gm_status
make_export_pool (int device)
{
  gm_status status = GM_OK;
  struct cudaMemPoolProps props;
  cudaMemPool_t created = NULL;
  int types = 0, fd = -1;
  bool fabric;

  GM_CUDA_CHECK (cudaDeviceGetAttribute (
      &types, cudaDevAttrMemoryPoolSupportedHandleTypes, device));
  if ((types & cudaMemHandleTypePosixFileDescriptor) == 0)
    return gm_error_set (GM_ERR_UNAVAILABLE, 0, NULL, "device %d cannot "
                         "share pool memory between processes (its driver "
                         "offers no POSIX descriptor handles for pools)",
                         device);
  fabric = want_fabric && (types & cudaMemHandleTypeFabric) != 0;
  if (want_fabric && !fabric)
    return gm_error_set (GM_ERR_UNAVAILABLE, 0, NULL, "device %d offers no "
                         "fabric handles for pools "
                         "(cudaDevAttrMemoryPoolSupportedHandleTypes is "
                         "%#x): unset GPUMEM_SHARE_HANDLE=fabric", device,
                         (unsigned) types);
  memset (&props, 0, sizeof props);
  props.allocType = cudaMemAllocationTypePinned;
  props.handleTypes = (enum cudaMemAllocationHandleType)
    (cudaMemHandleTypePosixFileDescriptor
     | (fabric ? cudaMemHandleTypeFabric : 0));
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = device;
  if (fabric)
    {
      /* Fabric handles need the fabric's services (IMEX) as well as the
         device's support: say which setting asked for them.  */
      cudaError_t err = cudaMemPoolCreate (&created, &props);
      if (err != cudaSuccess)
        {
          created = NULL;
          status = gm_cuda_status (err, "cudaMemPoolCreate", __FILE__,
                                   __LINE__);
          if (!gm_cuda_is_sticky (err))
            status = gm_error_set (GM_ERR_UNAVAILABLE, err,
                                   cudaGetErrorName (err), "device %d "
                                   "cannot make a pool with fabric handles "
                                   "(%s): unset GPUMEM_SHARE_HANDLE=fabric",
                                   device, cudaGetErrorString (err));
          goto done;
        }
    }
  else
    GM_CUDA_CHECK (cudaMemPoolCreate (&created, &props));
  status = keep_freed (created);
  if (status != GM_OK)
    goto done;
  GM_CUDA_CHECK (cudaMemPoolExportToShareableHandle (
      &fd, created, cudaMemHandleTypePosixFileDescriptor, 0));
  export_fds[device] = fd;
  export_fabric[device] = fabric;
  atomic_store_explicit (&export_pools[device], created,
                         memory_order_release);
  created = NULL;
done:
  if (created != NULL)
    cudaMemPoolDestroy (created);
  return status;
}

gm_status
gm_cuda_pool_setup (int device)
{
  gm_status status = GM_OK;
  cudaMemPool_t pool;

  if (device >= CUDA_POOL_DEVICES)
    return gm_error_set (GM_ERR_UNAVAILABLE, 0, NULL, "device %d: gpumem "
                         "uses the first %d devices only", device,
                         CUDA_POOL_DEVICES);
  GM_CUDA_CHECK (cudaDeviceGetDefaultMemPool (&pool, device));
  status = keep_freed (pool);
  if (status != GM_OK || !arrays_exportable)
    return status;
  pthread_mutex_lock (&pools_lock);
  if (export_pools[device] == NULL && !export_refused[device]
      && make_export_pool (device) != GM_OK)
    {
      /* The device still works: its arrays come from the default pool
         and share as copies, as GPUMEM_DEVICE_POOL=default has them.  */
      if (gm_cuda_is_sticky ((cudaError_t) gm_last_error ()->cuda_code))
        status = GM_ERR_CUDA;
      export_refused[device] = true;
      snprintf (export_why[device], sizeof export_why[device], "%.159s",
                gm_last_error ()->message);
    }
  pthread_mutex_unlock (&pools_lock);
done:
  return status;
}

cudaMemPool_t
gm_cuda_pool (int device)
{
  cudaMemPool_t pool = NULL;

  if (arrays_exportable && device < CUDA_POOL_DEVICES)
    pool = atomic_load_explicit (&export_pools[device],
                                 memory_order_acquire);
  return pool;
}

bool
gm_cuda_pool_exports (int device)
{
  return gm_cuda_pool (device) != NULL;
}

gm_status
gm_cuda_export_pool (int device, cudaMemPool_t *pool, int *fd)
{
  gm_status status = GM_OK;

  if (device >= CUDA_POOL_DEVICES)
    return gm_error_set (GM_ERR_UNAVAILABLE, 0, NULL, "device %d: gpumem "
                         "shares memory of the first %d devices only",
                         device, CUDA_POOL_DEVICES);
  pthread_mutex_lock (&pools_lock);
  if (export_pools[device] == NULL)
    {
      if (export_refused[device])
        status = gm_error_set (GM_ERR_UNAVAILABLE, 0, NULL, "%s",
                               export_why[device]);
      else
        status = make_export_pool (device);
    }
  if (status == GM_OK)
    {
      *pool = export_pools[device];
      *fd = export_fds[device];
    }
  pthread_mutex_unlock (&pools_lock);
  return status;
}

int
gm_cuda_pools_of (int device, cudaMemPool_t pools[2])
{
  int n = 0;

  if (cudaDeviceGetDefaultMemPool (&pools[n], device) == cudaSuccess)
    n++;
  else
    cudaGetLastError ();
  if (device < CUDA_POOL_DEVICES)
    {
      pthread_mutex_lock (&pools_lock);
      if (export_pools[device] != NULL)
        pools[n++] = export_pools[device];
      pthread_mutex_unlock (&pools_lock);
    }
  return n;
}

bool
gm_cuda_pool_fabric (int device)
{
  bool fabric;

  if (device >= CUDA_POOL_DEVICES)
    return false;
  pthread_mutex_lock (&pools_lock);
  fabric = export_pools[device] != NULL && export_fabric[device];
  pthread_mutex_unlock (&pools_lock);
  return fabric;
}
