/* module.c -- the built-in module gpumem: its exec slot (the state's
   life, the exceptions, each type's init), and the module-level
   functions that belong to no type.  The shared helpers are in
   py-utils.c.  */

#include "gm-python.h"

#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "py-dlpack.h"

static PyObject *
gmpy_device_count (PyObject *module, PyObject *unused)
{
  return PyLong_FromLong (gm_backend_current->device_count ());
}

static PyObject *
gmpy_current_device_fn (PyObject *module, PyObject *unused)
{
  return gmpy_device_get (gmpy_current_device ());
}

/* A loop's call (a copy, then a synchronize): the fast-call parser,
   which builds no tuple (py-utils.c says why it is our own).  */
static PyObject *
gmpy_synchronize (PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                  PyObject *kwnames)
{
  static const char *const names[] = {"device", NULL};
  PyObject *device_obj;
  int device;

  if (gmpy_parse_args (args, nargs, kwnames, "synchronize", names, 0, -1,
                       &device_obj) < 0
      || gmpy_device_arg (device_obj, &device) < 0
      || gmpy_synchronize_device (device) < 0)
    return NULL;
  Py_RETURN_NONE;
}

/* The folder RELATIVE (a path, or empty: none) names from the folder of
   FILE, when it holds gpumem/extension.h: a new string with the path
   made absolute and plain (realpath), or NULL with no exception set when
   it does not hold it (or on any failure).  */
static PyObject *
include_from (const char *file, const char *relative)
{
  static const char header[] = "/gpumem/extension.h";
  const char *slash = strrchr (file, '/');
  size_t dirlen = slash != NULL ? (size_t) (slash - file) + 1 : 0;
  char *candidate, resolved[PATH_MAX];
  PyObject *result = NULL;

  if (relative[0] == '\0' || slash == NULL)
    return NULL;
  candidate = PyMem_Malloc (dirlen + strlen (relative) + sizeof header);
  if (candidate == NULL)
    return NULL;
  memcpy (candidate, file, dirlen);
  strcpy (candidate + dirlen, relative);
  strcat (candidate, header);
  if (access (candidate, F_OK) == 0)
    {
      candidate[dirlen + strlen (relative)] = '\0';
      if (realpath (candidate, resolved) != NULL)
        result = PyUnicode_DecodeFSDefault (resolved);
      PyErr_Clear ();
    }
  PyMem_Free (candidate);
  return result;
}

/* The folder that holds gpumem/extension.h and the other installed
   headers, for building extensions against gpumem (as
   numpy.get_include()).  A module installed by pip has them in the
   folder gpumem-include beside its file (__file__).  A module installed
   by make install, and the installed program's built-in module, find
   them where includedir lies from pyexecdir or bindir
   (GM_INCLUDE_FROM_PYEXECDIR, GM_INCLUDE_FROM_BINDIR, from
   m4/gm_relocatable.m4), so that a tree installed with another prefix
   (make install prefix=DIR, DESTDIR) or moved is right; else the
   configured includedir (GM_INCLUDEDIR, from Makefile.am), which may not
   exist yet before make install.  */
static PyObject *
gmpy_get_include (PyObject *module, PyObject *unused)
{
  PyObject *file, *file_bytes, *result = NULL;
  char program[PATH_MAX];
  ssize_t length;

  file = PyObject_GetAttrString (module, "__file__");
  if (file == NULL)
    {
      if (!PyErr_ExceptionMatches (PyExc_AttributeError))
        return NULL;
      PyErr_Clear ();
    }
  if (file == NULL || !PyUnicode_Check (file))
    {
      Py_XDECREF (file);
      length = readlink ("/proc/self/exe", program, sizeof program - 1);
      if (length > 0)
        {
          program[length] = '\0';
          result = include_from (program, GM_INCLUDE_FROM_BINDIR);
        }
      return result != NULL ? result
                            : PyUnicode_DecodeFSDefault (GM_INCLUDEDIR);
    }
  file_bytes = PyUnicode_EncodeFSDefault (file);
  Py_DECREF (file);
  if (file_bytes == NULL)
    return NULL;
  result = include_from (PyBytes_AS_STRING (file_bytes), "gpumem-include");
  if (result == NULL)
    result = include_from (PyBytes_AS_STRING (file_bytes),
                           GM_INCLUDE_FROM_PYEXECDIR);
  Py_DECREF (file_bytes);
  return result != NULL ? result : PyUnicode_DecodeFSDefault (GM_INCLUDEDIR);
}

