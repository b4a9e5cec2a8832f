/* py-frameworks.c -- gpumem.use_pool and gpumem.torch_mem_pool: PyTorch,
   CuPy and Numba allocating from gpumem's pool (docs/frameworks.md).

   The glue each library needs (an allocator function, a pluggable
   allocator, a memory manager class) is Python, in src/python/frameworks.py,
   compiled from the text built into gpumem at first use and kept as
   the module gpumem._frameworks.  This file gives it what only C can:
   gpumem._PoolBlock, a block of the pool owned by a Python object, and
   the binding of the shim library PyTorch opens (torch-shim.c).  */

#include "gm-python.h"

#include <limits.h>
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "frameworks-py.h"
#include "pool-hooks.h"

/* gpumem._PoolBlock: NBYTES of device memory from the pool, booked to
   OWNER, ordered on the foreign stream STREAM; freed (in that stream's
   order) by free () or when the object goes.  */
typedef struct poolblockpy_object
{
  PyObject_HEAD
  void *ptr;
  size_t nbytes;
  int device;
  gm_mem_owner owner;
  void *stream;                 /* a cudaStream_t, or NULL: default */
  bool live;
} poolblockpy_object;

static PyTypeObject *poolblock_type;
static PyObject *frameworks_module;   /* gpumem._frameworks, once made */
static void *torch_shim;              /* dlopen's handle, kept */
static char torch_shim_path[4096];

/* Gives BLOCK's memory back, once.  0, or -1 with an exception.  */
static int
poolblock_release (poolblockpy_object *block)
{
  gm_status status;

  if (!block->live)
    return 0;
  block->live = false;
  status = gm_pool_hook_free (block->owner, block->device, block->ptr,
                              block->nbytes, block->stream);
  block->ptr = NULL;
  return status == GM_OK ? 0 : gmpy_raise_int (status);
}

static PyObject *
poolblockpy_free (PyObject *self, PyObject *unused)
{
  if (poolblock_release ((poolblockpy_object *) self) < 0)
    return NULL;
  Py_RETURN_NONE;
}

static void
poolblockpy_dealloc (PyObject *self)
{
  PyTypeObject *type = Py_TYPE (self);

  if (poolblock_release ((poolblockpy_object *) self) < 0)
    PyErr_WriteUnraisable (self);
  GMPY_TYPE_FREE (type, self);
  Py_DECREF (type);
}

static PyObject *
poolblockpy_get_ptr (PyObject *self, void *closure)
{
  return PyLong_FromVoidPtr (((poolblockpy_object *) self)->ptr);
}

static PyObject *
poolblockpy_get_size (PyObject *self, void *closure)
{
  return PyLong_FromSize_t (((poolblockpy_object *) self)->nbytes);
}

static PyObject *
poolblockpy_get_device (PyObject *self, void *closure)
{
  return PyLong_FromLong (((poolblockpy_object *) self)->device);
}

static PyObject *
poolblockpy_get_owner (PyObject *self, void *closure)
{
  return PyUnicode_FromString (
    gm_mem_owner_names[((poolblockpy_object *) self)->owner]);
}

static PyObject *
poolblockpy_repr (PyObject *self)
{
  poolblockpy_object *block = (poolblockpy_object *) self;

  return PyUnicode_FromFormat ("<gpumem._PoolBlock %zu bytes at %p on "
                               "device %d for %s%s>", block->nbytes,
                               block->ptr, block->device,
                               gm_mem_owner_names[block->owner],
                               block->live ? "" : ", freed");
}

static PyGetSetDef poolblockpy_getset[] = {
  {"ptr", poolblockpy_get_ptr, NULL, "The block's device address.", NULL},
  {"size", poolblockpy_get_size, NULL, "Its size in bytes.", NULL},
  {"device", poolblockpy_get_device, NULL, "Its device.", NULL},
  {"owner", poolblockpy_get_owner, NULL,
   "The library it is booked to in memory_stats()['owners'].", NULL},
  {NULL, NULL, NULL, NULL, NULL}
};

static PyMethodDef poolblockpy_methods[] = {
  {"free", poolblockpy_free, METH_NOARGS,
   "free($self)\n--\n\nGive the block back to the pool now, in the order of "
   "the stream it was\nallocated on (work queued there may still use it); "
   "later calls do nothing."},
  {NULL, NULL, 0, NULL}
};

static PyType_Slot poolblockpy_slots[] = {
  {Py_tp_dealloc, poolblockpy_dealloc},
  {Py_tp_repr, poolblockpy_repr},
  {Py_tp_getset, poolblockpy_getset},
  {Py_tp_methods, poolblockpy_methods},
  {Py_tp_doc, "A block of gpumem's pool that another library allocated "
              "(gpumem.use_pool);\nfreed when the object goes."},
  {0, NULL}
};

