/* py-array.c -- gpumem.DeviceArray, and the functions that make arrays.

   The type: its attributes, its method table and its slots, on top of
   the files that implement them: the object's core (py-array-core.c:
   owners, views, arrays over foreign memory, the life of their memory),
   indexing (py-index.c), transposed views (py-transpose.c), copies and
   fill (py-array-copy.c), scalar conversions (py-array-scalar.c),
   pickling (py-pickle.c) and the interop protocols (py-cai.c,
   py-dlpack-export.c).  free() releases an owner's memory at once,
   after which the owner and all its views refuse to be used.  */

#include "gm-python.h"

#include <string.h>

#include <structmember.h>

#include "py-dlpack.h"

static PyObject *
arraypy_new (PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
  PyErr_SetString (PyExc_TypeError,
                   "DeviceArray cannot be made directly; use gpumem.empty, "
                   "zeros, to_device or asarray");
  return NULL;
}

/* Attributes.  */

static PyObject *
arraypy_get_strides (PyObject *self, void *closure)
{
  return gmpy_strides_tuple ((arraypy_object *) self);
}

static PyObject *
arraypy_get_readonly (PyObject *self, void *closure)
{
  return PyBool_FromLong (((arraypy_object *) self)->readonly);
}

static PyObject *
arraypy_get_contiguous (PyObject *self, void *closure)
{
  return PyBool_FromLong (((arraypy_object *) self)->contiguous);
}

static PyObject *
arraypy_get_shape (PyObject *self, void *closure)
{
  return gmpy_shape_tuple (((arraypy_object *) self)->ndim,
                           ((arraypy_object *) self)->shape);
}

static PyObject *
arraypy_get_dtype (PyObject *self, void *closure)
{
  return Py_NewRef (gmpy_state_get ()->np_dtypes[((arraypy_object *) self)
                                                  ->dtype]);
}

static PyObject *
arraypy_get_size (PyObject *self, void *closure)
{
  return PyLong_FromSsize_t (((arraypy_object *) self)->size);
}

static PyObject *
arraypy_get_ndim (PyObject *self, void *closure)
{
  return PyLong_FromLong (((arraypy_object *) self)->ndim);
}

static PyObject *
arraypy_get_itemsize (PyObject *self, void *closure)
{
  return PyLong_FromSize_t (gm_dtypes[((arraypy_object *) self)->dtype]
                            .itemsize);
}

static PyObject *
arraypy_get_nbytes (PyObject *self, void *closure)
{
  return PyLong_FromSize_t (gmpy_array_nbytes ((arraypy_object *) self));
}

static PyObject *
arraypy_get_device (PyObject *self, void *closure)
{
  return gmpy_device_get (((arraypy_object *) self)->device);
}

static PyObject *
arraypy_get_ptr (PyObject *self, void *closure)
{
  arraypy_object *array = (arraypy_object *) self;
  gm_block *block;

  if (gmpy_array_usable (array) < 0)
    return NULL;
  /* The address goes out with no lifetime: the memory never moves.  */
  block = gmpy_array_block (self);
  if (block != NULL)
    gm_block_expose (block, GM_BLOCK_EXPOSED_POINTER);
  return PyLong_FromVoidPtr (array->data);
}

static PyObject *
arraypy_get_base (PyObject *self, void *closure)
{
  PyObject *base = ((arraypy_object *) self)->base;
  return Py_NewRef (base ? base : Py_None);
}

