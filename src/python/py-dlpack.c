/* py-dlpack.c -- DLPack, both ways.

   Producer: DeviceArray.__dlpack__ and __dlpack_device__.  An export is
   one malloc'd block holding the managed tensor, its shape and strides,
   and strong references to the exported array (and its owner), so the
   memory outlives every gpumem reference until the consumer calls the
   deleter.  The capsule is "dltensor_versioned" (DLPack 1.x, read-only
   flag) for consumers that ask for max_version >= (1, 0), else the
   legacy "dltensor".  A consumer renames the capsule to "used_..." and
   owns the deleter; the capsule's destructor deletes only capsules no
   one consumed.

   Consumer: gpumem.from_dlpack.  It asks the producer for its data on
   gpumem's stream (CUDA's legacy default stream, which gpumem's own
   streams follow), checks every field before taking the capsule, renames
   it, and wraps the memory in a DeviceArray whose base is a holder
   capsule ("gpumem.dlpack_holder...") that calls the producer's deleter
   once, when the last array using the memory goes.

   The layout of the exchanged structures is in dlpack-abi.h.  */

#include "gm-python.h"

#include <stdlib.h>
#include <string.h>

#include "dlpack-abi.h"

#define CAPSULE_LEGACY "dltensor"
#define CAPSULE_VERSIONED "dltensor_versioned"
#define CAPSULE_USED_LEGACY "used_dltensor"
#define CAPSULE_USED_VERSIONED "used_dltensor_versioned"
#define HOLDER_LEGACY "gpumem.dlpack_holder"
#define HOLDER_VERSIONED "gpumem.dlpack_holder_versioned"

/* The CUDA Array Interface / DLPack stream numbers with a meaning.  */
#define STREAM_NO_SYNC (-1)
#define STREAM_LEGACY 1

/* Whether the backend's device memory is CUDA memory (else host
   memory, kDLCPU).  */
static bool
backend_is_cuda (void)
{
  return gm_backend_current->device_memory == GM_MEMORY_CUDA;
}

/* The producer.  */

/* One export: the managed tensor first, so that the pointer the deleter
   gets is the block's.  */
typedef struct export_block
{
  union
  {
    gm_dl_managed_tensor legacy;
    gm_dl_managed_tensor_versioned versioned;
  } tensor;
  /* What keeps the memory alive: the exported DeviceArray, or the NumPy
     array of a copy to the host.  A strong reference.  */
  PyObject *owner;
  /* The exported DeviceArray, whose export count this block holds, or
     NULL for a copy to the host.  Borrowed from OWNER.  */
  arraypy_object *array;
  /* Shape, then strides: 2 * ndim elements.  */
  int64_t dims[];
} export_block;

/* Ends export BLOCK: drops its references, so that the memory goes
   when gpumem no longer uses it either, and frees the block.  Safe from
   any thread, with or without the GIL.  Once the interpreter is ending
   (Py_IsInitialized () is false from the start of finalization) the
   references are left alone: the backend's shutdown and the process's
   exit reclaim what they hold.  */
static void
export_free (export_block *block)
{
  /* Nothing here may use the module's state: a consumer may let go
     while the interpreter is finalizing, or after.  */
  if (Py_IsInitialized ())
    {
      PyGILState_STATE gil = PyGILState_Ensure ();
      PyObject *saved_type, *saved_value, *saved_tb;

      PyErr_Fetch (&saved_type, &saved_value, &saved_tb);
      if (block->array != NULL)
        gmpy_array_exports_add (block->array, -1);
      Py_DECREF (block->owner);
      PyErr_Restore (saved_type, saved_value, saved_tb);
      PyGILState_Release (gil);
    }
  free (block);
}

static void
export_delete_legacy (gm_dl_managed_tensor *self)
{
  export_free ((export_block *) self->manager_ctx);
}

static void
export_delete_versioned (gm_dl_managed_tensor_versioned *self)
{
  export_free ((export_block *) self->manager_ctx);
}

