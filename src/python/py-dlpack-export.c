/* py-dlpack-export.c -- DLPack's producer: DeviceArray.__dlpack__ and
   __dlpack_device__, and gmpy_dlpack_export, the managed tensor the C
   exchange API (py-dlpack-exchange.c) hands out.

   An export is one malloc'd block holding the managed tensor, its shape
   and strides, and strong references to the exported array (and its
   owner), so the memory outlives every gpumem reference until the
   consumer calls the deleter.  The capsule is "dltensor_versioned"
   (DLPack 1.x, read-only flag) for consumers that ask for max_version
   >= (1, 0), else the legacy "dltensor".  A consumer renames the capsule
   to "used_..." and owns the deleter; the capsule's destructor deletes
   only capsules no one consumed.

   The layout of the exchanged structures is in dlpack-abi.h.  */

#include "gm-python.h"

#include <stdlib.h>

#include "py-dlpack.h"

/* Whether the backend's device memory is CUDA memory (else host
   memory, kDLCPU).  */
static bool
backend_is_cuda (void)
{
  return gm_backend_current->device_memory == GM_MEMORY_CUDA;
}

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

/* The destructor of the capsules __dlpack__ makes: a capsule no one
   consumed still owns its tensor and deletes it; a consumer renamed the
   one it took and calls the deleter itself.  */
static void
export_capsule_destructor (PyObject *capsule)
{
  gmpy_dlpack_capsule_delete (capsule, GM_DLTENSOR_VERSIONED, GM_DLTENSOR);
}

/* The DLPack device of ARRAY's memory: the backend's device memory
   on its device, or its managed memory (kDLCUDAManaged).  */
static gm_dl_device
device_of (const arraypy_object *array)
{
  int device = array->device;
  gm_dl_device dl;

  dl.device_type = array->memory == GMPY_MEMORY_MANAGED
                   ? gm_backend_current->managed_dlpack_device_type
                   : gm_backend_current->dlpack_device_type;
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
                           versioned ? GM_DLTENSOR_VERSIONED : GM_DLTENSOR,
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
                      array->dtype, device_of (array), true,
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

  *handle = (void *) (uintptr_t) GM_DL_STREAM_LEGACY;
  if (obj == Py_None)
    return 0;
  if (gmpy_stream_number (obj, "stream", &value) < 0)
    return -1;
  if (value == GM_DL_STREAM_NO_SYNC)
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
  if (value != GM_DL_STREAM_NO_SYNC)
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
  copy = gmpy_array_new_in (array->ndim, array->shape, array->dtype,
                            array->device, NULL, array->memory);
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
gmpy_array_dlpack (PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                   PyObject *kwnames)
{
  static const char *const names[] = {"stream", "max_version", "dl_device",
                                      "copy", NULL};
  arraypy_object *array = (arraypy_object *) self;
  PyObject *arg[4] = {NULL, NULL, NULL, NULL};
  PyObject *stream_obj, *max_version, *dl_device_obj, *copy_obj;
  PyObject *owner = NULL, *capsule = NULL;
  gm_dl_device ours = device_of (array), wanted = ours;
  bool versioned, to_host = false, copy;
  uint64_t flags = 0;
  void *handle = NULL;
  Py_buffer view;

  /* Keyword-only, read by the fast-call convention: consumers call this
     once an exchange (torch.from_dlpack, cupy.from_dlpack).  */
  if (gmpy_parse_args (args, nargs, kwnames, "__dlpack__", names, 0, 0,
                       arg) < 0)
    return NULL;
  stream_obj = arg[0] != NULL ? arg[0] : Py_None;
  max_version = arg[1] != NULL ? arg[1] : Py_None;
  dl_device_obj = arg[2] != NULL ? arg[2] : Py_None;
  copy_obj = arg[3] != NULL ? arg[3] : Py_None;
  if (gmpy_array_usable (array) < 0
      || max_version_arg (max_version, &versioned) < 0
      || dl_device_arg (dl_device_obj, &wanted) < 0)
    return NULL;
  if (copy_obj != Py_None && !PyBool_Check (copy_obj))
    {
      PyErr_Format (PyExc_TypeError, "copy must be None, True or False, not "
                    "%.100s", GMPY_TYPE_NAME (Py_TYPE (copy_obj)));
      return NULL;
    }
  copy = copy_obj == Py_True;
  if (array->memory == GMPY_MEMORY_MANAGED
      && wanted.device_type == gm_backend_current->dlpack_device_type
      && wanted.device_id == ours.device_id)
    /* Managed memory is its device's memory too, for a consumer that
       takes no kDLCUDAManaged: exported as that, without a copy.  */
    ours = wanted;
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

/* The tuples __dlpack_device__ returns, made once each: (type, id) for
   the backend's device memory ([0]) and managed memory ([1]) of device
   ID below GM_MAX_DEVICES.  Kept for the process's life.  */
static PyObject *device_tuples[2][GM_MAX_DEVICES];

PyObject *
gmpy_array_dlpack_device (PyObject *self, PyObject *unused)
{
  const arraypy_object *array = (const arraypy_object *) self;
  gm_dl_device dl = device_of (array);
  PyObject **slot = &device_tuples[array->memory == GMPY_MEMORY_MANAGED]
                                  [dl.device_id];

  (void) unused;
  if (*slot == NULL)
    *slot = Py_BuildValue ("(ii)", (int) dl.device_type,
                           (int) dl.device_id);
  return Py_XNewRef (*slot);
}
