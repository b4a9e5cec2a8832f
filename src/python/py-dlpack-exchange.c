/* py-dlpack-exchange.c -- DLPack's C exchange API (DLPackExchangeAPI,
   dlpack-abi.h), both ways.

   Producer: DeviceArray's type carries __dlpack_c_exchange_api__, a
   capsule named "dlpack_exchange_api" over one static table, so that a
   consumer (PyTorch, tvm-ffi, a C extension) takes a DeviceArray
   without a Python call.  Exports are py-dlpack-export.c's (the same
   block and deleter as __dlpack__'s), wrapped tensors
   py-dlpack-import.c's; the borrowed DLTensor points into the array
   itself.  current_work_stream answers with gpumem's stream rule: the
   innermost `with stream:` block's stream, else an open
   gpumem.concurrent() block's, else NULL (the legacy default stream,
   where every gpumem call without stream= runs and completes before it
   returns).

   Consumer: which table, if any, an object's type publishes, looked up
   once per type (the types are held, so a cached address is never
   reused by another type).  asarray, from_dlpack and the C API's
   get_buffer ask here after the exact DeviceArray check and before
   __dlpack__ and __cuda_array_interface__.  */

#include "gm-python.h"

#include <stdlib.h>
#include <string.h>

#include "py-dlpack.h"

_Static_assert (sizeof (Py_ssize_t) == sizeof (int64_t),
                "a DeviceArray's shape is lent as DLPack's int64_t shape");

/* The producer.  */

/* Sets the Python exception that is set as ERROR_CTX/SET_ERROR's error
   (an allocator reports errors that way), and clears it.  */
static void
report_error (void *error_ctx,
              void (*set_error) (void *, const char *, const char *))
{
  PyObject *type, *value, *traceback, *text = NULL;
  const char *message = NULL;

  PyErr_Fetch (&type, &value, &traceback);
  PyErr_NormalizeException (&type, &value, &traceback);
  if (value != NULL)
    text = PyObject_Str (value);
  if (text != NULL)
    message = PyUnicode_AsUTF8 (text);
  if (message == NULL)
    {
      PyErr_Clear ();
      message = "gpumem could not allocate the tensor";
    }
  if (set_error != NULL)
    set_error (error_ctx, type != NULL ? GMPY_TYPE_NAME ((PyTypeObject *) type)
                                       : "RuntimeError", message);
  Py_XDECREF (text);
  Py_XDECREF (type);
  Py_XDECREF (value);
  Py_XDECREF (traceback);
}

/* Which gpumem dtype DLPack's DTYPE is, or -1.  */
static int
dtype_of (gm_dl_data_type dtype)
{
  for (int d = 0; d < GM_NDTYPES; d++)
    if (dtype.lanes == 1 && dtype.code == gm_dtypes[d].dlpack_code
        && dtype.bits == gm_dtypes[d].itemsize * 8)
      return d;
  return -1;
}

/* managed_tensor_allocator: a new C-contiguous DeviceArray of
   PROTOTYPE's dtype, shape and device (its device type must be the
   backend's), exported into *OUT.  Takes the GIL for itself.  */
