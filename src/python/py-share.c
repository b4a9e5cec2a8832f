/* py-share.c -- sharing arrays with other processes on the node, in
   Python: gpumem.shared_empty, share, open_shared, sharing_stats, and
   the reducer that makes multiprocessing pass a DeviceArray (or a
   shareable Event, py-share-event.c) as a handle instead of its bytes
   (docs/sharing.md).

   A shared array wraps its memory as foreign memory: its base is a
   capsule (py-share-capsule.c) that owns the producer's block (gm_ipc_drop when it goes) or
   the consumer's import (gm_ipc_close), so free () and garbage
   collection let go of them the way they let go of any foreign
   memory.  */

#include "gm-python.h"

#include <pwd.h>
#include <string.h>
#include <time.h>

#include "share.h"

/* A new array of NDIM dimensions SHAPE and DTYPE on DEVICE over a new
   shareable block, C-contiguous, uninitialized; *PTR is its memory.
   New reference or NULL.  */
static PyObject *
new_shared_array (int ndim, const Py_ssize_t *shape, gm_dtype dtype,
                  int device, void **ptr)
{
  size_t nbytes = (size_t) gmpy_shape_size (ndim, shape)
                  * gm_dtypes[dtype].itemsize;
  gm_ipc_block *block;
  PyObject *capsule, *array;
  gm_status status;

  Py_BEGIN_ALLOW_THREADS
  status = gm_ipc_alloc (device, nbytes, NULL, &block, ptr);
  Py_END_ALLOW_THREADS
  if (status != GM_OK)
    return gmpy_raise (status);
  capsule = gmpy_ipc_block_capsule (block);
  if (capsule == NULL)
    return NULL;
  array = gmpy_array_wrap (ndim, shape, dtype, device, *ptr, false, capsule);
  Py_DECREF (capsule);
  return array;
}

/* gpumem.shared_empty(shape, dtype='float32', device=None).  */
static PyObject *
ipcpy_shared_empty (PyObject *module, PyObject *args, PyObject *kwargs)
{
  static char *keywords[] = {"shape", "dtype", "device", NULL};
  PyObject *shape_obj, *dtype_obj = NULL, *device_obj = Py_None;
  Py_ssize_t shape[GM_MAX_NDIM];
  gm_dtype dtype = GM_FLOAT32;
  int ndim, device;
  void *ptr;
  (void) module;

  if (!PyArg_ParseTupleAndKeywords (args, kwargs, "O|OO:shared_empty",
                                    keywords, &shape_obj, &dtype_obj,
                                    &device_obj))
    return NULL;
  if (dtype_obj != NULL && dtype_obj != Py_None
      && gmpy_dtype_arg (dtype_obj, &dtype) < 0)
    return NULL;
  if (gmpy_device_arg (device_obj, &device) < 0
      || gmpy_shape_arg (shape_obj, gm_dtypes[dtype].itemsize, &ndim,
                         shape) < 0)
    return NULL;
  return new_shared_array (ndim, shape, dtype, device, &ptr);
}

/* The shareable block ARRAY's memory lies in, or NULL when it lies in
   other memory.  */
static gm_ipc_block *
block_of (arraypy_object *array)
{
  while (array->base != NULL && gmpy_array_check (array->base))
    array = (arraypy_object *) array->base;
  return gmpy_ipc_capsule_block (array->base);
}

/* The last release of the record of an owner's shared memory: lets go
   of the shared block's capsule.  */
static void
drop_capsule (void *capsule)
{
  Py_DECREF ((PyObject *) capsule);
}

/* The shareable block of ARRAY's memory, made now when ARRAY's owner
   holds memory of gpumem's pool that can be shared where it lies: the
   owner then keeps its memory through the block (its base becomes the
   block's capsule), so the memory stays while consumers hold it after
   the owner lets go.  NULL without an exception where the memory cannot
   be shared in place (foreign memory, an empty array, a pool that
   cannot export); NULL with one on error.  */
