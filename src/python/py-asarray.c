/* py-asarray.c -- gpumem.asarray: a DeviceArray over another library's
   device memory, without a copy.

   The dispatch is keyed on the argument's type, cheapest first: a
   DeviceArray is itself; a type that publishes DLPack's C exchange API
   is taken through it (py-dlpack-exchange.c: no Python call); then
   __dlpack__ (py-dlpack.c); the CUDA Array Interface (py-cai.c, a dict
   to read) last.  */

#include "gm-python.h"

#include "py-dlpack.h"

/* A read-only view of the DeviceArray ARRAY_OBJ, whose reference it
   takes.  New reference or NULL.  */
static PyObject *
readonly_view (PyObject *array_obj)
{
  arraypy_object *array = (arraypy_object *) array_obj;
  PyObject *view;

  if (array->readonly)
    return array_obj;
  view = gmpy_array_view (array, 0, array->ndim, array->shape,
                          array->strides);
  Py_DECREF (array_obj);
  if (view != NULL)
    ((arraypy_object *) view)->readonly = true;
  return view;
}

/* Sets the TypeError for OBJ, no memory the backend takes, naming WHO
   (NULL: no one); returns NULL.  */
static PyObject *
not_device_memory (PyObject *obj, const char *who)
{
  const char *prefix = who != NULL ? who : "";
  const char *colon = who != NULL ? ": " : "";

  if (gm_backend_current->device_memory == GM_MEMORY_CUDA)
    PyErr_Format (PyExc_TypeError, "%s%sexpected device memory: a "
                  "gpumem.DeviceArray, a DLPack producer of CUDA memory or an "
                  "object with __cuda_array_interface__ (CuPy, PyTorch, "
                  "Numba), not %.100s (gpumem.to_device copies host data)",
                  prefix, colon, GMPY_TYPE_NAME (Py_TYPE (obj)));
  else if (who != NULL)
    PyErr_Format (PyExc_TypeError, "%s%sexpected device memory: a "
                  "gpumem.DeviceArray, not %.100s (the host backend's device "
                  "memory is host memory: gpumem.from_dlpack wraps a DLPack "
                  "producer such as a NumPy array, gpumem.to_device copies "
                  "one)", prefix, colon, GMPY_TYPE_NAME (Py_TYPE (obj)));
  else
    PyErr_Format (PyExc_TypeError, "expected device memory: a "
                  "gpumem.DeviceArray or a DLPack producer of host memory "
                  "(the host backend's device memory, e.g. a NumPy array), "
                  "not %.100s", GMPY_TYPE_NAME (Py_TYPE (obj)));
  return NULL;
}

PyObject *
gmpy_asarray_for (PyObject *obj, const char *who, bool host_dlpack)
{
  Py_ssize_t dims[GM_MAX_NDIM], strides[GM_MAX_NDIM];
  bool cuda = gm_backend_current->device_memory == GM_MEMORY_CUDA;
  const gm_dl_exchange_api *api;
  PyObject *result;
  gmpy_devbuf buf;
  int found = 0, ndim;

  if (gmpy_array_check (obj))
    return Py_NewRef (obj);
  api = (cuda || host_dlpack) ? gmpy_exchange_api_of (obj) : NULL;
  if (api != NULL)
    {
      /* Memory of a device the backend does not use goes on to the
         protocols below, as any other object's.  */
      gm_dl_tensor tensor;
      bool usable = true;
      if (api->dltensor_from_py_object_no_sync != NULL)
        {
          if (api->dltensor_from_py_object_no_sync (obj, &tensor) < 0)
            return NULL;
          usable = gmpy_dlpack_device_usable (tensor.device.device_type);
        }
      if (usable)
        return gmpy_exchange_take (obj, api);
    }
  if (!cuda && host_dlpack && PyObject_HasAttrString (obj, "__dlpack__"))
    return gmpy_from_dlpack (NULL, obj);
  found = gmpy_dlpack_asarray (obj, &result);
  if (found < 0)
    return NULL;
  if (found)
    return result;
  if (cuda)
    found = gmpy_cai_read (obj, &buf, &ndim, dims, strides, "obj");
  if (found < 0)
    return NULL;
  if (found)
    {
      result = gmpy_array_wrap (ndim, dims, buf.dtype, buf.device, buf.data,
                                buf.readonly, obj);
      if (result != NULL)
        gmpy_array_set_strides ((arraypy_object *) result, strides);
      return result;
    }
  return not_device_memory (obj, who);
}

PyObject *
gmpy_asarray (PyObject *module, PyObject *obj)
{
  return gmpy_asarray_for (obj, "asarray", false);
}

PyObject *
gmpy_asarray_py (PyObject *module, PyObject *args, PyObject *kwargs)
{
  static char *keywords[] = {"obj", "readonly", NULL};
  PyObject *obj, *result;
  int readonly = 0;

  if (!PyArg_ParseTupleAndKeywords (args, kwargs, "O|$p:asarray", keywords,
                                    &obj, &readonly))
    return NULL;
  result = gmpy_asarray (module, obj);
  if (result == NULL || !readonly)
    return result;
  return readonly_view (result);
}
