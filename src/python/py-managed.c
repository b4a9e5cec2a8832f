/* py-managed.c -- managed arrays (memory="managed"): the memory=
   argument of the functions that make arrays, DeviceArray.memory,
   prefetching (a.prefetch, gpumem.prefetch), discarding (a.discard),
   advice (a.advise), and the zero-copy NumPy view of a managed array
   (np.asarray (a), through DeviceArray.__array__).

   Every argument is checked, for every array of a batch, before the
   backend is asked anything.  Prefetch and discard go where the
   dispatch says (py-dispatch.h): without a stream they are complete on
   return and follow the work queued before them; a recording refuses
   them.  Advice moves no byte and takes effect on return.  */

#include "gm-python.h"

#include <stdint.h>
#include <string.h>

/* The granule of a discard: whole pages of this size (the largest page
   size of managed memory, CUDA's large GPU pages) inside an array's
   bytes.  A discard acts on whole pages, and the pool puts other arrays
   in the pages an array's ends share, whose contents must stay.  */
#define DISCARD_GRANULE ((uintptr_t) 2 << 20)

int
gmpy_memory_arg (PyObject *obj, gmpy_memory fallback, gmpy_memory *memory)
{
  if (obj == NULL || obj == Py_None)
    {
      *memory = fallback;
      return 0;
    }
  if (!PyUnicode_Check (obj))
    {
      PyErr_Format (PyExc_TypeError, "memory must be 'device' or 'managed', "
                    "not %.100s", GMPY_TYPE_NAME (Py_TYPE (obj)));
      return -1;
    }
  if (PyUnicode_CompareWithASCIIString (obj, "device") == 0)
    *memory = GMPY_MEMORY_DEVICE;
  else if (PyUnicode_CompareWithASCIIString (obj, "managed") == 0)
    *memory = GMPY_MEMORY_MANAGED;
  else
    {
      PyErr_Format (PyExc_ValueError, "memory must be 'device' or "
                    "'managed', not %R", obj);
      return -1;
    }
  return 0;
}

PyObject *
gmpy_array_get_memory (PyObject *self, void *closure)
{
  (void) closure;
  return PyUnicode_FromString (((arraypy_object *) self)->memory
                               == GMPY_MEMORY_MANAGED ? "managed" : "device");
}

/* Reads a location (a device: an int or a Device; or "host") into
   *LOCATION.  WHO names the argument.  0, or -1 with TypeError or
   ValueError.  */
static int
location_arg (PyObject *obj, const char *who, int *location)
{
  if (PyUnicode_Check (obj))
    {
      if (PyUnicode_CompareWithASCIIString (obj, "host") == 0)
        {
          *location = GM_LOCATION_HOST;
          return 0;
        }
      PyErr_Format (PyExc_ValueError, "%s must be a device or 'host', not "
                    "%R", who, obj);
      return -1;
    }
  if (obj == Py_None || PyBool_Check (obj))
    {
      PyErr_Format (PyExc_TypeError, "%s must be a device or 'host', not "
                    "%.100s", who, GMPY_TYPE_NAME (Py_TYPE (obj)));
      return -1;
    }
  return gmpy_device_arg (obj, location);
}

/* The bytes ARRAY's elements span (from its lowest to its highest
   element, whatever its strides) into *START and *NBYTES; 0 bytes for
   an empty array.  */
static void
span_of (const arraypy_object *array, char **start, size_t *nbytes)
{
  Py_ssize_t low = 0, high = (Py_ssize_t) gm_dtypes[array->dtype].itemsize;

  *start = array->data;
  *nbytes = 0;
  if (array->size == 0)
    return;
  for (int i = 0; i < array->ndim; i++)
    if (array->shape[i] > 1)
      {
        Py_ssize_t reach = array->strides[i] * (array->shape[i] - 1);
        if (reach < 0)
          low += reach;
        else
          high += reach;
      }
  *start = array->data + low;
  *nbytes = (size_t) (high - low);
}

