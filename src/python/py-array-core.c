/* py-array-core.c -- the DeviceArray object's core, beneath the files
   of its methods (py-index.c, py-array-copy.c, the interop files) and
   its type (py-array.c): every helper of the array itself is here.

   Whether an object is a DeviceArray and whether its memory may still
   be used, its owner and the array that keeps its books; making
   arrays (new owners, views, arrays over foreign memory), their
   strides, the stream whose work last wrote them, and the life of their
   memory: an owner frees its allocation once, when free () was called
   or the object goes, and not before the last DLPack export and the
   last call running without the GIL that use it are done.  */

#include "gm-python.h"

#include <stdlib.h>

#include <string.h>

int
gmpy_array_check (PyObject *obj)
{
  return PyObject_TypeCheck (obj, gmpy_state_get ()->array_type);
}

arraypy_object *
gmpy_array_owner (arraypy_object *array)
{
  if (array->base == NULL)
    return array;
  if (gmpy_array_check (array->base))
    return (arraypy_object *) array->base;
  return NULL;
}

int
gmpy_array_come_back (arraypy_object *owner, gm_stream *stream, bool evict,
                      gm_block *const *keep, int nkeep)
{
  gm_status status = gm_spill_return (owner->block, stream, evict, keep,
                                      nkeep);

  if (status != GM_OK)
    {
      gmpy_raise (status);
      if (status == GM_ERR_NOMEM && !evict)
        {
          PyObject *type, *value, *traceback;
          PyErr_Fetch (&type, &value, &traceback);
          PyErr_Format (type, "a spilled DeviceArray of %zu bytes cannot "
                        "come back to device %d in this call: %S.  Bring "
                        "it back first with a.prefetch(%d) or "
                        "gpumem.prefetch([...], %d), which make room",
                        owner->block->nbytes, owner->device, value,
                        owner->device, owner->device);
          Py_XDECREF (type);
          Py_XDECREF (value);
          Py_XDECREF (traceback);
        }
      return -1;
    }
  owner->spilled = false;
  owner->alloc = owner->block->ptr;
  owner->data = owner->alloc;
  return 0;
}

int
gmpy_array_usable (arraypy_object *array)
{
  return gmpy_array_usable_for (array, true);
}

int
gmpy_array_usable_for (arraypy_object *array, bool write)
{
  arraypy_object *owner = gmpy_array_owner (array);

  if (array->released || (owner != NULL && owner->released))
    {
      PyErr_SetString (PyExc_ValueError,
                       "this DeviceArray's memory was freed (free() or the "
                       "end of its with block); it cannot be used");
      return -1;
    }
  if (owner != NULL && owner->block != NULL)
    {
      if (owner->spilled
          && gmpy_array_come_back (owner, NULL, false, NULL, 0) < 0)
        return -1;
      gm_spill_touch (owner->block);
      if (write)
        gm_spill_written (owner->block);
      if (owner != array && owner->block->listed)
        array->data = owner->data + array->offset;
    }
  return 0;
}

void
gmpy_array_moved (void *user)
{
  arraypy_object *owner = user;

  gmpy_array_unlend (owner);
  owner->spilled = true;
  owner->alloc = NULL;
  owner->data = NULL;
}

int
gmpy_devbuf_usable (const gmpy_devbuf *buf)
{
  if (buf->array == NULL)
    return 0;
  return gmpy_array_usable_for ((arraypy_object *) buf->array, !buf->reads);
}

size_t
gmpy_array_nbytes (const arraypy_object *array)
{
  return (size_t) array->size * gm_dtypes[array->dtype].itemsize;
}

/* Gives ARRAY the C-contiguous strides of its shape.  Past an overflow
   the array is empty (a dimension is 0), and its strides are never
   used.  */
static void
set_c_strides (arraypy_object *array, size_t itemsize)
{
  Py_ssize_t stride = (Py_ssize_t) itemsize;

  for (int i = array->ndim - 1; i >= 0; i--)
    {
      array->strides[i] = stride;
      if (__builtin_mul_overflow (stride, array->shape[i] > 1
                                           ? array->shape[i] : 1, &stride))
        stride = 0;
    }
  array->contiguous = true;
}

/* Whether NDIM-dimensional SHAPE with STRIDES is C-contiguous (axes of
   length 1 may have any stride; an empty array is).  */
