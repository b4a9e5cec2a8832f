/* exchange.c -- gmexchange, a consumer of DLPack's C exchange API
   (DLPackExchangeAPI, the capsule "dlpack_exchange_api" in a type's
   __dlpack_c_exchange_api__) as any other library writes one: its own
   declarations of DLPack 1.3's structures, nothing of gpumem's.
   tests/test_capi.py builds it at test time and calls it with gpumem's
   arrays (and, where installed, PyTorch's tensors).  */

#include <Python.h>

#include <stddef.h>
#include <stdint.h>

/* DLPack 1.3 (dlpack.h), the members the exchange uses.  */
typedef struct { uint32_t major, minor; } DLPackVersion;
typedef struct { int32_t device_type, device_id; } DLDevice;
typedef struct { uint8_t code, bits; uint16_t lanes; } DLDataType;
typedef struct
{
  void *data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t *shape;
  int64_t *strides;
  uint64_t byte_offset;
} DLTensor;
typedef struct DLManagedTensorVersioned
{
  DLPackVersion version;
  void *manager_ctx;
  void (*deleter) (struct DLManagedTensorVersioned *self);
  uint64_t flags;
  DLTensor dl_tensor;
} DLManagedTensorVersioned;
typedef struct DLPackExchangeAPIHeader
{
  DLPackVersion version;
  struct DLPackExchangeAPIHeader *prev_api;
} DLPackExchangeAPIHeader;
typedef struct
{
  DLPackExchangeAPIHeader header;
  int (*managed_tensor_allocator) (
    DLTensor *prototype, DLManagedTensorVersioned **out, void *error_ctx,
    void (*set_error) (void *error_ctx, const char *kind,
                       const char *message));
  int (*managed_tensor_from_py_object_no_sync) (
    void *py_object, DLManagedTensorVersioned **out);
  int (*managed_tensor_to_py_object_no_sync) (
    DLManagedTensorVersioned *tensor, void **out_py_object);
  int (*dltensor_from_py_object_no_sync) (void *py_object, DLTensor *out);
  int (*current_work_stream) (int32_t device_type, int32_t device_id,
                              void **out_current_stream);
} DLPackExchangeAPI;

/* The layout dlpack.h gives on a 64-bit platform.  */
_Static_assert (sizeof (DLTensor) == 48, "DLTensor");
_Static_assert (offsetof (DLManagedTensorVersioned, dl_tensor) == 32,
                "DLManagedTensorVersioned");
_Static_assert (offsetof (DLPackExchangeAPI, current_work_stream) == 48,
                "DLPackExchangeAPI");

/* The table TYPE publishes, or NULL with an exception.  */
static const DLPackExchangeAPI *
api_of (PyObject *type)
{
  PyObject *capsule;
  const DLPackExchangeAPI *api;

  if (!PyType_Check (type))
    {
      PyErr_SetString (PyExc_TypeError, "needs a type");
      return NULL;
    }
  capsule = PyObject_GetAttrString (type, "__dlpack_c_exchange_api__");
  if (capsule == NULL)
    return NULL;
  api = PyCapsule_GetPointer (capsule, "dlpack_exchange_api");
  Py_DECREF (capsule);
  if (api != NULL && api->header.version.major != 1)
    {
      PyErr_Format (PyExc_RuntimeError, "exchange API version %u",
                    api->header.version.major);
      return NULL;
    }
  return api;
}

/* info(type): (major, minor, prev_api is None, dltensor_from_py_object
   is there) of TYPE's table.  */
static PyObject *
info (PyObject *module, PyObject *type)
{
  const DLPackExchangeAPI *api = api_of (type);

  if (api == NULL)
    return NULL;
  return Py_BuildValue ("(IIOO)", api->header.version.major,
                        api->header.version.minor,
                        api->header.prev_api == NULL ? Py_True : Py_False,
                        api->dltensor_from_py_object_no_sync != NULL
                          ? Py_True : Py_False);
}

/* TENSOR as (data, (device_type, device_id), ndim, (code, bits, lanes),
   shape, strides, byte_offset).  */