static gm_ipc_block *
adopt_owner (arraypy_object *array)
{
  arraypy_object *owner = gmpy_array_owner (array);
  gm_ipc_block *block;
  PyObject *capsule;
  gm_status status;

  if (owner == NULL || owner->alloc == NULL || owner->alloc_bytes == 0)
    return NULL;
  /* Making the memory shareable may move its bytes (the host backend
     copies them into a shared file mapped over the same addresses): no
     one else may use it meanwhile.  Native code that holds it may be
     writing it now, and may keep it for good: refused.  A call of
     gpumem's running without the GIL in another thread ends: waited
     for.  */
  for (;;)
    {
      if (gmpy_array_usable (owner) < 0)
        return NULL;
      if (owner->alloc == NULL)
        return NULL;
      if (owner->block->native == 0 && owner->users <= 1)
        break;
      if (owner->block->native > 0)
        {
          PyErr_Format (gmpy_state_get ()->error, "share: this "
                        "DeviceArray's memory is held by native code (%u "
                        "holders: C++ gpumem::array, C API holds, DLPack "
                        "consumers) and cannot be made shareable while they "
                        "may use it; share it before handing it out, let "
                        "them go first, or make it with shared_empty",
                        (unsigned) owner->block->native);
          return NULL;
        }
      Py_BEGIN_ALLOW_THREADS
      nanosleep (&(struct timespec){ .tv_nsec = 100000 }, NULL);
      Py_END_ALLOW_THREADS
      if (PyErr_CheckSignals () < 0)
        return NULL;
    }
  /* With the GIL held: no other thread may share or free the owner
     while its memory changes hands.  */
  status = gm_ipc_adopt (GM_MEM_OWNER_GPUMEM, owner->device, owner->alloc,
                         owner->alloc_bytes, &block);
  if (status == GM_ERR_UNAVAILABLE)
    return NULL;
  if (status != GM_OK)
    return (gm_ipc_block *) gmpy_raise (status);
  capsule = gmpy_ipc_block_capsule (block);
  if (capsule == NULL)
    {
      /* The capsule's failure dropped the block, and its memory with
         it: the owner holds nothing now.  */
      gm_block_hand_over (owner->block, NULL, NULL);
      owner->block->ptr = NULL;
      owner->block->nbytes = 0;
      gmpy_array_let_go (owner);
      return NULL;
    }
  gmpy_array_unlend (owner);
  owner->alloc = NULL;
  owner->alloc_bytes = 0;
  owner->base = capsule;
  /* The memory is the shared block's now: the record's last holder lets
     go of the capsule (a reference of its own).  */
  gm_block_hand_over (owner->block, drop_capsule, Py_NewRef (capsule));
  gm_block_expose (owner->block, GM_BLOCK_SHARED);
  return block;
}

/* A copy of ARRAY, C-contiguous, in a new shareable block: new
   reference or NULL.  */
static PyObject *
shared_copy (arraypy_object *array)
{
  int64_t shape[GM_MAX_NDIM], src[GM_MAX_NDIM], dst[GM_MAX_NDIM];
  size_t itemsize = gm_dtypes[array->dtype].itemsize;
  gm_copy_plan plan;
  PyObject *copy, *held;
  gm_status status;
  void *ptr;

  copy = new_shared_array (array->ndim, array->shape, array->dtype,
                           array->device, &ptr);
  if (copy == NULL)
    return NULL;
  for (int d = 0; d < array->ndim; d++)
    {
      shape[d] = array->shape[d];
      src[d] = array->strides[d];
      dst[d] = ((arraypy_object *) copy)->strides[d];
    }
  status = gm_strided_plan (array->ndim, shape, itemsize, dst, src, &plan);
  if (status != GM_OK)
    {
      Py_DECREF (copy);
      return gmpy_raise (status);
    }
  held = gmpy_array_hold ((PyObject *) array);
  Py_BEGIN_ALLOW_THREADS
  status = gm_strided_copy (&plan, ptr, array->device, array->data,
                            array->device, NULL);
  Py_END_ALLOW_THREADS
  gmpy_array_unhold (held);
  if (status != GM_OK)
    {
      Py_DECREF (copy);
      return gmpy_raise (status);
    }
  return copy;
}