/* Checks that OBJ is a usable managed DeviceArray for WHO.  0, or -1
   with TypeError or ValueError.  */
static int
managed_check (PyObject *obj, const char *who)
{
  if (!gmpy_array_check (obj))
    {
      PyErr_Format (PyExc_TypeError, "%s takes DeviceArrays, not %.100s", who,
                    GMPY_TYPE_NAME (Py_TYPE (obj)));
      return -1;
    }
  if (gmpy_array_usable ((arraypy_object *) obj) < 0)
    return -1;
  if (((arraypy_object *) obj)->memory != GMPY_MEMORY_MANAGED)
    {
      PyErr_Format (PyExc_ValueError, "%s: the array is device memory; only "
                    "managed arrays (memory='managed') can be prefetched, "
                    "discarded or advised", who);
      return -1;
    }
  return 0;
}

/* Checks OBJ for prefetch to LOCATION: a DeviceArray not freed, managed
   memory, or device memory (spilled or not, which stays spilled until
   the prefetch itself) to the host or its own device.  0, or -1 with
   TypeError or ValueError.  */
static int
prefetch_check (PyObject *obj, int location)
{
  arraypy_object *array, *owner;

  if (!gmpy_array_check (obj))
    {
      PyErr_Format (PyExc_TypeError, "prefetch takes DeviceArrays, not "
                    "%.100s", GMPY_TYPE_NAME (Py_TYPE (obj)));
      return -1;
    }
  array = (arraypy_object *) obj;
  if (array->memory == GMPY_MEMORY_MANAGED)
    return managed_check (obj, "prefetch");
  owner = gmpy_array_owner (array);
  if (array->released || (owner != NULL && owner->released))
    return gmpy_array_usable (array);
  if (location != GM_LOCATION_HOST && location != array->device)
    {
      PyErr_Format (PyExc_ValueError, "prefetch: the array is device memory "
                    "of device %d; it moves only between that device and "
                    "the host (a spilled array comes back; \"host\" spills "
                    "it)", array->device);
      return -1;
    }
  return 0;
}

/* Splits the N checked ARRAYS of a prefetch to LOCATION on STREAM_OBJ:
   the device arrays' go through the spill engine now
   (gmpy_spill_prefetch), the managed ones are written to MANAGED (room
   for N), *NMANAGED of them.  0 or -1.  */
static int
prefetch_device_arrays (PyObject *const *arrays, Py_ssize_t n, int location,
                        PyObject *stream_obj, PyObject **managed,
                        Py_ssize_t *nmanaged)
{
  PyObject **device = PyMem_New (PyObject *, (size_t) (n > 0 ? n : 1));
  Py_ssize_t ndevice = 0;
  int result;

  if (device == NULL)
    {
      PyErr_NoMemory ();
      return -1;
    }
  *nmanaged = 0;
  for (Py_ssize_t i = 0; i < n; i++)
    if (((arraypy_object *) arrays[i])->memory == GMPY_MEMORY_MANAGED)
      managed[(*nmanaged)++] = arrays[i];
    else
      device[ndevice++] = arrays[i];
  result = ndevice > 0 ? gmpy_spill_prefetch (device, ndevice, location,
                                              stream_obj) : 0;
  PyMem_Free (device);
  return result;
}

/* What prefetch and discard share: the N arrays ARRAYS (checked by the
   caller with managed_check) prefetched to LOCATION (DISCARD false) or
   discarded (DISCARD true), where the dispatch of STREAM_OBJ on the
   destination's device (else the first array's) says.  None, or NULL
   with an exception.  */
