/* pool-hooks.h -- other libraries allocating from gpumem's pool
   (pool-hooks.c): plain C, no Python, callable without the GIL.  */

#ifndef GM_POOL_HOOKS_H
#define GM_POOL_HOOKS_H

#include <stddef.h>

#include "gm.h"

/* NBYTES of device memory on DEVICE for OWNER, ordered on the foreign
   stream STREAM_HANDLE (a cudaStream_t; NULL: the default stream), from
   gpumem's pool and in its books, in *PTR.  GM_ERR_UNAVAILABLE on a
   backend without CUDA memory, GM_ERR_NOMEM (the pool's idle cache was
   given back and the request tried again first), GM_ERR_VALUE for a
   device that does not exist or a handle that names no live stream of
   DEVICE.  */
gm_status gm_pool_hook_alloc (gm_mem_owner owner, int device, size_t nbytes,
                              void *stream_handle, void **ptr);
/* Gives back what gm_pool_hook_alloc returned, NBYTES long, in the order
   of STREAM_HANDLE: work queued there before the call may still use it.  */
gm_status gm_pool_hook_free (gm_mem_owner owner, int device, void *ptr,
                             size_t nbytes, void *stream_handle);

/* The two functions PyTorch's CUDAPluggableAllocator calls, through the
   shim library libgpumem-torch (torch-shim.c) that gpumem binds to them:
   NULL when the memory cannot be had (PyTorch raises its out-of-memory
   error then; gpumem.memory_stats () says who holds what).  */
void *gm_pool_torch_alloc (size_t nbytes, int device, void *stream);
void gm_pool_torch_free (void *ptr, size_t nbytes, int device, void *stream);

#endif /* GM_POOL_HOOKS_H */