static PyObject *
tensor_tuple (const DLTensor *t)
{
  PyObject *shape = PyTuple_New (t->ndim), *strides = PyTuple_New (t->ndim);

  if (shape == NULL || strides == NULL)
    goto fail;
  for (int i = 0; i < t->ndim; i++)
    {
      PyObject *extent = PyLong_FromLongLong (t->shape[i]);
      PyObject *stride = PyLong_FromLongLong (t->strides[i]);
      if (extent == NULL || stride == NULL)
        {
          Py_XDECREF (extent);
          Py_XDECREF (stride);
          goto fail;
        }
      PyTuple_SET_ITEM (shape, i, extent);
      PyTuple_SET_ITEM (strides, i, stride);
    }
  return Py_BuildValue ("(K(ii)i(iii)NNK)",
                        (unsigned long long) (uintptr_t) t->data,
                        t->device.device_type, t->device.device_id, t->ndim,
                        t->dtype.code, t->dtype.bits, t->dtype.lanes, shape,
                        strides, (unsigned long long) t->byte_offset);
fail:
  Py_XDECREF (shape);
  Py_XDECREF (strides);
  return NULL;
}

/* borrowed(obj): OBJ's DLTensor through dltensor_from_py_object_no_sync,
   as tensor_tuple.  */
static PyObject *
borrowed (PyObject *module, PyObject *obj)
{
  const DLPackExchangeAPI *api = api_of ((PyObject *) Py_TYPE (obj));
  DLTensor tensor;

  if (api == NULL || api->dltensor_from_py_object_no_sync (obj, &tensor) < 0)
    return NULL;
  return tensor_tuple (&tensor);
}

/* sum_host(obj): the sum of OBJ's float32 elements in host memory, read
   through the borrowed DLTensor's data, shape and strides.  */
static PyObject *
sum_host (PyObject *module, PyObject *obj)
{
  const DLPackExchangeAPI *api = api_of ((PyObject *) Py_TYPE (obj));
  int64_t index[32] = {0}, count = 1;
  DLTensor t;
  double sum = 0;

  if (api == NULL || api->dltensor_from_py_object_no_sync (obj, &t) < 0)
    return NULL;
  if (t.device.device_type != 1 || t.dtype.code != 2 || t.dtype.bits != 32
      || t.ndim > 32)
    {
      PyErr_SetString (PyExc_ValueError, "sum_host takes float32 host "
                       "memory");
      return NULL;
    }
  for (int i = 0; i < t.ndim; i++)
    count *= t.shape[i];
  for (int64_t n = 0; n < count; n++)
    {
      int64_t offset = 0;
      for (int i = 0; i < t.ndim; i++)
        offset += index[i] * t.strides[i];
      sum += ((const float *) ((const char *) t.data + t.byte_offset))[offset];
      for (int i = t.ndim - 1; i >= 0 && ++index[i] == t.shape[i]; i--)
        index[i] = 0;
    }
  return PyFloat_FromDouble (sum);
}

/* convert(obj, type): OBJ exported through its type's table
   (managed_tensor_from_py_object_no_sync), then imported by TYPE's
   (managed_tensor_to_py_object_no_sync): a new object of TYPE.  */
static PyObject *
convert (PyObject *module, PyObject *args)
{
  PyObject *obj, *type;
  const DLPackExchangeAPI *from, *to;
  DLManagedTensorVersioned *managed = NULL;
  void *result = NULL;

  if (!PyArg_ParseTuple (args, "OO", &obj, &type))
    return NULL;
  from = api_of ((PyObject *) Py_TYPE (obj));
  to = from != NULL ? api_of (type) : NULL;
  if (to == NULL)
    return NULL;
  if (from->managed_tensor_from_py_object_no_sync (obj, &managed) < 0)
    return NULL;
  if (to->managed_tensor_to_py_object_no_sync (managed, &result) < 0)
    return NULL;
  return result;
}

/* exported(obj): (version, read-only flag, the tensor as tensor_tuple)
   of an export of OBJ, deleted before returning.  */
static PyObject *
exported (PyObject *module, PyObject *obj)
{
  const DLPackExchangeAPI *api = api_of ((PyObject *) Py_TYPE (obj));
  DLManagedTensorVersioned *managed = NULL;
  PyObject *tensor, *result;

  if (api == NULL
      || api->managed_tensor_from_py_object_no_sync (obj, &managed) < 0)
    return NULL;
  tensor = tensor_tuple (&managed->dl_tensor);
  result = tensor == NULL ? NULL
    : Py_BuildValue ("((II)ON)", managed->version.major,
                     managed->version.minor,
                     (managed->flags & 1) ? Py_True : Py_False, tensor);
  if (managed->deleter != NULL)
    managed->deleter (managed);
  return result;
}

