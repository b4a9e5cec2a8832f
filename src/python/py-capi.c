/* py-capi.c -- gpumem._C_API: the capsule through which Python
   extensions get device memory from any object without linking gpumem
   (include/gpumem/extension.h says how they use it).  */

#include "gm-python.h"

#include <string.h>

#include "gpumem/extension.h"
#include "py-dlpack.h"

/* describe_array copies every dimension of an array into a gm_buffer.  */
_Static_assert (GM_MAX_NDIM <= GM_BUFFER_MAX_NDIM,
                "a gm_buffer holds every dimension a DeviceArray may have");

/* Each dtype's typestr, made once by gmpy_capi_init: every argument of
   a C++ binding's call is described with one.  */
static char typestrs[GM_NDTYPES][8];

/* Describes the DeviceArray ARRAY (borrowed) into *BUF as it is: its
   own strides (negative for a reversed view, any for a strided one) and
   the address of element 0, writing only the NDIM used entries of shape
   and strides; BUF->owner is a new reference to ARRAY.  0, or -1 with
   an exception (ValueError when the array was freed) and BUF->owner
   NULL.  */
static inline int
describe_array (arraypy_object *array, gm_buffer *buf)
{
  gm_stream *pending;

  buf->owner = NULL;
  /* An owner in use with no stream's work pending, the common case, is
     told apart without a call.  */
  if (array->base == NULL && !array->released && array->last_stream == NULL)
    pending = NULL;
  else if (gmpy_array_usable (array) < 0
           || gmpy_array_pending_stream (array, &pending) < 0)
    return -1;
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
  memcpy (buf->typestr, typestrs[array->dtype], sizeof buf->typestr);
  buf->device = array->device;
  buf->readonly = array->readonly;
  buf->stream = pending != NULL ? gm_backend_current->stream_handle (pending)
                                : NULL;
  buf->owner = Py_NewRef ((PyObject *) array);
  return 0;
}

/* Describes OBJ, whose type publishes the DLPack exchange API API,
   into *BUF: its borrowed DLTensor when the table lends one (no
   DeviceArray is made), else a DeviceArray over an export.  BUF->stream
   is the producer's current work stream on the memory's device.  0, or
   -1 with an exception and BUF->owner NULL.  */
