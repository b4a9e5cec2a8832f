/* py-array-make.c -- arrays made like another, and filled arrays.

   gpumem.full and ones, and empty_like, zeros_like, ones_like and
   full_like, as NumPy's: the *_like functions take the shape and dtype
   of a DeviceArray (or of any object with .shape and .dtype, a NumPy
   array too) unless given, and the device and memory of a DeviceArray
   (else the current device, and device memory); the result is always a new C-contiguous owner array,
   whatever the layout of the model.  Fills go as DeviceArray.fill does:
   the value converted as numpy.array (value, dtype) converts it, queued
   on the current stream, else complete on return.  */

#include "gm-python.h"

/* What a new array is made of: its dimensions, dtype and device.  */
typedef struct make_spec
{
  int ndim;
  Py_ssize_t dims[GM_MAX_NDIM];
  gm_dtype dtype;
  int device;
  gmpy_memory memory;
} make_spec;

/* How a new array's elements start.  */
typedef enum make_fill
{
  MAKE_EMPTY, MAKE_ZEROS, MAKE_VALUE
} make_fill;

/* A new array of SPEC, its elements as FILL says (VALUE for
   MAKE_VALUE).  New reference or NULL.  */
static PyObject *
make (const make_spec *spec, make_fill fill, PyObject *value)
{
  arraypy_object *array = gmpy_array_new_in (spec->ndim, spec->dims,
                                             spec->dtype, spec->device, NULL,
                                             spec->memory);
  gm_status status;

  if (array == NULL || fill == MAKE_EMPTY)
    return (PyObject *) array;
  if (fill == MAKE_VALUE)
    {
      if (gmpy_array_fill_value (array, value) < 0)
        Py_CLEAR (array);
      return (PyObject *) array;
    }
  status = gm_backend_current->memset (array->data, spec->device, 0,
                                       gmpy_array_nbytes (array), NULL);
  if (status != GM_OK)
    {
      Py_DECREF (array);
      return gmpy_raise (status);
    }
  return (PyObject *) array;
}

/* Reads the model PROTO of a *_like function and its DTYPE_OBJ, SHAPE,
   DEVICE_OBJ and MEMORY_OBJ overrides (None: the model's; the memory
   of a model that is no DeviceArray is device memory) into SPEC.  0, or
   -1 with TypeError (a model without shape and dtype, an unsupported
   dtype) or ValueError (freed model, bad shape, device or memory).  */
static int
like_spec (PyObject *proto, PyObject *dtype_obj, PyObject *shape_obj,
           PyObject *device_obj, PyObject *memory_obj, make_spec *spec)
{
  PyObject *own_dtype = NULL, *own_shape = NULL;
  int rc = -1;

  if (gmpy_array_check (proto))
    {
      arraypy_object *model = (arraypy_object *) proto;
      if (gmpy_array_usable (model) < 0)
        return -1;
      spec->dtype = model->dtype;
      spec->device = model->device;
      spec->memory = model->memory;
      spec->ndim = model->ndim;
      for (int i = 0; i < model->ndim; i++)
        spec->dims[i] = model->shape[i];
    }
  else
    {
      own_dtype = PyObject_GetAttrString (proto, "dtype");
      own_shape = own_dtype ? PyObject_GetAttrString (proto, "shape") : NULL;
      if (own_shape == NULL)
        {
          PyErr_Format (PyExc_TypeError, "the model must be a DeviceArray "
                        "or an array with shape and dtype, not %.100s",
                        GMPY_TYPE_NAME (Py_TYPE (proto)));
          goto done;
        }
      if (dtype_obj == Py_None && gmpy_dtype_arg (own_dtype, &spec->dtype) < 0)
        goto done;
      if (shape_obj == Py_None)
        shape_obj = own_shape;
      spec->device = gmpy_current_device ();
      spec->memory = GMPY_MEMORY_DEVICE;
    }
  if (gmpy_memory_arg (memory_obj, spec->memory, &spec->memory) < 0)
    goto done;
  if (dtype_obj != Py_None && gmpy_dtype_arg (dtype_obj, &spec->dtype) < 0)
    goto done;
  if (device_obj != Py_None && gmpy_device_arg (device_obj, &spec->device) < 0)
    goto done;
  if (shape_obj != Py_None)
    {
      if (gmpy_shape_arg (shape_obj, gm_dtypes[spec->dtype].itemsize,
                          &spec->ndim, spec->dims) < 0)
        goto done;
    }
  else if (gmpy_shape_fits (spec->ndim, spec->dims, -1,
                            gm_dtypes[spec->dtype].itemsize, "shape") < 0)
    goto done;
  rc = 0;
done:
  Py_XDECREF (own_dtype);
  Py_XDECREF (own_shape);
  return rc;
}

