/* py-standalone.c -- the backend of the module imported by a plain python.

   The extension module (gpumem$(PYTHON_EXT_SUFFIX): 'import gpumem' in
   any python) is the program's module without the program around it:
   no main.c chose and started a backend before Python.  So the module
   starts one itself when it is first imported, as GPUMEM_BACKEND says
   (auto when unset; when it falls back to the host backend the
   program's notice is a gpumem.BackendWarning instead, which
   warnings.filterwarnings can silence, naming the script's import),
   and ends it after the interpreter has finalized
   (Py_AtExit), when every DeviceArray has been freed: the program's
   order, Python first and the backend after (which, as in the program,
   leaves CUDA's contexts to the other libraries of the process).
   Before the backend it preloads the plugins of GPUMEM_KERNELS into
   gpumem.kernels, as the program does (gm_plugin_preload_list), and
   starts MPI where an MPI launcher started this python, or joins MPI
   where it runs already (mpi4py imported first), as the program does
   (gm_comm_init): the rank decides the default device, and gpumem.comm
   is then the job's.  (A build without MPI joins mpi4py's job as the
   module is made instead: py-comm-net.c.)  At the end MPI ends before the backend
   (gm_comm_finalize), where gpumem started it.  In the program, and in
   an application embedding gpumem, the backend is running already and
   gmpy_backend_start does nothing.  */

#include "gm-python.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "plugin.h"

/* Called by Py_FinalizeEx once the interpreter is gone (or by the C
   library's exit, where Py_AtExit's table is full).  */
static void
standalone_shutdown (void)
{
  gm_comm_finalize (0);
  gm_backend_shutdown ();
}

/* The stacklevel of a warning issued while gpumem is being imported
   that names the script's import statement, past the frames of
   Python's import machinery.  */
static int
importer_stacklevel (void)
{
  PyFrameObject *frame = PyEval_GetFrame ();
  int level = 1;

  Py_XINCREF ((PyObject *) frame);
  while (frame != NULL)
    {
      PyCodeObject *code = PyFrame_GetCode (frame);
#ifdef Py_LIMITED_API
      PyObject *filename = PyObject_GetAttrString ((PyObject *) code,
                                                   "co_filename");
      const char *file = filename != NULL ? PyUnicode_AsUTF8 (filename)
                                          : NULL;
#else
      const char *file = PyUnicode_AsUTF8 (code->co_filename);
#endif
      PyFrameObject *back;
      bool machinery = file != NULL
                       && strncmp (file, "<frozen importlib", 17) == 0;
#ifdef Py_LIMITED_API
      Py_XDECREF (filename);
#endif
      Py_DECREF (code);
      if (!machinery)
        break;
      back = PyFrame_GetBack (frame);
      Py_DECREF (frame);
      frame = back;
      level++;
    }
  Py_XDECREF ((PyObject *) frame);
  PyErr_Clear ();
  return level;
}

/* Whether GPUMEM_KERNELS's plugins were preloaded.  */
static bool kernels_preloaded;

int
gmpy_backend_start (PyObject *warning)
{
  const char *name = getenv ("GPUMEM_BACKEND");
  gm_backend_choice choice = GM_BACKEND_AUTO;

  if (gm_backend_current != NULL)
    return 0;
  /* Plugins first, as in the program: one that does not load is the
     import's error, before any backend starts.  Once a process; after
     a failure the next import tries again (a plugin loaded already is
     the same plugin, no clash).  */
  if (!kernels_preloaded)
    {
      if (gm_plugin_preload_list (getenv ("GPUMEM_KERNELS")) != GM_OK)
        {
          PyErr_Format (PyExc_ImportError, "gpumem: GPUMEM_KERNELS: %s",
                        gm_last_error ()->message);
          return -1;
        }
      kernels_preloaded = true;
    }
  if (name != NULL && *name != '\0' && !gm_backend_parse_name (name, &choice))
    {
      PyErr_Format (PyExc_ImportError, "gpumem: GPUMEM_BACKEND: unknown "
                    "backend '%s' (choose cuda, host or auto)", name);
      return -1;
    }
  /* MPI first, as in the program: the rank decides the default
     device.  */
  if (gm_comm_init () != GM_OK)
    {
      PyErr_Format (PyExc_ImportError, "gpumem: %s",
                    gm_last_error ()->message);
      return -1;
    }
  if (gm_backend_init (choice, true) != GM_OK)
    {
      PyErr_Format (PyExc_ImportError, "gpumem: %s",
                    gm_last_error ()->message);
      return -1;
    }
  if (Py_AtExit (standalone_shutdown) < 0 && atexit (standalone_shutdown) != 0)
    {
      gm_comm_finalize (0);
      gm_backend_shutdown ();
      PyErr_SetString (PyExc_ImportError, "gpumem: cannot register the "
                       "backend's shutdown at exit");
      return -1;
    }
  if (gm_backend_notice () != NULL
      && PyErr_WarnEx (warning, gm_backend_notice (),
                       importer_stacklevel ()) < 0)
    return -1;
  return 0;
}
