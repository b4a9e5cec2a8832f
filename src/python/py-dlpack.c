/* py-dlpack.c -- gpumem.from_dlpack, and the DLPack step of asarray's
   type-keyed order.

   From a capsule, from a type's C exchange API (py-dlpack-exchange.c:
   no Python call), or from a producer's __dlpack__: asked for its data
   on gpumem's stream (CUDA's legacy default stream, which gpumem's own
   streams follow), with max_version (1, 0) first.  What comes back is
   checked and wrapped by py-dlpack-import.c; DeviceArray's own
   __dlpack__ is py-dlpack-export.c's.  */

#include "gm-python.h"

#include "py-dlpack.h"

/* Whether the backend's device memory is CUDA memory (else host
   memory, kDLCPU).  */
static bool
backend_is_cuda (void)
{
  return gm_backend_current->device_memory == GM_MEMORY_CUDA;
}

/* Asks producer OBJ for a capsule of its data on gpumem's stream: with
   max_version (1, 0) first, then, for producers that predate it (a
   TypeError), without.  DEVICE_TYPE is what OBJ's __dlpack_device__
   said, or -1.  New reference or NULL.  */
static PyObject *
request_capsule (PyObject *obj, int device_type)
{
  PyObject *method, *kwargs = NULL, *capsule = NULL, *version;
  PyObject *empty = NULL;

  method = PyObject_GetAttrString (obj, "__dlpack__");
  if (method == NULL)
    return NULL;
  empty = PyTuple_New (0);
  kwargs = PyDict_New ();
  if (empty == NULL || kwargs == NULL)
    goto done;
  /* gpumem reads and writes on CUDA's legacy default stream, which its
     own streams follow too: the producer orders its work before it.
     Host memory has no stream.  */
  if (device_type == GM_DL_CUDA || device_type == GM_DL_CUDA_MANAGED)
    {
      PyObject *stream = PyLong_FromLong (GM_DL_STREAM_LEGACY);
      if (stream == NULL || PyDict_SetItemString (kwargs, "stream", stream) < 0)
        {
          Py_XDECREF (stream);
          goto done;
        }
      Py_DECREF (stream);
    }
  version = Py_BuildValue ("(ii)", GM_DLPACK_MAJOR, GM_DLPACK_MINOR);
  if (version == NULL
      || PyDict_SetItemString (kwargs, "max_version", version) < 0)
    {
      Py_XDECREF (version);
      goto done;
    }
  Py_DECREF (version);
  capsule = PyObject_Call (method, empty, kwargs);
  if (capsule == NULL && PyErr_ExceptionMatches (PyExc_TypeError))
    {
      PyErr_Clear ();
      if (PyDict_DelItemString (kwargs, "max_version") < 0)
        goto done;
      capsule = PyObject_Call (method, empty, kwargs);
    }
done:
  Py_DECREF (method);
  Py_XDECREF (empty);
  Py_XDECREF (kwargs);
  return capsule;
}

/* OBJ's __dlpack_device__ () into *TYPE and *ID: 1, 0 when OBJ has no
   such method, -1 with an exception.  */
static int
producer_device (PyObject *obj, int *type, int *id)
{
  PyObject *result;
  int ok;

  result = PyObject_CallMethod (obj, "__dlpack_device__", NULL);
  if (result == NULL)
    {
      if (!PyErr_ExceptionMatches (PyExc_AttributeError)
          || PyObject_HasAttrString (obj, "__dlpack_device__"))
        return -1;
      PyErr_Clear ();
      return 0;
    }
  ok = PyTuple_Check (result) && PyTuple_GET_SIZE (result) == 2;
  if (ok)
    {
      *type = PyLong_AsLong (PyTuple_GET_ITEM (result, 0));
      *id = PyLong_AsLong (PyTuple_GET_ITEM (result, 1));
      ok = !PyErr_Occurred ();
      PyErr_Clear ();
    }
  if (!ok)
    PyErr_Format (PyExc_TypeError, "__dlpack_device__ returned %R, not a "
                  "(device_type, device_id) tuple of ints", result);
  Py_DECREF (result);
  return ok ? 1 : -1;
}

/* gpumem.from_dlpack (OBJ): a new DeviceArray over the memory of DLPack
   producer OBJ (or of a capsule), as gmpy_dlpack_consume_capsule makes
   it.  NULL with TypeError when OBJ is neither, BufferError for memory
   on a device the backend cannot use, or what the producer or the
   checks raised.  */
PyObject *
gmpy_from_dlpack (PyObject *module, PyObject *obj)
{
  PyObject *capsule, *result;
  const gm_dl_exchange_api *api;
  int type = -1, id = -1, found;

  if (PyCapsule_CheckExact (obj))
    return gmpy_dlpack_consume_capsule (obj);
  /* A type's C exchange API first: no Python call.  */
  api = gmpy_exchange_api_of (obj);
  if (api != NULL)
    return gmpy_exchange_take (obj, api);
  if (!PyObject_HasAttrString (obj, "__dlpack__"))
    {
      PyErr_Format (PyExc_TypeError, "from_dlpack needs a DLPack producer "
                    "(an object with __dlpack__) or a DLPack capsule, not "
                    "%.100s", GMPY_TYPE_NAME (Py_TYPE (obj)));
      return NULL;
    }
  found = producer_device (obj, &type, &id);
  if (found < 0)
    return NULL;
  /* Refuse before the producer does any work for us.  */
  if (found && !gmpy_dlpack_device_usable (type))
    {
      gmpy_dlpack_wrong_device (type);
      return NULL;
    }
  capsule = request_capsule (obj, type);
  if (capsule == NULL)
    return NULL;
  if (!PyCapsule_CheckExact (capsule))
    {
      PyErr_Format (PyExc_TypeError, "%.100s.__dlpack__ returned %.100s, not "
                    "a capsule", GMPY_TYPE_NAME (Py_TYPE (obj)),
                    GMPY_TYPE_NAME (Py_TYPE (capsule)));
      Py_DECREF (capsule);
      return NULL;
    }
  result = gmpy_dlpack_consume_capsule (capsule);
  Py_DECREF (capsule);
  return result;
}

int
gmpy_dlpack_asarray (PyObject *obj, PyObject **result)
{
  int type, id, found;

  *result = NULL;
  if (!backend_is_cuda () || !PyObject_HasAttrString (obj, "__dlpack__"))
    return 0;
  found = producer_device (obj, &type, &id);
  if (found <= 0)
    return found;
  if (type != GM_DL_CUDA && type != GM_DL_CUDA_MANAGED)
    return 0;
  *result = gmpy_from_dlpack (NULL, obj);
  return *result != NULL ? 1 : -1;
}