/* The allocator's error: kept as a Python exception of KIND's name.  */
static void
set_error (void *error_ctx, const char *kind, const char *message)
{
  PyObject **error = error_ctx;

  Py_XDECREF (*error);
  *error = Py_BuildValue ("(ss)", kind, message);
}

/* allocate(type, shape, code, bits, device_type, device_id): a new
   tensor from TYPE's allocator, imported by the same table.  An
   allocator error raises RuntimeError("KIND: MESSAGE").  */
static PyObject *
allocate (PyObject *module, PyObject *args)
{
  PyObject *type, *shape_obj, *error = NULL;
  int code, bits, device_type, device_id;
  int64_t shape[32];
  DLTensor prototype = {0};
  DLManagedTensorVersioned *managed = NULL;
  const DLPackExchangeAPI *api;
  void *result = NULL;

  if (!PyArg_ParseTuple (args, "OO!iiii", &type, &PyTuple_Type, &shape_obj,
                         &code, &bits, &device_type, &device_id))
    return NULL;
  api = api_of (type);
  if (api == NULL)
    return NULL;
  prototype.ndim = (int32_t) PyTuple_GET_SIZE (shape_obj);
  if (prototype.ndim > 32)
    return PyErr_Format (PyExc_ValueError, "too many dimensions");
  for (int i = 0; i < prototype.ndim; i++)
    shape[i] = PyLong_AsLongLong (PyTuple_GET_ITEM (shape_obj, i));
  if (PyErr_Occurred ())
    return NULL;
  prototype.shape = shape;
  prototype.dtype.code = (uint8_t) code;
  prototype.dtype.bits = (uint8_t) bits;
  prototype.dtype.lanes = 1;
  prototype.device.device_type = device_type;
  prototype.device.device_id = device_id;
  if (api->managed_tensor_allocator (&prototype, &managed, &error, set_error)
      < 0)
    {
      if (error == NULL)
        return PyErr_Format (PyExc_AssertionError, "the allocator failed "
                             "without calling SetError");
      PyErr_Format (PyExc_RuntimeError, "%s: %s",
                    PyUnicode_AsUTF8 (PyTuple_GET_ITEM (error, 0)),
                    PyUnicode_AsUTF8 (PyTuple_GET_ITEM (error, 1)));
      Py_DECREF (error);
      return NULL;
    }
  if (api->managed_tensor_to_py_object_no_sync (managed, &result) < 0)
    return NULL;
  return result;
}

/* current_stream(type, device_type, device_id): TYPE's answer, an
   int.  */
static PyObject *
current_stream (PyObject *module, PyObject *args)
{
  PyObject *type;
  int device_type, device_id;
  const DLPackExchangeAPI *api;
  void *stream = (void *) 1;

  if (!PyArg_ParseTuple (args, "Oii", &type, &device_type, &device_id))
    return NULL;
  api = api_of (type);
  if (api == NULL
      || api->current_work_stream (device_type, device_id, &stream) < 0)
    return NULL;
  return PyLong_FromVoidPtr (stream);
}

static PyMethodDef methods[] = {
  {"info", info, METH_O, NULL},
  {"borrowed", borrowed, METH_O, NULL},
  {"sum_host", sum_host, METH_O, NULL},
  {"convert", convert, METH_VARARGS, NULL},
  {"exported", exported, METH_O, NULL},
  {"allocate", allocate, METH_VARARGS, NULL},
  {"current_stream", current_stream, METH_VARARGS, NULL},
  {NULL, NULL, 0, NULL}
};

static PyModuleDef module_def = {
  PyModuleDef_HEAD_INIT, "gmexchange",
  "A C consumer of DLPack's C exchange API, for gpumem's tests.", -1,
  methods, NULL, NULL, NULL, NULL
};

PyMODINIT_FUNC
PyInit_gmexchange (void)
{
  return PyModule_Create (&module_def);
}