static int
describe_exchange (PyObject *obj, const gm_dl_exchange_api *api,
                   gm_buffer *buf)
{
  Py_ssize_t dims[GM_MAX_NDIM], strides[GM_MAX_NDIM];
  gm_dl_tensor tensor;
  gm_dtype dtype = GM_FLOAT32;
  int ndim = 0, device = 0;
  char *data = NULL;
  void *stream = NULL;
  PyObject *array_obj;
  int result;

  buf->owner = NULL;
  if (api->dltensor_from_py_object_no_sync == NULL)
    {
      array_obj = gmpy_exchange_take (obj, api);
      if (array_obj == NULL)
        return -1;
      result = describe_array ((arraypy_object *) array_obj, buf);
      Py_DECREF (array_obj);
      return result;
    }
  if (api->dltensor_from_py_object_no_sync (obj, &tensor) < 0
      || gmpy_dlpack_read_tensor (&tensor, &ndim, dims, strides, &dtype,
                                  &device, &data) < 0)
    return -1;
  if (tensor.device.device_type != GM_DL_CPU
      && api->current_work_stream (tensor.device.device_type,
                                   tensor.device.device_id, &stream) < 0)
    return -1;
  buf->device_type = gm_backend_current->dlpack_device_type;
  buf->ptr = data;
  buf->ndim = ndim;
  buf->itemsize = (int64_t) gm_dtypes[dtype].itemsize;
  buf->size = 1;
  for (int i = 0; i < ndim; i++)
    {
      buf->shape[i] = dims[i];
      buf->strides[i] = strides[i];
      buf->size *= dims[i];
    }
  buf->dtype = gm_dtypes[dtype].name;
  memcpy (buf->typestr, typestrs[dtype], sizeof buf->typestr);
  buf->device = device;
  buf->readonly = 0;
  buf->stream = stream;
  buf->owner = Py_NewRef (obj);
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

/* Describes OBJ into *BUF as get_buffer does, writing only the used
   entries of shape and strides.  The dispatch is keyed on OBJ's type: a
   DeviceArray is read directly, then a type's DLPack exchange API,
   then what asarray takes (__dlpack__, then __cuda_array_interface__;
   on the host backend DLPack producers of host memory too).  0, or -1
   with an exception and BUF->owner NULL.  */
static int
describe (PyObject *obj, gm_buffer *buf)
{
  gmpy_state *state = gmpy_state_get ();
  const gm_dl_exchange_api *api;
  PyObject *array_obj;
  int result;

  buf->owner = NULL;
  if (obj == NULL)
    {
      PyErr_SetString (PyExc_TypeError, "gpumem's C API: get_buffer "
                       "needs an object, got NULL");
      return -1;
    }
  if (state != NULL && Py_TYPE (obj) == state->array_type)
    return describe_array ((arraypy_object *) obj, buf);
  if (capi_ready () < 0)
    return -1;
  if (gmpy_array_check (obj))
    return describe_array ((arraypy_object *) obj, buf);
  api = gmpy_exchange_api_of (obj);
  if (api != NULL)
    return describe_exchange (obj, api, buf);
  array_obj = gmpy_asarray_for (obj, NULL, true);
  if (array_obj == NULL)
    return -1;
  result = describe_array ((arraypy_object *) array_obj, buf);
  Py_DECREF (array_obj);
  return result;
}

/* gm_c_api_table.get_buffer: OBJ as gpumem.asarray takes it, described
   into *BUF (zeroed first) with a new reference to what keeps its
   memory alive.  */
static int
capi_get_buffer (PyObject *obj, gm_buffer *buf)
{
  memset (buf, 0, sizeof *buf);
  if (describe (obj, buf) < 0)
    {
      memset (buf, 0, sizeof *buf);
      return -1;
    }
  return 0;
}

/* gm_c_api_table.load_buffer: get_buffer without the zeroing, and in
   *LAUNCH the stream to launch on: BUF->stream, else the current one of
   BUF->device (capi_current_stream's answer).  */
static int
capi_load_buffer (PyObject *obj, gm_buffer *buf, void **launch)
{
  *launch = NULL;
  if (describe (obj, buf) < 0)
    return -1;
  if (buf->stream != NULL)
    *launch = buf->stream;
  else if (buf->device_type != GM_DL_CPU
           && gmpy_dispatch_handle (buf->device, launch) < 0)
    {
      Py_CLEAR (buf->owner);
      return -1;
    }
  return 0;
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
  int result;

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
  result = describe_array ((arraypy_object *) array_obj, buf);
  Py_DECREF (array_obj);
  return result;
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
  *stream = NULL;
  if (capi_ready () < 0)
    return -1;
  if (device < 0)
    device = gmpy_current_device ();
  if (gmpy_device_check (device) < 0)
    return -1;
  return gmpy_dispatch_handle (device, stream);
}

/* gm_c_api_table.stream_wait: the cudaStream_t WAITER (NULL: the legacy
   default stream) on DEVICE waits, without blocking the host, for the
   work queued on SOURCE so far; nothing when SOURCE is NULL or WAITER,
   or on the host backend.  0, or -1 with an exception.  */
static int
capi_stream_wait (int device, void *waiter, void *source)
{
  gm_stream *wrapped = NULL;
  gm_status status;

  if (capi_ready () < 0)
    return -1;
  if (source == NULL || source == waiter
      || gm_backend_current->device_memory != GM_MEMORY_CUDA)
    return 0;
  if (device < 0)
    device = gmpy_current_device ();
  if (gmpy_device_check (device) < 0)
    return -1;
  status = gm_backend_current->stream_wrap (device, source, &wrapped);
  if (status == GM_OK)
    status = gm_backend_current->foreign_stream_wait (
      device, wrapped, waiter != NULL ? waiter : (void *) (uintptr_t) 1);
  if (wrapped != NULL)
    gm_backend_current->stream_destroy (wrapped);
  return status == GM_OK ? 0 : gmpy_raise_int (status);
}

/* gm_c_api_table.launch_done: the end of a launch on STREAM on DEVICE.
   STREAM NULL (the default stream: no block was open) is waited for,
   the GIL released and Ctrl-C answered, so that the call is complete on
   return; otherwise each of the N objects WRITTEN that is a DeviceArray
   records that the current block's stream writes it, as gpumem's own
   calls do.  0, or -1 with an exception (CudaError from the work,
   KeyboardInterrupt).  */
static int
capi_launch_done (int device, void *stream, PyObject *const *written, int n)
{
  if (capi_ready () < 0)
    return -1;
  if (device < 0)
    device = gmpy_current_device ();
  if (stream == NULL)
    return gm_backend_current->device_memory == GM_MEMORY_CUDA
             ? gmpy_wait (device, NULL) : 0;
  for (int i = 0; i < n; i++)
    if (written[i] != NULL)
      gmpy_array_note_stream (written[i], NULL);
  return 0;
}

static const gm_c_api_table c_api = {
  .abi = GM_C_API_ABI,
  .size = sizeof (gm_c_api_table),
  .version = PACKAGE_VERSION,
  .get_buffer = capi_get_buffer,
  .new_array = capi_new_array,
  .current_stream = capi_current_stream,
  .load_buffer = capi_load_buffer,
  .stream_wait = capi_stream_wait,
  .launch_done = capi_launch_done,
};

int
gmpy_capi_init (PyObject *module)
{
  PyObject *capsule = PyCapsule_New ((void *) &c_api, GM_C_API_CAPSULE,
                                     NULL);
  int result;

  for (int d = 0; d < GM_NDTYPES; d++)
    gm_dtype_typestr ((gm_dtype) d, typestrs[d]);
  if (capsule == NULL)
    return -1;
  result = PyModule_AddObjectRef (module, "_C_API", capsule);
  Py_DECREF (capsule);
  return result;
}