static bool
is_c_contiguous (int ndim, const Py_ssize_t *shape, const Py_ssize_t *strides,
                 size_t itemsize)
{
  Py_ssize_t expect = (Py_ssize_t) itemsize;

  for (int i = 0; i < ndim; i++)
    if (shape[i] == 0)
      return true;
  for (int i = ndim - 1; i >= 0; i--)
    {
      if (shape[i] != 1 && strides[i] != expect)
        return false;
      expect *= shape[i];
    }
  return true;
}

/* A new, empty array object (no memory, not tracked).  */
static arraypy_object *
alloc_object (int ndim, const Py_ssize_t *shape, gm_dtype dtype, int device)
{
  gmpy_state *state = gmpy_state_get ();
  arraypy_object *array = PyObject_GC_New (arraypy_object, state->array_type);

  if (array == NULL)
    return NULL;
  array->data = NULL;
  array->ndim = ndim;
  memcpy (array->shape, shape, sizeof *shape * (size_t) ndim);
  set_c_strides (array, gm_dtypes[dtype].itemsize);
  array->size = gmpy_shape_size (ndim, shape);
  array->dtype = dtype;
  array->device = device;
  array->readonly = false;
  array->released = false;
  array->spilled = false;
  array->offset = 0;
  array->alloc = NULL;
  array->alloc_bytes = 0;
  array->block = NULL;
  array->base = NULL;
  array->last_stream = NULL;
  array->exports = 0;
  array->users = 0;
  array->weakreflist = NULL;
  array->dl_strides = NULL;
  memset (&array->lent, 0, sizeof array->lent);
  array->memory = GMPY_MEMORY_DEVICE;
  return array;
}

static arraypy_object *array_new (int ndim, const Py_ssize_t *shape,
                                   gm_dtype dtype, int device,
                                   gm_stream *stream, gmpy_memory memory,
                                   bool fresh);

arraypy_object *
gmpy_array_new (int ndim, const Py_ssize_t *shape, gm_dtype dtype,
                int device, gm_stream *stream)
{
  return array_new (ndim, shape, dtype, device, stream, GMPY_MEMORY_DEVICE,
                    false);
}

arraypy_object *
gmpy_array_new_in (int ndim, const Py_ssize_t *shape, gm_dtype dtype,
                   int device, gm_stream *stream, gmpy_memory memory)
{
  return array_new (ndim, shape, dtype, device, stream, memory, true);
}

static arraypy_object *
array_new (int ndim, const Py_ssize_t *shape, gm_dtype dtype, int device,
           gm_stream *stream, gmpy_memory memory, bool fresh)
{
  arraypy_object *array;
  gm_status status;

  /* Device memory is allocated before a recording, not in it: a graph
     would allocate at each replay, or hold memory only its capture
     saw.  */
  if (gmpy_graph_refuse ("a device allocation (empty, zeros, to_device, "
                         "alloc_gpu_memory, or a call that returns a new "
                         "array)") < 0)
    return NULL;
  array = alloc_object (ndim, shape, dtype, device);
  if (array == NULL)
    return NULL;
  array->memory = memory;
  status = gm_block_alloc (device, gmpy_array_nbytes (array), stream,
                           (fresh ? GM_BLOCK_MAY_SPILL : 0)
                           | (memory == GMPY_MEMORY_MANAGED
                              ? GM_BLOCK_MANAGED : 0),
                           &array->block);
  if (status != GM_OK)
    {
      gmpy_array_mark_released (array);
      Py_DECREF (array);
      return (arraypy_object *) gmpy_raise (status);
    }
  array->alloc = array->block->ptr;
  array->alloc_bytes = array->block->nbytes;
  array->data = array->alloc;
  if (memory != GMPY_MEMORY_MANAGED)
    gm_spill_track (array->block, array);
  PyObject_GC_Track (array);
  return array;
}

static arraypy_object *books_of (arraypy_object *array);

int
gmpy_strides_check (int ndim, const Py_ssize_t *dims,
                    const Py_ssize_t *strides, size_t itemsize,
                    bool *contiguous, const char *what)
{
  for (int i = 0; i < ndim; i++)
    if (dims[i] > 1 && (strides[i] == 0
                        || strides[i] % (Py_ssize_t) itemsize != 0))
      {
        PyErr_Format (PyExc_ValueError, "%s: stride %zd of axis %d is %s",
                      what, strides[i], i, strides[i] == 0
                        ? "0 (elements sharing memory are not supported)"
                        : "not a multiple of the element size");
        return -1;
      }
  *contiguous = is_c_contiguous (ndim, dims, strides, itemsize);
  return 0;
}