/* The handle of ARRAY as bytes.  ARRAY's memory is shared where it lies:
   a block of its own (shared_empty), its owner's memory of gpumem's
   pool (adopted now), or a block another library holds of gpumem's pool
   (use_pool); memory outside them is first copied into a shareable
   block, kept for its first consumer.  UNTIL_OPENED keeps the block for
   the first consumer even when the producer lets go first; the NALLOW
   uids ALLOW may open it too.  ARRAY is held from the first check on,
   so that free () in another thread leaves its memory (and its block)
   until the handle is made.  New reference or NULL.  */
static PyObject *
share_array (arraypy_object *array, bool until_opened, const uint32_t *allow,
             size_t nallow)
{
  uint8_t encoded[GM_IPC_MAX_BYTES];
  gm_ipc_handle handle;
  gm_ipc_block *block;
  gm_stream *stream;
  PyObject *copy = NULL, *result = NULL, *held, *held_copy = NULL;
  gm_status status;
  const char *start = NULL;
  bool readonly = array->readonly;
  size_t size;

  held = gmpy_array_hold ((PyObject *) array);
  if (gmpy_array_usable (array) < 0)
    goto done;
  if (array->memory == GMPY_MEMORY_MANAGED)
    {
      /* Refused on both backends alike, though the host backend could.  */
      PyErr_SetString (PyExc_ValueError, "share: a managed array "
                       "(memory='managed') cannot be shared with other "
                       "processes, as CUDA exports no managed memory; share "
                       "a device array (a copy: gpumem.empty_like(a, "
                       "memory='device'), or shared_empty)");
      goto done;
    }
  block = block_of (array);
  if (block == NULL && (block = adopt_owner (array)) == NULL
      && PyErr_Occurred ())
    goto done;
  if (block == NULL && (block = gmpy_ipc_pool_block (array, &start)) == NULL
      && PyErr_Occurred ())
    goto done;
  if (block == NULL)
    {
      copy = shared_copy (array);
      if (copy == NULL)
        goto done;
      array = (arraypy_object *) copy;
      held_copy = gmpy_array_hold (copy);
      block = block_of (array);
      until_opened = true;
    }
  if (gmpy_array_pending_stream (array, &stream) < 0)
    goto done;
  if (start == NULL)
    {
      /* The wrapped array at the bottom of the view chain starts at the
         block's start.  */
      arraypy_object *bottom = array;
      while (bottom->base != NULL && gmpy_array_check (bottom->base))
        bottom = (arraypy_object *) bottom->base;
      start = bottom->data;
    }
  /* The view, element 0's offset counted from the start of the block.  */
  memset (&handle, 0, sizeof handle);
  handle.object = GM_IPC_OBJECT_ARRAY;
  handle.offset = (uint64_t) (array->data - start);
  handle.dtype = (uint8_t) array->dtype;
  handle.readonly = readonly;
  handle.ndim = (uint8_t) array->ndim;
  for (int d = 0; d < array->ndim; d++)
    {
      handle.shape[d] = array->shape[d];
      handle.strides[d] = array->strides[d];
    }
  Py_BEGIN_ALLOW_THREADS
  status = gm_ipc_export (block, stream, until_opened, allow, nallow,
                          &handle, encoded, &size);
  Py_END_ALLOW_THREADS
  if (status != GM_OK)
    {
      gmpy_raise (status);
      goto done;
    }
  result = PyBytes_FromStringAndSize ((const char *) encoded,
                                      (Py_ssize_t) size);
done:
  gmpy_array_unhold (held_copy);
  Py_XDECREF (copy);
  gmpy_array_unhold (held);
  return result;
}

/* Reads share()'s ALLOW (None, or an iterable of uids and user names)
   into ALLOW, *NALLOW of them.  0 or -1 (TypeError, ValueError).  */