static int
exch_allocator (gm_dl_tensor *prototype,
                gm_dl_managed_tensor_versioned **out, void *error_ctx,
                void (*set_error) (void *, const char *, const char *))
{
  PyGILState_STATE gil = PyGILState_Ensure ();
  Py_ssize_t dims[GM_MAX_NDIM];
  arraypy_object *array = NULL;
  int dtype, device, result = -1;

  *out = NULL;
  if (gmpy_state_get () == NULL)
    {
      PyErr_SetString (PyExc_RuntimeError, "gpumem's DLPack allocator: the "
                       "gpumem module is not initialized");
      goto done;
    }
  dtype = dtype_of (prototype->dtype);
  if (dtype < 0 || prototype->ndim < 0 || prototype->ndim > GM_MAX_NDIM
      || (prototype->ndim > 0 && prototype->shape == NULL))
    {
      PyErr_Format (PyExc_ValueError, "gpumem's DLPack allocator: dtype "
                    "(code %d, %d bits, %d lanes) with %d dimensions is not "
                    "one gpumem makes", (int) prototype->dtype.code,
                    (int) prototype->dtype.bits, (int) prototype->dtype.lanes,
                    (int) prototype->ndim);
      goto done;
    }
  if (prototype->device.device_type != gm_backend_current->dlpack_device_type)
    {
      PyErr_Format (PyExc_ValueError, "gpumem's DLPack allocator: the %s "
                    "backend makes memory of DLPack device type %d, not %d",
                    gm_backend_current->name,
                    gm_backend_current->dlpack_device_type,
                    (int) prototype->device.device_type);
      goto done;
    }
  device = prototype->device.device_type == GM_DL_CPU
             ? gmpy_current_device () : prototype->device.device_id;
  if (device < 0 || device >= gm_backend_current->device_count ())
    {
      PyErr_Format (PyExc_ValueError, "gpumem's DLPack allocator: device %d "
                    "does not exist", device);
      goto done;
    }
  for (int i = 0; i < prototype->ndim; i++)
    {
      if (prototype->shape[i] < 0)
        {
          PyErr_Format (PyExc_ValueError, "gpumem's DLPack allocator: "
                        "dimension %d has length %lld", i,
                        (long long) prototype->shape[i]);
          goto done;
        }
      dims[i] = (Py_ssize_t) prototype->shape[i];
    }
  if (gmpy_shape_fits (prototype->ndim, dims, -1, gm_dtypes[dtype].itemsize,
                       "gpumem's DLPack allocator: the tensor") < 0)
    goto done;
  array = gmpy_array_new (prototype->ndim, dims, (gm_dtype) dtype, device,
                          NULL);
  if (array == NULL)
    goto done;
  result = gmpy_dlpack_export ((PyObject *) array, out);

done:
  /* The export holds the array.  */
  Py_XDECREF ((PyObject *) array);
  if (result < 0)
    report_error (error_ctx, set_error);
  PyGILState_Release (gil);
  return result;
}

/* 0 when PY_OBJECT is a DeviceArray, else -1 with TypeError naming
   WHAT.  */
static int
need_array (PyObject *obj, const char *what)
{
  if (obj != NULL && gmpy_state_get () != NULL && gmpy_array_check (obj))
    return 0;
  PyErr_Format (PyExc_TypeError, "gpumem's DLPack exchange API: %s needs a "
                "gpumem.DeviceArray, not %.100s", what,
                obj != NULL ? GMPY_TYPE_NAME (Py_TYPE (obj)) : "NULL");
  return -1;
}

/* managed_tensor_from_py_object_no_sync.  */
static int
exch_from_py_object (void *py_object, gm_dl_managed_tensor_versioned **out)
{
  *out = NULL;
  if (need_array (py_object, "managed_tensor_from_py_object_no_sync") < 0)
    return -1;
  return gmpy_dlpack_export (py_object, out);
}

/* managed_tensor_to_py_object_no_sync: TENSOR wrapped as from_dlpack
   wraps a capsule's (its deleter is called once the memory's last
   DeviceArray goes, or at once when it cannot be wrapped).  */
static int
exch_to_py_object (gm_dl_managed_tensor_versioned *tensor,
                   void **out_py_object)
{
  PyObject *array;

  *out_py_object = NULL;
  if (tensor == NULL)
    {
      PyErr_SetString (PyExc_ValueError, "gpumem's DLPack exchange API: "
                       "managed_tensor_to_py_object_no_sync got NULL");
      return -1;
    }
  if (gmpy_state_get () == NULL)
    {
      PyErr_SetString (PyExc_RuntimeError, "gpumem's DLPack exchange API: "
                       "the gpumem module is not initialized");
      if (tensor->deleter != NULL)
        tensor->deleter (tensor);
      return -1;
    }
  array = gmpy_dlpack_wrap (tensor);
  if (array == NULL)
    return -1;
  *out_py_object = array;
  return 0;
}

/* dltensor_from_py_object_no_sync: the DeviceArray's own shape, and its
   strides in elements (kept on the array from the first such call).  */
