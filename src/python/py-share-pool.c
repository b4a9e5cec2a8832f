/* py-share-pool.c -- share() of another library's array whose memory is
   a block of gpumem's pool (a PyTorch tensor or a CuPy array allocated
   after gpumem.use_pool): PyTorch's pluggable allocators cannot share
   through torch.multiprocessing, so gpumem shares the block itself.  The
   block is found by the array's pointer among those the libraries hold
   (pool-blocks.c), made shareable where it lies on its first share, and
   handed to the share server when its library frees it, which frees it
   once every consumer has let go too.  A consumer opens a DeviceArray,
   which PyTorch and CuPy take by DLPack.  */

#include "gm-python.h"

#include "pool-hooks.h"
#include "share.h"

/* gm_pool_blocks_share's MAKE: the share server's record of FOUND.  */
static gm_status
make_block (const gm_pool_block *found, void **ctx)
{
  gm_ipc_block *block;
  gm_status status = gm_ipc_adopt (found->owner, found->device, found->base,
                                   found->nbytes, &block);

  if (status == GM_OK)
    *ctx = block;
  return status;
}

/* gm_pool_blocks_share's DROP: the library let go of the block.  */
static void
drop_block (void *ctx)
{
  gm_ipc_drop (ctx);
}

/* Whether every element of ARRAY lies in the NBYTES from START.  */
static bool
inside (const arraypy_object *array, const char *start, size_t nbytes)
{
  ptrdiff_t low = 0, high = (ptrdiff_t) gm_dtypes[array->dtype].itemsize;
  ptrdiff_t offset = array->data - start;

  if (array->size == 0)
    return offset >= 0 && (size_t) offset <= nbytes;
  for (int d = 0; d < array->ndim; d++)
    {
      ptrdiff_t reach = (ptrdiff_t) (array->shape[d] - 1) * array->strides[d];
      if (reach < 0)
        low += reach;
      else
        high += reach;
    }
  return offset + low >= 0 && (size_t) (offset + high) <= nbytes;
}

gm_ipc_block *
gmpy_ipc_pool_block (arraypy_object *array, const char **start)
{
  gm_pool_block found;
  gm_status status;

  if (gm_backend_current->device_memory != GM_MEMORY_CUDA
      || gmpy_array_owner (array) != NULL || array->data == NULL)
    return NULL;
  Py_BEGIN_ALLOW_THREADS
  status = gm_pool_blocks_share (array->data, make_block, drop_block,
                                 &found);
  Py_END_ALLOW_THREADS
  if (status == GM_ERR_VALUE)
    return NULL;
  if (status != GM_OK)
    return (gm_ipc_block *) gmpy_raise (status);
  if (found.device != array->device
      || !inside (array, found.base, found.nbytes))
    return NULL;
  *start = found.base;
  return found.ctx;
}

PyObject *
gmpy_ipc_pool_array (PyObject *obj)
{
  PyObject *wrapped;
  const char *start;

  if ((!PyObject_HasAttrString (obj, "__cuda_array_interface__")
       && !PyObject_HasAttrString (obj, "__dlpack__"))
      || gm_backend_current->device_memory != GM_MEMORY_CUDA)
    return PyErr_Format (PyExc_TypeError, "share() takes a DeviceArray, an "
                         "Event, or another library's array allocated from "
                         "gpumem's pool (use_pool), not %.200s",
                         GMPY_TYPE_NAME (Py_TYPE (obj)));
  wrapped = gmpy_asarray (NULL, obj);
  if (wrapped == NULL)
    return NULL;
  if (gmpy_ipc_pool_block ((arraypy_object *) wrapped, &start) == NULL)
    {
      if (!PyErr_Occurred ())
        PyErr_Format (gmpy_state_get ()->error, "share(): this %.100s's "
                      "memory is not a block of gpumem's pool: allocate it "
                      "after gpumem.use_pool(...) for its library "
                      "(docs/frameworks.md), or copy it into a DeviceArray",
                      GMPY_TYPE_NAME (Py_TYPE (obj)));
      Py_DECREF (wrapped);
      return NULL;
    }
  return wrapped;
}
