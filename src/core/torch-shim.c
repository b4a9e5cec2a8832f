/* torch-shim.c -- libgpumem-torch.so, the library PyTorch's
   CUDAPluggableAllocator opens by path: two functions with the
   signatures PyTorch calls, forwarding to gpumem's pool.

   The gpumem program has its pool inside the executable, which no
   library can be opened by path from, so this small library stands
   between: gpumem opens it first and binds it (gpumem_torch_bind) to
   its own functions; PyTorch then opens the same path, gets the library
   already loaded, and calls through the bound pointers.  Nothing here
   links gpumem, CUDA or PyTorch.  */

#include <stddef.h>

#define GM_SHIM_EXPORT __attribute__ ((visibility ("default")))

typedef void *(*gm_shim_alloc_fn) (size_t nbytes, int device, void *stream);
typedef void (*gm_shim_free_fn) (void *ptr, size_t nbytes, int device,
                                 void *stream);

static gm_shim_alloc_fn bound_alloc;
static gm_shim_free_fn bound_free;

/* Binds the shim to gpumem's pool (gm_pool_torch_alloc and _free).
   Called by gpumem before PyTorch is given the shim.  */
GM_SHIM_EXPORT void gpumem_torch_bind (gm_shim_alloc_fn alloc_fn,
                                       gm_shim_free_fn free_fn);
/* PyTorch's alloc_fn and free_fn.  */
GM_SHIM_EXPORT void *gpumem_torch_alloc (size_t nbytes, int device,
                                         void *stream);
GM_SHIM_EXPORT void gpumem_torch_free (void *ptr, size_t nbytes, int device,
                                       void *stream);

void
gpumem_torch_bind (gm_shim_alloc_fn alloc_fn, gm_shim_free_fn free_fn)
{
  bound_alloc = alloc_fn;
  bound_free = free_fn;
}

void *
gpumem_torch_alloc (size_t nbytes, int device, void *stream)
{
  return bound_alloc != NULL ? bound_alloc (nbytes, device, stream) : NULL;
}

void
gpumem_torch_free (void *ptr, size_t nbytes, int device, void *stream)
{
  if (bound_free != NULL)
    bound_free (ptr, nbytes, device, stream);
}