void
gmpy_array_set_strides (arraypy_object *array, const Py_ssize_t *strides)
{
  memcpy (array->strides, strides, sizeof *strides * (size_t) array->ndim);
  free (array->dl_strides);
  array->dl_strides = NULL;
  gmpy_array_unlend (array);
  array->contiguous = is_c_contiguous (array->ndim, array->shape, strides,
                                       gm_dtypes[array->dtype].itemsize);
}

PyObject *
gmpy_array_view (arraypy_object *source, Py_ssize_t offset, int ndim,
                 const Py_ssize_t *shape, const Py_ssize_t *strides)
{
  size_t itemsize = gm_dtypes[source->dtype].itemsize;
  arraypy_object *view = alloc_object (ndim, shape, source->dtype,
                                       source->device);
  if (view == NULL)
    return NULL;
  if (strides != NULL)
    {
      memcpy (view->strides, strides, sizeof *strides * (size_t) ndim);
      view->contiguous = is_c_contiguous (ndim, shape, strides, itemsize);
    }
  view->offset = (source->base != NULL ? source->offset : 0) + offset;
  view->data = source->data ? source->data + offset : NULL;
  view->readonly = source->readonly;
  view->memory = source->memory;
  /* A view refers to the array that keeps the books of the memory (the
     first owner, or the array over foreign memory), never to a view
     nor to the foreign object itself: chains stay short, and freeing
     that array reaches every view.  */
  view->base = Py_NewRef ((PyObject *) books_of (source));
  PyObject_GC_Track (view);
  return (PyObject *) view;
}

/* Lets go of ARRAY's hold on its memory's record, the memory going
   now unless native code still holds it; safe to call more than once.  */
static void
release (arraypy_object *array)
{
  gm_block *block = array->block;

  gmpy_array_mark_released (array);
  array->block = NULL;
  array->alloc = NULL;
  array->alloc_bytes = 0;
  if (block != NULL)
    {
      gm_status status = gm_block_owner_release (block);
      if (status != GM_OK && !PyErr_Occurred ())
        PyErr_WriteUnraisable (gmpy_raise (status));
    }
}

void
gmpy_array_let_go (arraypy_object *array)
{
  release (array);
  Py_CLEAR (array->base);
  Py_CLEAR (array->last_stream);
  array->data = NULL;
}

/* The last release of the record of foreign memory: lets go of the
   reference to its owner that the record kept.  */
static void
foreign_gone (void *owner)
{
  Py_DECREF ((PyObject *) owner);
}

gm_block *
gmpy_array_block (PyObject *obj)
{
  arraypy_object *books;

  if (!gmpy_array_check (obj))
    return NULL;
  books = books_of ((arraypy_object *) obj);
  return books->released ? NULL : books->block;
}

PyObject *
gmpy_array_wrap (int ndim, const Py_ssize_t *shape, gm_dtype dtype,
                 int device, void *data, bool readonly, PyObject *base)
{
  arraypy_object *array = alloc_object (ndim, shape, dtype, device);

  if (array == NULL)
    return NULL;
  array->data = data;
  array->readonly = readonly;
  array->base = Py_NewRef (base);
  /* The record keeps a reference of its own to the foreign owner, for
     native holders that outlive this array's use (free ()).  */
  array->block = gm_block_wrap (device, data, gmpy_array_nbytes (array),
                                foreign_gone, base);
  if (array->block == NULL)
    {
      gmpy_array_mark_released (array);
      Py_DECREF (array);
      return PyErr_NoMemory ();
    }
  Py_INCREF (base);
  PyObject_GC_Track (array);
  return (PyObject *) array;
}

/* The array that keeps the books (last stream, exports) for ARRAY's
   memory: its owner, or ARRAY itself when it wraps foreign memory.  */
static arraypy_object *
books_of (arraypy_object *array)
{
  arraypy_object *owner = gmpy_array_owner (array);
  return owner != NULL ? owner : array;
}

void
gmpy_array_note_stream (PyObject *obj, const gmpy_dispatch *d)
{
  gmpy_dispatch current;
  arraypy_object *books;

  if (!gmpy_array_check (obj))
    return;
  if (d == NULL)
    {
      /* A C caller's work went to the current stream of OBJ's device.  */
      if (gmpy_dispatch_get (NULL, ((arraypy_object *) obj)->device,
                             &current) < 0)
        {
          PyErr_WriteUnraisable (obj);
          return;
        }
      d = &current;
    }
  if (d->stream_obj == NULL)
    return;
  books = books_of ((arraypy_object *) obj);
  gmpy_array_unlend (books);
  Py_XSETREF (books->last_stream, Py_NewRef (d->stream_obj));
}

