/* py-plugin.c -- gpumem.load_kernels: a plugin library's kernels as a
   namespace of checked functions (plugin.c reads the library).  */

#include "gm-python.h"

#include <string.h>

#include "plugin.h"

/* load_kernels (path): the namespace of the plugin at PATH, made once
   per library: loading it again returns the same object.  */
static PyObject *
load_kernels (PyObject *module, PyObject *arg)
{
  gmpy_state *state = gmpy_state_get ();
  PyObject *path_bytes, *ns;
  const gm_kernel **kernels;
  gm_plugin *plugin;
  const char *base;
  char name[300];
  gm_status status;

  if (!PyUnicode_FSConverter (arg, &path_bytes))
    return NULL;
  if (PyBytes_GET_SIZE (path_bytes) == 0)
    {
      Py_DECREF (path_bytes);
      PyErr_SetString (PyExc_ValueError, "load_kernels: path is empty");
      return NULL;
    }
  status = gm_plugin_load (PyBytes_AS_STRING (path_bytes), &plugin);
  Py_DECREF (path_bytes);
  /* A library refused (GM_ERR_FAILED) is gpumem.Error, its message
     naming the file and the kernel.  */
  if (status != GM_OK)
    return gmpy_raise (status);
  if (state->plugins == NULL && (state->plugins = PyDict_New ()) == NULL)
    return NULL;
  ns = PyDict_GetItemString (state->plugins, plugin->path);
  if (ns != NULL)
    return Py_NewRef (ns);

  kernels = PyMem_Calloc ((size_t) plugin->count + 1, sizeof *kernels);
  if (kernels == NULL)
    return PyErr_NoMemory ();
  for (int k = 0; k < plugin->count; k++)
    kernels[k] = &plugin->kernels[k];
  /* gpumem.plugin.STEM, STEM the file's name up to its first dot.  */
  base = strrchr (plugin->path, '/');
  base = base ? base + 1 : plugin->path;
  snprintf (name, sizeof name, "gpumem.plugin.%.*s",
            (int) strcspn (base, "."), base);
  ns = gmpy_kernels_namespace (name, "The kernels of a gpumem plugin "
                               "library, one function each.",
                               (const gm_kernel *const *) kernels,
                               plugin->count);
  PyMem_Free (kernels);
  if (ns == NULL)
    return NULL;
  if (PyModule_AddStringConstant (ns, "__file__", plugin->path) < 0
      || PyDict_SetItemString (state->plugins, plugin->path, ns) < 0)
    {
      Py_DECREF (ns);
      return NULL;
    }
  return ns;
}

PyMethodDef gmpy_plugin_methods[] = {
  {"load_kernels", load_kernels, METH_O,
   "load_kernels(path)\n--\n\n"
   "The kernels of the plugin library PATH (a shared library built\n"
   "against gpumem/kernel.h) as an object with one checked function per\n"
   "kernel, as gpumem.kernels has, and list().  Loading a library again\n"
   "returns the same object.  A PATH without a '/' is found where the\n"
   "dynamic linker looks, never in the current folder ('./mine.so' for\n"
   "a file there).  gpumem.Error, naming the file and the\n"
   "kernel, when the library does not load, has no kernel table, a table\n"
   "of another ABI version, a signature that does not parse, or a kernel\n"
   "whose name another kernel has.  See gpumem-kernels(7)."},
  {NULL, NULL, 0, NULL}
};