static PyType_Spec poolblockpy_spec = {
  .name = "gpumem._PoolBlock",
  .basicsize = sizeof (poolblockpy_object),
  .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE
           | Py_TPFLAGS_DISALLOW_INSTANTIATION,
  .slots = poolblockpy_slots,
};

PyObject *
gmpy_pool_block_new (size_t nbytes, gm_mem_owner owner, int device,
                     void *stream, void **ptr)
{
  poolblockpy_object *block;
  gm_status status;

  block = PyObject_New (poolblockpy_object, poolblock_type);
  if (block == NULL)
    return NULL;
  block->live = false;
  block->ptr = NULL;
  block->nbytes = nbytes;
  block->device = device;
  block->owner = owner;
  block->stream = stream;
  status = gm_pool_hook_alloc (owner, device, nbytes, stream, &block->ptr);
  if (status != GM_OK)
    {
      Py_DECREF (block);
      return gmpy_raise (status);
    }
  block->live = true;
  *ptr = block->ptr;
  return (PyObject *) block;
}

/* gpumem._pool_block (NBYTES, OWNER, DEVICE, STREAM): OWNER one of
   memory_stats ()'s owner names, STREAM a cudaStream_t as an int or
   None (the default stream).  */
static PyObject *
gmpy_pool_block (PyObject *module, PyObject *args)
{
  PyObject *device_obj, *stream_obj;
  const char *owner_name;
  Py_ssize_t nbytes;
  void *stream = NULL, *ptr;
  int owner = -1, device;

  if (!PyArg_ParseTuple (args, "nsOO:_pool_block", &nbytes, &owner_name,
                         &device_obj, &stream_obj)
      || gmpy_device_arg (device_obj, &device) < 0)
    return NULL;
  if (nbytes < 0)
    {
      PyErr_SetString (PyExc_ValueError, "_pool_block: nbytes must be >= 0");
      return NULL;
    }
  for (int i = 0; i < GM_MEM_NOWNERS; i++)
    if (strcmp (owner_name, gm_mem_owner_names[i]) == 0)
      owner = i;
  if (owner < 0)
    {
      PyErr_Format (PyExc_ValueError, "_pool_block: unknown owner '%s'",
                    owner_name);
      return NULL;
    }
  if (stream_obj != Py_None)
    {
      stream = PyLong_AsVoidPtr (stream_obj);
      if (stream == NULL && PyErr_Occurred ())
        return NULL;
    }
  return gmpy_pool_block_new ((size_t) nbytes, (gm_mem_owner) owner, device,
                              stream, &ptr);
}

/* Opens the shim library PyTorch will open by the same path and binds it
   to gpumem's pool; the path in TORCH_SHIM_PATH.  The path is
   GPUMEM_TORCH_SHIM (read here, its one reader), else the wheel's
   gpumem-lib/libgpumem-torch.so beside the module, else the build
   tree's src/.libs/libgpumem-torch.so beside a program or module run
   from the build tree (src/gpumem, src/.libs/gpumem*.so), else the
   installed $(pkglibdir)/libgpumem-torch.so.  0, or -1 with gpumem.Error.  */
static int
torch_shim_bind (void)
{
  typedef void (*bind_fn) (void *(*) (size_t, int, void *),
                           void (*) (void *, size_t, int, void *),
                           const char *(*) (void));
  const char *path = getenv ("GPUMEM_TORCH_SHIM");
  char beside[sizeof torch_shim_path], resolved[PATH_MAX];
  bind_fn bind;

  if (torch_shim != NULL)
    return 0;
  if ((path == NULL || *path == '\0')
      && (gm_env_beside_self ("gpumem-lib/libgpumem-torch.so", beside,
                              sizeof beside)
          || gm_env_beside_self (".libs/libgpumem-torch.so", beside,
                                 sizeof beside)
          || gm_env_beside_self ("libgpumem-torch.so", beside,
                                 sizeof beside)))
    {
      /* Absolute, so that a later chdir () does not lose it.  */
      if (realpath (beside, resolved) != NULL)
        path = resolved;
      else
        path = beside;
    }
  if (path == NULL || *path == '\0')
    path = GM_PKGLIBDIR "/libgpumem-torch.so";
  if (strlen (path) >= sizeof torch_shim_path)
    {
      PyErr_SetString (gmpy_state_get ()->error, "GPUMEM_TORCH_SHIM is too "
                       "long a path");
      return -1;
    }
  torch_shim = dlopen (path, RTLD_NOW | RTLD_LOCAL);
  if (torch_shim == NULL)
    {
      PyErr_Format (gmpy_state_get ()->error, "gpumem cannot open its "
                    "PyTorch allocator library %s (%s); set "
                    "GPUMEM_TORCH_SHIM to its path", path, dlerror ());
      return -1;
    }
  *(void **) &bind = dlsym (torch_shim, "gpumem_torch_bind");
  if (bind == NULL)
    {
      PyErr_Format (gmpy_state_get ()->error, "%s is not gpumem's PyTorch "
                    "allocator library: it has no gpumem_torch_bind", path);
      dlclose (torch_shim);
      torch_shim = NULL;
      return -1;
    }
  bind (gm_pool_torch_alloc, gm_pool_torch_free, gm_pool_torch_error);
  strcpy (torch_shim_path, path);
  return 0;
}

