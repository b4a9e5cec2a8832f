/* py-share-event.c -- sharing a gpumem.Event with other processes on the
   node: the handle of an Event made with interprocess=True, and the
   Event a consumer opens from it (docs/sharing.md, "Events").

   A shared event owns a small shareable block (GM_IPC_EVENT_WORD bytes,
   made at its first share): the word its records publish to on the host
   backend, and on every backend what the consumer's lease holds, so the
   usual handle checks (node, device, producer alive, secret) and the
   share server's lifetime rules apply to events as to arrays.  The
   backend's own description of the event (CUDA's interprocess event
   handle) travels in the handle's event data.  */

#include "gm-python.h"

#include <string.h>

#include "share.h"

/* Gives EVENT its shareable block and binds its records to the block's
   word, once.  0 or -1.  */
static int
event_make_shareable (eventpy_object *event, uint8_t data[GM_IPC_EVENT_DATA])
{
  gm_ipc_block *block;
  gm_status status;
  void *word;

  if (event->shared == NULL)
    {
      Py_BEGIN_ALLOW_THREADS
      status = gm_ipc_alloc (event->device, GM_IPC_EVENT_WORD, NULL, &block,
                             &word);
      Py_END_ALLOW_THREADS
      if (status != GM_OK)
        {
          gmpy_raise (status);
          return -1;
        }
      event->shared = gmpy_ipc_block_capsule (block);
      if (event->shared == NULL)
        return -1;
      if (PyCapsule_SetContext (event->shared, word) < 0)
        return -1;
    }
  word = PyCapsule_GetContext (event->shared);
  status = gm_backend_current->event_export (event->event, word, data);
  if (status != GM_OK)
    {
      gmpy_raise (status);
      return -1;
    }
  return 0;
}

PyObject *
gmpy_event_share (PyObject *event_obj, bool until_opened,
                  const uint32_t *allow, size_t nallow)
{
  eventpy_object *event = (eventpy_object *) event_obj;
  uint8_t encoded[GM_IPC_MAX_BYTES], data[GM_IPC_EVENT_DATA];
  gm_ipc_handle handle;
  gm_ipc_block *block;
  PyObject *shared;
  gm_status status;
  size_t size;

  if (!event->interprocess)
    return PyErr_Format (gmpy_state_get ()->error, "share: this Event was "
                         "not made to be shared: make it with "
                         "gpumem.Event(interprocess=True)");
  if (event->shared != NULL
      && gmpy_ipc_capsule_block (event->shared) == NULL)
    return PyErr_Format (gmpy_state_get ()->error, "share: this Event was "
                         "opened from another process; share that "
                         "process's handle instead");
  if (event_make_shareable (event, data) < 0)
    return NULL;
  block = gmpy_ipc_capsule_block (event->shared);
  memset (&handle, 0, sizeof handle);
  handle.object = GM_IPC_OBJECT_EVENT;
  memcpy (handle.event, data, GM_IPC_EVENT_DATA);
  /* The capsule, and so the block, stays while the export runs without
     the GIL, whatever other threads do with the event.  */
  shared = Py_NewRef (event->shared);
  Py_BEGIN_ALLOW_THREADS
  status = gm_ipc_export (block, NULL, until_opened, allow, nallow, &handle,
                          encoded, &size);
  Py_END_ALLOW_THREADS
  Py_DECREF (shared);
  if (status != GM_OK)
    return gmpy_raise (status);
  return PyBytes_FromStringAndSize ((const char *) encoded,
                                    (Py_ssize_t) size);
}

PyObject *
gmpy_event_open (const gm_ipc_handle *handle)
{
  gm_ipc_import *import;
  gm_event *event;
  PyObject *capsule, *result;
  gm_status status;
  void *word;
  int device;

  if (gmpy_ipc_open_import (handle, &import, &word, &device) < 0)
    return NULL;
  /* The capsule before the event: the event goes before the import it
     uses, so a failure from here on closes only the capsule.  */
  capsule = gmpy_ipc_import_capsule (import);
  if (capsule == NULL)
    return NULL;
  Py_BEGIN_ALLOW_THREADS
  status = gm_backend_current->event_import (device, handle->event, word,
                                             &event);
  Py_END_ALLOW_THREADS
  if (status != GM_OK)
    {
      gmpy_raise (status);
      Py_DECREF (capsule);
      return NULL;
    }
  result = gmpy_event_wrap (event, device, capsule);
  Py_DECREF (capsule);
  return result;
}