static PyGetSetDef arraypy_getset[] = {
  {"shape", arraypy_get_shape, NULL, "Tuple of dimensions.", NULL},
  {"dtype", arraypy_get_dtype, NULL, "The numpy.dtype of the elements.",
   NULL},
  {"size", arraypy_get_size, NULL, "Number of elements.", NULL},
  {"strides", arraypy_get_strides, NULL,
   "Tuple of bytes from one index to the next along each axis\n"
   "(negative for a reversed view), as NumPy's.", NULL},
  {"is_contiguous", arraypy_get_contiguous, NULL,
   "True when the elements are C-contiguous (every array but a\n"
   "strided view).", NULL},
  {"readonly", arraypy_get_readonly, NULL,
   "True when the memory may only be read (gpumem.asarray(x,\n"
   "readonly=True), a read-only DLPack or CUDA Array Interface\n"
   "producer's).", NULL},
  {"ndim", arraypy_get_ndim, NULL, "Number of dimensions.", NULL},
  {"itemsize", arraypy_get_itemsize, NULL, "Bytes per element.", NULL},
  {"nbytes", arraypy_get_nbytes, NULL, "Bytes of all elements.", NULL},
  {"device", arraypy_get_device, NULL, "The Device holding the memory.",
   NULL},
  {"memory", gmpy_array_get_memory, NULL,
   "'device', or 'managed' for managed memory (memory='managed').", NULL},
  {"ptr", arraypy_get_ptr, NULL, "The device address of element 0, an int.\n"
   "Once read, the memory never spills (the address has no lifetime).",
   NULL},
  {"base", arraypy_get_base, NULL,
   "The owner of a view's memory, or None for an owner.", NULL},
  {"is_spilled", gmpy_array_get_is_spilled, NULL,
   "True while the spill engine keeps the memory's bytes in host memory\n"
   "(gpumem.set_spill); the next use brings them back.", NULL},
  {"T", gmpy_array_get_T, NULL,
   "The view with the axes reversed: a.transpose ().", NULL},
  {"__cuda_array_interface__", gmpy_array_cai, NULL,
   "The CUDA Array Interface, version 3.", NULL},
  {NULL, NULL, NULL, NULL, NULL}
};

/* Methods.  */

/* copy_to_host (OUT, STREAM) of a strided view: into a new array, or
   into OUT (of as many elements) as NumPy's same_kind casting allows.
   Complete on return.  New reference or NULL.  */
static PyObject *
strided_to_host (arraypy_object *array, PyObject *out, gm_stream *stream)
{
  PyObject *host = gmpy_array_strided_to_host (array, stream), *shaped;
  PyObject *shape, *result;

  if (host == NULL || out == Py_None)
    return host;
  shape = PyObject_CallMethod (gmpy_state_get ()->numpy, "shape", "O", out);
  shaped = shape ? PyObject_CallMethod (host, "reshape", "O", shape) : NULL;
  Py_XDECREF (shape);
  Py_DECREF (host);
  if (shaped == NULL)
    {
      PyErr_Clear ();
      PyErr_Format (PyExc_ValueError, "out must be a host array of %zd "
                    "elements", array->size);
      return NULL;
    }
  result = PyObject_CallMethod (gmpy_state_get ()->numpy, "copyto", "OO",
                                out, shaped);
  Py_DECREF (shaped);
  if (result == NULL)
    return NULL;
  Py_DECREF (result);
  return Py_NewRef (out);
}

static PyObject *
arraypy_copy_to_host (PyObject *self, PyObject *args, PyObject *kwargs)
{
  static char *keywords[] = {"out", "stream", NULL};
  arraypy_object *array = (arraypy_object *) self;
  gmpy_state *state = gmpy_state_get ();
  PyObject *out = Py_None, *stream_obj = Py_None, *shape;
  gmpy_devbuf src;
  gmpy_dispatch d;
  bool joined = false;

  if (!PyArg_ParseTupleAndKeywords (args, kwargs, "|OO:copy_to_host",
                                    keywords, &out, &stream_obj)
      || gmpy_array_prepare (&self, 1) < 0
      || gmpy_array_usable_for (array, false) < 0
      || gmpy_dispatch_get (stream_obj, array->device, &d) < 0)
    return NULL;
  if (!array->contiguous)
    return strided_to_host (array, out, d.stream);
  if (gmpy_devbuf_get_read (self, &src, "self") < 0)
    return NULL;
  if (out == Py_None)
    {
      /* A new array is read at once: inside a gpumem.concurrent() block
         it is filled on the block's stream and waited for.  */
      if (d.mode == GMPY_CONCURRENT)
        {
          if (gmpy_dispatch_stream (&d, array->device, NULL) < 0)
            return NULL;
          joined = true;
        }
      shape = gmpy_shape_tuple (array->ndim, array->shape);
      if (shape == NULL)
        return NULL;
      out = PyObject_CallMethod (state->numpy, "empty", "NO", shape,
                                 state->np_dtypes[array->dtype]);
      if (out == NULL)
        return NULL;
    }
  else
    {
      Py_INCREF (out);
      PyObject *out_size = PyObject_GetAttrString (out, "size");
      Py_ssize_t n = out_size ? PyLong_AsSsize_t (out_size) : -1;
      Py_XDECREF (out_size);
      if (n == -1 && PyErr_Occurred ())
        {
          PyErr_Clear ();
          n = -2;
        }
      if (n != array->size)
        {
          Py_DECREF (out);
          PyErr_Format (PyExc_ValueError,
                        "out must be a host array of %zd elements", array->size);
          return NULL;
        }
    }
  if (gmpy_copy_device_to_host (out, &src, array->size, &d, "out") < 0
      || (joined && gmpy_concurrent_join (array->device) < 0))
    {
      Py_DECREF (out);
      return NULL;
    }
  return out;
}

