/* py-share-capsule.c -- the capsules that own a shared object's memory:
   the producer's block (gm_ipc_drop when the capsule goes) or the
   consumer's import (gm_ipc_close), and the open that makes an import
   (gm_ipc_open without the GIL, Ctrl-C ending its wait), for shared
   arrays (py-share.c) and shared events (py-share-event.c) alike.  */

#include "gm-python.h"

#include "share.h"

#define BLOCK_CAPSULE "gpumem.shared_block"
#define IMPORT_CAPSULE "gpumem.shared_import"

static void
block_capsule_free (PyObject *capsule)
{
  gm_ipc_block *block = PyCapsule_GetPointer (capsule, BLOCK_CAPSULE);
  if (block != NULL)
    gm_ipc_drop (block);
}

static void
import_capsule_free (PyObject *capsule)
{
  gm_ipc_import *import = PyCapsule_GetPointer (capsule, IMPORT_CAPSULE);
  if (import != NULL)
    gm_ipc_close (import);
}

PyObject *
gmpy_ipc_block_capsule (gm_ipc_block *block)
{
  PyObject *capsule = PyCapsule_New (block, BLOCK_CAPSULE,
                                     block_capsule_free);
  if (capsule == NULL)
    gm_ipc_drop (block);
  return capsule;
}

gm_ipc_block *
gmpy_ipc_capsule_block (PyObject *obj)
{
  if (obj == NULL || !PyCapsule_IsValid (obj, BLOCK_CAPSULE))
    return NULL;
  return PyCapsule_GetPointer (obj, BLOCK_CAPSULE);
}

PyObject *
gmpy_ipc_import_capsule (gm_ipc_import *import)
{
  PyObject *capsule = PyCapsule_New (import, IMPORT_CAPSULE,
                                     import_capsule_free);
  if (capsule == NULL)
    gm_ipc_close (import);
  return capsule;
}

/* What the interrupt hook of an open keeps: the exception Ctrl-C
   raised, until the GIL's holder raises it again.  */
typedef struct open_wait
{
  PyObject *type, *value, *traceback;
} open_wait;

/* gm_ipc_open's hook: runs the signal handlers (with the GIL, taken for
   the moment) and keeps what they raised.  */
static bool
open_interrupted (void *arg)
{
  open_wait *wait = arg;
  PyGILState_STATE gil = PyGILState_Ensure ();

  if (wait->type == NULL && PyErr_CheckSignals () < 0)
    PyErr_Fetch (&wait->type, &wait->value, &wait->traceback);
  PyGILState_Release (gil);
  return wait->type != NULL;
}

int
gmpy_ipc_open_import (const gm_ipc_handle *handle, gm_ipc_import **import,
                      void **base, int *device)
{
  open_wait wait = { NULL, NULL, NULL };
  gm_status status;

  Py_BEGIN_ALLOW_THREADS
  status = gm_ipc_open (handle, import, base, device, open_interrupted,
                        &wait);
  Py_END_ALLOW_THREADS
  if (wait.type != NULL)
    {
      PyErr_Restore (wait.type, wait.value, wait.traceback);
      return -1;
    }
  return status == GM_OK ? 0 : gmpy_raise_int (status);
}