static PyMethodDef gmpy_methods[] = {
  {"device_count", gmpy_device_count, METH_NOARGS,
   "device_count()\n--\n\nThe number of devices of the backend in use."},
  {"current_device", gmpy_current_device_fn, METH_NOARGS,
   "current_device()\n--\n\nThe Device that new arrays go to by default."},
  {"empty", (PyCFunction) (void (*) (void)) gmpy_empty,
   METH_FASTCALL | METH_KEYWORDS,
   "empty(shape, dtype='float32', device=None, memory='device')\n--\n\n"
   "A new DeviceArray of SHAPE, its contents not initialized; MEMORY\n"
   "'managed' makes it of managed memory (docs/memory.md)."},
  {"zeros", (PyCFunction) (void (*) (void)) gmpy_zeros,
   METH_FASTCALL | METH_KEYWORDS,
   "zeros(shape, dtype='float32', device=None, memory='device')\n--\n\n"
   "A new DeviceArray of SHAPE filled with zeros."},
  {"to_device", (PyCFunction) (void (*) (void)) gmpy_to_device,
   METH_VARARGS | METH_KEYWORDS,
   "to_device(host, device=None, stream=None, memory='device')\n--\n\n"
   "A new DeviceArray holding a copy of the host array HOST."},
  {"alloc_gpu_memory", (PyCFunction) (void (*) (void)) gmpy_alloc_gpu_memory,
   METH_VARARGS | METH_KEYWORDS,
   "alloc_gpu_memory(size, dtype='float32', device=None, memory='device')\n--\n\n"
   "A new one-dimensional DeviceArray of SIZE elements (the stitching workload's API)."},
  {"asarray", (PyCFunction) (void (*) (void)) gmpy_asarray_py,
   METH_VARARGS | METH_KEYWORDS,
   "asarray(obj, readonly=False)\n--\n\n"
   "OBJ as a DeviceArray without a copy: a DeviceArray itself, an object\n"
   "whose type publishes DLPack's C exchange API, a DLPack producer of\n"
   "CUDA memory, or any object with __cuda_array_interface__ (kept alive\n"
   "by the result).  readonly=True gives a read-only view of it."},
  {"from_dlpack", gmpy_from_dlpack, METH_O,
   "from_dlpack(obj, /)\n--\n\n"
   "A DeviceArray over the memory of DLPack producer OBJ (an object with\n"
   "__dlpack__, or a DLPack capsule), without a copy; the producer's\n"
   "memory stays alive until the array and its views go.  CUDA memory on\n"
   "the cuda backend, host memory (e.g. a NumPy array) on the host one."},
  {"copy_to_gpu", (PyCFunction) (void (*) (void)) gmpy_copy_to_gpu,
   METH_FASTCALL | METH_KEYWORDS,
   "copy_to_gpu(src, dest, size)\n--\n\n"
   "Source first (gpumem.copy takes the destination first): copy the\n"
   "first SIZE elements of host array SRC into DeviceArray DEST."},
  {"copy_from_gpu", (PyCFunction) (void (*) (void)) gmpy_copy_from_gpu,
   METH_FASTCALL | METH_KEYWORDS,
   "copy_from_gpu(src, dest, size)\n--\n\n"
   "Source first (gpumem.copy takes the destination first): copy the\n"
   "first SIZE elements of DeviceArray SRC into writable host array DEST."},
  {"copy", (PyCFunction) (void (*) (void)) gmpy_copy,
   METH_FASTCALL | METH_KEYWORDS,
   "copy(dst, src, count=None, stream=None)\n--\n\n"
   "Destination first, as numpy.copyto and cupy.copyto (copy_to_gpu and\n"
   "copy_from_gpu take the source first): copy COUNT elements (default:\n"
   "all of SRC) from SRC into DST in any direction: host to device,\n"
   "device to host, device to device on one device or across devices."},
  {"pinned_empty", (PyCFunction) (void (*) (void)) gmpy_pinned_empty,
   METH_FASTCALL | METH_KEYWORDS,
   "pinned_empty(shape, dtype='float32')\n--\n\n"
   "A numpy.ndarray in page-locked host memory, freed with the array."},
  {"current_stream", (PyCFunction) (void (*) (void)) gmpy_current_stream_fn,
   METH_VARARGS | METH_KEYWORDS,
   "current_stream(device=None)\n--\n\n"
   "The Stream of the innermost `with stream:` block of DEVICE (default:\n"
   "the current device) in this thread, or None: calls without stream=\n"
   "on that device's data are queued on it."},
  {"synchronize", (PyCFunction) (void (*) (void)) gmpy_synchronize,
   METH_FASTCALL | METH_KEYWORDS,
   "synchronize(device=None)\n--\n\nWait for all work on the device."},
  {"_rebuild", gmpy_rebuild, METH_VARARGS,
   "_rebuild(host, device, memory='device', /)\n--\n\n"
   "A DeviceArray on DEVICE, in MEMORY, holding a copy of host array\n"
   "HOST: what pickle calls to load a pickled DeviceArray."},
  {"get_include", gmpy_get_include, METH_NOARGS,
   "get_include()\n--\n\n"
   "The folder holding gpumem/extension.h and gpumem's other C headers,\n"
   "for building extensions against gpumem (-I or include_dirs)."},
  {NULL, NULL, 0, NULL}
};

