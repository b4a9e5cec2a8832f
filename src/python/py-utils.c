/* py-utils.c -- the helpers beneath gpumem's Python layer: what every py-*.c
   file shares.  The module's state, the one bridge from a gm_status to a
   Python exception (gmpy_raise), waiting on the backend without the GIL
   (gmpy_wait), refusing it and what else a graph recording cannot take
   (gmpy_graph_refuse), the fast-call argument parser, the readers of
   size, shape, dtype and rank arguments.  It calls no other py-*.c file.  */

#include "gm-python.h"

#include <string.h>

#include "comm-job.h"

gmpy_state *gmpy_module_state;

void
gmpy_state_set (gmpy_state *state)
{
  gmpy_module_state = state;
}

#ifdef Py_LIMITED_API
const char *
gmpy_type_name (PyTypeObject *type)
{
  static _Thread_local char names[4][200];
  static _Thread_local unsigned next;
  char *name = names[next++ % 4];
  PyObject *exc_type, *exc_value, *exc_tb, *module, *qualname;
  const char *module_text = NULL, *qualname_text = NULL;
  bool heap_class;

  /* Named while an error may be pending: it is kept as it is.  */
  PyErr_Fetch (&exc_type, &exc_value, &exc_tb);
  module = PyObject_GetAttrString ((PyObject *) type, "__module__");
  if (module != NULL && PyUnicode_Check (module))
    module_text = PyUnicode_AsUTF8AndSize (module, NULL);
  /* A class statement's tp_name is its __name__; gpumem's types (heap
     types too, from their specs) and the static types of C have
     "module.qualname".  */
  heap_class = (PyType_GetFlags (type) & Py_TPFLAGS_HEAPTYPE) != 0
               && (module_text == NULL || strcmp (module_text, "gpumem") != 0);
  qualname = heap_class ? PyType_GetName (type) : PyType_GetQualName (type);
  if (qualname != NULL)
    qualname_text = PyUnicode_AsUTF8AndSize (qualname, NULL);
  if (qualname_text == NULL)
    snprintf (name, sizeof names[0], "?");
  else if (heap_class || module_text == NULL
           || strcmp (module_text, "builtins") == 0)
    snprintf (name, sizeof names[0], "%s", qualname_text);
  else
    snprintf (name, sizeof names[0], "%s.%s", module_text, qualname_text);
  Py_XDECREF (module);
  Py_XDECREF (qualname);
  PyErr_Restore (exc_type, exc_value, exc_tb);
  return name;
}
#endif

PyObject *
gmpy_raise (gm_status status)
{
  const gm_error *error = gm_last_error ();
  gmpy_state *state = gmpy_module_state;
  PyObject *type, *exc;

  switch (status)
    {
    case GM_ERR_VALUE:
      type = PyExc_ValueError;
      break;
    case GM_ERR_TYPE:
      type = PyExc_TypeError;
      break;
    case GM_ERR_NOMEM:
      type = state->oom_error;
      break;
    case GM_ERR_HOST_NOMEM:
      type = PyExc_MemoryError;
      break;
    case GM_ERR_CUDA:
      type = state->cuda_error;
      break;
    default:
      type = state->error;
      break;
    }
  exc = PyObject_CallFunction (type, "s", error->message);
  if (exc == NULL)
    return NULL;
  if (status == GM_ERR_CUDA || error->cuda_code != 0)
    {
      PyObject *code = PyLong_FromLong (error->cuda_code);
      PyObject *name = PyUnicode_FromString (error->cuda_name);
      int failed = code == NULL || name == NULL
                   || PyObject_SetAttrString (exc, "code", code) < 0
                   || PyObject_SetAttrString (exc, "name", name) < 0;
      Py_XDECREF (code);
      Py_XDECREF (name);
      if (failed)
        {
          Py_DECREF (exc);
          return NULL;
        }
    }
  PyErr_SetObject (type, exc);
  Py_DECREF (exc);
  return NULL;
}

int
gmpy_raise_int (gm_status status)
{
  gmpy_raise (status);
  return -1;
}

_Thread_local gmpy_graph_rec *gmpy_graph_capture;

int
gmpy_graph_refuse (const char *what)
{
  if (gmpy_graph_capture == NULL)
    return 0;
  PyErr_Format (gmpy_module_state->error, "gpumem.graph %R: %s cannot be "
                "captured: do it before or after the `with gpumem.graph()` "
                "block (docs/graphs.md)", gmpy_graph_capture->name, what);
  return -1;
}