static int
exch_dltensor_from_py_object (void *py_object, gm_dl_tensor *out)
{
  arraypy_object *array = py_object;

  if (need_array (py_object, "dltensor_from_py_object_no_sync") < 0
      || gmpy_array_usable (array) < 0)
    return -1;
  if (array->dl_strides == NULL && array->ndim > 0)
    {
      Py_ssize_t itemsize = (Py_ssize_t) gm_dtypes[array->dtype].itemsize;
      array->dl_strides = malloc ((size_t) array->ndim * sizeof (int64_t));
      if (array->dl_strides == NULL)
        {
          PyErr_NoMemory ();
          return -1;
        }
      for (int i = 0; i < array->ndim; i++)
        array->dl_strides[i] = array->strides[i] / itemsize;
    }
  out->data = array->data;
  out->device.device_type = gm_backend_current->dlpack_device_type;
  out->device.device_id = out->device.device_type == GM_DL_CPU
                            ? 0 : array->device;
  out->ndim = array->ndim;
  out->dtype.code = gm_dtypes[array->dtype].dlpack_code;
  out->dtype.bits = (uint8_t) (gm_dtypes[array->dtype].itemsize * 8);
  out->dtype.lanes = 1;
  out->shape = array->ndim > 0 ? (int64_t *) array->shape : NULL;
  out->strides = array->dl_strides;
  out->byte_offset = 0;
  return 0;
}

/* current_work_stream: gpumem's stream rule for DEVICE_ID; NULL for
   memory that is not the backend's (host memory has no stream).  */
static int
exch_current_work_stream (int32_t device_type, int32_t device_id,
                          void **out_stream)
{
  *out_stream = NULL;
  if (gmpy_state_get () == NULL
      || device_type != gm_backend_current->dlpack_device_type
      || device_type == GM_DL_CPU)
    return 0;
  if (gmpy_device_check (device_id) < 0)
    return -1;
  return gmpy_dispatch_handle (device_id, out_stream);
}

static const gm_dl_exchange_api exchange_api = {
  .header = {
    .version = {GM_DLPACK_EXCHANGE_MAJOR, GM_DLPACK_EXCHANGE_MINOR},
    .prev_api = NULL,
  },
  .managed_tensor_allocator = exch_allocator,
  .managed_tensor_from_py_object_no_sync = exch_from_py_object,
  .managed_tensor_to_py_object_no_sync = exch_to_py_object,
  .dltensor_from_py_object_no_sync = exch_dltensor_from_py_object,
  .current_work_stream = exch_current_work_stream,
};

int
gmpy_exchange_init (PyTypeObject *type)
{
  PyObject *capsule = PyCapsule_New ((void *) &exchange_api,
                                     GM_DLPACK_EXCHANGE_CAPSULE, NULL);
  int result;

  if (capsule == NULL)
    return -1;
  /* The type is immutable to Python code: set it in its dictionary
     before the type is in use (the limited API has no tp_dict: the
     generic setter writes the same dictionary, past type's own setter,
     which refuses an immutable type).  */
#ifdef Py_LIMITED_API
  {
    PyObject *name = PyUnicode_InternFromString (GM_DLPACK_EXCHANGE_ATTR);
    result = name != NULL
               ? PyObject_GenericSetAttr ((PyObject *) type, name, capsule)
               : -1;
    Py_XDECREF (name);
  }
#else
  result = PyDict_SetItemString (type->tp_dict, GM_DLPACK_EXCHANGE_ATTR,
                                 capsule);
#endif
  Py_DECREF (capsule);
  PyType_Modified (type);
  return result;
}

/* The consumer.  */

/* Types seen, with the table each publishes (NULL: none).  A small
   table replaced round-robin: a call site meets few types.  */
#define TYPE_CACHE_SIZE 16

static struct
{
  PyTypeObject *type;           /* a strong reference, or NULL */
  const gm_dl_exchange_api *api;
} type_cache[TYPE_CACHE_SIZE];
static int type_cache_next;

void
gmpy_exchange_clear (void)
{
  for (int i = 0; i < TYPE_CACHE_SIZE; i++)
    {
      Py_CLEAR (type_cache[i].type);
      type_cache[i].api = NULL;
    }
  type_cache_next = 0;
}

/* The table TYPE publishes, read from its attribute: a major version
   gpumem reads, walking prev_api for one.  NULL when none; never
   fails.  */
