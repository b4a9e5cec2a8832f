/* py-pinned.c -- pinned_empty: NumPy arrays in page-locked host memory.

   The array's base is a small buffer object that owns a block of the
   pinned pool (src/core/pinned-pool.c) and gives it back to the pool
   when the last array using it goes.  */

#include "gm-python.h"
#include "pinned-pool.h"

typedef struct pinnedpy_object
{
  PyObject_HEAD
  void *ptr;
  Py_ssize_t nbytes;
} pinnedpy_object;

static int
pinnedpy_getbuffer (PyObject *self, Py_buffer *view, int flags)
{
  pinnedpy_object *p = (pinnedpy_object *) self;
  return PyBuffer_FillInfo (view, self, p->ptr, p->nbytes, 0, flags);
}

static void
pinnedpy_releasebuffer (PyObject *self, Py_buffer *view)
{
}

static void
pinnedpy_dealloc (PyObject *self)
{
  pinnedpy_object *p = (pinnedpy_object *) self;
  PyTypeObject *type = Py_TYPE (self);

  if (p->ptr != NULL && gm_backend_current != NULL)
    gm_pinned_free (p->ptr);
  GMPY_TYPE_FREE (type, self);
  Py_DECREF (type);
}

static PyType_Slot pinnedpy_slots[] = {
  {Py_tp_dealloc, pinnedpy_dealloc},
  {Py_bf_getbuffer, pinnedpy_getbuffer},
  {Py_bf_releasebuffer, pinnedpy_releasebuffer},
  {Py_tp_doc, "Page-locked host memory behind a pinned_empty array."},
  {0, NULL}
};

static PyType_Spec pinnedpy_spec = {
  .name = "gpumem.PinnedBuffer",
  .basicsize = sizeof (pinnedpy_object),
  .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE
           | Py_TPFLAGS_DISALLOW_INSTANTIATION,
  .slots = pinnedpy_slots,
};

PyObject *
gmpy_pinned_empty (PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                   PyObject *kwnames)
{
  static const char *const names[] = {"shape", "dtype", NULL};
  gmpy_state *state = gmpy_state_get ();
  PyObject *arg[2], *dims_tuple, *result;
  pinnedpy_object *buffer;
  Py_ssize_t size, dims[GM_MAX_NDIM];
  int ndim;
  gm_dtype dtype;
  gm_status status;

  if (gmpy_parse_args (args, nargs, kwnames, "pinned_empty", names, 1, -1,
                       arg) < 0
      || gmpy_dtype_arg (arg[1], &dtype) < 0)
    return NULL;
  if (gmpy_shape_arg (arg[0], gm_dtypes[dtype].itemsize, &ndim, dims) < 0)
    return NULL;
  size = gmpy_shape_size (ndim, dims);
  buffer = PyObject_New (pinnedpy_object, state->pinned_type);
  if (buffer == NULL)
    return NULL;
  buffer->nbytes = size * (Py_ssize_t) gm_dtypes[dtype].itemsize;
  buffer->ptr = NULL;
  status = gm_pinned_alloc ((size_t) buffer->nbytes, &buffer->ptr);
  if (status != GM_OK)
    {
      buffer->ptr = NULL;
      Py_DECREF (buffer);
      return gmpy_raise (status);
    }
  /* numpy.ndarray (shape, dtype, buffer): one call makes the array of
     the shape over the buffer, which becomes its base.  */
  dims_tuple = gmpy_shape_tuple (ndim, dims);
  result = dims_tuple != NULL
           ? PyObject_CallFunctionObjArgs (state->np_ndarray, dims_tuple,
                                           state->np_dtypes[dtype],
                                           (PyObject *) buffer, NULL)
           : NULL;
  Py_XDECREF (dims_tuple);
  Py_DECREF (buffer);
  return result;
}

int
gmpy_pinned_init (PyObject *module, gmpy_state *state)
{
  state->pinned_type = (PyTypeObject *) PyType_FromModuleAndSpec (
    module, &pinnedpy_spec, NULL);
  return state->pinned_type == NULL ? -1 : 0;
}