int
gmpy_wait (int device, gm_stream *stream)
{
  gm_status status;

  /* Inside a recording nothing runs, so nothing may be waited for: the
     call that waits (a synchronize, a call complete on return that the
     recorder does not take) is refused.  */
  if (gmpy_graph_capture != NULL)
    {
      PyErr_Format (gmpy_module_state->error, "gpumem.graph %R: a call that "
                    "waits for device %d (a synchronization, or a call the "
                    "graph cannot record) cannot be captured: do it before "
                    "or after the `with gpumem.graph()` block "
                    "(docs/graphs.md)", gmpy_graph_capture->name, device);
      return -1;
    }
  /* Short work (a small kernel, the workload's) is over within tens of
     microseconds: wait that long with the GIL, then let other threads
     run while waiting in calls of 50 ms.  */
  status = gm_backend_current->wait (device, stream, 50);
  if (status == GM_OK)
    return 0;
  if (status != GM_ERR_NOT_READY)
    return gmpy_raise_int (status);
  for (;;)
    {
      /* Ctrl-C raises KeyboardInterrupt here; the queued work goes on,
         and a later wait sees it finish.  */
      if (PyErr_CheckSignals () < 0)
        return -1;
      Py_BEGIN_ALLOW_THREADS
      status = gm_backend_current->wait (device, stream, 50000);
      Py_END_ALLOW_THREADS
      if (status == GM_OK)
        return 0;
      if (status != GM_ERR_NOT_READY)
        return gmpy_raise_int (status);
    }
}

int
gmpy_synchronize_device (int device)
{
  gm_status status;

  if (gmpy_wait (device, NULL) < 0)
    return -1;
  Py_BEGIN_ALLOW_THREADS
  status = gm_backend_current->device_synchronize (device);
  Py_END_ALLOW_THREADS
  if (status != GM_OK)
    return gmpy_raise_int (status);
  return 0;
}

/* Why a parser of our own beside PyArg_ParseTupleAndKeywords: the copy
   and kernel calls are METH_FASTCALL | METH_KEYWORDS, the calling
   convention that hands over a C array of arguments and a tuple of
   keyword names without building an args tuple and a kwargs dict for
   each call.  They are the calls a workload makes in its inner loop, and
   CPython's public API has no parser for that convention
   (_PyArg_ParseStackAndKeywords is private).  Functions called rarely
   (factories, settings) keep PyArg_ParseTupleAndKeywords.  */
int
gmpy_parse_args (PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                 const char *fname, const char *const *names, int required,
                 int positional, PyObject **out)
{
  int count = 0;

  while (names[count] != NULL)
    count++;
  if (positional < 0)
    positional = count;
  if (nargs > positional)
    {
      PyErr_Format (PyExc_TypeError, "%s() takes at most %d positional "
                    "arguments (%zd given)", fname, positional, nargs);
      return -1;
    }
  for (int i = 0; i < count; i++)
    out[i] = i < nargs ? args[i] : NULL;
  if (kwnames != NULL)
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE (kwnames); k++)
      {
        PyObject *key = PyTuple_GET_ITEM (kwnames, k);
        int i;
        for (i = 0; i < count; i++)
          if (PyUnicode_CompareWithASCIIString (key, names[i]) == 0)
            break;
        if (i == count)
          {
            PyErr_Format (PyExc_TypeError, "%s() got an unexpected keyword "
                          "argument '%U'", fname, key);
            return -1;
          }
        if (out[i] != NULL)
          {
            PyErr_Format (PyExc_TypeError, "%s() got multiple values for "
                          "argument '%s'", fname, names[i]);
            return -1;
          }
        out[i] = args[nargs + k];
      }
  for (int i = 0; i < required; i++)
    if (out[i] == NULL)
      {
        PyErr_Format (PyExc_TypeError, "%s() missing required argument "
                      "'%s'", fname, names[i]);
        return -1;
      }
  return 0;
}

/* Reads OBJ, an int or an object with __index__, into *VALUE; WHAT names
   it in messages.  TypeError for anything else, ValueError naming the
   number when it does not fit a Py_ssize_t (never a value clipped to the
   largest one, as PyNumber_AsSsize_t (OBJ, NULL) would give; every
   caller refuses negative values, so a hugely negative one is told it
   must not be negative).  0 or -1.  */
