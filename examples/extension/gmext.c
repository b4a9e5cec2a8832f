/* gmext.c -- a Python C extension that takes device memory from any
   object gpumem accepts (a DeviceArray, CuPy or PyTorch arrays, DLPack
   producers) through the capsule gpumem._C_API, without linking
   libgpumem: gpumem/extension.h is all it includes of gpumem.

     gmext.describe (obj)   a dict: ptr, shape, strides, dtype, device,
                            device_type, stream, readonly

   Built by Makefile; run under gpumem (make check).  */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <gpumem/extension.h>

static PyObject *
describe (PyObject *module, PyObject *obj)
{
  PyObject *shape, *strides, *result;
  gm_buffer buf;

  if (gm_c_api->get_buffer (obj, &buf) < 0)
    return NULL;
  shape = PyTuple_New (buf.ndim);
  strides = PyTuple_New (buf.ndim);
  if (shape == NULL || strides == NULL)
    goto fail;
  for (int i = 0; i < buf.ndim; i++)
    {
      PyTuple_SET_ITEM (shape, i, PyLong_FromLongLong (buf.shape[i]));
      PyTuple_SET_ITEM (strides, i, PyLong_FromLongLong (buf.strides[i]));
    }
  result = Py_BuildValue ("{s:K,s:N,s:N,s:s,s:i,s:i,s:K,s:O}",
                          "ptr", (unsigned long long) (uintptr_t) buf.ptr,
                          "shape", shape, "strides", strides,
                          "dtype", buf.dtype, "device", buf.device,
                          "device_type", buf.device_type,
                          "stream",
                          (unsigned long long) (uintptr_t) buf.stream,
                          "readonly", buf.readonly ? Py_True : Py_False);
  /* Done with the memory: let it go.  */
  Py_DECREF (buf.owner);
  return result;
fail:
  Py_XDECREF (shape);
  Py_XDECREF (strides);
  Py_DECREF (buf.owner);
  return NULL;
}

static PyMethodDef methods[] = {
  {"describe", describe, METH_O,
   "describe(obj)\n--\n\nWhere OBJ's device memory is and how it is laid "
   "out."},
  {NULL, NULL, 0, NULL}
};

static int
exec_module (PyObject *module)
{
  (void) module;
  return gm_import_c_api ();
}

static PyModuleDef_Slot slots[] = {
  {Py_mod_exec, exec_module},
  {0, NULL}
};

static PyModuleDef def = {
  PyModuleDef_HEAD_INIT, "gmext", "Device memory through gpumem's C API.",
  0, methods, slots, NULL, NULL, NULL
};

PyMODINIT_FUNC PyInit_gmext (void);

PyMODINIT_FUNC
PyInit_gmext (void)
{
  return PyModuleDef_Init (&def);
}