/* Creates exception NAME (gpumem.NAME) with BASES and default class
   attributes code and name; adds it to MODULE.  New reference or NULL.  */
static PyObject *
new_exception (PyObject *module, const char *name, const char *doc,
               PyObject *bases, bool cuda_attrs)
{
  PyObject *dict = NULL, *exc = NULL;
  char qualname[64];

  snprintf (qualname, sizeof qualname, "gpumem.%s", name);
  if (cuda_attrs)
    {
      dict = Py_BuildValue ("{s:i,s:s}", "code", 0, "name", "");
      if (dict == NULL)
        return NULL;
    }
  exc = PyErr_NewExceptionWithDoc (qualname, doc, bases, dict);
  Py_XDECREF (dict);
  if (exc == NULL || PyModule_AddObjectRef (module, name, exc) < 0)
    {
      Py_XDECREF (exc);
      return NULL;
    }
  return exc;
}

/* The module whose state is gmpy_module_state: the first gpumem module
   whose exec succeeded in this process, still alive (borrowed; its free
   clears it).  */
static PyObject *first_module;

/* Fills MODULE, made by a second import of gpumem while the first
   module lives (`del sys.modules["gpumem"]; import gpumem`, as test
   runners and autoreload do), with the first module's names and state,
   so that there is one gpumem per process: the same types, functions,
   exceptions and state, whichever module object a script reached them
   through, and the first module stays alive while this one refers to
   it.  MODULE keeps its own identity (__name__, __spec__, __file__...).
   0, or -1 with an exception.  */
static int
exec_again (PyObject *module, gmpy_state *state)
{
  static const char *const own[] = {"__name__", "__doc__", "__package__",
                                    "__loader__", "__spec__", "__file__",
                                    "__cached__", "__path__",
                                    "__builtins__"};
  const gmpy_state *first = gmpy_state_get ();
  PyObject *from = PyModule_GetDict (first_module);
  PyObject *to = PyModule_GetDict (module), *key, *value;
  Py_ssize_t pos = 0;

  *state = *first;
  Py_XINCREF ((PyObject *) state->device_type);
  Py_XINCREF ((PyObject *) state->array_type);
  Py_XINCREF ((PyObject *) state->stream_type);
  Py_XINCREF ((PyObject *) state->event_type);
  Py_XINCREF ((PyObject *) state->pinned_type);
  Py_XINCREF (state->error);
  Py_XINCREF (state->cuda_error);
  Py_XINCREF (state->oom_error);
  Py_XINCREF (state->numpy);
  Py_XINCREF (state->np_ndarray);
  for (int d = 0; d < GM_NDTYPES; d++)
    Py_XINCREF (state->np_dtypes[d]);
  Py_XINCREF (state->devices);
  Py_XINCREF (state->kernels);
  Py_XINCREF (state->plugins);
  Py_XINCREF (state->jit_kernels);
  while (PyDict_Next (from, &pos, &key, &value))
    {
      bool skip = false;
      for (size_t i = 0; i < sizeof own / sizeof own[0]; i++)
        if (PyUnicode_Check (key)
            && PyUnicode_CompareWithASCIIString (key, own[i]) == 0)
          skip = true;
      if (!skip && PyDict_SetItem (to, key, value) < 0)
        return -1;
    }
  return 0;
}