static int
index_arg (PyObject *obj, const char *what, Py_ssize_t *value)
{
  PyObject *index;

  if (!PyIndex_Check (obj))
    {
      PyErr_Format (PyExc_TypeError, "%s must be an integer, not %.100s",
                    what, GMPY_TYPE_NAME (Py_TYPE (obj)));
      return -1;
    }
  index = PyNumber_Index (obj);
  if (index == NULL)
    return -1;
  *value = PyLong_AsSsize_t (index);
  if (*value == -1 && PyErr_Occurred ()
      && PyErr_ExceptionMatches (PyExc_OverflowError))
    {
      PyObject *zero = PyLong_FromLong (0);
      int negative;

      PyErr_Clear ();
      negative = zero ? PyObject_RichCompareBool (index, zero, Py_LT) : -1;
      Py_XDECREF (zero);
      if (negative > 0)
        PyErr_Format (PyExc_ValueError, "%s must not be negative, got %S",
                      what, index);
      else if (negative == 0)
        PyErr_Format (PyExc_ValueError, "%s %S is too large: at most %zd",
                      what, index, PY_SSIZE_T_MAX);
    }
  Py_DECREF (index);
  return *value == -1 && PyErr_Occurred () ? -1 : 0;
}

int
gmpy_rank_arg (PyObject *obj, const char *fname, const char *what,
               PyObject **index, Py_ssize_t *value)
{
  *index = NULL;
  if (!PyIndex_Check (obj) || PyBool_Check (obj))
    {
      PyErr_Format (PyExc_TypeError, "%s: %s must be an int, not %.100s",
                    fname, what, GMPY_TYPE_NAME (Py_TYPE (obj)));
      return -1;
    }
  *index = PyNumber_Index (obj);
  if (*index == NULL)
    return -1;
  *value = PyLong_AsSsize_t (*index);
  if (*value == -1 && PyErr_Occurred ())
    {
      if (!PyErr_ExceptionMatches (PyExc_OverflowError))
        {
          Py_CLEAR (*index);
          return -1;
        }
      /* Far out of range: -1, which no range takes; the caller's
         message names *INDEX itself.  */
      PyErr_Clear ();
    }
  return 0;
}

int
gmpy_comm_rank_arg (PyObject *obj, const char *fname, const char *what,
                    int *rank)
{
  PyObject *index;
  Py_ssize_t value;
  int size = gm_comm_size ();

  if (obj == NULL)
    return 0;
  if (gmpy_rank_arg (obj, fname, what, &index, &value) < 0)
    return -1;
  if (value < 0 || value >= size)
    {
      PyErr_Format (PyExc_ValueError,
                    "%s: %s %S is not a rank: the job has %d "
                    "process%s (ranks 0 to %d)", fname, what, index, size,
                    size == 1 ? "" : "es", size - 1);
      Py_DECREF (index);
      return -1;
    }
  Py_DECREF (index);
  *rank = (int) value;
  return 0;
}

int
gmpy_stream_number (PyObject *obj, const char *what, long long *value)
{
  int overflow;

  if (!PyLong_Check (obj) || PyBool_Check (obj))
    {
      PyErr_Format (PyExc_TypeError, "%s must be None or an int, not %.100s",
                    what, GMPY_TYPE_NAME (Py_TYPE (obj)));
      return -1;
    }
  *value = PyLong_AsLongLongAndOverflow (obj, &overflow);
  if (*value == -1 && PyErr_Occurred ())
    return -1;
  if (overflow != 0)
    {
      PyErr_Format (PyExc_ValueError, "%s %S is not a CUDA stream: a "
                    "stream's handle is an address, below 2**63", what, obj);
      return -1;
    }
  return 0;
}

int
gmpy_size_arg (PyObject *obj, const char *what, Py_ssize_t *value)
{
  if (index_arg (obj, what, value) < 0)
    return -1;
  if (*value < 0)
    {
      PyErr_Format (PyExc_ValueError, "%s must not be negative, got %zd",
                    what, *value);
      return -1;
    }
  return 0;
}

int
gmpy_dtype_arg (PyObject *obj, gm_dtype *dtype)
{
  gmpy_state *state = gmpy_state_get ();
  PyObject *np_dtype;
  int found = -1;

  if (obj == NULL || obj == Py_None)
    {
      *dtype = GM_FLOAT32;
      return 0;
    }
  for (int d = 0; d < GM_NDTYPES; d++)
    if (obj == state->np_dtypes[d])
      {
        *dtype = (gm_dtype) d;
        return 0;
      }
  if (PyUnicode_Check (obj))
    {
      Py_ssize_t len;
      const char *name = PyUnicode_AsUTF8AndSize (obj, &len);
      if (name == NULL)
        return -1;
      found = gm_dtype_from_name (name, (size_t) len);
      if (found >= 0)
        {
          *dtype = (gm_dtype) found;
          return 0;
        }
    }
  np_dtype = PyObject_CallMethod (state->numpy, "dtype", "O", obj);
  if (np_dtype == NULL)
    {
      PyErr_Clear ();
      PyErr_Format (PyExc_TypeError, "dtype %R is not a data type", obj);
      return -1;
    }
  for (int d = 0; d < GM_NDTYPES && found < 0; d++)
    {
      int equal = PyObject_RichCompareBool (np_dtype, state->np_dtypes[d],
                                            Py_EQ);
      if (equal < 0)
        {
          Py_DECREF (np_dtype);
          return -1;
        }
      if (equal)
        found = d;
    }
  if (found < 0)
    {
      PyErr_Format (PyExc_TypeError,
                    "dtype %R is not supported; gpumem supports bool, int8, "
                    "int16, int32, int64, uint8, uint16, uint32, uint64, "
                    "float16, float32, float64, complex64 and complex128 "
                    "(native byte order)", np_dtype);
      Py_DECREF (np_dtype);
      return -1;
    }
  Py_DECREF (np_dtype);
  *dtype = (gm_dtype) found;
  return 0;
}