static PyObject *
arraypy_copy_from_host (PyObject *self, PyObject *args, PyObject *kwargs)
{
  static char *keywords[] = {"src", "stream", NULL};
  arraypy_object *array = (arraypy_object *) self;
  PyObject *src, *stream_obj = Py_None, *src_size;
  gmpy_devbuf dst;
  gmpy_dispatch d;
  Py_ssize_t n;

  if (!PyArg_ParseTupleAndKeywords (args, kwargs, "O|O:copy_from_host",
                                    keywords, &src, &stream_obj)
      || gmpy_array_prepare (&self, 1) < 0
      || gmpy_array_usable (array) < 0
      || gmpy_dispatch_get (stream_obj, array->device, &d) < 0)
    return NULL;
  if (!array->contiguous)
    {
      if (gmpy_array_strided_from_host (array, src, false, false, d.stream,
                                        "src") < 0)
        return NULL;
      gmpy_array_note_stream (self, &d);
      Py_RETURN_NONE;
    }
  if (gmpy_devbuf_get (self, &dst, "self") < 0)
    return NULL;
  src_size = PyObject_CallMethod (gmpy_state_get ()->numpy, "size", "O", src);
  if (src_size == NULL)
    return NULL;
  n = PyLong_AsSsize_t (src_size);
  Py_DECREF (src_size);
  if (n == -1 && PyErr_Occurred ())
    return NULL;
  if (n != array->size)
    {
      PyErr_Format (PyExc_ValueError,
                    "src has %zd elements; this DeviceArray has %zd", n,
                    array->size);
      return NULL;
    }
  if (gmpy_copy_host_to_device (&dst, src, n, &d, "src") < 0)
    return NULL;
  gmpy_array_note_stream (self, &d);
  Py_RETURN_NONE;
}

static PyObject *
arraypy_free (PyObject *self, PyObject *unused)
{
  arraypy_object *array = (arraypy_object *) self;

  /* A live graph replays calls on this memory: refused (naming it).  */
  if (!array->released && gmpy_graph_check_free (array) < 0)
    return NULL;
  /* While DLPack consumers or calls in other threads hold the memory,
     it stays theirs: gpumem refuses to use it from now on, and it goes
     when the last of them lets go (gmpy_array_exports_add,
     gmpy_array_unhold).  */
  gmpy_array_mark_released (array);
  if (array->exports == 0 && array->users == 0)
    gmpy_array_let_go (array);
  if (PyErr_Occurred ())
    return NULL;
  Py_RETURN_NONE;
}

static PyObject *
arraypy_enter (PyObject *self, PyObject *unused)
{
  if (gmpy_array_usable ((arraypy_object *) self) < 0)
    return NULL;
  return Py_NewRef (self);
}

static PyObject *
arraypy_exit (PyObject *self, PyObject *args)
{
  PyObject *result = arraypy_free (self, NULL);
  if (result == NULL)
    return NULL;
  Py_DECREF (result);
  Py_RETURN_FALSE;
}

static PyObject *
arraypy_reshape (PyObject *self, PyObject *args)
{
  arraypy_object *array = (arraypy_object *) self;
  PyObject *shape_obj;
  Py_ssize_t dims[GM_MAX_NDIM], known = 1;
  int ndim, unknown = -1;

  if (gmpy_array_usable (array) < 0)
    return NULL;
  if (!array->contiguous)
    {
      PyErr_SetString (PyExc_ValueError, "reshape needs a contiguous "
                       "DeviceArray; this is a strided view: reshape "
                       "a.copy()");
      return NULL;
    }
  if (PyTuple_GET_SIZE (args) == 1)
    shape_obj = PyTuple_GET_ITEM (args, 0);
  else
    shape_obj = args;
  if (gmpy_shape_read (shape_obj, gm_dtypes[array->dtype].itemsize, &ndim,
                       dims, &unknown) < 0)
    return NULL;
  for (int i = 0; i < ndim; i++)
    if (i != unknown)
      known *= dims[i];
  if (unknown >= 0)
    {
      if (known == 0 || array->size % known != 0)
        {
          PyErr_Format (PyExc_ValueError, "cannot reshape an array of size "
                        "%zd with an unknown dimension", array->size);
          return NULL;
        }
      dims[unknown] = array->size / known;
      known = array->size;
    }
  if (known != array->size)
    {
      PyErr_Format (PyExc_ValueError, "cannot reshape an array of size %zd "
                    "into a shape of size %zd", array->size, known);
      return NULL;
    }
  return gmpy_array_view (array, 0, ndim, dims, NULL);
}