/* gpumem._torch_shim (): the bound shim's path, for
   torch.cuda.memory.CUDAPluggableAllocator.  */
static PyObject *
gmpy_torch_shim (PyObject *module, PyObject *unused)
{
  if (torch_shim_bind () < 0)
    return NULL;
  return PyUnicode_DecodeFSDefault (torch_shim_path);
}

/* gpumem._frameworks, compiled from frameworks.py's text at first use:
   a new reference, or NULL.  */
static PyObject *
frameworks_get (void)
{
  PyObject *code, *module;

  if (frameworks_module != NULL)
    return Py_NewRef (frameworks_module);
  code = Py_CompileString (gm_frameworks_py, "<gpumem>/frameworks.py",
                           Py_file_input);
  if (code == NULL)
    return NULL;
  module = PyImport_ExecCodeModule ("gpumem._frameworks", code);
  Py_DECREF (code);
  if (module == NULL)
    return NULL;
  frameworks_module = Py_NewRef (module);
  return module;
}

/* Calls gpumem._frameworks.NAME (*ARGS).  */
static PyObject *
frameworks_call (const char *name, PyObject *args)
{
  PyObject *module = frameworks_get (), *fn, *result;

  if (module == NULL)
    return NULL;
  fn = PyObject_GetAttrString (module, name);
  Py_DECREF (module);
  if (fn == NULL)
    return NULL;
  result = PyObject_CallObject (fn, args);
  Py_DECREF (fn);
  return result;
}

int
gmpy_frameworks_release_caches (void)
{
  PyObject *result;

  if (frameworks_module == NULL)
    return 0;
  result = frameworks_call ("release_caches", NULL);
  Py_XDECREF (result);
  return result != NULL ? 0 : -1;
}

static PyObject *
gmpy_use_pool (PyObject *module, PyObject *args)
{
  return frameworks_call ("use_pool", args);
}

static PyObject *
gmpy_torch_mem_pool (PyObject *module, PyObject *unused)
{
  return frameworks_call ("torch_mem_pool", NULL);
}

static PyObject *
gmpy_pool_users (PyObject *module, PyObject *unused)
{
  return frameworks_call ("hooked", NULL);
}

static PyMethodDef frameworks_functions[] = {
  {"use_pool", gmpy_use_pool, METH_VARARGS,
   "use_pool(*libraries)\n--\n\n"
   "Make LIBRARIES ('torch', 'cupy', 'numba') allocate device memory from\n"
   "gpumem's pool, under gpumem's limit and in memory_stats()['owners']:\n"
   "PyTorch through a CUDAPluggableAllocator (before its first CUDA\n"
   "allocation), CuPy through cupy.cuda.set_allocator (and its page-locked\n"
   "memory through set_pinned_memory_allocator), Numba through an External\n"
   "Memory Management plugin (before its first use of the GPU).  Raises\n"
   "gpumem.Error on the host backend, for a library that cannot be\n"
   "imported, or when it is too late.  docs/frameworks.md."},
  {"torch_mem_pool", gmpy_torch_mem_pool, METH_NOARGS,
   "torch_mem_pool()\n--\n\n"
   "A torch.cuda.MemPool whose blocks come from gpumem's pool:\n"
   "`with torch.cuda.use_mem_pool(gpumem.torch_mem_pool()):`, at any time."},
  {"pool_users", gmpy_pool_users, METH_NOARGS,
   "pool_users()\n--\n\nThe libraries use_pool switched over, sorted."},
  {"_pool_block", gmpy_pool_block, METH_VARARGS,
   "_pool_block(nbytes, owner, device, stream, /)\n--\n\n"
   "A block of the pool for another library (gpumem._frameworks)."},
  {"_torch_shim", gmpy_torch_shim, METH_NOARGS,
   "_torch_shim()\n--\n\n"
   "The path of the PyTorch allocator library, bound to gpumem's pool."},
  {NULL, NULL, 0, NULL}
};

int
gmpy_frameworks_init (PyObject *module)
{
  poolblock_type = (PyTypeObject *) PyType_FromModuleAndSpec (
    module, &poolblockpy_spec, NULL);
  if (poolblock_type == NULL
      || PyModule_AddType (module, poolblock_type) < 0)
    return -1;
  return PyModule_AddFunctions (module, frameworks_functions);
}
