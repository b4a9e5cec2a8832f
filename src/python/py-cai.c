/* py-cai.c -- the CUDA Array Interface (version 3), both ways.

   The producer: DeviceArray.__cuda_array_interface__.  The reader: any
   object offering the interface, as kernels, copies and asarray take
   it; gmpy_devbuf_get looks up the device memory behind an argument (a
   DeviceArray or such an object).  DLPack, the other protocol, is in
   py-dlpack.c; gpumem.asarray, which tries both, in py-asarray.c.  */

#include "gm-python.h"

#include <string.h>

PyObject *
gmpy_array_cai (PyObject *self, void *closure)
{
  arraypy_object *array = (arraypy_object *) self;
  gm_stream *pending;
  PyObject *shape, *stream, *strides;
  char typestr[8];

  if (gm_backend_current->device_memory != GM_MEMORY_CUDA)
    {
      PyErr_SetString (PyExc_AttributeError,
                       "__cuda_array_interface__ is only offered by the "
                       "cuda backend; host-backend arrays are in host "
                       "memory");
      return NULL;
    }
  if (gmpy_array_usable (array) < 0
      || gmpy_array_pending_stream (array, &pending) < 0)
    return NULL;
  /* The address goes out with no lifetime: the memory never moves.  */
  {
    gm_block *block = gmpy_array_block (self);
    if (block != NULL)
      gm_block_expose (block, GM_BLOCK_EXPOSED_POINTER);
  }
  /* Default-stream work is complete before gpumem returns, so a stream
     is named only while work queued on a gpumem.Stream that writes the
     array may still run.  */
  if (pending != NULL)
    stream = PyLong_FromVoidPtr (gm_backend_current->stream_handle (pending));
  else
    stream = Py_NewRef (Py_None);
  if (stream == NULL)
    return NULL;
  shape = gmpy_shape_tuple (array->ndim, array->shape);
  if (shape == NULL)
    {
      Py_DECREF (stream);
      return NULL;
    }
  gm_dtype_typestr (array->dtype, typestr);
  /* None says C-contiguous; a strided view spells its strides out.  */
  strides = array->contiguous ? Py_NewRef (Py_None)
                              : gmpy_strides_tuple (array);
  if (strides == NULL)
    {
      Py_DECREF (stream);
      Py_DECREF (shape);
      return NULL;
    }
  /* The interface asks for a pointer of 0 for an empty array.  */
  return Py_BuildValue ("{s:N,s:s,s:(NO),s:N,s:i,s:N}", "shape", shape,
                        "typestr", typestr, "data",
                        PyLong_FromVoidPtr (array->size > 0 ? array->data
                                                            : NULL),
                        array->readonly ? Py_True : Py_False, "strides",
                        strides, "version", 3, "stream", stream);
}