/* The items of sequence OBJ as a new tuple, or NULL (TypeError MESSAGE
   when OBJ is no sequence).  A tuple, not PySequence_Fast's list: the
   items' __index__ may change a list while it is being read.  */
static PyObject *
shape_items (PyObject *obj, const char *message)
{
  PyObject *seq = PySequence_Fast (obj, message), *tuple;

  if (seq == NULL || PyTuple_Check (seq))
    return seq;
  tuple = PyList_AsTuple (seq);
  Py_DECREF (seq);
  return tuple;
}

int
gmpy_shape_read (PyObject *shape, size_t itemsize, int *ndim,
                 Py_ssize_t dims[GM_MAX_NDIM], int *unknown)
{
  bool scalar = PyLong_Check (shape) || (!PySequence_Check (shape)
                                         && PyIndex_Check (shape));
  const char *what = scalar ? "shape" : "each dimension of shape";
  PyObject *seq;
  Py_ssize_t n;

  if (unknown != NULL)
    *unknown = -1;
  if (scalar)
    {
      seq = PyTuple_Pack (1, shape);
      if (seq == NULL)
        return -1;
    }
  else
    {
      seq = shape_items (shape, "shape must be an int or a sequence "
                                "of ints");
      if (seq == NULL)
        return -1;
    }
  n = PyTuple_GET_SIZE (seq);
  if (n > GM_MAX_NDIM)
    {
      Py_DECREF (seq);
      PyErr_Format (PyExc_ValueError, "shape has %zd dimensions; at "
                    "most %d are supported", n, GM_MAX_NDIM);
      return -1;
    }
  for (Py_ssize_t i = 0; i < n; i++)
    {
      if (index_arg (PyTuple_GET_ITEM (seq, i), what, &dims[i]) < 0)
        {
          Py_DECREF (seq);
          return -1;
        }
      /* -1 stands for the one dimension the others leave.  */
      if (dims[i] == -1 && unknown != NULL && *unknown < 0)
        *unknown = (int) i;
      else if (dims[i] < 0)
        {
          PyErr_Format (PyExc_ValueError, "%s must not be negative, got %zd",
                        what, dims[i]);
          Py_DECREF (seq);
          return -1;
        }
    }
  Py_DECREF (seq);
  *ndim = (int) n;
  return gmpy_shape_fits (*ndim, dims, unknown != NULL ? *unknown : -1,
                          itemsize, "array");
}

int
gmpy_shape_fits (int ndim, const Py_ssize_t *dims, int skip, size_t itemsize,
                 const char *what)
{
  Py_ssize_t total = (Py_ssize_t) itemsize;

  for (int i = 0; i < ndim; i++)
    if (i != skip && dims[i] != 0
        && __builtin_mul_overflow (total, dims[i], &total))
      {
        PyErr_Format (PyExc_ValueError, "%s is too large", what);
        return -1;
      }
  return 0;
}

int
gmpy_shape_arg (PyObject *shape, size_t itemsize, int *ndim,
                Py_ssize_t dims[GM_MAX_NDIM])
{
  return gmpy_shape_read (shape, itemsize, ndim, dims, NULL);
}

Py_ssize_t
gmpy_shape_size (int ndim, const Py_ssize_t *dims)
{
  Py_ssize_t size = 1;

  for (int i = 0; i < ndim; i++)
    size *= dims[i];
  return size;
}

PyObject *
gmpy_shape_tuple (int ndim, const Py_ssize_t *dims)
{
  PyObject *shape = PyTuple_New (ndim);

  if (shape == NULL)
    return NULL;
  for (int i = 0; i < ndim; i++)
    {
      PyObject *dim = PyLong_FromSsize_t (dims[i]);
      if (dim == NULL)
        {
          Py_DECREF (shape);
          return NULL;
        }
      PyTuple_SET_ITEM (shape, i, dim);
    }
  return shape;
}
