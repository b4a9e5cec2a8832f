/* py-index.c -- DeviceArray indexing and assignment.

   Basic indexing (ints, slices with any step, ..., None, on every axis)
   makes views that share the owner's memory and may be strided.
   Assignment writes scalars, host arrays and device memory (DeviceArrays,
   and other libraries' through asarray) into such a view, by the copies
   of py-array-copy.c.  */

#include "gm-python.h"

/* 0 unless ITEM, an index, is an array (a DeviceArray or a NumPy
   array) of one dimension or more: advanced indexing, which gpumem
   does not do.  Then -1 with TypeError saying so, and what to do
   instead for a boolean mask.  (A 0-d integer array is an int.)  */
static int
array_index (PyObject *item)
{
  PyObject *ndim_obj, *dtype, *kind;
  long ndim;
  int is_bool;

  if (!gmpy_array_check (item)
      && PyObject_IsInstance (item, gmpy_state_get ()->np_ndarray) != 1)
    {
      PyErr_Clear ();
      return 0;
    }
  ndim_obj = PyObject_GetAttrString (item, "ndim");
  ndim = ndim_obj ? PyLong_AsLong (ndim_obj) : -1;
  Py_XDECREF (ndim_obj);
  if (ndim == -1 && PyErr_Occurred ())
    return -1;
  if (ndim == 0)
    return 0;
  dtype = PyObject_GetAttrString (item, "dtype");
  kind = dtype ? PyObject_GetAttrString (dtype, "kind") : NULL;
  Py_XDECREF (dtype);
  if (kind == NULL)
    return -1;
  is_bool = PyUnicode_CompareWithASCIIString (kind, "b") == 0;
  Py_DECREF (kind);
  if (is_bool)
    PyErr_SetString (PyExc_TypeError, "boolean mask indexing is not "
                     "supported: DeviceArray indexes are ints, slices, ... "
                     "and None; copy to the host (a.copy_to_host()[mask]) "
                     "or select with slices");
  else
    PyErr_Format (PyExc_TypeError, "indexing by an array of indices is not "
                  "supported: DeviceArray indexes are ints, slices, ... and "
                  "None; copy to the host (a.copy_to_host()[indices]) or "
                  "select with slices");
  return -1;
}

/* Reads the index KEY of ARRAY into the view's byte OFFSET from ARRAY's
   data, *NDIM, SHAPE and STRIDES.  0, or -1 with IndexError (out of
   range, too many indices) or TypeError (an index that is not basic).
   The offset of a view of an empty array stays 0: no element is ever
   read there, and the strides of an empty array another library made
   (DLPack, the CUDA Array Interface) may be anything, so that an index
   times one could overflow.  gpumem's own shapes cannot
   (gmpy_shape_fits).  */
static int
read_key (arraypy_object *array, PyObject *key, Py_ssize_t *offset, int *ndim,
          Py_ssize_t shape[GM_MAX_NDIM], Py_ssize_t strides[GM_MAX_NDIM])
{
  PyObject *items = PyTuple_Check (key) ? Py_NewRef (key)
                                        : PyTuple_Pack (1, key);
  Py_ssize_t nitems, consumed = 0;
  int ellipsis = -1, axis = 0, out = 0, rc = -1;

  if (items == NULL)
    return -1;
  nitems = PyTuple_GET_SIZE (items);
  for (Py_ssize_t i = 0; i < nitems; i++)
    {
      PyObject *item = PyTuple_GET_ITEM (items, i);
      if (item == Py_Ellipsis)
        {
          if (ellipsis >= 0)
            {
              PyErr_SetString (PyExc_IndexError, "an index can only have a "
                               "single ellipsis ('...')");
              goto done;
            }
          ellipsis = (int) i;
        }
      else if (item == Py_None)
        ;
      else if (PySlice_Check (item))
        consumed++;
      else if (array_index (item) < 0)
        goto done;
      else if (PyIndex_Check (item) && !PyBool_Check (item))
        consumed++;
      else
        {
          PyErr_Format (PyExc_TypeError, "DeviceArray indexes are ints, "
                        "slices, ... and None (basic indexing); not %.100s "
                        "(advanced indexing by arrays or booleans is not "
                        "supported)", GMPY_TYPE_NAME (Py_TYPE (item)));
          goto done;
        }
    }
  if (consumed > array->ndim)
    {
      PyErr_Format (PyExc_IndexError, "too many indices for a DeviceArray: "
                    "it has %d dimensions, but %zd were indexed",
                    array->ndim, consumed);
      goto done;
    }
  *offset = 0;
  for (Py_ssize_t i = 0; i <= nitems; i++)
    {
      PyObject *item = i < nitems ? PyTuple_GET_ITEM (items, i) : NULL;
      Py_ssize_t start, stop, step, length;

      if (out >= GM_MAX_NDIM && (item == Py_None || (item != NULL
                                                     && PySlice_Check (item))))
        {
          PyErr_Format (PyExc_IndexError, "a view may have at most %d "
                        "dimensions", GM_MAX_NDIM);
          goto done;
        }
      if (item == NULL || item == Py_Ellipsis)
        {
          /* The axes no index names: all of them, at the ellipsis or at
             the end when there is none.  */
          Py_ssize_t rest = array->ndim - consumed;
          if (item == NULL && ellipsis >= 0)
            break;
          if (out + rest > GM_MAX_NDIM)
            {
              PyErr_Format (PyExc_IndexError, "a view may have at most %d "
                            "dimensions", GM_MAX_NDIM);
              goto done;
            }
          for (Py_ssize_t k = 0; k < rest; k++, axis++, out++)
            {
              shape[out] = array->shape[axis];
              strides[out] = array->strides[axis];
            }
          consumed = array->ndim;
        }
      else if (item == Py_None)
        {
          shape[out] = 1;
          strides[out] = 0;
          out++;
        }
      else if (PySlice_Check (item))
        {
          if (PySlice_Unpack (item, &start, &stop, &step) < 0)
            goto done;
          length = PySlice_AdjustIndices (array->shape[axis], &start, &stop,
                                          step);
          /* An empty slice starts at 0 with step 1, as NumPy's does.  */
          if (length == 0)
            step = 1;
          else if (array->size > 0)
            *offset += start * array->strides[axis];
          shape[out] = length;
          /* Only an axis of length 0 or 1 can have a step this large;
             its stride is never used.  */
          if (__builtin_mul_overflow (array->strides[axis], step,
                                      &strides[out]))
            strides[out] = array->strides[axis];
          out++;
          axis++;
        }
      else
        {
          Py_ssize_t index = PyNumber_AsSsize_t (item, PyExc_IndexError);
          if (index == -1 && PyErr_Occurred ())
            goto done;
          if (index < 0)
            index += array->shape[axis];
          if (index < 0 || index >= array->shape[axis])
            {
              PyErr_Format (PyExc_IndexError, "index %zd is out of bounds "
                            "for axis %d with size %zd",
                            index < 0 ? index - array->shape[axis] : index,
                            axis, array->shape[axis]);
              goto done;
            }
          if (array->size > 0)
            *offset += index * array->strides[axis];
          axis++;
        }
    }
  *ndim = out;
  rc = 0;
done:
  Py_DECREF (items);
  return rc;
}