#ifndef GM_HAVE_MPI
/* The module's __getattr__ (PEP 562) in a build without MPI where
   gpumem.comm is absent (an MPI launcher started this python and mpi4py
   cannot be imported): asking for it says why and what to do, still as
   an AttributeError (hasattr stays false).  */
static PyObject *
absent_attribute (PyObject *module, PyObject *name)
{
  (void) module;
  if (PyUnicode_Check (name)
      && PyUnicode_CompareWithASCIIString (name, "comm") == 0)
    return PyErr_Format (PyExc_AttributeError,
                         "module 'gpumem' has no attribute 'comm': %s.  "
                         "gpumem.show_config() says what this build has",
                         gmpy_comm_net_absent ());
  return PyErr_Format (PyExc_AttributeError,
                       "module 'gpumem' has no attribute %R", name);
}

static PyMethodDef absent_methods[] = {
  {"__getattr__", absent_attribute, METH_O, NULL},
  {NULL, NULL, 0, NULL}
};
#endif

static int
gmpy_exec (PyObject *module)
{
  gmpy_state *state = PyModule_GetState (module);
  PyObject *bases, *backend_warning;
  int started;

  if (module == first_module)
    return 0;                   /* importlib.reload: nothing to redo */
  if (first_module != NULL)
    return exec_again (module, state);

  backend_warning = new_exception (module, "BackendWarning",
                                   "Warned on import when gpumem, "
                                   "imported by a plain python, falls\n"
                                   "back to the host backend for want of "
                                   "a CUDA device.", PyExc_UserWarning,
                                   false);
  if (backend_warning == NULL)
    return -1;
  started = gmpy_backend_start (backend_warning);
  Py_DECREF (backend_warning);
  if (started < 0)
    return -1;
  gmpy_state_set (state);
  state->numpy = PyImport_ImportModule ("numpy");
  if (state->numpy == NULL)
    return -1;
  state->np_ndarray = PyObject_GetAttrString (state->numpy, "ndarray");
  if (state->np_ndarray == NULL)
    return -1;
  for (int d = 0; d < GM_NDTYPES; d++)
    {
      state->np_dtypes[d] = PyObject_CallMethod (state->numpy, "dtype", "s",
                                                 gm_dtypes[d].name);
      if (state->np_dtypes[d] == NULL)
        return -1;
    }

  state->error = new_exception (module, "Error",
                                "Base of gpumem's own errors.",
                                PyExc_RuntimeError, false);
  if (state->error == NULL)
    return -1;
  state->cuda_error = new_exception (module, "CudaError",
                                     "A CUDA call failed; .code and .name "
                                     "give the cudaError_t.",
                                     state->error, true);
  if (state->cuda_error == NULL)
    return -1;
  bases = PyTuple_Pack (2, state->error, PyExc_MemoryError);
  if (bases == NULL)
    return -1;
  state->oom_error = new_exception (module, "OutOfMemoryError",
                                    "Device memory, or the limit set on it, "
                                    "is exhausted.", bases, true);
  Py_DECREF (bases);
  if (state->oom_error == NULL)
    return -1;

  gm_spill_set_moved_hook (gmpy_array_moved);
  {
    gm_status status = gm_spill_from_env ();
    if (status != GM_OK)
      {
        PyErr_SetString (PyExc_ValueError, gm_last_error ()->message);
        return -1;
      }
  }
  if (PyModule_AddStringConstant (module, "__version__", PACKAGE_VERSION) < 0
      || PyModule_AddStringConstant (module, "backend",
                                     gm_backend_current->name) < 0)
    return -1;
  if (gmpy_device_init (module, state) < 0
      || gmpy_array_init (module, state) < 0
      || PyModule_AddFunctions (module, gmpy_make_methods) < 0
      || PyModule_AddFunctions (module, gmpy_managed_methods) < 0
      || gmpy_stream_init (module, state) < 0
      || gmpy_pinned_init (module, state) < 0
      || gmpy_concurrent_init (module, state) < 0
      || gmpy_graph_init (module, state) < 0
      || gmpy_kernels_init (module, state) < 0
      || gmpy_comm_devices_init (module, state) < 0
      || PyModule_AddFunctions (module, gmpy_memory_methods) < 0
      || PyModule_AddFunctions (module, gmpy_spill_methods) < 0
      || PyModule_AddFunctions (module, gmpy_nvtx_methods) < 0
      || PyModule_AddFunctions (module, gmpy_config_methods) < 0
      || gmpy_mem_history_init (module) < 0
      || PyModule_AddFunctions (module, gmpy_plugin_methods) < 0
      || PyModule_AddFunctions (module, gmpy_jit_methods) < 0
      || gmpy_capi_init (module) < 0
      || gmpy_frameworks_init (module) < 0
      || gmpy_cupy_alloc_init (module) < 0
      || gmpy_ipc_init (module) < 0)
    return -1;
#ifdef GM_HAVE_MPI
  if (gmpy_comm_init (module, state) < 0)
    return -1;
#else
  /* Without MPI of its own gpumem joins the job mpi4py gives, where it
     runs in one (the default device is chosen later, at first use).  */
  if (gmpy_comm_net_start () < 0)
    return -1;
  if (gmpy_comm_net_absent () == NULL
      ? gmpy_comm_init (module, state) < 0
      : PyModule_AddFunctions (module, absent_methods) < 0)
    return -1;
#endif
  first_module = module;
  return 0;
}

