/* py-ipc.c -- sharing arrays with other processes on the node, in
   Python: gpumem.shared_empty, share, open_shared, sharing_stats, and
   the reducer that makes multiprocessing pass a DeviceArray (or a
   shareable Event, py-ipc-event.c) as a handle instead of its bytes
   (docs/sharing.md).

   A shared array wraps its memory as foreign memory: its base is a
   capsule (py-ipc-capsule.c) that owns the producer's block (gm_ipc_drop when it goes) or
   the consumer's import (gm_ipc_close), so free () and garbage
   collection let go of them the way they let go of any foreign
   memory.  */

#include "gm-python.h"

#include <string.h>

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
      owner->alloc = NULL;
      owner->alloc_bytes = 0;
      owner->released = true;
      return NULL;
    }
  owner->alloc = NULL;
  owner->alloc_bytes = 0;
  owner->base = capsule;
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

/* The handle (bytes) of ARRAY, whose memory lies in BLOCK, which starts
   at START, with READONLY and UNTIL_OPENED as share() has them.  New
   reference or NULL.  */
static PyObject *
share_block (arraypy_object *array, gm_ipc_block *block, const char *start,
             bool readonly, bool until_opened)
{
  uint8_t encoded[GM_IPC_MAX_BYTES];
  gm_ipc_handle handle;
  gm_stream *stream;
  gm_status status;
  size_t size;

  if (gmpy_array_pending_stream (array, &stream) < 0)
    return NULL;
  Py_BEGIN_ALLOW_THREADS
  status = gm_ipc_export (block, stream, until_opened, &handle);
  Py_END_ALLOW_THREADS
  if (status != GM_OK)
    return gmpy_raise (status);
  handle.offset = (uint64_t) (array->data - start);
  handle.dtype = (uint8_t) array->dtype;
  handle.readonly = readonly;
  handle.ndim = (uint8_t) array->ndim;
  for (int d = 0; d < array->ndim; d++)
    {
      handle.shape[d] = array->shape[d];
      handle.strides[d] = array->strides[d];
    }
  size = gm_ipc_encode (&handle, encoded);
  return PyBytes_FromStringAndSize ((const char *) encoded,
                                    (Py_ssize_t) size);
}

/* The handle of ARRAY as bytes; a copy in shareable memory is made when
   ARRAY lies elsewhere, and kept for its first consumer.  UNTIL_OPENED
   keeps the block for the first consumer even when the producer lets go
   first.  New reference or NULL.  */
static PyObject *
share_array (arraypy_object *array, bool until_opened)
{
  gm_ipc_block *block;
  PyObject *copy = NULL, *result;
  const char *start = NULL;
  bool readonly = array->readonly;

  if (gmpy_array_usable (array) < 0)
    return NULL;
  block = block_of (array);
  if (block == NULL)
    {
      block = adopt_owner (array);
      if (block == NULL && PyErr_Occurred ())
        return NULL;
    }
  if (block == NULL)
    {
      block = gmpy_ipc_pool_block (array, &start);
      if (block == NULL && PyErr_Occurred ())
        return NULL;
    }
  if (block == NULL)
    {
      copy = shared_copy (array);
      if (copy == NULL)
        return NULL;
      array = (arraypy_object *) copy;
      block = block_of (array);
      until_opened = true;
    }
  if (start == NULL)
    {
      /* The wrapped array at the bottom of the view chain starts at the
         block's start.  */
      arraypy_object *bottom = array;
      while (bottom->base != NULL && gmpy_array_check (bottom->base))
        bottom = (arraypy_object *) bottom->base;
      start = bottom->data;
    }
  result = share_block (array, block, start, readonly, until_opened);
  Py_XDECREF (copy);
  return result;
}

/* gpumem.share(array, *, until_opened=False).  */
static PyObject *
ipcpy_share (PyObject *module, PyObject *args, PyObject *kwargs)
{
  static char *keywords[] = {"array", "until_opened", NULL};
  PyObject *array;
  int until_opened = 0;
  (void) module;

  if (!PyArg_ParseTupleAndKeywords (args, kwargs, "O|$p:share", keywords,
                                    &array, &until_opened))
    return NULL;
  return gmpy_ipc_share (array, until_opened != 0);
}

PyObject *
gmpy_ipc_share (PyObject *obj, bool until_opened)
{
  if (PyObject_TypeCheck (obj, gmpy_state_get ()->event_type))
    return gmpy_event_share (obj, until_opened);
  if (!gmpy_array_check (obj))
    {
      PyObject *wrapped = gmpy_ipc_pool_array (obj), *result;
      if (wrapped == NULL)
        return NULL;
      result = share_array ((arraypy_object *) wrapped, until_opened);
      Py_DECREF (wrapped);
      return result;
    }
  return share_array ((arraypy_object *) obj, until_opened);
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
  Py_buffer view;
  const char *reason;
  PyObject *capsule, *array;
  gm_status status;
  void *base;
  int device;

  if (PyObject_GetBuffer (handle_obj, &view, PyBUF_SIMPLE) < 0)
    return NULL;
  reason = gm_ipc_decode (view.buf, (size_t) view.len, &handle);
  PyBuffer_Release (&view);
  if (reason != NULL)
    {
      PyErr_Format (state->error, "open_shared: the handle is not valid: "
                    "%s", reason);
      return NULL;
    }
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
    return NULL;
  Py_BEGIN_ALLOW_THREADS
  status = gm_ipc_open (&handle, &import, &base, &device);
  Py_END_ALLOW_THREADS
  if (status != GM_OK)
    return gmpy_raise (status);
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

  handle = gmpy_ipc_share (array, true);
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
   "share(obj, *, until_opened=False)\n--\n\n"
   "A handle (bytes) that open_shared opens, in any process on this node,\n"
   "onto OBJ: a DeviceArray's memory (its shape, dtype, strides, device\n"
   "and read-only flag), or an Event made with interprocess=True.\n"
   "Any gpumem array, views included, shares its own memory, and so\n"
   "does another library's array (a tensor, a CuPy array) allocated\n"
   "from gpumem's pool (use_pool), found by its pointer; other\n"
   "libraries' arrays raise gpumem.Error.  A DeviceArray over foreign\n"
   "memory (or CUDA's default pool, GPUMEM_DEVICE_POOL=default) is\n"
   "first copied once into shareable memory, kept for the handle's\n"
   "first consumer.  until_opened=True keeps the block for one more\n"
   "consumer (one for each such handle) even when this process lets go\n"
   "of it first."},
  {"open_shared", ipcpy_open_shared, METH_O,
   "open_shared(handle, /)\n--\n\n"
   "The DeviceArray a share() handle describes, on the same memory, or\n"
   "the Event, the same event.\n"
   "gpumem.Error for a handle of another node or device, one closed or\n"
   "forged, or whose producer has exited."},
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
