/* torch-shim.cc -- libgpumem-torch.so, the library PyTorch's
   CUDAPluggableAllocator opens by path: two functions with the
   signatures PyTorch calls, forwarding to gpumem's pool.

   The gpumem program has its pool inside the executable, which no
   library can be opened by path from, so this small library stands
   between: gpumem opens it first and binds it (gpumem_torch_bind) to
   its own functions; PyTorch then opens the same path, gets the library
   already loaded, and calls through the bound pointers.  Nothing here
   links gpumem, CUDA or PyTorch.

   C++ for one reason: PyTorch's pluggable allocator takes whatever its
   allocation function returns, a null pointer too (PyTorch 2.11 made a
   tensor at address 0 of one that the limit refused), so a refusal is
   thrown as a C++ exception, which PyTorch turns into a Python
   RuntimeError carrying gpumem's message.  */

#include <cstddef>
#include <stdexcept>
#include <string>

#define GM_SHIM_EXPORT extern "C" __attribute__ ((visibility ("default")))

typedef void *(*gm_shim_alloc_fn) (size_t nbytes, int device, void *stream);
typedef void (*gm_shim_free_fn) (void *ptr, size_t nbytes, int device,
                                 void *stream);
/* The message of the calling thread's last failed allocation.  */
typedef const char *(*gm_shim_error_fn) (void);

static gm_shim_alloc_fn bound_alloc;
static gm_shim_free_fn bound_free;
static gm_shim_error_fn bound_error;

/* Binds the shim to gpumem's pool (gm_pool_torch_alloc, _free and
   _error).  Called by gpumem before PyTorch is given the shim.  */
GM_SHIM_EXPORT void
gpumem_torch_bind (gm_shim_alloc_fn alloc_fn, gm_shim_free_fn free_fn,
                   gm_shim_error_fn error_fn)
{
  bound_alloc = alloc_fn;
  bound_free = free_fn;
  bound_error = error_fn;
}

/* PyTorch's alloc_fn: the memory, or std::runtime_error naming why it
   cannot be had (a null pointer only for 0 bytes).  */
GM_SHIM_EXPORT void *
gpumem_torch_alloc (size_t nbytes, int device, void *stream)
{
  void *ptr;

  if (bound_alloc == nullptr)
    throw std::runtime_error ("gpumem's PyTorch allocator is not bound to "
                              "gpumem's pool (call gpumem.use_pool first)");
  ptr = bound_alloc (nbytes, device, stream);
  if (ptr == nullptr && nbytes > 0)
    throw std::runtime_error (
      std::string ("gpumem.OutOfMemoryError: ")
      + (bound_error != nullptr ? bound_error () : "out of memory"));
  return ptr;
}

/* PyTorch's free_fn.  */
GM_SHIM_EXPORT void
gpumem_torch_free (void *ptr, size_t nbytes, int device, void *stream)
{
  if (bound_free != nullptr)
    bound_free (ptr, nbytes, device, stream);
}