static int
gmpy_traverse (PyObject *module, visitproc visit, void *arg)
{
  gmpy_state *state = PyModule_GetState (module);

  Py_VISIT (state->device_type);
  Py_VISIT (state->array_type);
  Py_VISIT (state->stream_type);
  Py_VISIT (state->event_type);
  Py_VISIT (state->pinned_type);
  Py_VISIT (state->error);
  Py_VISIT (state->cuda_error);
  Py_VISIT (state->oom_error);
  Py_VISIT (state->numpy);
  Py_VISIT (state->np_ndarray);
  for (int d = 0; d < GM_NDTYPES; d++)
    Py_VISIT (state->np_dtypes[d]);
  Py_VISIT (state->devices);
  Py_VISIT (state->kernels);
  Py_VISIT (state->plugins);
  Py_VISIT (state->jit_kernels);
  return 0;
}

static int
gmpy_clear (PyObject *module)
{
  gmpy_state *state = PyModule_GetState (module);

  Py_CLEAR (state->device_type);
  Py_CLEAR (state->array_type);
  Py_CLEAR (state->stream_type);
  Py_CLEAR (state->event_type);
  Py_CLEAR (state->pinned_type);
  Py_CLEAR (state->error);
  Py_CLEAR (state->cuda_error);
  Py_CLEAR (state->oom_error);
  Py_CLEAR (state->numpy);
  Py_CLEAR (state->np_ndarray);
  for (int d = 0; d < GM_NDTYPES; d++)
    Py_CLEAR (state->np_dtypes[d]);
  Py_CLEAR (state->devices);
  Py_CLEAR (state->kernels);
  Py_CLEAR (state->plugins);
  Py_CLEAR (state->jit_kernels);
  return 0;
}

static void
gmpy_free (void *module)
{
  gmpy_clear ((PyObject *) module);
  if (module == first_module)
    first_module = NULL;
  else if (gmpy_state_get () != PyModule_GetState ((PyObject *) module))
    return;                     /* a second module: the first one stays */
  gmpy_exchange_clear ();
  gmpy_state_set (NULL);
}

static PyModuleDef_Slot gmpy_slots[] = {
  {Py_mod_exec, gmpy_exec},
  {0, NULL}
};

PyModuleDef gmpy_module_def = {
  PyModuleDef_HEAD_INIT,
  .m_name = "gpumem",
  .m_doc = "GPU memory owned by Python, handed to native CUDA kernels.\n\n"
           "Arrays: empty, zeros, to_device, asarray, alloc_gpu_memory.\n"
           "Copies: copy, copy_to_gpu, copy_from_gpu.\n"
           "Kernels: gpumem.kernels.NAME(...), gpumem.kernels.list().\n"
           "Streams: Stream, Event, `with stream:`, current_stream.\n"
           "The reference of every name: docs/python-api.md; the program:\n"
           "docs/command-line.md and gpumem(1).",
  .m_size = sizeof (gmpy_state),
  .m_methods = gmpy_methods,
  .m_slots = gmpy_slots,
  .m_traverse = gmpy_traverse,
  .m_clear = gmpy_clear,
  .m_free = gmpy_free,
};

PyMODINIT_FUNC
PyInit_gpumem (void)
{
  return PyModuleDef_Init (&gmpy_module_def);
}
