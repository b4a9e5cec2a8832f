/* py-cupy-alloc.c -- CuPy's allocator function over gpumem's pool,
   written in C so that no Python code runs per allocation
   (gpumem._frameworks hands it to cupy.cuda.set_allocator;
   docs/frameworks.md).

   A call malloc (nbytes) reads CuPy's current device (its
   runtime.getDevice) and current stream, takes a gpumem._PoolBlock
   ordered on that stream and returns CuPy's MemoryPointer over an
   UnownedMemory that holds the block: the block goes back to the pool,
   in its stream's order, when CuPy lets go of the memory.  The current
   stream is read through the C function CuPy's own Cython modules call
   (cupy.cuda.stream's get_current_stream_ptr, from the module's
   __pyx_capi__) where CuPy exports it with the expected signature, else
   through cupy.cuda.get_current_stream ().  A failure raises gpumem's
   exception, which CuPy passes on to its caller.

   CuPy's CFunctionAllocator is not used: CuPy 14.2 does not raise the
   exception of its C malloc that fails (bench/NOTES.md, "CuPy's
   allocator in C"), so a failure could reach a script as an array at
   address 0 or as an unrelated error.  */

#include "gm-python.h"

#include <stdint.h>
#include <string.h>

/* The signature Cython writes as the name of the capsule of
   `cdef intptr_t get_current_stream_ptr ()`.  */
#define CUPY_STREAM_SIGNATURE "intptr_t (void)"

typedef intptr_t (*cupy_stream_fn) (void);

/* The items of the state tuple a malloc function is bound to.  */
enum
{
  STATE_GET_DEVICE,             /* cupy.cuda.runtime.getDevice */
  STATE_CURRENT_STREAM,         /* cupy.cuda.get_current_stream */
  STATE_STREAM_FN,              /* get_current_stream_ptr's address (an
                                   int, taken from its capsule once), or
                                   None */
  STATE_UNOWNED,                /* cupy.cuda.memory.UnownedMemory */
  STATE_POINTER,                /* cupy.cuda.memory.MemoryPointer */
  STATE_ZERO,                   /* the int 0 */
  STATE_ITEMS
};

/* In *STREAM the cudaStream_t of CuPy's current stream (NULL: the
   default stream), read as STATE says.  0, or -1 with an exception.  */
static int
current_stream (PyObject *state, void **stream)
{
  PyObject *fn = PyTuple_GET_ITEM (state, STATE_STREAM_FN);
  PyObject *got, *ptr;

  if (fn != Py_None)
    {
      cupy_stream_fn read = (cupy_stream_fn) PyLong_AsVoidPtr (fn);
      intptr_t handle = read ();

      if (handle == -1 && PyErr_Occurred ())
        return -1;
      *stream = (void *) handle;
      return 0;
    }
  got = PyObject_CallNoArgs (PyTuple_GET_ITEM (state, STATE_CURRENT_STREAM));
  if (got == NULL)
    return -1;
  ptr = PyObject_GetAttrString (got, "ptr");
  Py_DECREF (got);
  if (ptr == NULL)
    return -1;
  *stream = PyLong_AsVoidPtr (ptr);
  Py_DECREF (ptr);
  return *stream == NULL && PyErr_Occurred () ? -1 : 0;
}

/* The allocator function: malloc (nbytes) -> MemoryPointer, bound to
   its STATE tuple.  */
static PyObject *
cupy_malloc (PyObject *state, PyObject *nbytes_obj)
{
  PyObject *device_obj, *block, *ptr_obj, *memory, *result;
  Py_ssize_t nbytes = PyLong_AsSsize_t (nbytes_obj);
  void *stream, *ptr;
  long device;

  if (nbytes < 0)
    {
      if (!PyErr_Occurred ())
        PyErr_Format (PyExc_ValueError, "gpumem's CuPy allocator: nbytes "
                      "must be >= 0, not %zd", nbytes);
      return NULL;
    }
  device_obj = PyObject_CallNoArgs (PyTuple_GET_ITEM (state,
                                                      STATE_GET_DEVICE));
  if (device_obj == NULL)
    return NULL;
  device = PyLong_AsLong (device_obj);
  if (!(device == -1 && PyErr_Occurred ()) && device != (int) device)
    PyErr_Format (PyExc_ValueError, "gpumem's CuPy allocator: CuPy's "
                  "device %ld is no device index", device);
  if (PyErr_Occurred () || current_stream (state, &stream) < 0)
    {
      Py_DECREF (device_obj);
      return NULL;
    }
  block = gmpy_pool_block_new ((size_t) nbytes, GM_MEM_OWNER_CUPY,
                               (int) device, stream, &ptr);
  ptr_obj = block != NULL ? PyLong_FromVoidPtr (ptr) : NULL;
  if (ptr_obj == NULL)
    {
      Py_XDECREF (block);
      Py_DECREF (device_obj);
      return NULL;
    }
#ifdef GMPY_VECTORCALL
  {
    PyObject *args[] = { ptr_obj, nbytes_obj, block, device_obj };
    memory = PyObject_Vectorcall (PyTuple_GET_ITEM (state, STATE_UNOWNED),
                                  args, 4, NULL);
  }
#else
  memory = PyObject_CallFunctionObjArgs (PyTuple_GET_ITEM (state,
                                                           STATE_UNOWNED),
                                         ptr_obj, nbytes_obj, block,
                                         device_obj, NULL);
#endif
  Py_DECREF (ptr_obj);
  Py_DECREF (block);
  Py_DECREF (device_obj);
  if (memory == NULL)
    return NULL;
#ifdef GMPY_VECTORCALL
  {
    PyObject *args[] = { memory, PyTuple_GET_ITEM (state, STATE_ZERO) };
    result = PyObject_Vectorcall (PyTuple_GET_ITEM (state, STATE_POINTER),
                                  args, 2, NULL);
  }
#else
  result = PyObject_CallFunctionObjArgs (PyTuple_GET_ITEM (state,
                                                           STATE_POINTER),
                                         memory,
                                         PyTuple_GET_ITEM (state, STATE_ZERO),
                                         NULL);
#endif
  Py_DECREF (memory);
  return result;
}

