/* py-dlpack-import.c -- DLPack's consumer, its low level: a managed
   tensor, versioned (DLPack 1.x) or legacy, checked field by field and
   wrapped in a DeviceArray, from a "dltensor" or "dltensor_versioned"
   capsule (renamed "used_..." once taken) or from the C exchange API
   (gmpy_dlpack_wrap).  The DeviceArray's base is a holder capsule
   ("gpumem.dlpack_holder...") that calls the producer's deleter once,
   when the last array using the memory goes.

   The layout of the exchanged structures is in dlpack-abi.h.  */

#include "gm-python.h"


#include "py-dlpack.h"

#define HOLDER_LEGACY "gpumem.dlpack_holder"
#define HOLDER_VERSIONED "gpumem.dlpack_holder_versioned"

/* Whether the backend's device memory is CUDA memory (else host
   memory, kDLCPU).  */
static bool
backend_is_cuda (void)
{
  return gm_backend_current->device_memory == GM_MEMORY_CUDA;
}

void
gmpy_dlpack_capsule_delete (PyObject *capsule, const char *versioned,
                       const char *legacy)
{
  PyObject *saved_type, *saved_value, *saved_tb;

  PyErr_Fetch (&saved_type, &saved_value, &saved_tb);
  if (PyCapsule_IsValid (capsule, versioned))
    {
      gm_dl_managed_tensor_versioned *tensor
        = PyCapsule_GetPointer (capsule, versioned);
      if (tensor->deleter != NULL)
        tensor->deleter (tensor);
    }
  else if (PyCapsule_IsValid (capsule, legacy))
    {
      gm_dl_managed_tensor *tensor = PyCapsule_GetPointer (capsule, legacy);
      if (tensor->deleter != NULL)
        tensor->deleter (tensor);
    }
  PyErr_Restore (saved_type, saved_value, saved_tb);
}

/* The destructor of the holder capsule that a DeviceArray made by
   from_dlpack has as its base: the producer's deleter, once.  */
static void
holder_destructor (PyObject *holder)
{
  gmpy_dlpack_capsule_delete (holder, HOLDER_VERSIONED, HOLDER_LEGACY);
}

/* Names DLPack device type TYPE for messages.  */
static const char *
dl_device_name (int32_t type)
{
  switch (type)
    {
    case GM_DL_CPU:
      return "CPU";
    case GM_DL_CUDA:
      return "CUDA";
    case GM_DL_CUDA_HOST:
      return "CUDA pinned host";
    case GM_DL_CUDA_MANAGED:
      return "CUDA managed";
    default:
      return "non-CUDA";
    }
}

/* Whether the backend can use memory of DLPack device type TYPE.  */
static bool
device_type_usable (int32_t type)
{
  if (backend_is_cuda ())
    return type == GM_DL_CUDA || type == GM_DL_CUDA_MANAGED;
  return type == GM_DL_CPU || type == GM_DL_CUDA_HOST;
}

bool
gmpy_dlpack_device_usable (int32_t type)
{
  return device_type_usable (type);
}

int
gmpy_dlpack_wrong_device (int32_t type)
{
  PyErr_Format (PyExc_BufferError, "from_dlpack: the data is in %s memory "
                "(DLPack device type %d); the %s backend takes %s",
                dl_device_name (type), (int) type, gm_backend_current->name,
                backend_is_cuda () ? "CUDA device memory (gpumem.to_device "
                                     "copies host data)"
                                   : "host memory");
  return -1;
}

/* Checks TENSOR, the DLTensor of a capsule, and reads what a DeviceArray
   needs: *NDIM, DIMS, STRIDES (bytes), *DTYPE, *DEVICE and *DATA.  0, or
   -1 with BufferError (device, null data), TypeError (data type) or
   ValueError (shape, strides that are not usable); TENSOR is left as it
   was.  */