static int
allow_arg (PyObject *obj, uint32_t allow[GM_IPC_MAX_ALLOW], size_t *nallow)
{
  PyObject *items, *item;
  Py_ssize_t n;

  *nallow = 0;
  if (obj == NULL || obj == Py_None)
    return 0;
  if (PyUnicode_Check (obj) || PyLong_Check (obj))
    {
      PyErr_SetString (PyExc_TypeError, "share: allow must be a list of "
                       "uids or user names, not one");
      return -1;
    }
  items = PySequence_Fast (obj, "share: allow must be a list of uids or "
                           "user names");
  if (items == NULL)
    return -1;
  n = PySequence_Fast_GET_SIZE (items);
  if (n > GM_IPC_MAX_ALLOW)
    {
      PyErr_Format (PyExc_ValueError, "share: allow names %zd users; at "
                    "most %d", n, GM_IPC_MAX_ALLOW);
      goto fail;
    }
  for (Py_ssize_t i = 0; i < n; i++)
    {
      item = PySequence_Fast_GET_ITEM (items, i);
      if (PyLong_Check (item) && !PyBool_Check (item))
        {
          unsigned long long uid = PyLong_AsUnsignedLongLong (item);
          if (uid == (unsigned long long) -1 && PyErr_Occurred ())
            PyErr_Clear ();
          if (uid >= UINT32_MAX)
            {
              PyErr_Format (PyExc_ValueError, "share: allow: %R is not a "
                            "uid", item);
              goto fail;
            }
          allow[(*nallow)++] = (uint32_t) uid;
        }
      else if (PyUnicode_Check (item))
        {
          const char *name = PyUnicode_AsUTF8 (item);
          struct passwd entry, *found = NULL;
          char buf[1024];
          if (name == NULL)
            goto fail;
          if (getpwnam_r (name, &entry, buf, sizeof buf, &found) != 0
              || found == NULL)
            {
              PyErr_Format (PyExc_ValueError, "share: allow: no user %R on "
                            "this system", item);
              goto fail;
            }
          allow[(*nallow)++] = (uint32_t) found->pw_uid;
        }
      else
        {
          PyErr_Format (PyExc_TypeError, "share: allow takes uids (int) and "
                        "user names (str), not %.100s",
                        GMPY_TYPE_NAME (Py_TYPE (item)));
          goto fail;
        }
    }
  Py_DECREF (items);
  return 0;
fail:
  Py_DECREF (items);
  return -1;
}

/* gpumem.share(array, *, until_opened=False, allow=None).  */
static PyObject *
ipcpy_share (PyObject *module, PyObject *args, PyObject *kwargs)
{
  static char *keywords[] = {"array", "until_opened", "allow", NULL};
  PyObject *array, *allow_obj = NULL;
  uint32_t allow[GM_IPC_MAX_ALLOW];
  size_t nallow;
  int until_opened = 0;
  (void) module;

  if (!PyArg_ParseTupleAndKeywords (args, kwargs, "O|$pO:share", keywords,
                                    &array, &until_opened, &allow_obj)
      || allow_arg (allow_obj, allow, &nallow) < 0)
    return NULL;
  return gmpy_ipc_share (array, until_opened != 0, allow, nallow);
}

PyObject *
gmpy_ipc_share (PyObject *obj, bool until_opened, const uint32_t *allow,
                size_t nallow)
{
  if (PyObject_TypeCheck (obj, gmpy_state_get ()->event_type))
    return gmpy_event_share (obj, until_opened, allow, nallow);
  if (!gmpy_array_check (obj))
    {
      PyObject *wrapped = gmpy_ipc_pool_array (obj), *result;
      if (wrapped == NULL)
        return NULL;
      result = share_array ((arraypy_object *) wrapped, until_opened, allow,
                            nallow);
      Py_DECREF (wrapped);
      return result;
    }
  return share_array ((arraypy_object *) obj, until_opened, allow, nallow);
}

/* Decodes the bytes HANDLE_OBJ into *HANDLE.  0, or -1 with TypeError
   (not bytes-like) or gpumem.Error naming FNAME and the rule broken
   (never the handle's bytes).  */
static int
decode_arg (PyObject *handle_obj, const char *fname, gm_ipc_handle *handle)
{
  Py_buffer view;
  const char *reason;

  if (PyObject_GetBuffer (handle_obj, &view, PyBUF_SIMPLE) < 0)
    return -1;
  reason = gm_ipc_decode (view.buf, (size_t) view.len, handle);
  PyBuffer_Release (&view);
  if (reason != NULL)
    {
      PyErr_Format (gmpy_state_get ()->error, "%s: the handle is not "
                    "valid: %s", fname, reason);
      return -1;
    }
  return 0;
}