/* empty_like, zeros_like and ones_like: FORMAT parses (a, dtype, shape,
   device, memory).  */
static PyObject *
like (PyObject *args, PyObject *kwargs, const char *format, make_fill fill,
      PyObject *value)
{
  static char *keywords[] = {"a", "dtype", "shape", "device", "memory",
                             NULL};
  PyObject *proto, *dtype_obj = Py_None, *shape_obj = Py_None;
  PyObject *device_obj = Py_None, *memory_obj = Py_None;
  make_spec spec;

  if (!PyArg_ParseTupleAndKeywords (args, kwargs, format, keywords, &proto,
                                    &dtype_obj, &shape_obj, &device_obj,
                                    &memory_obj)
      || like_spec (proto, dtype_obj, shape_obj, device_obj, memory_obj,
                    &spec) < 0)
    return NULL;
  return make (&spec, fill, value);
}

static PyObject *
makepy_empty_like (PyObject *module, PyObject *args, PyObject *kwargs)
{
  return like (args, kwargs, "O|OOOO:empty_like", MAKE_EMPTY, NULL);
}

static PyObject *
makepy_zeros_like (PyObject *module, PyObject *args, PyObject *kwargs)
{
  return like (args, kwargs, "O|OOOO:zeros_like", MAKE_ZEROS, NULL);
}

static PyObject *
makepy_ones_like (PyObject *module, PyObject *args, PyObject *kwargs)
{
  PyObject *one = PyLong_FromLong (1), *result;

  if (one == NULL)
    return NULL;
  result = like (args, kwargs, "O|OOOO:ones_like", MAKE_VALUE, one);
  Py_DECREF (one);
  return result;
}

static PyObject *
makepy_full_like (PyObject *module, PyObject *args, PyObject *kwargs)
{
  static char *keywords[] = {"a", "fill_value", "dtype", "shape", "device",
                             "memory", NULL};
  PyObject *proto, *value, *dtype_obj = Py_None, *shape_obj = Py_None;
  PyObject *device_obj = Py_None, *memory_obj = Py_None;
  make_spec spec;

  if (!PyArg_ParseTupleAndKeywords (args, kwargs, "OO|OOOO:full_like",
                                    keywords, &proto, &value, &dtype_obj,
                                    &shape_obj, &device_obj, &memory_obj)
      || like_spec (proto, dtype_obj, shape_obj, device_obj, memory_obj,
                    &spec) < 0)
    return NULL;
  return make (&spec, MAKE_VALUE, value);
}

/* Reads SHAPE_OBJ, DTYPE_OBJ (None: float32, gpumem's default),
   DEVICE_OBJ (None: the current device) and MEMORY_OBJ (None: device
   memory) into SPEC.  0 or -1.  */
static int
read_spec (PyObject *shape_obj, PyObject *dtype_obj, PyObject *device_obj,
           PyObject *memory_obj, make_spec *spec)
{
  if (gmpy_dtype_arg (dtype_obj, &spec->dtype) < 0
      || gmpy_device_arg (device_obj, &spec->device) < 0
      || gmpy_memory_arg (memory_obj, GMPY_MEMORY_DEVICE, &spec->memory) < 0)
    return -1;
  return gmpy_shape_arg (shape_obj, gm_dtypes[spec->dtype].itemsize,
                         &spec->ndim, spec->dims);
}

