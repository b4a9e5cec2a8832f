/* py-share-capsule.c -- the capsules that own a shared object's memory:
   the producer's block (gm_ipc_drop when the capsule goes) or the
   consumer's import (gm_ipc_close), for shared arrays (py-share.c) and
   shared events (py-share-event.c) alike.  */

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