/* gpumem.unshare(handle).  */
static PyObject *
ipcpy_unshare (PyObject *module, PyObject *handle_obj)
{
  gm_ipc_handle handle;
  gm_status status;
  (void) module;

  if (decode_arg (handle_obj, "unshare", &handle) < 0)
    return NULL;
  status = gm_ipc_unshare (&handle);
  if (status != GM_OK)
    return gmpy_raise (status);
  Py_RETURN_NONE;
}

/* gpumem.open_shared(handle).  */
static PyObject *
ipcpy_open_shared (PyObject *module, PyObject *handle_obj)
{
  (void) module;
  return gmpy_ipc_open (handle_obj);
}

PyObject *
gmpy_ipc_open (PyObject *handle_obj)
{
  gmpy_state *state = gmpy_state_get ();
  Py_ssize_t shape[GM_MAX_NDIM], strides[GM_MAX_NDIM];
  gm_ipc_handle handle;
  gm_ipc_import *import;
  PyObject *capsule, *array;
  void *base;
  int device;

  if (decode_arg (handle_obj, "open_shared", &handle) < 0)
    return NULL;
  if (handle.object == GM_IPC_OBJECT_EVENT)
    return gmpy_event_open (&handle);
  for (int d = 0; d < handle.ndim; d++)
    {
      shape[d] = (Py_ssize_t) handle.shape[d];
      strides[d] = (Py_ssize_t) handle.strides[d];
    }
  if (gmpy_shape_fits (handle.ndim, shape, -1,
                       gm_dtypes[handle.dtype].itemsize, "a shared array")
      < 0)
    {
      PyErr_Clear ();
      return PyErr_Format (state->error, "open_shared: the handle is not "
                           "valid: its shape is too large for an array");
    }
  if (gmpy_ipc_open_import (&handle, &import, &base, &device) < 0)
    return NULL;
  capsule = gmpy_ipc_import_capsule (import);
  if (capsule == NULL)
    return NULL;
  array = gmpy_array_wrap (handle.ndim, shape, (gm_dtype) handle.dtype,
                           device, base, handle.readonly != 0, capsule);
  Py_DECREF (capsule);
  if (array != NULL)
    gmpy_array_set_strides ((arraypy_object *) array, strides);
  return array;
}

/* gpumem.sharing_stats().  */
static PyObject *
ipcpy_sharing_stats (PyObject *module, PyObject *unused)
{
  size_t blocks, leases, imports;
  (void) module;
  (void) unused;

  gm_ipc_counts (&blocks, &leases, &imports);
  return Py_BuildValue ("{s:n,s:n,s:n,s:n}", "blocks", (Py_ssize_t) blocks,
                        "leases", (Py_ssize_t) leases, "imports",
                        (Py_ssize_t) imports, "imported_pools",
                        (Py_ssize_t) gm_ipc_imported_pools ());
}

/* gpumem._reduce_shared(obj): multiprocessing's reducer of DeviceArray
   and Event.  */
static PyObject *
ipcpy_reduce_shared (PyObject *module, PyObject *array)
{
  PyObject *handle, *open_fn, *result;

  handle = gmpy_ipc_share (array, true, NULL, 0);
  if (handle == NULL)
    return NULL;
  open_fn = PyObject_GetAttrString (module, "open_shared");
  if (open_fn == NULL)
    {
      Py_DECREF (handle);
      return NULL;
    }
  result = Py_BuildValue ("(N(N))", open_fn, handle);
  return result;
}