static PyObject *
arraypy_repr (PyObject *self)
{
  arraypy_object *array = (arraypy_object *) self;
  PyObject *shape = gmpy_shape_tuple (array->ndim, array->shape), *result;

  if (shape == NULL)
    return NULL;
  result = PyUnicode_FromFormat ("DeviceArray(shape=%R, dtype=%s, device=%d%s%s%s)",
                                 shape, gm_dtypes[array->dtype].name,
                                 array->device,
                                 array->base ? ", view" : "",
                                 array->contiguous ? "" : ", strided",
                                 array->released || (gmpy_array_owner (array)
                                                     && gmpy_array_owner (array)
                                                          ->released)
                                   ? ", freed" : "");
  Py_DECREF (shape);
  return result;
}

static Py_ssize_t
arraypy_length (PyObject *self)
{
  arraypy_object *array = (arraypy_object *) self;

  if (array->ndim == 0)
    {
      PyErr_SetString (PyExc_TypeError, "len() of a 0-d DeviceArray");
      return -1;
    }
  return array->shape[0];
}

/* DeviceArray.__array__: a view without a copy of a managed array's
   memory (py-managed.c); TypeError for device memory (no implicit host
   copies).  */
static PyObject *
arraypy_numpy (PyObject *self, PyObject *args, PyObject *kwargs)
{
  if (((arraypy_object *) self)->memory == GMPY_MEMORY_MANAGED)
    return gmpy_array_managed_numpy (self, args, kwargs);
  PyErr_SetString (PyExc_TypeError, "a DeviceArray is not converted to a "
                   "NumPy array implicitly (its memory may be on a GPU): "
                   "use a.copy_to_host() for a host copy; for array math "
                   "on the same memory without a copy, cupy.asarray(a) or "
                   "torch.from_dlpack(a) (numpy.from_dlpack(a) on the host "
                   "backend), or a kernel");
  return NULL;
}

