/* py-capi.c -- gpumem._C_API: the capsule through which Python
   extensions get device memory from any object without linking gpumem
   (include/gpumem/extension.h says how they use it).  */

#include "gm-python.h"

#include <string.h>

#include "gpumem/extension.h"

/* capi_describe copies every dimension of an array into a gm_buffer.  */
_Static_assert (GM_MAX_NDIM <= GM_BUFFER_MAX_NDIM,
                "a gm_buffer holds every dimension a DeviceArray may have");

/* Describes the DeviceArray ARRAY_OBJ into *BUF as it is: its own
   strides (negative for a reversed view, any for a strided one) and the
   address of element 0.  *BUF takes over the caller's reference to
   ARRAY_OBJ as its owner on success; on failure ARRAY_OBJ is released.
   0, or -1 with an exception (ValueError when the array was freed).  */
static int
capi_describe (PyObject *array_obj, gm_buffer *buf)
{
  arraypy_object *array = (arraypy_object *) array_obj;
  gm_stream *pending;

  if (gmpy_array_usable (array) < 0
      || gmpy_array_pending_stream (array, &pending) < 0)
    {
      Py_DECREF (array_obj);
      memset (buf, 0, sizeof *buf);
      return -1;
    }
  /* DLPack's device, as __dlpack_device__ names it.  */
  buf->device_type = gm_backend_current->dlpack_device_type;
  buf->ptr = array->data;
  buf->ndim = array->ndim;
  buf->itemsize = (int64_t) gm_dtypes[array->dtype].itemsize;
  for (int i = 0; i < array->ndim; i++)
    {
      buf->shape[i] = array->shape[i];
      buf->strides[i] = array->strides[i];
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

/* 0 when the gpumem module is up, else -1 with RuntimeError.  */
static int
capi_ready (void)
{
  if (gmpy_state_get () != NULL)
    return 0;
  PyErr_SetString (PyExc_RuntimeError, "gpumem's C API: the gpumem "
                   "module is not initialized");
  return -1;
}

/* gm_c_api_table.get_buffer: OBJ as gpumem.asarray takes it, described
   into *BUF with a new reference to what keeps its memory alive.  */
static int
capi_get_buffer (PyObject *obj, gm_buffer *buf)
{
  PyObject *array_obj;

  memset (buf, 0, sizeof *buf);
  if (obj == NULL)
    {
      PyErr_SetString (PyExc_TypeError, "gpumem's C API: get_buffer "
                       "needs an object, got NULL");
      return -1;
    }
  if (capi_ready () < 0)
    return -1;
  /* A DeviceArray is described as it is (the common case, kept short:
     a C++ caster calls this once an argument).  A DLPack producer
     without the CUDA Array Interface goes through
     from_dlpack, which takes the memory of this backend's devices (host
     memory on the host backend); the rest through asarray.  */
  if (gmpy_array_check (obj))
    array_obj = Py_NewRef (obj);
  else if (!PyObject_HasAttrString (obj, "__cuda_array_interface__")
      && PyObject_HasAttrString (obj, "__dlpack__"))
    array_obj = gmpy_from_dlpack (NULL, obj);
  else
    array_obj = gmpy_asarray (NULL, obj);
  if (array_obj == NULL)
    return -1;
  return capi_describe (array_obj, buf);
}

/* gm_c_api_table.new_array: a new, uninitialized C-contiguous
   DeviceArray of NDIM dimensions SHAPE and dtype DTYPE (NumPy's name) on
   DEVICE (-1: the current device), as gpumem.empty makes it, described
   into *BUF; BUF->owner is the new array.  0, or -1 with an exception
   (ValueError for a bad shape or dtype, gpumem.OutOfMemoryError).  */
static int
capi_new_array (int ndim, const int64_t *shape, const char *dtype,
                int device, gm_buffer *buf)
{
  PyObject *shape_obj = NULL, *args = NULL, *array_obj = NULL;
  PyObject *device_obj = NULL;

  memset (buf, 0, sizeof *buf);
  if (capi_ready () < 0)
    return -1;
  if (ndim < 0 || ndim > GM_BUFFER_MAX_NDIM || (ndim > 0 && shape == NULL)
      || dtype == NULL)
    {
      PyErr_Format (PyExc_ValueError, "gpumem's C API: new_array needs "
                    "0 to %d dimensions with their shape and a dtype name, "
                    "got ndim %d", GM_BUFFER_MAX_NDIM, ndim);
      return -1;
    }
  shape_obj = PyTuple_New (ndim);
  if (shape_obj == NULL)
    return -1;
  for (int i = 0; i < ndim; i++)
    {
      PyObject *extent = PyLong_FromLongLong ((long long) shape[i]);
      if (extent == NULL)
        goto done;
      PyTuple_SET_ITEM (shape_obj, i, extent);
    }
  device_obj = device < 0 ? Py_NewRef (Py_None) : PyLong_FromLong (device);
  if (device_obj == NULL)
    goto done;
  args = Py_BuildValue ("(OsO)", shape_obj, dtype, device_obj);
  if (args == NULL)
    goto done;
  array_obj = gmpy_empty (NULL, args, NULL);

done:
  Py_XDECREF (args);
  Py_XDECREF (device_obj);
  Py_DECREF (shape_obj);
  if (array_obj == NULL)
    return -1;
  return capi_describe (array_obj, buf);
}

/* gm_c_api_table.current_stream: in *STREAM the cudaStream_t that a call
   without stream= would use on DEVICE (-1: the current device) in this
   thread: the innermost `with stream:` block's, else an open
   gpumem.concurrent() block's; NULL when neither is open (the default
   stream: the caller synchronizes before it returns to Python, as every
   gpumem call without stream= is complete on return).  0, or -1 with an
   exception.  */
static int
capi_current_stream (int device, void **stream)
{
  gm_stream *current = NULL;

  *stream = NULL;
  if (capi_ready () < 0)
    return -1;
  if (device < 0)
    device = gmpy_current_device ();
  else if (device >= gm_backend_current->device_count ())
    {
      PyErr_Format (PyExc_ValueError, "device %d does not exist (valid: 0 "
                    "to %d)", device, gm_backend_current->device_count () - 1);
      return -1;
    }
  if (gmpy_stream_arg (NULL, device, &current) < 0)
    return -1;
  if (current == NULL && gmpy_concurrent_active ()
      && gmpy_concurrent_stream (device, &current) < 0)
    return -1;
  *stream = current != NULL ? gm_backend_current->stream_handle (current)
                            : NULL;
  return 0;
}

static const gm_c_api_table c_api = {
  .abi = GM_C_API_ABI,
  .size = sizeof (gm_c_api_table),
  .version = PACKAGE_VERSION,
  .get_buffer = capi_get_buffer,
  .new_array = capi_new_array,
  .current_stream = capi_current_stream,
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