static int
read_tensor (const gm_dl_tensor *tensor, int *ndim,
             Py_ssize_t dims[GM_MAX_NDIM], Py_ssize_t strides[GM_MAX_NDIM],
             gm_dtype *dtype, int *device, char **data)
{
  Py_ssize_t size;
  int found = -1;

  if (!device_type_usable (tensor->device.device_type))
    return gmpy_dlpack_wrong_device (tensor->device.device_type);
  if (backend_is_cuda ())
    {
      if (tensor->device.device_id < 0
          || tensor->device.device_id >= gm_backend_current->device_count ())
        {
          PyErr_Format (PyExc_BufferError, "from_dlpack: the data is on CUDA "
                        "device %d, which gpumem does not see (it has %d)",
                        (int) tensor->device.device_id,
                        gm_backend_current->device_count ());
          return -1;
        }
      *device = tensor->device.device_id;
    }
  else
    *device = gmpy_current_device ();

  for (int d = 0; d < GM_NDTYPES && found < 0; d++)
    if (tensor->dtype.lanes == 1
        && tensor->dtype.code == gm_dtypes[d].dlpack_code
        && tensor->dtype.bits == gm_dtypes[d].itemsize * 8)
      found = d;
  if (found < 0)
    {
      PyErr_Format (PyExc_TypeError, "from_dlpack: the DLPack data type "
                    "(code %d, %d bits, %d lanes) is not supported; gpumem "
                    "supports bool, int8-64, uint8-64, float16/32/64, "
                    "complex64 and complex128", (int) tensor->dtype.code,
                    (int) tensor->dtype.bits, (int) tensor->dtype.lanes);
      return -1;
    }
  *dtype = (gm_dtype) found;

  if (tensor->ndim < 0 || tensor->ndim > GM_MAX_NDIM)
    {
      PyErr_Format (PyExc_ValueError, "from_dlpack: %d dimensions; gpumem "
                    "supports 0 to %d", (int) tensor->ndim, GM_MAX_NDIM);
      return -1;
    }
  *ndim = tensor->ndim;
  for (int i = 0; i < *ndim; i++)
    {
      if (tensor->shape[i] < 0 || tensor->shape[i] > PY_SSIZE_T_MAX)
        {
          PyErr_Format (PyExc_ValueError, "from_dlpack: dimension %d has "
                        "length %lld", i, (long long) tensor->shape[i]);
          return -1;
        }
      dims[i] = (Py_ssize_t) tensor->shape[i];
    }
  if (gmpy_shape_fits (*ndim, dims, -1, gm_dtypes[found].itemsize,
                       "from_dlpack: the array") < 0)
    return -1;
  size = gmpy_shape_size (*ndim, dims);

  {
    /* Strides in elements (NULL: C-contiguous), kept in bytes.  */
    Py_ssize_t itemsize = (Py_ssize_t) gm_dtypes[found].itemsize;
    Py_ssize_t stride = itemsize;
    bool contiguous;
    for (int i = *ndim - 1; i >= 0; i--)
      {
        if (tensor->strides == NULL)
          strides[i] = stride;
        else if (__builtin_mul_overflow ((Py_ssize_t) tensor->strides[i],
                                         itemsize, &strides[i]))
          {
            PyErr_Format (PyExc_ValueError, "from_dlpack: stride %lld of "
                          "dimension %d is too large",
                          (long long) tensor->strides[i], i);
            return -1;
          }
        stride *= dims[i] > 1 ? dims[i] : 1;
      }
    if (size > 1
        && gmpy_strides_check (*ndim, dims, strides, (size_t) itemsize,
                               &contiguous, "from_dlpack") < 0)
      return -1;
  }
  if (tensor->data == NULL && size > 0)
    {
      PyErr_SetString (PyExc_BufferError, "from_dlpack: the DLPack tensor "
                                          "has no data pointer");
      return -1;
    }
  *data = tensor->data != NULL
            ? (char *) tensor->data + tensor->byte_offset : NULL;
  return 0;
}

/* Wraps MANAGED, a DLManagedTensorVersioned (VERSIONED) or a
   DLManagedTensor, in a DeviceArray that calls its deleter when the
   last array using the memory goes, after checking it all.  CAPSULE,
   when not NULL, is the capsule MANAGED came in: it is renamed
   "used_..." once the tensor is ours, and left untouched on a failed
   check (its destructor then deletes the tensor); without a capsule a
   failed check deletes the tensor.  New reference, or NULL with an
   exception.  */