static PyObject *
move_arrays (PyObject *const *arrays, Py_ssize_t n, int location,
             bool discard, PyObject *stream_obj, const char *who)
{
  void **ptrs = NULL;
  size_t *sizes = NULL, count = 0;
  int device = location != GM_LOCATION_HOST && !discard ? location
               : n > 0 ? ((arraypy_object *) arrays[0])->device
               : gmpy_current_device ();
  PyObject *result = NULL;
  gm_stream *stream;
  gmpy_dispatch d;
  gm_status status;

  if (gmpy_dispatch_get (stream_obj, device, &d) < 0)
    return NULL;
  if (d.mode == GMPY_GRAPH)
    {
      PyErr_Format (gmpy_state_get ()->error, "%s cannot be recorded in a "
                    "graph: call it before the recording or between "
                    "replays", who);
      return NULL;
    }
  if (n > 0)
    {
      ptrs = PyMem_New (void *, (size_t) n);
      sizes = PyMem_New (size_t, (size_t) n);
      if (ptrs == NULL || sizes == NULL)
        {
          PyErr_NoMemory ();
          goto done;
        }
    }
  for (Py_ssize_t i = 0; i < n; i++)
    {
      char *start;
      size_t nbytes;

      span_of ((arraypy_object *) arrays[i], &start, &nbytes);
      if (discard && nbytes > 0)
        {
          uintptr_t first = ((uintptr_t) start + DISCARD_GRANULE - 1)
                            & ~(DISCARD_GRANULE - 1);
          uintptr_t end = ((uintptr_t) start + nbytes)
                          & ~(DISCARD_GRANULE - 1);
          start = (char *) first;
          nbytes = end > first ? (size_t) (end - first) : 0;
        }
      if (nbytes == 0)
        continue;
      ptrs[count] = start;
      sizes[count] = nbytes;
      count++;
    }
  if (gmpy_dispatch_stream (&d, device, &stream) < 0)
    goto done;
  if (count > 0)
    {
      status = discard
               ? gm_backend_current->managed_discard (device, ptrs, sizes,
                                                      count, stream)
               : gm_backend_current->managed_prefetch (device, ptrs, sizes,
                                                       count, location,
                                                       stream);
      if (status != GM_OK)
        {
          gmpy_raise (status);
          goto done;
        }
    }
  if (stream == NULL && gmpy_wait (device, NULL) < 0)
    goto done;
  result = Py_NewRef (Py_None);
done:
  PyMem_Free (ptrs);
  PyMem_Free (sizes);
  return result;
}

PyObject *
gmpy_array_prefetch (PyObject *self, PyObject *args, PyObject *kwargs)
{
  static char *keywords[] = {"location", "stream", NULL};
  PyObject *location_obj, *stream_obj = Py_None;
  int location;

  if (!PyArg_ParseTupleAndKeywords (args, kwargs, "O|O:prefetch", keywords,
                                    &location_obj, &stream_obj)
      || location_arg (location_obj, "location", &location) < 0
      || prefetch_check (self, location) < 0)
    return NULL;
  if (((arraypy_object *) self)->memory != GMPY_MEMORY_MANAGED)
    {
      if (gmpy_spill_prefetch (&self, 1, location, stream_obj) < 0)
        return NULL;
      Py_RETURN_NONE;
    }
  return move_arrays (&self, 1, location, false, stream_obj, "prefetch");
}

PyObject *
gmpy_array_discard (PyObject *self, PyObject *args, PyObject *kwargs)
{
  static char *keywords[] = {"stream", NULL};
  PyObject *stream_obj = Py_None;

  if (!PyArg_ParseTupleAndKeywords (args, kwargs, "|O:discard", keywords,
                                    &stream_obj)
      || managed_check (self, "discard") < 0)
    return NULL;
  if (((arraypy_object *) self)->readonly)
    {
      PyErr_SetString (PyExc_ValueError, "discard: the DeviceArray is "
                       "read-only");
      return NULL;
    }
  return move_arrays (&self, 1, GM_LOCATION_HOST, true, stream_obj,
                      "discard");
}