static PyMethodDef cupy_malloc_def = {
  "malloc", cupy_malloc, METH_O,
  "malloc(nbytes, /)\n--\n\n"
  "NBYTES of gpumem's pool for CuPy on its current device and stream, as\n"
  "a cupy.cuda.MemoryPointer."
};

/* gpumem._cupy_allocator (GET_DEVICE, CURRENT_STREAM, STREAM_CAPI,
   UNOWNED, POINTER): CuPy's allocator function over these parts of
   CuPy's (runtime.getDevice, cuda.get_current_stream, the stream
   module's __pyx_capi__ or None, memory.UnownedMemory and
   memory.MemoryPointer).  A capsule of get_current_stream_ptr of
   another signature is not used.  */
static PyObject *
gmpy_cupy_allocator (PyObject *module, PyObject *const *args,
                     Py_ssize_t nargs)
{
  PyObject *fn = NULL, *capsule, *zero, *state, *made;

  (void) module;
  if (nargs != 5)
    {
      PyErr_Format (PyExc_TypeError, "_cupy_allocator takes 5 arguments, "
                    "not %zd", nargs);
      return NULL;
    }
  if (gm_backend_current == NULL
      || gm_backend_current->device_memory != GM_MEMORY_CUDA)
    {
      PyErr_SetString (gmpy_state_get ()->error, "_cupy_allocator: the "
                       "backend has no CUDA memory");
      return NULL;
    }
  for (int i = 0; i < 5; i++)
    if (i != 2 && !PyCallable_Check (args[i]))
      {
        PyErr_Format (PyExc_TypeError, "_cupy_allocator: argument %d must "
                      "be callable, not %.100s", i + 1,
                      GMPY_TYPE_NAME (Py_TYPE (args[i])));
        return NULL;
      }
  capsule = PyDict_Check (args[2])
              ? PyDict_GetItemString (args[2], "get_current_stream_ptr")
              : NULL;
  fn = capsule != NULL && PyCapsule_IsValid (capsule, CUPY_STREAM_SIGNATURE)
         ? PyLong_FromVoidPtr (PyCapsule_GetPointer (capsule,
                                                     CUPY_STREAM_SIGNATURE))
         : Py_NewRef (Py_None);
  zero = PyLong_FromLong (0);
  if (fn == NULL || zero == NULL)
    {
      Py_XDECREF (fn);
      Py_XDECREF (zero);
      return NULL;
    }
  state = PyTuple_Pack (STATE_ITEMS, args[0], args[1], fn, args[3], args[4],
                        zero);
  Py_DECREF (fn);
  Py_DECREF (zero);
  if (state == NULL)
    return NULL;
  made = PyCFunction_New (&cupy_malloc_def, state);
  Py_DECREF (state);
  return made;
}

/* gpumem._cupy_allocator_reads_capsule (MALLOC): whether MALLOC reads
   CuPy's current stream through the C function.  */
static PyObject *
gmpy_cupy_allocator_reads_capsule (PyObject *module, PyObject *malloc_fn)
{
  PyObject *state;

  (void) module;
  if (!PyCFunction_Check (malloc_fn)
      || PyCFunction_GET_FUNCTION (malloc_fn) != (PyCFunction) cupy_malloc)
    {
      PyErr_SetString (PyExc_TypeError, "_cupy_allocator_reads_capsule: "
                       "needs an allocator of _cupy_allocator");
      return NULL;
    }
  state = PyCFunction_GET_SELF (malloc_fn);
  return PyBool_FromLong (PyTuple_GET_ITEM (state, STATE_STREAM_FN)
                          != Py_None);
}

static PyMethodDef cupy_alloc_functions[] = {
  {"_cupy_allocator", (PyCFunction) (void (*) (void)) gmpy_cupy_allocator,
   METH_FASTCALL,
   "_cupy_allocator(get_device, current_stream, stream_capi, unowned, "
   "pointer, /)\n--\n\n"
   "CuPy's allocator function over gpumem's pool (gpumem._frameworks)."},
  {"_cupy_allocator_reads_capsule", gmpy_cupy_allocator_reads_capsule,
   METH_O,
   "_cupy_allocator_reads_capsule(malloc, /)\n--\n\n"
   "Whether MALLOC reads CuPy's stream through its C function."},
  {NULL, NULL, 0, NULL}
};

int
gmpy_cupy_alloc_init (PyObject *module)
{
  return PyModule_AddFunctions (module, cupy_alloc_functions);
}