static PyMethodDef arraypy_methods[] = {
  {"copy_to_host", (PyCFunction) (void (*) (void)) arraypy_copy_to_host,
   METH_VARARGS | METH_KEYWORDS,
   "copy_to_host($self, out=None, stream=None)\n--\n\n"
   "The array's contents in a numpy.ndarray (OUT, if given)."},
  {"copy_from_host", (PyCFunction) (void (*) (void)) arraypy_copy_from_host,
   METH_VARARGS | METH_KEYWORDS,
   "copy_from_host($self, src, stream=None)\n--\n\n"
   "Overwrite the array with host array SRC of the same size."},
  {"free", arraypy_free, METH_NOARGS,
   "free($self)\n--\n\nRelease the memory now (or, while a call in another thread\n"
   "still uses it, when that call ends); later use raises ValueError."},
  {"spill", gmpy_array_spill, METH_NOARGS,
   "spill($self)\n--\n\nMove the memory's bytes to host memory now, freeing the\n"
   "device's; the next use brings them back.  gpumem.Error where it may\n"
   "not move (held by native code, exported, shared, in use)."},
  {"reshape", arraypy_reshape, METH_VARARGS,
   "reshape($self, shape, /)\n--\n\nA view of the same memory with another shape "
   "(-1 stands for the\ndimension the others leave); contiguous arrays "
   "only."},
  {"fill", gmpy_array_fill, METH_O,
   "fill($self, value, /)\n--\n\nSet every element to the scalar VALUE, converted "
   "as\nnumpy.array(value, dtype) converts it.  Queued on the current\n"
   "stream (gpumem.current_stream), else complete on return."},
  {"copy", gmpy_array_copy, METH_NOARGS,
   "copy($self)\n--\n\nA new contiguous DeviceArray on the same device with "
   "the same\ncontents (of a strided view: its elements, packed)."},
  {"transpose", gmpy_array_transpose, METH_VARARGS,
   "transpose($self, *axes)\n--\n\nA view with the axes permuted as AXES says "
   "(ints, or one tuple;\nnone: reversed), as NumPy's; shares the memory."},
  {"item", gmpy_array_to_scalar, METH_NOARGS,
   "item($self)\n--\n\nThe one element of an array of size 1, as a Python "
   "scalar\n(copied to the host); ValueError for another size."},
  {"__complex__", gmpy_array_complex, METH_NOARGS,
   "__complex__($self)\n--\n\ncomplex(a) of an array of one element."},
  {"__reduce__", gmpy_array_reduce, METH_NOARGS,
   "__reduce__($self)\n--\n\nPickles the array by value: a host copy of its "
   "elements and\nits device index, made again by gpumem._rebuild."},
  {"__array__", (PyCFunction) (void (*) (void)) arraypy_numpy,
   METH_VARARGS | METH_KEYWORDS,
   "__array__($self, *args, **kwargs)\n--\n\nA managed array's memory as a "
   "numpy.ndarray, no copy (its\npending stream work waited for first); "
   "raises TypeError for device\nmemory, which becomes a NumPy array only "
   "through copy_to_host()."},
  {"prefetch", (PyCFunction) (void (*) (void)) gmpy_array_prefetch,
   METH_VARARGS | METH_KEYWORDS,
   "prefetch($self, location, stream=None)\n--\n\nMove a managed array's "
   "pages to LOCATION (a device, or 'host');\na device array spilled "
   "(set_spill) comes back to its device, or\nspills to 'host'.  Complete "
   "on return without a stream; with one,\nthe move to a device is "
   "queued on it."},
  {"discard", (PyCFunction) (void (*) (void)) gmpy_array_discard,
   METH_VARARGS | METH_KEYWORDS,
   "discard($self, stream=None)\n--\n\nSay that a managed array's contents "
   "are no longer needed: its\npages need not move until written again "
   "(a read before finds any\nvalue)."},
  {"advise", (PyCFunction) (void (*) (void)) gmpy_array_advise,
   METH_VARARGS | METH_KEYWORDS,
   "advise($self, *, read_mostly=None, preferred_location=None, "
   "accessed_by=None, not_accessed_by=None)\n--\n\nAdvice about a managed "
   "array's pages: READ_MOSTLY True/False,\nPREFERRED_LOCATION a device, "
   "'host' or False (unset), ACCESSED_BY and\nNOT_ACCESSED_BY a location "
   "or a sequence of them; None leaves one as\nit is."},
  {"__enter__", arraypy_enter, METH_NOARGS,
   "__enter__($self)\n--\n\nThe array itself, for `with gpumem.empty(n) as "
   "a:`."},
  {"__exit__", arraypy_exit, METH_VARARGS,
   "__exit__($self, *exc_info)\n--\n\nfree() the array at the end of the with "
   "block."},
  {"__dlpack__", (PyCFunction) (void (*) (void)) gmpy_array_dlpack,
   METH_FASTCALL | METH_KEYWORDS,
   "__dlpack__($self, *, stream=None, max_version=None, dl_device=None, "
   "copy=None)\n--\n\n"
   "The array as a DLPack capsule, without a copy (unless COPY is True).\n"
   "A versioned capsule when MAX_VERSION >= (1, 0), else a legacy one.\n"
   "STREAM is the consumer's: it is made to wait for gpumem's work."},
  {"__dlpack_device__", gmpy_array_dlpack_device, METH_NOARGS,
   "__dlpack_device__($self)\n--\n\n"
   "(device_type, device_id) as DLPack numbers them: (2, index) for a\n"
   "CUDA device, (1, 0) for the host backend's memory."},
  {NULL, NULL, 0, NULL}
};

static PyMemberDef arraypy_members[] = {
  {"__weaklistoffset__", T_PYSSIZET,
   offsetof (arraypy_object, weakreflist), READONLY, NULL},
  {NULL, 0, 0, 0, NULL}
};