/* gpumem.prefetch (arrays, location, stream=None).  */
static PyObject *
managedpy_prefetch (PyObject *module, PyObject *args, PyObject *kwargs)
{
  static char *keywords[] = {"arrays", "location", "stream", NULL};
  PyObject *arrays_obj, *location_obj, *stream_obj = Py_None, *seq;
  PyObject *result = NULL, **managed = NULL, **items = NULL;
  Py_ssize_t nmanaged = 0, n;
  int location;
  (void) module;

  if (!PyArg_ParseTupleAndKeywords (args, kwargs, "OO|O:prefetch", keywords,
                                    &arrays_obj, &location_obj, &stream_obj)
      || location_arg (location_obj, "location", &location) < 0)
    return NULL;
  if (gmpy_array_check (arrays_obj))
    {
      PyErr_SetString (PyExc_TypeError, "prefetch takes a sequence of "
                       "DeviceArrays (a.prefetch(location) moves one)");
      return NULL;
    }
  if (!PySequence_Check (arrays_obj))
    {
      PyErr_SetString (PyExc_TypeError, "prefetch: arrays must be a "
                       "sequence of DeviceArrays");
      return NULL;
    }
  seq = PySequence_Tuple (arrays_obj);
  if (seq == NULL)
    return NULL;
  n = PyTuple_GET_SIZE (seq);
  items = PyMem_New (PyObject *, (size_t) n + 1);
  managed = PyMem_New (PyObject *, (size_t) n + 1);
  if (items == NULL || managed == NULL)
    {
      PyErr_NoMemory ();
      goto done;
    }
  for (Py_ssize_t i = 0; i < n; i++)
    {
      items[i] = PyTuple_GET_ITEM (seq, i);
      if (prefetch_check (items[i], location) < 0)
        goto done;
    }
  if (prefetch_device_arrays (items, n, location, stream_obj, managed,
                              &nmanaged) < 0)
    goto done;
  result = move_arrays (managed, nmanaged, location, false, stream_obj,
                        "prefetch");
done:
  PyMem_Free (items);
  PyMem_Free (managed);
  Py_DECREF (seq);
  return result;
}

/* The advice a.advise gives, one entry a backend call: all of it read
   first, and given only once every argument was checked.  */
typedef struct advice_list
{
  size_t n, room;
  gm_advice *advice;
  int *location;
} advice_list;

static int
advice_add (advice_list *list, gm_advice advice, int location)
{
  if (list->n == list->room)
    {
      size_t room = list->room ? 2 * list->room : 8;
      gm_advice *a = PyMem_Realloc (list->advice, room * sizeof *a);
      int *l;
      if (a == NULL)
        {
          PyErr_NoMemory ();
          return -1;
        }
      list->advice = a;
      l = PyMem_Realloc (list->location, room * sizeof *l);
      if (l == NULL)
        {
          PyErr_NoMemory ();
          return -1;
        }
      list->location = l;
      list->room = room;
    }
  list->advice[list->n] = advice;
  list->location[list->n] = location;
  list->n++;
  return 0;
}

/* Adds ADVICE for each location OBJ names (one location, or a sequence
   of them) to LIST.  0 or -1.  */
static int
advice_locations (PyObject *obj, const char *who, gm_advice advice,
                  advice_list *list)
{
  PyObject *seq;
  int location, rc = 0;

  if (PyUnicode_Check (obj) || PyLong_Check (obj)
      || !PySequence_Check (obj))
    {
      if (location_arg (obj, who, &location) < 0)
        return -1;
      return advice_add (list, advice, location);
    }
  seq = PySequence_Fast (obj, "locations");
  if (seq == NULL)
    return -1;
  for (Py_ssize_t i = 0; rc == 0 && i < PySequence_Fast_GET_SIZE (seq); i++)
    rc = location_arg (PySequence_Fast_GET_ITEM (seq, i), who, &location) < 0
         ? -1 : advice_add (list, advice, location);
  Py_DECREF (seq);
  return rc;
}