PyObject *
gmpy_array_subscript (PyObject *self, PyObject *key)
{
  arraypy_object *array = (arraypy_object *) self;
  Py_ssize_t shape[GM_MAX_NDIM], strides[GM_MAX_NDIM], offset;
  int ndim;

  if (gmpy_array_usable (array) < 0
      || read_key (array, key, &offset, &ndim, shape, strides) < 0
      /* An index's __index__ may have freed the array.  */
      || gmpy_array_usable (array) < 0)
    return NULL;
  return gmpy_array_view (array, offset, ndim, shape, strides);
}

PyObject *
gmpy_array_item (PyObject *self, Py_ssize_t index)
{
  PyObject *key = PyLong_FromSsize_t (index), *item;

  if (key == NULL)
    return NULL;
  item = gmpy_array_subscript (self, key);
  Py_DECREF (key);
  return item;
}

PyObject *
gmpy_array_iter (PyObject *self)
{
  if (((arraypy_object *) self)->ndim == 0)
    {
      PyErr_SetString (PyExc_TypeError, "iteration over a 0-d DeviceArray");
      return NULL;
    }
  return PySeqIter_New (self);
}

int
gmpy_array_ass_subscript (PyObject *self, PyObject *key, PyObject *value)
{
  PyObject *view, *ndim = NULL;
  long dims;
  int rc = -1;

  if (value == NULL)
    {
      PyErr_SetString (PyExc_TypeError, "DeviceArray elements cannot be "
                                        "deleted");
      return -1;
    }
  view = gmpy_array_subscript (self, key);
  if (view == NULL)
    return -1;
  /* Another library's device memory (__cuda_array_interface__, DLPack)
     is assigned as a DeviceArray over it, without a host copy.  */
  if (!gmpy_array_check (value)
      && gm_backend_current->device_memory == GM_MEMORY_CUDA
      && (PyObject_HasAttrString (value, "__cuda_array_interface__")
          || PyObject_HasAttrString (value, "__dlpack__")))
    {
      PyObject *wrapped = gmpy_asarray (NULL, value);
      if (wrapped != NULL)
        {
          rc = gmpy_array_ass_subscript (self, key, wrapped);
          Py_DECREF (wrapped);
          Py_DECREF (view);
          return rc;
        }
      if (!PyErr_ExceptionMatches (PyExc_TypeError))
        {
          Py_DECREF (view);
          return -1;
        }
      PyErr_Clear ();           /* not device memory: as host data */
    }
  if (gmpy_array_check (value))
    {
      gmpy_dispatch d;
      if (gmpy_dispatch_get (NULL, ((arraypy_object *) view)->device, &d)
          == 0)
        rc = gmpy_array_assign ((arraypy_object *) view,
                                (arraypy_object *) value, d.stream);
      if (rc == 0)
        gmpy_array_note_stream (view, &d);
    }
  else
    {
      ndim = PyObject_CallMethod (gmpy_state_get ()->numpy, "ndim", "O",
                                  value);
      dims = ndim ? PyLong_AsLong (ndim) : -1;
      if (dims == 0)
        rc = gmpy_array_fill_value ((arraypy_object *) view, value);
      else if (dims > 0)
        {
          gmpy_dispatch d;
          arraypy_object *target = (arraypy_object *) view;
          if (gmpy_dispatch_get (NULL, target->device, &d) == 0)
            rc = gmpy_array_strided_from_host (target, value, true, true,
                                               d.stream, "value");
          if (rc == 0)
            gmpy_array_note_stream (view, &d);
        }
    }
  Py_XDECREF (ndim);
  Py_DECREF (view);
  return rc;
}
