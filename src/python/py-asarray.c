/* py-asarray.c -- gpumem.asarray: a DeviceArray over another library's
   device memory, without a copy.

   The CUDA Array Interface is tried first (py-cai.c: it is what kernels
   take too), then DLPack (py-dlpack.c).  */

#include "gm-python.h"

PyObject *
gmpy_asarray (PyObject *module, PyObject *obj)
{
  Py_ssize_t dims[GM_MAX_NDIM], strides[GM_MAX_NDIM];
  PyObject *result;
  gmpy_devbuf buf;
  int found = 0, ndim;

  if (gmpy_array_check (obj))
    return Py_NewRef (obj);
  /* The CUDA Array Interface first: it is what kernels take too.  */
  if (gm_backend_current->device_memory == GM_MEMORY_CUDA)
    found = gmpy_cai_read (obj, &buf, &ndim, dims, strides, "obj");
  if (found < 0)
    return NULL;
  if (found)
    {
      result = gmpy_array_wrap (ndim, dims, buf.dtype, buf.device, buf.data,
                                buf.readonly, obj);
      if (result != NULL)
        gmpy_array_set_strides ((arraypy_object *) result, strides);
      return result;
    }
  found = gmpy_dlpack_asarray (obj, &result);
  if (found < 0)
    return NULL;
  if (found)
    return result;
  PyErr_Format (PyExc_TypeError,
                "asarray needs device memory: a DeviceArray, an object with "
                "__cuda_array_interface__ or a DLPack producer of CUDA "
                "memory, not %.100s (use gpumem.to_device to copy host "
                "data; on the host backend gpumem.from_dlpack wraps it)",
                Py_TYPE (obj)->tp_name);
  return NULL;
}