static PyObject *
wrap_managed (void *managed, bool versioned, PyObject *capsule)
{
  Py_ssize_t dims[GM_MAX_NDIM], strides[GM_MAX_NDIM];
  const gm_dl_tensor *tensor;
  PyObject *holder, *result;
  bool readonly = false;
  /* Set by read_tensor; initialized for the compiler's sake.  */
  gm_dtype dtype = GM_FLOAT32;
  char *data = NULL;
  int ndim = 0, device = 0;

  if (versioned)
    {
      gm_dl_managed_tensor_versioned *mtv = managed;
      if (mtv->version.major != GM_DLPACK_MAJOR)
        {
          PyErr_Format (PyExc_BufferError, "from_dlpack: the tensor is "
                        "DLPack %u.%u; gpumem reads %d.x", mtv->version.major,
                        mtv->version.minor, GM_DLPACK_MAJOR);
          goto refused;
        }
      readonly = (mtv->flags & GM_DLPACK_FLAG_READ_ONLY) != 0;
      tensor = &mtv->dl_tensor;
    }
  else
    tensor = &((gm_dl_managed_tensor *) managed)->dl_tensor;
  if (read_tensor (tensor, &ndim, dims, strides, &dtype, &device, &data) < 0)
    goto refused;

  holder = PyCapsule_New (managed, versioned ? HOLDER_VERSIONED
                                             : HOLDER_LEGACY,
                          holder_destructor);
  if (holder == NULL)
    goto refused;
  /* The tensor is ours now: the holder calls its deleter, even if
     wrapping fails below.  */
  if (capsule != NULL
      && PyCapsule_SetName (capsule, versioned ? GM_DLTENSOR_USED_VERSIONED
                                               : GM_DLTENSOR_USED) < 0)
    {
      /* Renaming a valid capsule does not fail; if it ever did, the
         producer's destructor still owns the tensor.  */
      PyCapsule_SetDestructor (holder, NULL);
      Py_DECREF (holder);
      return NULL;
    }
  result = gmpy_array_wrap (ndim, dims, dtype, device, data, readonly,
                            holder);
  Py_DECREF (holder);
  if (result != NULL)
    {
      gmpy_array_set_strides ((arraypy_object *) result, strides);
      /* Another library's managed memory: prefetch, advice and
         np.asarray take it as they take gpumem's.  */
      if (tensor->device.device_type == GM_DL_CUDA_MANAGED)
        ((arraypy_object *) result)->memory = GMPY_MEMORY_MANAGED;
    }
  return result;

refused:
  if (capsule == NULL)
    {
      PyObject *saved_type, *saved_value, *saved_tb;
      PyErr_Fetch (&saved_type, &saved_value, &saved_tb);
      if (versioned && ((gm_dl_managed_tensor_versioned *) managed)->deleter)
        ((gm_dl_managed_tensor_versioned *) managed)->deleter (managed);
      else if (!versioned && ((gm_dl_managed_tensor *) managed)->deleter)
        ((gm_dl_managed_tensor *) managed)->deleter (managed);
      PyErr_Restore (saved_type, saved_value, saved_tb);
    }
  return NULL;
}

PyObject *
gmpy_dlpack_wrap (gm_dl_managed_tensor_versioned *managed)
{
  return wrap_managed (managed, true, NULL);
}

int
gmpy_dlpack_read_tensor (const gm_dl_tensor *tensor, int *ndim,
                         Py_ssize_t dims[GM_MAX_NDIM],
                         Py_ssize_t strides[GM_MAX_NDIM], gm_dtype *dtype,
                         int *device, char **data)
{
  return read_tensor (tensor, ndim, dims, strides, dtype, device, data);
}

PyObject *
gmpy_dlpack_consume_capsule (PyObject *capsule)
{
  bool versioned;
  void *managed;

  if (PyCapsule_IsValid (capsule, GM_DLTENSOR_VERSIONED))
    versioned = true;
  else if (PyCapsule_IsValid (capsule, GM_DLTENSOR))
    versioned = false;
  else if (PyCapsule_IsValid (capsule, GM_DLTENSOR_USED_VERSIONED)
           || PyCapsule_IsValid (capsule, GM_DLTENSOR_USED))
    {
      PyErr_SetString (PyExc_BufferError, "from_dlpack: this DLPack capsule "
                       "was already consumed; a capsule can be used once");
      return NULL;
    }
  else
    {
      PyErr_SetString (PyExc_TypeError, "from_dlpack: the capsule is not a "
                       "DLPack capsule (named \"dltensor\" or "
                       "\"dltensor_versioned\")");
      return NULL;
    }
  managed = PyCapsule_GetPointer (capsule, versioned ? GM_DLTENSOR_VERSIONED
                                                     : GM_DLTENSOR);
  if (managed == NULL)
    return NULL;
  return wrap_managed (managed, versioned, capsule);
}
