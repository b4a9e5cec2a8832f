/* py-nvtx.c -- gpumem.nvtx: the NVTX switch (nvtx.h) from Python.  */

#include "gm-python.h"

#include "nvtx.h"

/* gpumem.nvtx (enabled=None): with ENABLED, turns annotation on or off;
   returns whether it is on (after the change).  New reference, or NULL
   with TypeError for an ENABLED that is not None or a bool.  */
static PyObject *
gmpy_nvtx (PyObject *self, PyObject *args, PyObject *kwargs)
{
  static char *names[] = {"enabled", NULL};
  PyObject *enabled = Py_None;

  if (!PyArg_ParseTupleAndKeywords (args, kwargs, "|O:nvtx", names, &enabled))
    return NULL;
  if (enabled != Py_None)
    {
      if (!PyBool_Check (enabled))
        return PyErr_Format (PyExc_TypeError, "nvtx: enabled must be True, "
                             "False or None, not %.80s",
                             GMPY_TYPE_NAME (Py_TYPE (enabled)));
      gm_nvtx_set (enabled == Py_True);
    }
  return PyBool_FromLong (gm_nvtx_on ());
}

PyMethodDef gmpy_nvtx_methods[] = {
  {"nvtx", (PyCFunction) (void (*) (void)) gmpy_nvtx,
   METH_VARARGS | METH_KEYWORDS,
   "nvtx(enabled=None)\n--\n\n"
   "Whether gpumem annotates its work for NVIDIA's tools (NVTX ranges in\n"
   "the 'gpumem' domain for copies, kernel launches, collectives,\n"
   "synchronizations and allocations); True or False turns it on or off\n"
   "first.  Starts as GPUMEM_NVTX says (off when unset).\n"
   "The host backend keeps the switch but has nothing to annotate."},
  {NULL, NULL, 0, NULL}
};
