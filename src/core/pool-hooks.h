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

/* The blocks of other libraries, by address (pool-blocks.c).  */

/* A live block of another library.  */
typedef struct gm_pool_block
{
  void *base;
  size_t nbytes;
  int device;
  gm_mem_owner owner;
  void *ctx;                 /* what share's MAKE returned */
} gm_pool_block;

/* Called with the block's lock held, so that the library's free waits:
   makes the share server's record of BLOCK into *CTX.  */
typedef gm_status (*gm_pool_share_fn) (const gm_pool_block *block,
                                       void **ctx);
/* Called in place of the free when the library lets go of a shared
   block: the callee frees it (gm_mem_free_as) once no process uses it.  */
typedef void (*gm_pool_drop_fn) (void *ctx);

/* Lists the NBYTES at PTR that gm_pool_hook_alloc gave OWNER on DEVICE.
   GM_ERR_HOST_NOMEM where the list cannot grow.  */
gm_status gm_pool_blocks_add (void *ptr, size_t nbytes, gm_mem_owner owner,
                              int device);
/* Forgets the block at PTR; true when it was shared: *DROP (*CTX) then
   stands for its free.  */
bool gm_pool_blocks_remove (void *ptr, gm_pool_drop_fn *drop, void **ctx);
/* Finds the listed block that contains PTR into *FOUND and, the first
   time, calls MAKE for it and keeps DROP: every later share of the block
   gets the same CTX.  GM_ERR_VALUE when no listed block contains PTR;
   MAKE's error.  */
gm_status gm_pool_blocks_share (const void *ptr, gm_pool_share_fn make,
                                gm_pool_drop_fn drop, gm_pool_block *found);

/* The two functions PyTorch's CUDAPluggableAllocator calls, through the
   shim library libgpumem-torch (torch-shim.cc) that gpumem binds to
   them: NULL when the memory cannot be had, which the shim throws as a
   C++ exception with gm_pool_torch_error's message, the calling
   thread's last error (PyTorch takes a null pointer as memory).  */
void *gm_pool_torch_alloc (size_t nbytes, int device, void *stream);
void gm_pool_torch_free (void *ptr, size_t nbytes, int device, void *stream);
const char *gm_pool_torch_error (void);

#endif /* GM_POOL_HOOKS_H */
