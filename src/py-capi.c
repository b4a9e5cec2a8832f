/* py-capi.c -- gpumem._C_API: the capsule through which Python
   extensions get device memory from any object without linking gpumem
   (include/gpumem/extension.h says how they use it).  */

#include "gm-python.h"

#include <string.h>

#include "gpumem/extension.h"

/* gm_c_api_table.get_buffer: OBJ as gpumem.asarray takes it, described
   into *BUF with a new reference to what keeps its memory alive.  */
static int
capi_get_buffer (PyObject *obj, gm_buffer *buf)
{
  PyObject *array_obj, *device = NULL;
  arraypy_object *array;
  gm_stream *pending;
  int64_t stride;

  memset (buf, 0, sizeof *buf);
  if (obj == NULL || gmpy_state_get () == NULL)
    {
      PyErr_SetString (PyExc_RuntimeError, "gpumem's C API: the gpumem "
                       "module is not initialized");
      return -1;
    }
  /* A DLPack producer without the CUDA Array Interface goes through
     from_dlpack, which takes the memory of this backend's devices (host
     memory on the host backend); the rest through asarray.  */
  if (!gmpy_array_check (obj)
      && !PyObject_HasAttrString (obj, "__cuda_array_interface__")
      && PyObject_HasAttrString (obj, "__dlpack__"))
    array_obj = gmpy_from_dlpack (NULL, obj);
  else
    array_obj = gmpy_asarray (NULL, obj);
  if (array_obj == NULL)
    return -1;
  array = (arraypy_object *) array_obj;
  if (gmpy_array_usable (array) < 0
      || gmpy_array_pending_stream (array, &pending) < 0
      || (device = gmpy_array_dlpack_device (array_obj, NULL)) == NULL
      || !PyArg_ParseTuple (device, "ii", &buf->device_type, &buf->device))
    {
      Py_XDECREF (device);
      Py_DECREF (array_obj);
      return -1;
    }
  Py_DECREF (device);
  buf->ptr = array->data;
  buf->ndim = array->ndim;
  buf->itemsize = (int64_t) gm_dtypes[array->dtype].itemsize;
  stride = buf->itemsize;
  for (int i = array->ndim - 1; i >= 0; i--)
    {
      buf->shape[i] = array->shape[i];
      buf->strides[i] = stride;
      stride *= array->shape[i];
    }
  buf->size = array->size;
  buf->dtype = gm_dtypes[array->dtype].name;
  gm_dtype_typestr (array->dtype, buf->typestr);
  buf->device = array->device;
  buf->readonly = array->readonly;
  buf->stream = pending != NULL ? gm_backend_current->stream_handle (pending)
                                : NULL;
  buf->owner = array_obj;
  return 0;
}

static const gm_c_api_table c_api = {
  .abi = GM_C_API_ABI,
  .size = sizeof (gm_c_api_table),
  .version = PACKAGE_VERSION,
  .get_buffer = capi_get_buffer,
};

int
gmpy_capi_init (PyObject *module)
{
  PyObject *capsule = PyCapsule_New ((void *) &c_api, GM_C_API_CAPSULE,
                                     NULL);
  int result;

  if (capsule == NULL)
    return -1;
  result = PyModule_AddObjectRef (module, "_C_API", capsule);
  Py_DECREF (capsule);
  return result;
}
