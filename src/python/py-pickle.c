/* py-pickle.c -- pickling a DeviceArray by value.

   pickle.dumps (a) holds a host copy of the elements (a C-contiguous
   numpy.ndarray: a view pickles as its own elements, packed), the
   index of a's device and, for a managed array, its memory ('managed');
   pickle.loads makes a new owner array on that device and in that
   memory from them, through gpumem._rebuild.  The memory is never
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
  /* A device array's pickle stays as it was, for older readers.  */
  if (array->memory == GMPY_MEMORY_MANAGED)
    return Py_BuildValue ("N(Nis)", rebuild, host, array->device,
                          "managed");
  return Py_BuildValue ("N(Ni)", rebuild, host, array->device);
}

/* gpumem._rebuild (HOST, DEVICE, MEMORY='device'): gpumem.to_device
   (HOST, device=DEVICE, memory=MEMORY), called through the module, as a
   script would call it.  */
PyObject *
gmpy_rebuild (PyObject *module, PyObject *args)
{
  PyObject *host, *device, *memory = Py_None, *to_device, *result;

  if (!PyArg_ParseTuple (args, "OO|O:_rebuild", &host, &device, &memory))
    return NULL;
  to_device = PyObject_GetAttrString (module, "to_device");
  if (to_device == NULL)
    return NULL;
  result = PyObject_CallFunction (to_device, "OOOO", host, device, Py_None,
                                  memory);
  Py_DECREF (to_device);
  return result;
}