int
gmpy_cai_read (PyObject *obj, gmpy_devbuf *buf, int *ndim,
               Py_ssize_t dims[GM_MAX_NDIM], Py_ssize_t *strides,
               const char *what)
{
  PyObject *cai, *item;
  int result = -1, dtype, readonly;

  buf->reads = false;
  /* Host objects whose type cannot carry the interface: NumPy's own
     ndarray (not a subclass: numba's managed arrays are one, and carry
     it), bytes, bytearray, memoryview.  Asking them raises and clears
     an AttributeError, a microsecond of every copy from a NumPy array
     (bench/HISTORY.md, "Where a small copy's microseconds went").  */
  if (Py_TYPE (obj) == (PyTypeObject *) gmpy_state_get ()->np_ndarray
      || PyBytes_CheckExact (obj) || PyByteArray_CheckExact (obj)
      || PyMemoryView_Check (obj))
    return 0;
  cai = PyObject_GetAttrString (obj, "__cuda_array_interface__");
  if (cai == NULL)
    {
      if (!PyErr_ExceptionMatches (PyExc_AttributeError))
        return -1;
      PyErr_Clear ();
      return 0;
    }
  if (!PyDict_Check (cai))
    {
      PyErr_Format (PyExc_TypeError, "%s: __cuda_array_interface__ is not a "
                    "dict", what);
      goto done;
    }
  item = PyDict_GetItemString (cai, "typestr");
  dtype = item && PyUnicode_Check (item)
            ? gm_dtype_from_typestr (PyUnicode_AsUTF8 (item)) : -1;
  if (PyErr_Occurred ())
    goto done;
  if (dtype < 0)
    {
      PyErr_Format (PyExc_TypeError, "%s: element type %R is not supported",
                    what, item ? item : Py_None);
      goto done;
    }
  item = PyDict_GetItemString (cai, "shape");
  if (item == NULL)
    {
      PyErr_Format (PyExc_TypeError, "%s: __cuda_array_interface__ has no "
                    "shape", what);
      goto done;
    }
  if (gmpy_shape_arg (item, gm_dtypes[dtype].itemsize, ndim, dims) < 0)
    goto done;
  buf->size = gmpy_shape_size (*ndim, dims);
  buf->dtype = (gm_dtype) dtype;
  item = PyDict_GetItemString (cai, "mask");
  if (item != NULL && item != Py_None)
    {
      PyErr_Format (PyExc_ValueError, "%s: masked arrays (a "
                    "__cuda_array_interface__ mask) are not supported", what);
      goto done;
    }
  item = PyDict_GetItemString (cai, "strides");
  if (strides != NULL)
    {
      /* C-contiguous unless the interface says otherwise.  */
      Py_ssize_t stride = (Py_ssize_t) gm_dtypes[dtype].itemsize;
      for (int i = *ndim - 1; i >= 0; i--)
        {
          strides[i] = stride;
          stride *= dims[i] > 1 ? dims[i] : 1;
        }
    }
  if (item != NULL && item != Py_None && buf->size > 1)
    {
      Py_ssize_t given[GM_MAX_NDIM];
      PyObject *seq = PySequence_Fast (item, "strides must be a sequence");
      bool contiguous;

      if (seq == NULL)
        goto done;
      if (PySequence_Fast_GET_SIZE (seq) != *ndim)
        {
          /* SEQ's count: ITEM itself may be any sequence, not a list
             or a tuple (fuzz_api found it on the CUDA backend).  */
          PyErr_Format (PyExc_ValueError, "%s: __cuda_array_interface__ has "
                        "%zd strides for %d dimensions", what,
                        PySequence_Fast_GET_SIZE (seq), *ndim);
          Py_DECREF (seq);
          goto done;
        }
      for (int i = 0; i < *ndim; i++)
        {
          given[i] = PyLong_AsSsize_t (PySequence_Fast_GET_ITEM (seq, i));
          if (given[i] == -1 && PyErr_Occurred ())
            break;
        }
      Py_DECREF (seq);
      if (PyErr_Occurred ()
          || gmpy_strides_check (*ndim, dims, given,
                                 gm_dtypes[dtype].itemsize, &contiguous,
                                 what) < 0)
        goto done;
      if (!contiguous && strides == NULL)
        {
          PyErr_Format (PyExc_ValueError, "%s is not C-contiguous (its "
                        "strides are %R); kernels and copies need contiguous "
                        "device memory (gpumem.asarray wraps it as a strided "
                        "view; .copy() packs that)", what, item);
          goto done;
        }
      if (strides != NULL)
        memcpy (strides, given, sizeof *given * (size_t) *ndim);
    }
  item = PyDict_GetItemString (cai, "data");
  if (item == NULL || !PyTuple_Check (item) || PyTuple_GET_SIZE (item) != 2)
    {
      PyErr_Format (PyExc_TypeError, "%s: __cuda_array_interface__ data is "
                    "not a (pointer, read_only) tuple", what);
      goto done;
    }
  buf->data = PyLong_AsVoidPtr (PyTuple_GET_ITEM (item, 0));
  if (buf->data == NULL && PyErr_Occurred ())
    goto done;
  readonly = PyObject_IsTrue (PyTuple_GET_ITEM (item, 1));
  if (readonly < 0)
    goto done;
  buf->readonly = readonly;
  buf->device = gmpy_current_device ();
  if (buf->data == NULL && buf->size > 0)
    {
      PyErr_Format (PyExc_ValueError, "%s: its __cuda_array_interface__ "
                    "has a null pointer for %zd elements", what, buf->size);
      goto done;
    }
  if (buf->data != NULL)
    {
      gm_status status = gm_backend_current->pointer_device (buf->data,
                                                             &buf->device);
      if (status != GM_OK)
        {
          gmpy_raise (status);
          goto done;
        }
      if (buf->device < 0)
        {
          PyErr_Format (PyExc_ValueError, "%s: its __cuda_array_interface__ "
                        "points to host memory", what);
          goto done;
        }
    }
  item = PyDict_GetItemString (cai, "stream");
  if (item != NULL && item != Py_None)
    {
      /* The producer's work on that stream must finish before ours
         reads the data.  */
      gm_status status;
      long long value;
      char name[160];

      snprintf (name, sizeof name, "%s: __cuda_array_interface__ stream",
                what);
      if (gmpy_stream_number (item, name, &value) < 0)
        goto done;
      if (value <= 0)
        {
          PyErr_Format (PyExc_ValueError, "%s %lld is not allowed (0 is "
                        "ambiguous, and no stream is negative)", name, value);
          goto done;
        }
      Py_BEGIN_ALLOW_THREADS
      status = gm_backend_current->foreign_stream_sync (
                 (void *) (uintptr_t) value);
      Py_END_ALLOW_THREADS
      if (status != GM_OK)
        {
          gmpy_raise (status);
          goto done;
        }
    }
  result = 1;
done:
  Py_DECREF (cai);
  return result;
}

/* gmpy_devbuf_get, for a call that only reads when READS.  */
static int
devbuf_get (PyObject *obj, gmpy_devbuf *buf, const char *what, bool reads)
{
  Py_ssize_t dims[GM_MAX_NDIM];
  int ndim;

  buf->reads = reads;
  if (gmpy_array_check (obj))
    {
      arraypy_object *array = (arraypy_object *) obj;
      if (gmpy_array_usable_for (array, !reads) < 0)
        return -1;
      if (!array->contiguous)
        {
          PyErr_Format (PyExc_ValueError, "%s is a strided (non-contiguous) "
                        "DeviceArray view; kernels, copy_to_gpu and "
                        "copy_from_gpu take contiguous memory: pass "
                        "%s.copy() (gpumem.copy, copy_to_host, "
                        "copy_from_host and a[...] = ... take strided "
                        "views as they are)", what, what);
          return -1;
        }
      buf->data = array->data;
      buf->size = array->size;
      buf->dtype = array->dtype;
      buf->device = array->device;
      buf->readonly = array->readonly;
      buf->array = obj;
      return 1;
    }
  buf->array = NULL;
  if (gm_backend_current->device_memory != GM_MEMORY_CUDA)
    return 0;
  return gmpy_cai_read (obj, buf, &ndim, dims, NULL, what);
}

int
gmpy_devbuf_get (PyObject *obj, gmpy_devbuf *buf, const char *what)
{
  return devbuf_get (obj, buf, what, false);
}

int
gmpy_devbuf_get_read (PyObject *obj, gmpy_devbuf *buf, const char *what)
{
  return devbuf_get (obj, buf, what, true);
}