PyObject *
gmpy_array_advise (PyObject *self, PyObject *args, PyObject *kwargs)
{
  static char *keywords[] = {"read_mostly", "preferred_location",
                             "accessed_by", "not_accessed_by", NULL};
  PyObject *read_obj = Py_None, *preferred_obj = Py_None;
  PyObject *accessed_obj = Py_None, *not_accessed_obj = Py_None;
  arraypy_object *array = (arraypy_object *) self;
  advice_list list = {0, 0, NULL, NULL};
  PyObject *result = NULL;
  gm_block *block;
  size_t nbytes;
  char *start;
  int location;

  if (!PyArg_ParseTupleAndKeywords (args, kwargs, "|$OOOO:advise", keywords,
                                    &read_obj, &preferred_obj, &accessed_obj,
                                    &not_accessed_obj)
      || managed_check (self, "advise") < 0)
    return NULL;
  if (read_obj != Py_None)
    {
      if (!PyBool_Check (read_obj))
        {
          PyErr_Format (PyExc_TypeError, "read_mostly must be True, False "
                        "or None, not %.100s", GMPY_TYPE_NAME (Py_TYPE (read_obj)));
          goto done;
        }
      if (advice_add (&list, read_obj == Py_True
                             ? GM_ADVISE_READ_MOSTLY
                             : GM_ADVISE_UNSET_READ_MOSTLY,
                      GM_LOCATION_HOST) < 0)
        goto done;
    }
  if (preferred_obj == Py_False)
    {
      if (advice_add (&list, GM_ADVISE_UNSET_PREFERRED_LOCATION,
                      GM_LOCATION_HOST) < 0)
        goto done;
    }
  else if (preferred_obj != Py_None
           && (location_arg (preferred_obj, "preferred_location",
                             &location) < 0
               || advice_add (&list, GM_ADVISE_PREFERRED_LOCATION,
                              location) < 0))
    goto done;
  if ((accessed_obj != Py_None
       && advice_locations (accessed_obj, "accessed_by",
                            GM_ADVISE_ACCESSED_BY, &list) < 0)
      || (not_accessed_obj != Py_None
          && advice_locations (not_accessed_obj, "not_accessed_by",
                               GM_ADVISE_UNSET_ACCESSED_BY, &list) < 0))
    goto done;
  span_of (array, &start, &nbytes);
  block = gmpy_array_block (self);
  if (list.n > 0 && block != NULL)
    gm_block_note_advised (block);
  for (size_t i = 0; nbytes > 0 && i < list.n; i++)
    {
      gm_status status = gm_backend_current->managed_advise (
        start, nbytes, list.advice[i], list.location[i]);
      if (status != GM_OK)
        {
          gmpy_raise (status);
          goto done;
        }
    }
  result = Py_NewRef (Py_None);
done:
  PyMem_Free (list.advice);
  PyMem_Free (list.location);
  return result;
}

/* The destructor of the capsule a NumPy view of a managed array keeps:
   the view no longer uses the array's memory.  */
static void
numpy_lease_end (PyObject *capsule)
{
  arraypy_object *array
    = PyCapsule_GetPointer (capsule, "gpumem.managed_view");

  if (array == NULL)
    {
      PyErr_WriteUnraisable (capsule);
      return;
    }
  gmpy_array_exports_add (array, -1);
  Py_DECREF (array);
}

/* A new numpy.ndarray over ARRAY's managed memory, no copy: its base
   holds ARRAY and counts as an export of it, so that free () leaves
   the memory to the view.  New reference or NULL.  */
