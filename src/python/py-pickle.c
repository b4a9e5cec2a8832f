/* py-pickle.c -- pickling a DeviceArray by value.

   pickle.dumps (a) holds a host copy of the elements (a C-contiguous
   numpy.ndarray: a view pickles as its own elements, packed) and the
   index of a's device; pickle.loads makes a new owner array on that
   device from them, through gpumem._rebuild.  The memory is never
   shared: the loaded array is a copy, writable, with no base.  A freed
   array refuses to be pickled (ValueError).  */

#include "gm-python.h"

PyObject *
gmpy_array_reduce (PyObject *self, PyObject *unused)
{
  arraypy_object *array = (arraypy_object *) self;
  PyObject *module, *rebuild, *host;
  gm_stream *stream;

  if (gmpy_array_usable (array) < 0
      || gmpy_stream_arg (Py_None, array->device, &stream) < 0)
    return NULL;
  module = PyType_GetModule (Py_TYPE (self));
  if (module == NULL)
    return NULL;
  rebuild = PyObject_GetAttrString (module, "_rebuild");
  if (rebuild == NULL)
    return NULL;
  host = gmpy_array_strided_to_host (array, stream);
  if (host == NULL)
    {
      Py_DECREF (rebuild);
      return NULL;
    }
  return Py_BuildValue ("N(Ni)", rebuild, host, array->device);
}

/* gpumem._rebuild (HOST, DEVICE): gpumem.to_device (HOST, device=DEVICE),
   called through the module, as a script would call it.  */
PyObject *
gmpy_rebuild (PyObject *module, PyObject *args)
{
  PyObject *host, *device, *to_device, *result;

  if (!PyArg_ParseTuple (args, "OO:_rebuild", &host, &device))
    return NULL;
  to_device = PyObject_GetAttrString (module, "to_device");
  if (to_device == NULL)
    return NULL;
  result = PyObject_CallFunction (to_device, "OO", host, device);
  Py_DECREF (to_device);
  return result;
}