int
gmpy_array_pending_stream (arraypy_object *array, gm_stream **stream)
{
  arraypy_object *books = books_of (array);
  streampy_object *last = (streampy_object *) books->last_stream;
  gm_status status;
  bool done;

  *stream = NULL;
  if (last == NULL)
    return 0;
  status = gm_backend_current->stream_query (last->stream, &done);
  if (status != GM_OK)
    return gmpy_raise_int (status);
  if (done)
    Py_CLEAR (books->last_stream);
  else
    *stream = last->stream;
  return 0;
}

/* Whether ARRAY, on which free () was called, can let go of its memory
   now: no DLPack consumer and no call running without the GIL uses it,
   and it still holds something.  */
static bool
may_let_go (const arraypy_object *array)
{
  return array->released && array->exports == 0 && array->users == 0
         && (array->block != NULL || array->base != NULL);
}

PyObject *
gmpy_array_hold (PyObject *obj)
{
  arraypy_object *books;

  if (obj == NULL || !gmpy_array_check (obj))
    return NULL;
  books = books_of ((arraypy_object *) obj);
  books->users++;
  return Py_NewRef ((PyObject *) books);
}

void
gmpy_array_unhold (PyObject *held)
{
  arraypy_object *books = (arraypy_object *) held;

  if (books == NULL)
    return;
  books->users--;
  if (may_let_go (books))
    {
      PyObject *type, *value, *traceback;
      PyErr_Fetch (&type, &value, &traceback);
      gmpy_array_let_go (books);
      PyErr_Restore (type, value, traceback);
    }
  Py_DECREF (held);
}

void
gmpy_array_exports_add (arraypy_object *array, int delta)
{
  /* Called from DLPack deleters, perhaps while the interpreter ends:
     the owner is found without the module's state (owner_of needs it),
     and held while its view may let go of it.  */
  arraypy_object *owner
    = array->base != NULL
        && Py_IS_TYPE (array->base, Py_TYPE ((PyObject *) array))
        ? (arraypy_object *) Py_NewRef (array->base) : NULL;
  arraypy_object *counted[2] = {array, owner};
  arraypy_object *books = owner != NULL ? owner : array;

  /* A consumer is a native holder of the memory's record too (what
     share () and the books ask); the count below decides when this
     array lets go.  */
  if (books->block != NULL)
    {
      if (delta > 0)
        gm_block_hold (books->block, true);
      else
        {
          gm_status status = gm_block_release (books->block, true);
          if (status != GM_OK)
            PyErr_WriteUnraisable (gmpy_raise (status));
        }
    }
  for (int i = 0; i < 2; i++)
    {
      arraypy_object *each = counted[i];
      if (each == NULL)
        continue;
      each->exports += delta;
      if (may_let_go (each))
        gmpy_array_let_go (each);
    }
  Py_XDECREF ((PyObject *) owner);
}

int
gmpy_array_traverse (PyObject *self, visitproc visit, void *arg)
{
  Py_VISIT (Py_TYPE (self));
  Py_VISIT (((arraypy_object *) self)->base);
  Py_VISIT (((arraypy_object *) self)->last_stream);
  return 0;
}

int
gmpy_array_clear (PyObject *self)
{
  Py_CLEAR (((arraypy_object *) self)->base);
  Py_CLEAR (((arraypy_object *) self)->last_stream);
  return 0;
}

void
gmpy_array_dealloc (PyObject *self)
{
  arraypy_object *array = (arraypy_object *) self;
  PyTypeObject *type = Py_TYPE (self);

  PyObject_GC_UnTrack (self);
  if (array->weakreflist != NULL)
    PyObject_ClearWeakRefs (self);
  /* A dealloc never raises: a failed free is reported as unraisable.  */
  if (array->block != NULL)
    {
      PyObject *saved_type, *saved_value, *saved_tb;
      PyErr_Fetch (&saved_type, &saved_value, &saved_tb);
      release (array);
      PyErr_Restore (saved_type, saved_value, saved_tb);
    }
  gmpy_array_clear (self);
  free (array->dl_strides);
  GMPY_TYPE_FREE (type, self);
  Py_DECREF (type);
}

PyObject *
gmpy_strides_tuple (const arraypy_object *array)
{
  return gmpy_shape_tuple (array->ndim, array->strides);
}
