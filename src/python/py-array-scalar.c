/* py-array-scalar.c -- a DeviceArray as one Python scalar.

   float (a), int (a), complex (a), a.item (), bool (a) and
   operator.index (a), by NumPy's rules: an array of exactly one element
   (any number of dimensions) gives that element, copied to the host and
   complete on return; any other size is refused.  bool () of an empty
   array raises, as NumPy 2 does; __index__ takes only 0-d arrays of an
   integer dtype, as NumPy's.  */

#include "gm-python.h"

/* The one element of ARRAY as a Python scalar (NumPy's item ()), read
   on the current stream of ARRAY's device and complete on return.  The
   caller has checked that ARRAY has one element.  New reference or
   NULL (ValueError when freed, or the copy's error).  */
static PyObject *
element (arraypy_object *array)
{
  PyObject *host, *value;
  gmpy_dispatch d;

  if (gmpy_array_usable (array) < 0
      || gmpy_dispatch_get (NULL, array->device, &d) < 0)
    return NULL;
  host = gmpy_array_strided_to_host (array, d.stream);
  if (host == NULL)
    return NULL;
  value = PyObject_CallMethod (host, "item", NULL);
  Py_DECREF (host);
  return value;
}

/* The element of ARRAY for float (), int () and complex (); TypeError
   with NumPy's message unless ARRAY has one element.  */
static PyObject *
scalar_element (arraypy_object *array)
{
  if (array->size != 1)
    {
      PyErr_SetString (PyExc_TypeError, "only length-1 arrays can be "
                       "converted to Python scalars");
      return NULL;
    }
  return element (array);
}

PyObject *
gmpy_array_float (PyObject *self)
{
  PyObject *value = scalar_element ((arraypy_object *) self), *result;

  if (value == NULL)
    return NULL;
  result = PyNumber_Float (value);
  Py_DECREF (value);
  return result;
}

PyObject *
gmpy_array_int (PyObject *self)
{
  PyObject *value = scalar_element ((arraypy_object *) self), *result;

  if (value == NULL)
    return NULL;
  result = PyNumber_Long (value);
  Py_DECREF (value);
  return result;
}

PyObject *
gmpy_array_complex (PyObject *self, PyObject *unused)
{
  PyObject *value = scalar_element ((arraypy_object *) self), *result;

  if (value == NULL)
    return NULL;
  result = PyObject_CallFunctionObjArgs ((PyObject *) &PyComplex_Type, value,
                                         NULL);
  Py_DECREF (value);
  return result;
}

PyObject *
gmpy_array_to_scalar (PyObject *self, PyObject *unused)
{
  arraypy_object *array = (arraypy_object *) self;

  if (array->size != 1)
    {
      PyErr_SetString (PyExc_ValueError, "can only convert an array of size "
                       "1 to a Python scalar");
      return NULL;
    }
  return element (array);
}

int
gmpy_array_bool (PyObject *self)
{
  arraypy_object *array = (arraypy_object *) self;
  PyObject *value;
  int truth;

  if (array->size == 0)
    {
      PyErr_SetString (PyExc_ValueError, "The truth value of an empty array "
                       "is ambiguous. Use `array.size > 0` to check that an "
                       "array is not empty.");
      return -1;
    }
  if (array->size > 1)
    {
      PyErr_SetString (PyExc_ValueError, "The truth value of an array with "
                       "more than one element is ambiguous. Use a.any() or "
                       "a.all()");
      return -1;
    }
  value = element (array);
  if (value == NULL)
    return -1;
  truth = PyObject_IsTrue (value);
  Py_DECREF (value);
  return truth;
}

PyObject *
gmpy_array_index (PyObject *self)
{
  arraypy_object *array = (arraypy_object *) self;
  char kind = gm_dtypes[array->dtype].kind;
  PyObject *value, *result;

  if (array->ndim != 0 || (kind != 'i' && kind != 'u'))
    {
      PyErr_SetString (PyExc_TypeError, "only integer scalar arrays can be "
                       "converted to a scalar index");
      return NULL;
    }
  value = element (array);
  if (value == NULL)
    return NULL;
  result = PyNumber_Index (value);
  Py_DECREF (value);
  return result;
}
