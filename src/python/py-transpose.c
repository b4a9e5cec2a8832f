/* py-transpose.c -- DeviceArray views with permuted axes.

   a.transpose (*axes) and a.T, as NumPy's: a view of the same memory
   whose shape and strides are the array's, permuted; its base is the
   owner, as every view's.  Every path that takes strided views (copies,
   assignment, copy_to_host, CAI, DLPack) sees the permuted strides;
   what needs contiguous memory asks for a.copy ().  */

#include "gm-python.h"

/* Reads AXES (a tuple of ints, None, or one sequence of ints) into PERM,
   a permutation of ARRAY's axes; negative axes count from the end.  0,
   or -1 with ValueError (wrong length, out of range, repeated) or
   TypeError (not ints).  */
static int
read_axes (const arraypy_object *array, PyObject *axes, int perm[GM_MAX_NDIM])
{
  bool seen[GM_MAX_NDIM] = {false};
  Py_ssize_t n;
  int rc = -1;

  if (PyTuple_GET_SIZE (axes) == 1)
    {
      PyObject *only = PyTuple_GET_ITEM (axes, 0);
      if (only == Py_None)
        axes = PyTuple_New (0);
      else if (PySequence_Check (only))
        axes = PySequence_Tuple (only);
      else
        axes = Py_NewRef (axes);
    }
  else
    axes = Py_NewRef (axes);
  if (axes == NULL)
    return -1;
  n = PyTuple_GET_SIZE (axes);
  if (n == 0)
    {
      for (int i = 0; i < array->ndim; i++)
        perm[i] = array->ndim - 1 - i;
      rc = 0;
      goto done;
    }
  if (n != array->ndim)
    {
      PyErr_Format (PyExc_ValueError, "axes don't match array: %zd axes "
                    "for an array of %d dimensions", n, array->ndim);
      goto done;
    }
  for (Py_ssize_t i = 0; i < n; i++)
    {
      PyObject *item = PyTuple_GET_ITEM (axes, i);
      Py_ssize_t axis;

      if (PyBool_Check (item) || !PyIndex_Check (item))
        {
          PyErr_Format (PyExc_TypeError, "transpose: axes are ints, not "
                        "%.100s", GMPY_TYPE_NAME (Py_TYPE (item)));
          goto done;
        }
      axis = PyNumber_AsSsize_t (item, NULL);
      if (axis == -1 && PyErr_Occurred ())
        goto done;
      if (axis < -array->ndim || axis >= array->ndim)
        {
          PyErr_Format (PyExc_ValueError, "axis %zd is out of bounds for an "
                        "array of dimension %d", axis, array->ndim);
          goto done;
        }
      if (axis < 0)
        axis += array->ndim;
      if (seen[axis])
        {
          PyErr_SetString (PyExc_ValueError, "repeated axis in transpose");
          goto done;
        }
      seen[axis] = true;
      perm[i] = (int) axis;
    }
  rc = 0;
done:
  Py_DECREF (axes);
  return rc;
}

/* The view of ARRAY with its axes in the order PERM.  New reference or
   NULL.  */
static PyObject *
permuted_view (arraypy_object *array, const int perm[GM_MAX_NDIM])
{
  Py_ssize_t shape[GM_MAX_NDIM], strides[GM_MAX_NDIM];

  if (gmpy_array_usable (array) < 0)
    return NULL;
  for (int i = 0; i < array->ndim; i++)
    {
      shape[i] = array->shape[perm[i]];
      strides[i] = array->strides[perm[i]];
    }
  return gmpy_array_view (array, 0, array->ndim, shape, strides);
}

PyObject *
gmpy_array_transpose (PyObject *self, PyObject *args)
{
  arraypy_object *array = (arraypy_object *) self;
  int perm[GM_MAX_NDIM];

  if (read_axes (array, args, perm) < 0)
    return NULL;
  return permuted_view (array, perm);
}

PyObject *
gmpy_array_get_T (PyObject *self, void *closure)
{
  arraypy_object *array = (arraypy_object *) self;
  int perm[GM_MAX_NDIM];

  for (int i = 0; i < array->ndim; i++)
    perm[i] = array->ndim - 1 - i;
  return permuted_view (array, perm);
}
