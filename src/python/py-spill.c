/* py-spill.c -- spilling from Python: gpumem.set_spill, the array's
   spill () and is_spilled, and the hook through which the spill engine
   (src/core/spill.c) tells an array that its bytes moved.  */

#include "gm-python.h"

static PyObject *
gmpy_set_spill (PyObject *module, PyObject *args, PyObject *kwargs)
{
  static char *keywords[] = {"enabled", "device", "host_limit", NULL};
  PyObject *device_obj = Py_None, *limit_obj = Py_None;
  int enabled = 1, device = -1;
  Py_ssize_t limit = -1;
  gm_status status;

  if (!PyArg_ParseTupleAndKeywords (args, kwargs, "|pOO:set_spill", keywords,
                                    &enabled, &device_obj, &limit_obj))
    return NULL;
  if (device_obj != Py_None && gmpy_device_arg (device_obj, &device) < 0)
    return NULL;
  if (limit_obj != Py_None && gmpy_size_arg (limit_obj, "host_limit",
                                             &limit) < 0)
    return NULL;
  status = gm_spill_set (device, enabled,
                         limit < 0 ? SIZE_MAX : (size_t) limit);
  if (status != GM_OK)
    return gmpy_raise (status);
  Py_RETURN_NONE;
}

PyObject *
gmpy_array_spill (PyObject *self, PyObject *unused)
{
  arraypy_object *array = (arraypy_object *) self;
  gm_status status;

  if (array->spilled && !array->released)
    Py_RETURN_NONE;
  if (gmpy_array_usable_for (array, false) < 0)
    return NULL;
  if (array->base != NULL || array->block == NULL)
    {
      PyErr_SetString (PyExc_ValueError, "spill: only an array that owns "
                       "its memory spills (a view spills with its base)");
      return NULL;
    }
  status = gm_spill_block (array->block);
  if (status != GM_OK)
    return gmpy_raise (status);
  Py_RETURN_NONE;
}

PyObject *
gmpy_array_get_is_spilled (PyObject *self, void *closure)
{
  arraypy_object *owner = gmpy_array_owner ((arraypy_object *) self);

  return PyBool_FromLong (owner != NULL && owner->spilled);
}

PyMethodDef gmpy_spill_methods[] = {
  {"set_spill", (PyCFunction) (void (*) (void)) gmpy_set_spill,
   METH_VARARGS | METH_KEYWORDS,
   "set_spill(enabled=True, device=None, host_limit=None)\n--\n\n"
   "Turn spilling on (or off) for DEVICE (None: every device): when an\n"
   "array of empty, zeros, ones, full, the *_like functions or to_device\n"
   "does not fit the device or the memory limit, arrays nothing outside\n"
   "gpumem holds move to host memory, least recently used first, and\n"
   "come back on their next use.  HOST_LIMIT bounds the host memory\n"
   "spilled arrays take, in bytes (None: no bound)."},
  {NULL, NULL, 0, NULL}
};

/* Brings every spilled DeviceArray among the N objects OBJS back to its
   device as gmpy_array_prepare_slow says, complete on return (D NULL)
   or queued on the stream D dispatches to on DEVICE (D's gpumem.Stream
   then named as the one whose work writes them).  A return queued on a
   stream of arrays that came back before (a loop over more than fits)
   first starts the write-behind of the arrays their room would take.
   0 or -1.  */
static int
bring_back (PyObject *const *objs, Py_ssize_t n, gmpy_dispatch *d,
            int device)
{
  gm_block **keep = PyMem_New (gm_block *, (size_t) (n > 0 ? n : 1));
  gm_stream *stream = NULL;
  int nkeep = 0, result = -1;

  if (keep == NULL)
    {
      PyErr_NoMemory ();
      return -1;
    }
  if (d != NULL && gmpy_dispatch_stream (d, device, &stream) < 0)
    goto done;
  for (Py_ssize_t i = 0; i < n; i++)
    {
      arraypy_object *owner;
      if (objs[i] == NULL || !gmpy_array_check (objs[i]))
        continue;
      owner = gmpy_array_owner ((arraypy_object *) objs[i]);
      if (owner != NULL && owner->block != NULL && !owner->released)
        keep[nkeep++] = owner->block;
    }
  if (stream != NULL)
    {
      gm_status status = gm_spill_write_behind (device, keep, nkeep);
      if (status != GM_OK)
        {
          gmpy_raise (status);
          goto done;
        }
    }
  for (Py_ssize_t i = 0; i < n; i++)
    {
      arraypy_object *owner;
      if (objs[i] == NULL || !gmpy_array_check (objs[i]))
        continue;
      owner = gmpy_array_owner ((arraypy_object *) objs[i]);
      if (owner == NULL || !owner->spilled || owner->released)
        continue;
      if (gmpy_array_come_back (owner, stream, true, keep, nkeep) < 0)
        goto done;
      if (stream != NULL)
        gmpy_array_note_stream ((PyObject *) owner, d);
    }
  result = 0;
done:
  PyMem_Free (keep);
  return result;
}

int
gmpy_spill_prefetch (PyObject *const *arrays, Py_ssize_t n, int location,
                     PyObject *stream_obj)
{
  gmpy_dispatch d;

  if (gmpy_dispatch_get (stream_obj, location != GM_LOCATION_HOST ? location
                         : n > 0 ? ((arraypy_object *) arrays[0])->device
                         : -1, &d) < 0)
    return -1;
  if (d.mode == GMPY_GRAPH)
    {
      PyErr_SetString (gmpy_state_get ()->error, "prefetch cannot be "
                       "recorded in a graph: call it before the recording "
                       "or between replays");
      return -1;
    }
  if (location != GM_LOCATION_HOST)
    return bring_back (arrays, n, &d, location);
  for (Py_ssize_t i = 0; i < n; i++)
    {
      arraypy_object *owner = gmpy_array_owner ((arraypy_object *) arrays[i]);
      gm_status status;

      /* Foreign and shared memory stays put.  */
      if (owner == NULL || owner->block == NULL || !owner->block->listed
          || owner->spilled)
        continue;
      status = gm_spill_block (owner->block);
      if (status != GM_OK)
        {
          gmpy_raise (status);
          return -1;
        }
    }
  return 0;
}

int
gmpy_array_prepare_slow (PyObject *const *objs, Py_ssize_t n)
{
  return bring_back (objs, n, NULL, -1);
}