static PyObject *
numpy_view (arraypy_object *array)
{
  gmpy_state *state = gmpy_state_get ();
  PyObject *shape = NULL, *strides = NULL, *iface = NULL, *lease = NULL;
  PyObject *types = NULL, *holder = NULL, *result = NULL;
  char typestr[8];

  if (array->size == 0)
    {
      PyObject *dims = gmpy_shape_tuple (array->ndim, array->shape);
      if (dims == NULL)
        return NULL;
      result = PyObject_CallMethod (state->numpy, "empty", "OO", dims,
                                    state->np_dtypes[array->dtype]);
      Py_DECREF (dims);
      return result;
    }
  gm_dtype_typestr (array->dtype, typestr);
  shape = gmpy_shape_tuple (array->ndim, array->shape);
  strides = gmpy_shape_tuple (array->ndim, array->strides);
  if (shape == NULL || strides == NULL)
    goto done;
  iface = Py_BuildValue ("{s:O,s:s,s:(NO),s:O,s:i}", "shape", shape,
                         "typestr", typestr, "data",
                         PyLong_FromVoidPtr (array->data),
                         array->readonly ? Py_True : Py_False,
                         "strides", strides, "version", 3);
  if (iface == NULL)
    goto done;
  lease = PyCapsule_New (array, "gpumem.managed_view", numpy_lease_end);
  if (lease == NULL)
    goto done;
  Py_INCREF ((PyObject *) array);
  gmpy_array_exports_add (array, 1);
  types = PyImport_ImportModule ("types");
  if (types == NULL)
    goto done;
  holder = PyObject_CallMethod (types, "SimpleNamespace", NULL);
  if (holder == NULL
      || PyObject_SetAttrString (holder, "__array_interface__", iface) < 0
      || PyObject_SetAttrString (holder, "lease", lease) < 0)
    goto done;
  result = PyObject_CallMethod (state->numpy, "asarray", "O", holder);
done:
  Py_XDECREF (shape);
  Py_XDECREF (strides);
  Py_XDECREF (iface);
  Py_XDECREF (lease);
  Py_XDECREF (types);
  Py_XDECREF (holder);
  return result;
}

PyObject *
gmpy_array_managed_numpy (PyObject *self, PyObject *args, PyObject *kwargs)
{
  static char *keywords[] = {"dtype", "copy", NULL};
  arraypy_object *array = (arraypy_object *) self;
  PyObject *dtype_obj = Py_None, *copy_obj = Py_None, *view, *result;
  gm_stream *pending;

  if (!PyArg_ParseTupleAndKeywords (args, kwargs, "|O$O:__array__", keywords,
                                    &dtype_obj, &copy_obj)
      || gmpy_array_usable (array) < 0
      || gmpy_array_pending_stream (array, &pending) < 0)
    return NULL;
  /* The host reads what the device wrote: work a stream still has
     pending on the array is waited for first, and then all gpumem's
     work on its device, which covers work of streams on memory the pool
     gave the array after it was freed (the host does not follow the
     pool's stream order).  */
  if ((pending != NULL && gmpy_wait (array->device, pending) < 0)
      || gmpy_wait (array->device, NULL) < 0)
    return NULL;
  view = numpy_view (array);
  if (view == NULL)
    return NULL;
  if (dtype_obj != Py_None)
    {
      result = PyObject_CallMethod (view, "astype", "O", dtype_obj);
      Py_DECREF (view);
      return result;
    }
  if (copy_obj == Py_True)
    {
      result = PyObject_CallMethod (view, "copy", NULL);
      Py_DECREF (view);
      return result;
    }
  return view;
}

PyMethodDef gmpy_managed_methods[] = {
  {"prefetch", (PyCFunction) (void (*) (void)) managedpy_prefetch,
   METH_VARARGS | METH_KEYWORDS,
   "prefetch(arrays, location, stream=None)\n--\n\n"
   "Move the pages of every managed array in ARRAYS to LOCATION (a\n"
   "device, or 'host') in one batched call; complete on return without\n"
   "a stream."},
  {NULL, NULL, 0, NULL}
};