static PyType_Slot arraypy_slots[] = {
  {Py_tp_new, arraypy_new},
  {Py_tp_dealloc, gmpy_array_dealloc},
  {Py_tp_traverse, gmpy_array_traverse},
  {Py_tp_clear, gmpy_array_clear},
  {Py_tp_repr, arraypy_repr},
  {Py_tp_getset, arraypy_getset},
  {Py_tp_methods, arraypy_methods},
  {Py_tp_members, arraypy_members},
  {Py_mp_length, arraypy_length},
  {Py_mp_subscript, gmpy_array_subscript},
  {Py_mp_ass_subscript, gmpy_array_ass_subscript},
  {Py_sq_length, arraypy_length},
  {Py_nb_float, gmpy_array_float},
  {Py_nb_int, gmpy_array_int},
  {Py_nb_bool, gmpy_array_bool},
  {Py_nb_index, gmpy_array_index},
  {Py_sq_item, gmpy_array_item},
  {Py_tp_iter, gmpy_array_iter},
  {Py_tp_doc,
   "A typed block of device memory, or a view into one.\n\n"
   "Made by gpumem.empty, zeros, to_device, asarray, alloc_gpu_memory.\n"
   "Basic indexing (ints, slices with steps, ..., None) gives views,\n"
   "strided ones too; a[key] = value assigns scalars, NumPy arrays and\n"
   "DeviceArrays; len(a) and iteration walk the first axis.  Kernels,\n"
   "gpumem.copy and DLPack/CUDA Array Interface consumers that need it\n"
   "take contiguous arrays; a.copy() makes one.  np.asarray(a) is a view\n"
   "of a managed array (memory='managed') and raises TypeError for\n"
   "device memory: a.copy_to_host() is the explicit copy.  No array math:\n"
   "a + 1, a.sum() raise TypeError; cupy.asarray(a) and\n"
   "torch.from_dlpack(a) do it on the same memory without a copy."},
  {0, NULL}
};

/* The type's slots: ARRAYPY_SLOTS, then py-array-math.c's refusals of
   array math (gmpy_array_init joins them).  */
static PyType_Slot
  arraypy_all_slots[sizeof arraypy_slots / sizeof arraypy_slots[0] + 32];

static PyType_Spec arraypy_spec = {
  .name = "gpumem.DeviceArray",
  .basicsize = sizeof (arraypy_object),
  .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_IMMUTABLETYPE,
  .slots = arraypy_all_slots,
};

/* Module functions that make arrays.  */

/* empty and zeros (ZERO): their fast-call arguments, named FNAME in
   messages.  */
static PyObject *
new_array (PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
           const char *fname, bool zero)
{
  static const char *const names[] = {"shape", "dtype", "device", "memory",
                                      NULL};
  PyObject *arg[4];
  Py_ssize_t dims[GM_MAX_NDIM];
  arraypy_object *array;
  gmpy_memory memory;
  gm_dtype dtype;
  int ndim, device;

  if (gmpy_parse_args (args, nargs, kwnames, fname, names, 1, -1, arg) < 0
      || gmpy_dtype_arg (arg[1], &dtype) < 0
      || gmpy_device_arg (arg[2], &device) < 0
      || gmpy_memory_arg (arg[3], GMPY_MEMORY_DEVICE, &memory) < 0
      || gmpy_shape_arg (arg[0], gm_dtypes[dtype].itemsize, &ndim, dims) < 0)
    return NULL;
  array = gmpy_array_new_in (ndim, dims, dtype, device, NULL, memory);
  if (array != NULL && zero)
    {
      gm_status status = gm_backend_current->memset (
        array->data, device, 0, gmpy_array_nbytes (array), NULL);
      if (status != GM_OK)
        {
          Py_DECREF (array);
          return gmpy_raise (status);
        }
    }
  return (PyObject *) array;
}

PyObject *
gmpy_empty (PyObject *module, PyObject *const *args, Py_ssize_t nargs,
            PyObject *kwnames)
{
  return new_array (args, nargs, kwnames, "empty", false);
}

PyObject *
gmpy_zeros (PyObject *module, PyObject *const *args, Py_ssize_t nargs,
            PyObject *kwnames)
{
  return new_array (args, nargs, kwnames, "zeros", true);
}