static const gm_dl_exchange_api *
lookup_api (PyTypeObject *type)
{
  PyObject *capsule = PyObject_GetAttrString ((PyObject *) type,
                                              GM_DLPACK_EXCHANGE_ATTR);
  const gm_dl_exchange_header *header = NULL;

  if (capsule == NULL)
    {
      PyErr_Clear ();
      return NULL;
    }
  if (PyCapsule_IsValid (capsule, GM_DLPACK_EXCHANGE_CAPSULE))
    header = PyCapsule_GetPointer (capsule, GM_DLPACK_EXCHANGE_CAPSULE);
  /* Tables are static for the process's life: the capsule may go.  */
  Py_DECREF (capsule);
  while (header != NULL && header->version.major != GM_DLPACK_EXCHANGE_MAJOR)
    header = header->prev_api;
  if (header != NULL)
    {
      const gm_dl_exchange_api *api = (const gm_dl_exchange_api *) header;
      if (api->managed_tensor_from_py_object_no_sync == NULL
          || api->current_work_stream == NULL)
        header = NULL;
    }
  return (const gm_dl_exchange_api *) header;
}

const gm_dl_exchange_api *
gmpy_exchange_api_of (PyObject *obj)
{
  PyTypeObject *type = Py_TYPE (obj);
  const gm_dl_exchange_api *api;
  int slot;

  for (int i = 0; i < TYPE_CACHE_SIZE; i++)
    if (type_cache[i].type == type)
      return type_cache[i].api;
  /* Common types that never carry one are not worth a slot.  */
  if (PyLong_CheckExact (obj) || PyFloat_CheckExact (obj) || obj == Py_None
      || PyUnicode_CheckExact (obj) || PyTuple_CheckExact (obj)
      || PyList_CheckExact (obj) || PyDict_CheckExact (obj))
    return NULL;
  api = lookup_api (type);
  slot = type_cache_next;
  type_cache_next = (type_cache_next + 1) % TYPE_CACHE_SIZE;
  Py_XDECREF ((PyObject *) type_cache[slot].type);
  type_cache[slot].type = (PyTypeObject *) Py_NewRef ((PyObject *) type);
  type_cache[slot].api = api;
  return api;
}

/* Makes gpumem's default stream on DEVICE wait (no host wait) for the
   work queued on the cudaStream_t HANDLE so far.  0, or -1 with an
   exception.  */
int
gmpy_default_stream_wait (int device, void *handle)
{
  gm_stream *wrapped = NULL;
  gm_status status;

  if (handle == NULL || gm_backend_current->device_memory != GM_MEMORY_CUDA)
    return 0;
  status = gm_backend_current->stream_wrap (device, handle, &wrapped);
  if (status == GM_OK)
    status = gm_backend_current->foreign_stream_wait (device, wrapped,
                                                      (void *) (uintptr_t) 1);
  if (wrapped != NULL)
    gm_backend_current->stream_destroy (wrapped);
  return status == GM_OK ? 0 : gmpy_raise_int (status);
}

PyObject *
gmpy_exchange_take (PyObject *obj, const gm_dl_exchange_api *api)
{
  gm_dl_managed_tensor_versioned *managed = NULL;
  void *stream = NULL;
  gm_dl_device device;

  if (api->managed_tensor_from_py_object_no_sync (obj, &managed) < 0)
    return NULL;
  if (managed == NULL)
    {
      PyErr_Format (PyExc_BufferError, "%.100s's DLPack exchange API gave "
                    "no tensor", GMPY_TYPE_NAME (Py_TYPE (obj)));
      return NULL;
    }
  /* Nothing was synchronized: gpumem's default stream, which its reads
     and writes follow, waits for the producer's current stream.  */
  device = managed->version.major == GM_DLPACK_MAJOR
             ? managed->dl_tensor.device : (gm_dl_device) {0, 0};
  if ((device.device_type == GM_DL_CUDA
       || device.device_type == GM_DL_CUDA_MANAGED)
      && gm_backend_current->device_memory == GM_MEMORY_CUDA
      && device.device_id >= 0
      && device.device_id < gm_backend_current->device_count ())
    {
      if (api->current_work_stream (device.device_type, device.device_id,
                                    &stream) < 0
          || gmpy_default_stream_wait (device.device_id, stream) < 0)
        {
          if (managed->deleter != NULL)
            managed->deleter (managed);
          return NULL;
        }
    }
  return gmpy_dlpack_wrap (managed);
}