static PyMethodDef ipcpy_methods[] = {
  {"shared_empty", (PyCFunction) (void (*) (void)) ipcpy_shared_empty,
   METH_VARARGS | METH_KEYWORDS,
   "shared_empty(shape, dtype='float32', device=None)\n--\n\n"
   "A new uninitialized DeviceArray in memory that other processes on\n"
   "this node can open (share, open_shared; docs/sharing.md)."},
  {"share", (PyCFunction) (void (*) (void)) ipcpy_share,
   METH_VARARGS | METH_KEYWORDS,
   "share(obj, *, until_opened=False, allow=None)\n--\n\n"
   "A handle (bytes) that open_shared opens, in a process on this node,\n"
   "onto OBJ: a DeviceArray's memory (its shape, dtype, strides, device\n"
   "and read-only flag), or an Event made with interprocess=True.\n"
   "Only processes of this user, root, the users of GPUMEM_SHARE_ALLOW\n"
   "and those ALLOW names (uids or user names) may open it, and only as\n"
   "it was made: a handle with any byte changed is refused.\n"
   "Any gpumem array, views included, shares its own memory, and so\n"
   "does another library's array (a tensor, a CuPy array) allocated\n"
   "from gpumem's pool (use_pool), found by its pointer; other\n"
   "libraries' arrays raise gpumem.Error.  A DeviceArray over foreign\n"
   "memory (or CUDA's default pool, GPUMEM_DEVICE_POOL=default) is\n"
   "first copied once into shareable memory, kept for the handle's\n"
   "first consumer.  until_opened=True keeps the block for one more\n"
   "consumer (one for each such handle) even when this process lets go\n"
   "of it first; unshare(handle) lets go of it sooner."},
  {"unshare", ipcpy_unshare, METH_O,
   "unshare(handle, /)\n--\n\n"
   "Revoke a handle share() made in this process: it opens nowhere from\n"
   "now on (arrays opened from it stay), and an until_opened share, or\n"
   "the copy share() made of an array outside shareable memory, no\n"
   "longer keeps its memory.  The same view shared twice the same way\n"
   "gives one handle, revoked once.  gpumem.Error for a handle this\n"
   "process did not make or revoked already."},
  {"open_shared", ipcpy_open_shared, METH_O,
   "open_shared(handle, /)\n--\n\n"
   "The DeviceArray a share() handle describes, on the same memory, or\n"
   "the Event, the same event.\n"
   "gpumem.Error for a handle of another node or device, one closed,\n"
   "revoked, altered or forged, one whose producer has exited, does not\n"
   "admit this user or does not answer within GPUMEM_SHARE_TIMEOUT\n"
   "seconds; Ctrl-C ends the wait (KeyboardInterrupt)."},
  {"sharing_stats", ipcpy_sharing_stats, METH_NOARGS,
   "sharing_stats()\n--\n\n"
   "This process's shared blocks (made here, not yet released), the\n"
   "leases other processes hold on them, the handles it has open, and\n"
   "the pools of other processes it keeps imported (CUDA backend)."},
  {"_reduce_shared", ipcpy_reduce_shared, METH_O,
   "multiprocessing's reducer of DeviceArray: open_shared and a handle."},
  {NULL, NULL, 0, NULL}
};

/* Registers the reducer with multiprocessing's pickler, so that arrays
   in queues, pipes and pool arguments travel as handles.  0 or -1.  */
static int
register_reducer (PyObject *module)
{
  gmpy_state *state = gmpy_state_get ();
  PyObject *reduction, *pickler, *reducer, *result;

  reduction = PyImport_ImportModule ("multiprocessing.reduction");
  if (reduction == NULL)
    return -1;
  pickler = PyObject_GetAttrString (reduction, "ForkingPickler");
  Py_DECREF (reduction);
  if (pickler == NULL)
    return -1;
  reducer = PyObject_GetAttrString (module, "_reduce_shared");
  if (reducer == NULL)
    {
      Py_DECREF (pickler);
      return -1;
    }
  result = PyObject_CallMethod (pickler, "register", "OO",
                                (PyObject *) state->array_type, reducer);
  if (result != NULL)
    {
      Py_DECREF (result);
      result = PyObject_CallMethod (pickler, "register", "OO",
                                    (PyObject *) state->event_type, reducer);
    }
  Py_DECREF (pickler);
  Py_DECREF (reducer);
  Py_XDECREF (result);
  return result != NULL ? 0 : -1;
}

int
gmpy_ipc_init (PyObject *module)
{
  if (PyModule_AddFunctions (module, ipcpy_methods) < 0)
    return -1;
  return register_reducer (module);
}