static PyObject *
makepy_full (PyObject *module, PyObject *args, PyObject *kwargs)
{
  static char *keywords[] = {"shape", "fill_value", "dtype", "device",
                             "memory", NULL};
  PyObject *shape_obj, *value, *dtype_obj = Py_None, *device_obj = Py_None;
  PyObject *memory_obj = Py_None, *value_dtype = NULL;
  make_spec spec;
  int rc;

  if (!PyArg_ParseTupleAndKeywords (args, kwargs, "OO|OOO:full", keywords,
                                    &shape_obj, &value, &dtype_obj,
                                    &device_obj, &memory_obj))
    return NULL;
  /* Without a dtype, the value's own, as numpy.full takes it: int gives
     int64, float float64, bool bool.  */
  if (dtype_obj == Py_None)
    {
      PyObject *host = PyObject_CallMethod (gmpy_state_get ()->numpy,
                                            "asarray", "O", value);
      value_dtype = host ? PyObject_GetAttrString (host, "dtype") : NULL;
      Py_XDECREF (host);
      if (value_dtype == NULL)
        return NULL;
      dtype_obj = value_dtype;
    }
  rc = read_spec (shape_obj, dtype_obj, device_obj, memory_obj, &spec);
  Py_XDECREF (value_dtype);
  if (rc < 0)
    return NULL;
  return make (&spec, MAKE_VALUE, value);
}

static PyObject *
makepy_ones (PyObject *module, PyObject *args, PyObject *kwargs)
{
  static char *keywords[] = {"shape", "dtype", "device", "memory", NULL};
  PyObject *shape_obj, *dtype_obj = Py_None, *device_obj = Py_None;
  PyObject *memory_obj = Py_None, *one, *result;
  make_spec spec;

  if (!PyArg_ParseTupleAndKeywords (args, kwargs, "O|OOO:ones", keywords,
                                    &shape_obj, &dtype_obj, &device_obj,
                                    &memory_obj)
      || read_spec (shape_obj, dtype_obj, device_obj, memory_obj, &spec) < 0)
    return NULL;
  one = PyLong_FromLong (1);
  if (one == NULL)
    return NULL;
  result = make (&spec, MAKE_VALUE, one);
  Py_DECREF (one);
  return result;
}

PyMethodDef gmpy_make_methods[] = {
  {"full", (PyCFunction) (void (*) (void)) makepy_full,
   METH_VARARGS | METH_KEYWORDS,
   "full(shape, fill_value, dtype=None, device=None, memory='device')\n--\n\n"
   "A new DeviceArray of SHAPE with every element FILL_VALUE; DTYPE\n"
   "defaults to the value's own, as NumPy's (int: int64, float: float64,\n"
   "bool: bool)."},
  {"ones", (PyCFunction) (void (*) (void)) makepy_ones,
   METH_VARARGS | METH_KEYWORDS,
   "ones(shape, dtype='float32', device=None, memory='device')\n--\n\n"
   "A new DeviceArray of SHAPE filled with ones."},
  {"empty_like", (PyCFunction) (void (*) (void)) makepy_empty_like,
   METH_VARARGS | METH_KEYWORDS,
   "empty_like(a, dtype=None, shape=None, device=None, memory=None)\n--\n\n"
   "A new C-contiguous DeviceArray of A's shape, dtype, device and\n"
   "memory (unless given), its contents not initialized."},
  {"zeros_like", (PyCFunction) (void (*) (void)) makepy_zeros_like,
   METH_VARARGS | METH_KEYWORDS,
   "zeros_like(a, dtype=None, shape=None, device=None, memory=None)\n--\n\n"
   "As empty_like, filled with zeros."},
  {"ones_like", (PyCFunction) (void (*) (void)) makepy_ones_like,
   METH_VARARGS | METH_KEYWORDS,
   "ones_like(a, dtype=None, shape=None, device=None, memory=None)\n--\n\n"
   "As empty_like, filled with ones."},
  {"full_like", (PyCFunction) (void (*) (void)) makepy_full_like,
   METH_VARARGS | METH_KEYWORDS,
   "full_like(a, fill_value, dtype=None, shape=None, device=None, "
   "memory=None)\n--\n\n"
   "As empty_like, every element FILL_VALUE (converted to the dtype)."},
  {NULL, NULL, 0, NULL}
};