/* Calls the deleter of the managed tensor that CAPSULE holds under the
   name VERSIONED (a DLManagedTensorVersioned) or LEGACY (a
   DLManagedTensor), if it holds one and it has a deleter.  A capsule
   destructor: leaves any pending exception as it was.  */
static void
capsule_delete_tensor (PyObject *capsule, const char *versioned,
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

/* The destructor of the capsules __dlpack__ makes: a capsule no one
   consumed still owns its tensor and deletes it; a consumer renamed the
   one it took and calls the deleter itself.  */
static void
export_capsule_destructor (PyObject *capsule)
{
  capsule_delete_tensor (capsule, CAPSULE_VERSIONED, CAPSULE_LEGACY);
}

/* The DLPack device of the backend's memory on DEVICE.  */
static gm_dl_device
device_of (int device)
{
  gm_dl_device dl;

  dl.device_type = gm_backend_current->dlpack_device_type;
  /* kDLCPU has one device, 0: the host backend's devices share it.  */
  dl.device_id = dl.device_type == GM_DL_CPU ? 0 : device;
  return dl;
}

/* A new export of NDIM, SHAPE, BYTE_STRIDES (NULL: C-contiguous) and
   DTYPE at DATA on DL_DEVICE, kept alive by OWNER (a new strong
   reference is taken).  ARRAY, when not NULL, is the DeviceArray OWNER
   is, whose exports count this one.  VERSIONED picks the structure;
   FLAGS are the versioned flags.  The block, whose deleter ends it, or
   NULL with MemoryError.  */
static export_block *
export_new (PyObject *owner, arraypy_object *array, void *data, int ndim,
            const Py_ssize_t *shape, const Py_ssize_t *byte_strides,
            gm_dtype dtype, gm_dl_device dl_device, bool versioned,
            uint64_t flags)
{
  export_block *block;
  gm_dl_tensor *tensor;
  int64_t stride = 1;

  block = calloc (1, sizeof *block + 2 * (size_t) ndim * sizeof (int64_t));
  if (block == NULL)
    {
      PyErr_NoMemory ();
      return NULL;
    }
  if (versioned)
    {
      block->tensor.versioned.version.major = GM_DLPACK_MAJOR;
      block->tensor.versioned.version.minor = GM_DLPACK_MINOR;
      block->tensor.versioned.manager_ctx = block;
      block->tensor.versioned.deleter = export_delete_versioned;
      block->tensor.versioned.flags = flags;
      tensor = &block->tensor.versioned.dl_tensor;
    }
  else
    {
      block->tensor.legacy.manager_ctx = block;
      block->tensor.legacy.deleter = export_delete_legacy;
      tensor = &block->tensor.legacy.dl_tensor;
    }
  tensor->data = data;
  tensor->device = dl_device;
  tensor->ndim = ndim;
  tensor->dtype.code = gm_dtypes[dtype].dlpack_code;
  tensor->dtype.bits = (uint8_t) (gm_dtypes[dtype].itemsize * 8);
  tensor->dtype.lanes = 1;
  /* Strides are always given: DLPack 1.2 and later require them.  */
  tensor->shape = block->dims;
  tensor->strides = block->dims + ndim;
  for (int i = ndim - 1; i >= 0; i--)
    {
      block->dims[i] = shape[i];
      block->dims[ndim + i] = byte_strides != NULL
        ? byte_strides[i] / (Py_ssize_t) gm_dtypes[dtype].itemsize : stride;
      /* Past an overflow the array is empty (a dimension is 0), and an
         empty array's strides are never used.  */
      if (__builtin_mul_overflow (stride, shape[i] > 1 ? shape[i] : 1,
                                  &stride))
        stride = 0;
    }
  tensor->byte_offset = 0;
  block->owner = Py_NewRef (owner);
  block->array = array;
  if (array != NULL)
    gmpy_array_exports_add (array, +1);
  return block;
}

/* A capsule holding a new export (export_new's arguments).  New
   reference, or NULL with MemoryError.  */
static PyObject *
export_capsule (PyObject *owner, arraypy_object *array, void *data, int ndim,
                const Py_ssize_t *shape, const Py_ssize_t *byte_strides,
                gm_dtype dtype,
                gm_dl_device dl_device, bool versioned, uint64_t flags)
{
  export_block *block = export_new (owner, array, data, ndim, shape,
                                    byte_strides, dtype, dl_device,
                                    versioned, flags);
  PyObject *capsule;

  if (block == NULL)
    return NULL;
  capsule = PyCapsule_New (&block->tensor,
                           versioned ? CAPSULE_VERSIONED : CAPSULE_LEGACY,
                           export_capsule_destructor);
  if (capsule == NULL)
    export_free (block);
  /* From here the capsule owns the block.  */
  return capsule;
}

int
gmpy_dlpack_export (PyObject *array_obj, gm_dl_managed_tensor_versioned **out)
{
  arraypy_object *array = (arraypy_object *) array_obj;
  export_block *block;

  *out = NULL;
  if (gmpy_array_usable (array) < 0)
    return -1;
  block = export_new (array_obj, array, array->data, array->ndim,
                      array->shape, array->contiguous ? NULL : array->strides,
                      array->dtype, device_of (array->device), true,
                      array->readonly ? GM_DLPACK_FLAG_READ_ONLY : 0);
  if (block == NULL)
    return -1;
  *out = &block->tensor.versioned;
  return 0;
}

/* Reads OBJ, a tuple of two ints, into *FIRST and *SECOND.  1, 0 when
   OBJ is None, or -1 with TypeError saying that NAME must be None or a
   tuple (FIELDS) of ints.  */
static int
int_pair_arg (PyObject *obj, const char *name, const char *fields,
              long *first, long *second)
{
  if (obj == Py_None)
    return 0;
  if (!PyTuple_Check (obj) || PyTuple_GET_SIZE (obj) != 2
      || !PyLong_Check (PyTuple_GET_ITEM (obj, 0))
      || !PyLong_Check (PyTuple_GET_ITEM (obj, 1)))
    {
      PyErr_Format (PyExc_TypeError, "%s must be None or a tuple (%s) of "
                    "ints, not %R", name, fields, obj);
      return -1;
    }
  *first = PyLong_AsLong (PyTuple_GET_ITEM (obj, 0));
  *second = PyLong_AsLong (PyTuple_GET_ITEM (obj, 1));
  return PyErr_Occurred () ? -1 : 1;
}

/* Reads the max_version= argument OBJ: *VERSIONED tells whether the
   consumer reads DLPack 1.x capsules.  0, or -1 with TypeError.  */
static int
max_version_arg (PyObject *obj, bool *versioned)
{
  long major, minor;
  int given = int_pair_arg (obj, "max_version", "major, minor", &major,
                            &minor);

  *versioned = given > 0 && major >= GM_DLPACK_MAJOR;
  return given < 0 ? -1 : 0;
}

/* Reads the dl_device= argument OBJ into *DEVICE (unchanged for None).
   0, or -1 with TypeError or ValueError.  */
static int
dl_device_arg (PyObject *obj, gm_dl_device *device)
{
  long type, id;
  int given = int_pair_arg (obj, "dl_device", "device_type, device_id",
                            &type, &id);

  if (given <= 0)
    return given;
  if (type < INT32_MIN || type > INT32_MAX || id < INT32_MIN
      || id > INT32_MAX)
    {
      PyErr_Format (PyExc_ValueError, "dl_device %R is out of range", obj);
      return -1;
    }
  device->device_type = (int32_t) type;
  device->device_id = (int32_t) id;
  return 0;
}

/* Reads the stream= argument OBJ for data on a CUDA device: *HANDLE is
   the consumer's stream to order after gpumem's work (None means the
   legacy default stream), or NULL for -1 (no synchronization).  0, or -1
   with TypeError or ValueError (0 and other negative numbers).  */
static int
cuda_stream_arg (PyObject *obj, void **handle)
{
  long long value;

  *handle = (void *) (uintptr_t) STREAM_LEGACY;
  if (obj == Py_None)
    return 0;
  if (gmpy_stream_number (obj, "stream", &value) < 0)
    return -1;
  if (value == STREAM_NO_SYNC)
    {
      *handle = NULL;
      return 0;
    }
  if (value == 0)
    {
      PyErr_SetString (PyExc_ValueError, "stream 0 is ambiguous and not "
                       "allowed by DLPack: use 1 for the legacy default "
                       "stream, 2 for the per-thread one");
      return -1;
    }
  if (value < 0)
    {
      PyErr_Format (PyExc_ValueError, "stream %lld is not a CUDA stream",
                    value);
      return -1;
    }
  *handle = (void *) (uintptr_t) value;
  return 0;
}

/* Reads the stream= argument OBJ for data in host memory, which needs no
   ordering: None or -1.  0, or -1 with TypeError or ValueError.  */
static int
host_stream_arg (PyObject *obj)
{
  long long value;

  if (obj == Py_None)
    return 0;
  if (gmpy_stream_number (obj, "stream", &value) < 0)
    return -1;
  if (value != STREAM_NO_SYNC)
    {
      PyErr_Format (PyExc_ValueError, "stream must be None for data in "
                    "host memory (DLPack device type kDLCPU), not %lld",
                    value);
      return -1;
    }
  return 0;
}

/* A new owner array holding a copy of ARRAY, made on the default stream
   (so ordered before whatever is queued there next).  New reference or
   NULL.  */
static arraypy_object *
device_copy (arraypy_object *array)
{
  arraypy_object *copy;
  PyObject *held;

  if (!array->contiguous)
    return (arraypy_object *) gmpy_array_copy ((PyObject *) array, NULL);
  copy = gmpy_array_new (array->ndim, array->shape, array->dtype,
                         array->device, NULL);
  if (copy == NULL)
    return NULL;
  /* The copy may run without the GIL: ARRAY stays alive through it.  */
  held = gmpy_array_hold ((PyObject *) array);
  if (gmpy_backend_copy (copy->data, array->device, array->data,
                         array->device, gmpy_array_nbytes (array), NULL) < 0)
    Py_CLEAR (copy);
  gmpy_array_unhold (held);
  return copy;
}

/* DeviceArray.__dlpack__ (*, stream, max_version, dl_device, copy): a
   new capsule exporting SELF's memory (a fresh copy's with COPY True, a
   host copy's for DL_DEVICE (kDLCPU, 0) on the cuda backend unless COPY
   is False), versioned when MAX_VERSION >= (1, 0).  On a CUDA device the
   consumer's STREAM (None: the legacy default stream; -1: none) is made
   to wait for gpumem's work first.  NULL with TypeError or ValueError
   for bad arguments, BufferError for a device it cannot export to or a
   read-only array in a legacy capsule, ValueError for a freed array.  */
PyObject *
gmpy_array_dlpack (PyObject *self, PyObject *args, PyObject *kwargs)
{
  static char *keywords[] = {"stream", "max_version", "dl_device", "copy",
                             NULL};
  arraypy_object *array = (arraypy_object *) self;
  PyObject *stream_obj = Py_None, *max_version = Py_None;
  PyObject *dl_device_obj = Py_None, *copy_obj = Py_None;
  PyObject *owner = NULL, *capsule = NULL;
  gm_dl_device ours = device_of (array->device), wanted = ours;
  bool versioned, to_host = false, copy;
  uint64_t flags = 0;
  void *handle = NULL;
  Py_buffer view;

  if (!PyArg_ParseTupleAndKeywords (args, kwargs, "|$OOOO:__dlpack__",
                                    keywords, &stream_obj, &max_version,
                                    &dl_device_obj, &copy_obj)
      || gmpy_array_usable (array) < 0
      || max_version_arg (max_version, &versioned) < 0
      || dl_device_arg (dl_device_obj, &wanted) < 0)
    return NULL;
  if (copy_obj != Py_None && !PyBool_Check (copy_obj))
    {
      PyErr_Format (PyExc_TypeError, "copy must be None, True or False, not "
                    "%.100s", Py_TYPE (copy_obj)->tp_name);
      return NULL;
    }
  copy = copy_obj == Py_True;
  if (wanted.device_type != ours.device_type
      || wanted.device_id != ours.device_id)
    {
      /* Another device is reachable only through a copy to the host.  */
      if (wanted.device_type == GM_DL_CPU && wanted.device_id == 0
          && copy_obj != Py_False)
        to_host = true;
      else
        {
          PyErr_Format (PyExc_BufferError, "__dlpack__: the array is on "
                        "DLPack device (%d, %d); it cannot be exported to "
                        "(%d, %d)%s", (int) ours.device_type,
                        (int) ours.device_id, (int) wanted.device_type,
                        (int) wanted.device_id,
                        wanted.device_type == GM_DL_CPU && copy_obj == Py_False
                          ? " without a copy (copy=False)" : "");
          return NULL;
        }
    }
  if (array->readonly && !versioned && !copy && !to_host)
    {
      PyErr_SetString (PyExc_BufferError, "__dlpack__: the array is "
                       "read-only, which a legacy DLPack capsule cannot say; "
                       "ask for max_version=(1, 0) or copy=True");
      return NULL;
    }
  if ((to_host || !backend_is_cuda ())
        ? host_stream_arg (stream_obj) < 0
        : cuda_stream_arg (stream_obj, &handle) < 0)
    return NULL;

  if (to_host)
    {
      PyObject *method = PyObject_GetAttrString (self, "copy_to_host");
      if (method == NULL)
        return NULL;
      owner = PyObject_CallNoArgs (method);
      Py_DECREF (method);
      if (owner == NULL)
        return NULL;
      /* The copy is C-contiguous and complete: export its memory.  */
      if (PyObject_GetBuffer (owner, &view, PyBUF_C_CONTIGUOUS) < 0)
        goto done;
      capsule = export_capsule (owner, NULL,
                                array->size > 0 ? view.buf : NULL,
                                array->ndim, array->shape, NULL, array->dtype,
                                wanted, versioned, GM_DLPACK_FLAG_IS_COPIED);
      PyBuffer_Release (&view);
      goto done;
    }
  if (copy)
    {
      owner = (PyObject *) device_copy (array);
      if (owner == NULL)
        return NULL;
      flags |= GM_DLPACK_FLAG_IS_COPIED;
    }
  else
    {
      owner = Py_NewRef (self);
      if (array->readonly)
        flags |= GM_DLPACK_FLAG_READ_ONLY;
    }
  if (handle != NULL)
    {
      /* The consumer's stream waits for gpumem's work on the data: on
         the gpumem.Stream that last wrote it, while that work is
         pending, else on the legacy default stream, which follows the
         work of every stream gpumem made.  */
      gm_stream *pending;
      gm_status status;
      if (gmpy_array_pending_stream ((arraypy_object *) owner, &pending) < 0)
        goto done;
      status = gm_backend_current->foreign_stream_wait (array->device,
                                                        pending, handle);
      if (status != GM_OK)
        {
          gmpy_raise (status);
          goto done;
        }
    }
  capsule = export_capsule (owner, (arraypy_object *) owner,
                            ((arraypy_object *) owner)->data, array->ndim,
                            array->shape,
                            ((arraypy_object *) owner)->contiguous
                              ? NULL : ((arraypy_object *) owner)->strides,
                            array->dtype, ours, versioned, flags);
done:
  Py_XDECREF (owner);
  return capsule;
}

PyObject *
gmpy_array_dlpack_device (PyObject *self, PyObject *unused)
{
  gm_dl_device dl = device_of (((arraypy_object *) self)->device);

  return Py_BuildValue ("(ii)", (int) dl.device_type, (int) dl.device_id);
}

/* The consumer.  */

/* The destructor of the holder capsule that a DeviceArray made by
   from_dlpack has as its base: the producer's deleter, once.  */
static void
holder_destructor (PyObject *holder)
{
  capsule_delete_tensor (holder, HOLDER_VERSIONED, HOLDER_LEGACY);
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

/* Sets BufferError for data on DLPack device type TYPE, which the
   backend cannot use; returns -1.  */
static int
wrong_device (int32_t type)
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
    return wrong_device (tensor->device.device_type);
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
      && PyCapsule_SetName (capsule, versioned ? CAPSULE_USED_VERSIONED
                                               : CAPSULE_USED_LEGACY) < 0)
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
    gmpy_array_set_strides ((arraypy_object *) result, strides);
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

/* Takes CAPSULE, a "dltensor" or "dltensor_versioned" capsule: checks it
   all, then renames it "used_..." and wraps its memory in a DeviceArray
   that calls the producer's deleter when it goes.  New reference, or
   NULL with an exception and CAPSULE untouched (its own destructor then
   deletes the tensor).  */
static PyObject *
consume_capsule (PyObject *capsule)
{
  bool versioned;
  void *managed;

  if (PyCapsule_IsValid (capsule, CAPSULE_VERSIONED))
    versioned = true;
  else if (PyCapsule_IsValid (capsule, CAPSULE_LEGACY))
    versioned = false;
  else if (PyCapsule_IsValid (capsule, CAPSULE_USED_VERSIONED)
           || PyCapsule_IsValid (capsule, CAPSULE_USED_LEGACY))
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
  managed = PyCapsule_GetPointer (capsule, versioned ? CAPSULE_VERSIONED
                                                     : CAPSULE_LEGACY);
  if (managed == NULL)
    return NULL;
  return wrap_managed (managed, versioned, capsule);
}

/* Asks producer OBJ for a capsule of its data on gpumem's stream: with
   max_version (1, 0) first, then, for producers that predate it (a
   TypeError), without.  DEVICE_TYPE is what OBJ's __dlpack_device__
   said, or -1.  New reference or NULL.  */
static PyObject *
request_capsule (PyObject *obj, int device_type)
{
  PyObject *method, *kwargs = NULL, *capsule = NULL, *version;
  PyObject *empty = NULL;

  method = PyObject_GetAttrString (obj, "__dlpack__");
  if (method == NULL)
    return NULL;
  empty = PyTuple_New (0);
  kwargs = PyDict_New ();
  if (empty == NULL || kwargs == NULL)
    goto done;
  /* gpumem reads and writes on CUDA's legacy default stream, which its
     own streams follow too: the producer orders its work before it.
     Host memory has no stream.  */
  if (device_type == GM_DL_CUDA || device_type == GM_DL_CUDA_MANAGED)
    {
      PyObject *stream = PyLong_FromLong (STREAM_LEGACY);
      if (stream == NULL || PyDict_SetItemString (kwargs, "stream", stream) < 0)
        {
          Py_XDECREF (stream);
          goto done;
        }
      Py_DECREF (stream);
    }
  version = Py_BuildValue ("(ii)", GM_DLPACK_MAJOR, GM_DLPACK_MINOR);
  if (version == NULL
      || PyDict_SetItemString (kwargs, "max_version", version) < 0)
    {
      Py_XDECREF (version);
      goto done;
    }
  Py_DECREF (version);
  capsule = PyObject_Call (method, empty, kwargs);
  if (capsule == NULL && PyErr_ExceptionMatches (PyExc_TypeError))
    {
      PyErr_Clear ();
      if (PyDict_DelItemString (kwargs, "max_version") < 0)
        goto done;
      capsule = PyObject_Call (method, empty, kwargs);
    }
done:
  Py_DECREF (method);
  Py_XDECREF (empty);
  Py_XDECREF (kwargs);
  return capsule;
}

/* OBJ's __dlpack_device__ () into *TYPE and *ID: 1, 0 when OBJ has no
   such method, -1 with an exception.  */
static int
producer_device (PyObject *obj, int *type, int *id)
{
  PyObject *result;
  int ok;

  result = PyObject_CallMethod (obj, "__dlpack_device__", NULL);
  if (result == NULL)
    {
      if (!PyErr_ExceptionMatches (PyExc_AttributeError)
          || PyObject_HasAttrString (obj, "__dlpack_device__"))
        return -1;
      PyErr_Clear ();
      return 0;
    }
  ok = PyTuple_Check (result) && PyTuple_GET_SIZE (result) == 2;
  if (ok)
    {
      *type = PyLong_AsLong (PyTuple_GET_ITEM (result, 0));
      *id = PyLong_AsLong (PyTuple_GET_ITEM (result, 1));
      ok = !PyErr_Occurred ();
      PyErr_Clear ();
    }
  if (!ok)
    PyErr_Format (PyExc_TypeError, "__dlpack_device__ returned %R, not a "
                  "(device_type, device_id) tuple of ints", result);
  Py_DECREF (result);
  return ok ? 1 : -1;
}

/* gpumem.from_dlpack (OBJ): a new DeviceArray over the memory of DLPack
   producer OBJ (or of a capsule), as consume_capsule makes it.  NULL
   with TypeError when OBJ is neither, BufferError for memory on a device
   the backend cannot use, or what the producer or the checks raised.  */
PyObject *
gmpy_from_dlpack (PyObject *module, PyObject *obj)
{
  PyObject *capsule, *result;
  const gm_dl_exchange_api *api;
  int type = -1, id = -1, found;

  if (PyCapsule_CheckExact (obj))
    return consume_capsule (obj);
  /* A type's C exchange API first: no Python call.  */
  api = gmpy_exchange_api_of (obj);
  if (api != NULL)
    return gmpy_exchange_take (obj, api);
  if (!PyObject_HasAttrString (obj, "__dlpack__"))
    {
      PyErr_Format (PyExc_TypeError, "from_dlpack needs a DLPack producer "
                    "(an object with __dlpack__) or a DLPack capsule, not "
                    "%.100s", Py_TYPE (obj)->tp_name);
      return NULL;
    }
  found = producer_device (obj, &type, &id);
  if (found < 0)
    return NULL;
  /* Refuse before the producer does any work for us.  */
  if (found && !device_type_usable (type))
    {
      wrong_device (type);
      return NULL;
    }
  capsule = request_capsule (obj, type);
  if (capsule == NULL)
    return NULL;
  if (!PyCapsule_CheckExact (capsule))
    {
      PyErr_Format (PyExc_TypeError, "%.100s.__dlpack__ returned %.100s, not "
                    "a capsule", Py_TYPE (obj)->tp_name,
                    Py_TYPE (capsule)->tp_name);
      Py_DECREF (capsule);
      return NULL;
    }
  result = consume_capsule (capsule);
  Py_DECREF (capsule);
  return result;
}

int
gmpy_dlpack_asarray (PyObject *obj, PyObject **result)
{
  int type, id, found;

  *result = NULL;
  if (!backend_is_cuda () || !PyObject_HasAttrString (obj, "__dlpack__"))
    return 0;
  found = producer_device (obj, &type, &id);
  if (found <= 0)
    return found;
  if (type != GM_DL_CUDA && type != GM_DL_CUDA_MANAGED)
    return 0;
  *result = gmpy_from_dlpack (NULL, obj);
  return *result != NULL ? 1 : -1;
}
