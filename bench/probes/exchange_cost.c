/* exchange_cost.c -- gmexchcost, the probe bench/probes/exchange_cost.py
   builds: what one argument's steps cost when a C++ caster takes an
   object, each timed alone over N calls from C.  cost (obj, n) gives a
   dict of nanoseconds a call:

     dltensor     the type's DLPack exchange API, dltensor_from_py_object_no_sync
     work_stream  its current_work_stream on the tensor's device
     load_buffer  gpumem's C API load_buffer (what the casters call)
     get_buffer   gpumem's C API get_buffer (zeroes a gm_buffer first)

   (the first two only where OBJ's type publishes the exchange API).  */

#include <Python.h>

#include <time.h>

#include "gpumem/extension.h"
#include "../../src/core/dlpack-abi.h"

static double
now_ns (void)
{
  struct timespec t;
  clock_gettime (CLOCK_MONOTONIC, &t);
  return (double) t.tv_sec * 1e9 + (double) t.tv_nsec;
}

static int
put (PyObject *dict, const char *key, double total, long n)
{
  PyObject *value = PyFloat_FromDouble (total / (double) n);
  int result = value != NULL ? PyDict_SetItemString (dict, key, value) : -1;
  Py_XDECREF (value);
  return result;
}

static PyObject *
cost (PyObject *module, PyObject *args)
{
  PyObject *obj, *capsule, *dict;
  const gm_dl_exchange_api *api = NULL;
  long n;
  double t0;
  gm_buffer buf;
  void *launch;

  if (!PyArg_ParseTuple (args, "Ol", &obj, &n) || n <= 0)
    return NULL;
  if (gm_c_api == NULL && gm_import_c_api () < 0)
    return NULL;
  dict = PyDict_New ();
  if (dict == NULL)
    return NULL;
  capsule = PyObject_GetAttrString ((PyObject *) Py_TYPE (obj),
                                    GM_DLPACK_EXCHANGE_ATTR);
  if (capsule == NULL)
    PyErr_Clear ();
  else
    {
      api = PyCapsule_GetPointer (capsule, GM_DLPACK_EXCHANGE_CAPSULE);
      Py_DECREF (capsule);
      if (api == NULL)
        goto fail;
    }
  if (api != NULL && api->dltensor_from_py_object_no_sync != NULL)
    {
      gm_dl_tensor tensor;
      void *stream;
      t0 = now_ns ();
      for (long i = 0; i < n; i++)
        if (api->dltensor_from_py_object_no_sync (obj, &tensor) < 0)
          goto fail;
      if (put (dict, "dltensor", now_ns () - t0, n) < 0)
        goto fail;
      t0 = now_ns ();
      for (long i = 0; i < n; i++)
        if (api->current_work_stream (tensor.device.device_type,
                                      tensor.device.device_id, &stream) < 0)
          goto fail;
      if (put (dict, "work_stream", now_ns () - t0, n) < 0)
        goto fail;
    }
  t0 = now_ns ();
  for (long i = 0; i < n; i++)
    {
      if (gm_c_api->load_buffer (obj, &buf, &launch) < 0)
        goto fail;
      Py_DECREF (buf.owner);
    }
  if (put (dict, "load_buffer", now_ns () - t0, n) < 0)
    goto fail;
  t0 = now_ns ();
  for (long i = 0; i < n; i++)
    {
      if (gm_c_api->get_buffer (obj, &buf) < 0)
        goto fail;
      Py_DECREF (buf.owner);
    }
  if (put (dict, "get_buffer", now_ns () - t0, n) < 0)
    goto fail;
  return dict;
fail:
  Py_DECREF (dict);
  return NULL;
}

static PyMethodDef methods[] = {
  {"cost", cost, METH_VARARGS, "cost(obj, n): ns a call of each step"},
  {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
  PyModuleDef_HEAD_INIT, "gmexchcost", NULL, -1, methods,
  NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit_gmexchcost (void)
{
  return PyModule_Create (&module_def);
}