PyObject *
gmpy_alloc_gpu_memory (PyObject *module, PyObject *args, PyObject *kwargs)
{
  static char *keywords[] = {"size", "dtype", "device", "memory", NULL};
  PyObject *size_obj, *dtype_obj = Py_None, *device_obj = Py_None;
  PyObject *memory_obj = Py_None;
  Py_ssize_t dims[1];
  gmpy_memory memory;
  gm_dtype dtype;
  int device;

  if (!PyArg_ParseTupleAndKeywords (args, kwargs, "O|OOO:alloc_gpu_memory",
                                    keywords, &size_obj, &dtype_obj,
                                    &device_obj, &memory_obj)
      || gmpy_size_arg (size_obj, "size", &dims[0]) < 0
      || gmpy_dtype_arg (dtype_obj, &dtype) < 0
      || gmpy_device_arg (device_obj, &device) < 0
      || gmpy_memory_arg (memory_obj, GMPY_MEMORY_DEVICE, &memory) < 0)
    return NULL;
  if (dims[0] > PY_SSIZE_T_MAX / (Py_ssize_t) gm_dtypes[dtype].itemsize)
    {
      PyErr_SetString (PyExc_ValueError, "size is too large");
      return NULL;
    }
  return (PyObject *) gmpy_array_new_in (1, dims, dtype, device, NULL,
                                        memory);
}

PyObject *
gmpy_to_device (PyObject *module, PyObject *args, PyObject *kwargs)
{
  static char *keywords[] = {"host", "device", "stream", "memory", NULL};
  gmpy_state *state = gmpy_state_get ();
  PyObject *host, *device_obj = Py_None, *stream_obj = Py_None;
  PyObject *memory_obj = Py_None;
  gmpy_memory memory;
  PyObject *np_array, *dtype_obj, *shape_obj;
  Py_ssize_t dims[GM_MAX_NDIM];
  arraypy_object *array = NULL;
  gmpy_dispatch d;
  gm_dtype dtype;
  gmpy_devbuf dst;
  int ndim, device;

  if (!PyArg_ParseTupleAndKeywords (args, kwargs, "O|OOO:to_device",
                                    keywords, &host, &device_obj,
                                    &stream_obj, &memory_obj)
      || gmpy_device_arg (device_obj, &device) < 0
      || gmpy_memory_arg (memory_obj, GMPY_MEMORY_DEVICE, &memory) < 0
      || gmpy_dispatch_get (stream_obj, device, &d) < 0)
    return NULL;
  np_array = PyObject_CallMethod (state->numpy, "asarray", "O", host);
  if (np_array == NULL)
    return NULL;
  dtype_obj = PyObject_GetAttrString (np_array, "dtype");
  shape_obj = PyObject_GetAttrString (np_array, "shape");
  if (dtype_obj == NULL || shape_obj == NULL
      || gmpy_dtype_arg (dtype_obj, &dtype) < 0
      || gmpy_shape_arg (shape_obj, gm_dtypes[dtype].itemsize, &ndim, dims) < 0)
    goto done;
  array = gmpy_array_new_in (ndim, dims, dtype, device, d.stream, memory);
  if (array == NULL)
    goto done;
  dst.data = array->data;
  dst.size = array->size;
  dst.dtype = dtype;
  dst.device = device;
  dst.readonly = false;
  dst.reads = false;
  dst.array = (PyObject *) array;
  if (gmpy_copy_host_to_device (&dst, np_array, array->size, &d, "host")
      < 0)
    Py_CLEAR (array);
  else
    gmpy_array_note_stream ((PyObject *) array, &d);
done:
  Py_DECREF (np_array);
  Py_XDECREF (dtype_obj);
  Py_XDECREF (shape_obj);
  return (PyObject *) array;
}

int
gmpy_array_init (PyObject *module, gmpy_state *state)
{
  size_t n = 0;

  for (const PyType_Slot *s = arraypy_slots; s->slot != 0; s++)
    arraypy_all_slots[n++] = *s;
  for (const PyType_Slot *s = gmpy_array_math_slots; s->slot != 0; s++)
    {
      if (n + 1 >= sizeof arraypy_all_slots / sizeof arraypy_all_slots[0])
        {
          PyErr_SetString (PyExc_SystemError,
                           "gpumem: DeviceArray's slot table is too small");
          return -1;
        }
      arraypy_all_slots[n++] = *s;
    }
  arraypy_all_slots[n] = (PyType_Slot) {0, NULL};
  state->array_type = (PyTypeObject *) PyType_FromModuleAndSpec (
    module, &arraypy_spec, NULL);
  if (state->array_type == NULL
      || gmpy_exchange_init (state->array_type) < 0
      || PyModule_AddType (module, state->array_type) < 0)
    return -1;
  return 0;
}
