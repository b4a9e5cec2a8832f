/* py-copy.c -- copies between host arrays and device memory.

   Every copy is checked whole before the first byte moves: the count
   against both sides, the dtypes (same_kind casting for host data of
   another dtype, equal dtypes on the device side), writability of the
   destination.  Host data already C-contiguous and of the device's dtype
   is copied straight from its buffer; anything else goes through NumPy
   into a contiguous buffer first.  */

#include "gm-python.h"

#include <string.h>

/* Large copies move in chunks of this size, without the GIL, so that
   Ctrl-C is answered between chunks (some 10 ms apart at the pageable
   copy's speed; larger pieces keep its pipeline full longer).  */
#define COPY_CHUNK ((size_t) 256 << 20)
/* Copies smaller than this take tens of microseconds at most and keep
   the GIL: releasing and retaking it would cost more than it frees.  */
#define COPY_KEEP_GIL_MAX ((size_t) 1 << 20)

/* gmpy_backend_copy, checking before each chunk that DST_BUF and
   SRC_BUF (NULL for host memory) may still be used (gmpy_devbuf_usable):
   the Python code run since they were read, or between chunks, may have
   freed one.  */
static int
guarded_copy (const gmpy_devbuf *dst_buf, const gmpy_devbuf *src_buf,
              void *dst, int dst_device, const void *src, int src_device,
              size_t nbytes, gm_stream *stream)
{
  size_t done = 0;

  /* Copies on a stream are asynchronous: enqueue them whole.  */
  size_t chunk = stream != NULL ? nbytes : COPY_CHUNK;
  do
    {
      size_t n = nbytes - done < chunk ? nbytes - done : chunk;
      gm_status status;

      if ((dst_buf != NULL && gmpy_devbuf_usable (dst_buf) < 0)
          || (src_buf != NULL && gmpy_devbuf_usable (src_buf) < 0))
        return -1;
      if (n < COPY_KEEP_GIL_MAX)
        status = gm_backend_current->copy ((char *) dst + done, dst_device,
                                           (const char *) src + done,
                                           src_device, n, stream);
      else
        {
          Py_BEGIN_ALLOW_THREADS
          status = gm_backend_current->copy ((char *) dst + done, dst_device,
                                             (const char *) src + done,
                                             src_device, n, stream);
          Py_END_ALLOW_THREADS
        }
      if (status != GM_OK)
        return gmpy_raise_int (status);
      done += n;
      if (done < nbytes && PyErr_CheckSignals () < 0)
        return -1;
    }
  while (done < nbytes);
  return 0;
}

int
gmpy_backend_copy (void *dst, int dst_device, const void *src,
                   int src_device, size_t nbytes, gm_stream *stream)
{
  return guarded_copy (NULL, NULL, dst, dst_device, src, src_device, nbytes,
                       stream);
}

/* Raises TypeError unless FROM may be cast to TO under NumPy's
   same_kind rule.  FROM and TO are numpy.dtype objects.  */
static int
check_same_kind (PyObject *from, PyObject *to, const char *what)
{
  gmpy_state *state = gmpy_state_get ();
  PyObject *ok = PyObject_CallMethod (state->numpy, "can_cast", "OOs", from,
                                      to, "same_kind");
  int result;

  if (ok == NULL)
    return -1;
  result = PyObject_IsTrue (ok);
  Py_DECREF (ok);
  if (result < 0)
    return -1;
  if (!result)
    {
      PyErr_Format (PyExc_TypeError,
                    "%s: cannot copy %S data into %S without a cast that "
                    "NumPy's same_kind rule forbids", what, from, to);
      return -1;
    }
  return 0;
}

static int
count_error (const char *what, Py_ssize_t count, const char *side,
             Py_ssize_t size)
{
  PyErr_Format (PyExc_ValueError,
                "%s: %zd elements asked for, but the %s has only %zd",
                what, count, side, size);
  return -1;
}

int
gmpy_copy_host_to_device (const gmpy_devbuf *dst, PyObject *src,
                          Py_ssize_t count, gm_stream *stream,
                          const char *src_name)
{
  gmpy_state *state = gmpy_state_get ();
  size_t itemsize = gm_dtypes[dst->dtype].itemsize;
  PyObject *array = NULL, *flat = NULL, *contiguous = NULL, *dtype = NULL;
  Py_ssize_t src_size;
  Py_buffer view;
  int result = -1;

  if (dst->readonly)
    {
      PyErr_SetString (PyExc_ValueError, "the destination device array is "
                                         "read-only");
      return -1;
    }
  if (count > dst->size)
    return count_error (src_name, count, "destination", dst->size);

  if (PyObject_CheckBuffer (src)
      && PyObject_GetBuffer (src, &view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT)
           == 0)
    {
      if (gm_dtype_from_format (view.format, (size_t) view.itemsize)
          == (int) dst->dtype)
        {
          Py_ssize_t n = view.len / view.itemsize;
          if (count > n)
            result = count_error (src_name, count, "source", n);
          else
            result = guarded_copy (dst, NULL, dst->data, dst->device,
                                   view.buf, -1, (size_t) count * itemsize,
                                   stream);
          PyBuffer_Release (&view);
          return result;
        }
      PyBuffer_Release (&view);
    }
  PyErr_Clear ();

  array = PyObject_CallMethod (state->numpy, "asarray", "O", src);
  if (array == NULL)
    goto done;
  dtype = PyObject_GetAttrString (array, "dtype");
  if (dtype == NULL
      || check_same_kind (dtype, state->np_dtypes[dst->dtype], src_name) < 0)
    goto done;
  flat = PyObject_CallMethod (array, "reshape", "i", -1);
  if (flat == NULL)
    goto done;
  src_size = PyObject_Size (flat);
  if (src_size < 0)
    goto done;
  if (count > src_size)
    {
      count_error (src_name, count, "source", src_size);
      goto done;
    }
  {
    PyObject *head = PySequence_GetSlice (flat, 0, count);
    if (head == NULL)
      goto done;
    contiguous = PyObject_CallMethod (state->numpy, "ascontiguousarray", "OO",
                                      head, state->np_dtypes[dst->dtype]);
    Py_DECREF (head);
  }
  if (contiguous == NULL
      || PyObject_GetBuffer (contiguous, &view, PyBUF_C_CONTIGUOUS) < 0)
    goto done;
  result = guarded_copy (dst, NULL, dst->data, dst->device, view.buf, -1,
                         (size_t) count * itemsize, stream);
  PyBuffer_Release (&view);
done:
  Py_XDECREF (array);
  Py_XDECREF (dtype);
  Py_XDECREF (flat);
  Py_XDECREF (contiguous);
  return result;
}

int
gmpy_copy_device_to_host (PyObject *dst, const gmpy_devbuf *src,
                          Py_ssize_t count, gm_stream *stream,
                          const char *dst_name)
{
  gmpy_state *state = gmpy_state_get ();
  size_t itemsize = gm_dtypes[src->dtype].itemsize;
  PyObject *array = NULL, *dtype = NULL, *flags = NULL, *staging = NULL;
  PyObject *flat = NULL, *slice = NULL, *ndarray_type;
  Py_ssize_t dst_size;
  Py_buffer view;
  int result = -1, writeable, is_ndarray;

  if (count > src->size)
    return count_error (dst_name, count, "source", src->size);

  if (PyObject_CheckBuffer (dst)
      && PyObject_GetBuffer (dst, &view, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS
                                           | PyBUF_FORMAT) == 0)
    {
      if (gm_dtype_from_format (view.format, (size_t) view.itemsize)
          == (int) src->dtype)
        {
          Py_ssize_t n = view.len / view.itemsize;
          if (count > n)
            result = count_error (dst_name, count, "destination", n);
          else
            result = guarded_copy (NULL, src, view.buf, -1, src->data,
                                   src->device, (size_t) count * itemsize,
                                   stream);
          PyBuffer_Release (&view);
          return result;
        }
      PyBuffer_Release (&view);
    }
  PyErr_Clear ();

  /* Anything else must be a host array that writes reach: an ndarray,
     or an object exporting a buffer.  */
  ndarray_type = PyObject_GetAttrString (state->numpy, "ndarray");
  if (ndarray_type == NULL)
    return -1;
  is_ndarray = PyObject_IsInstance (dst, ndarray_type);
  Py_DECREF (ndarray_type);
  if (is_ndarray < 0)
    return -1;
  if (!is_ndarray && !PyObject_CheckBuffer (dst))
    {
      PyErr_Format (PyExc_TypeError,
                    "%s must be a writable host array (a numpy.ndarray or "
                    "an object with the buffer protocol), not %.100s",
                    dst_name, Py_TYPE (dst)->tp_name);
      return -1;
    }
  /* Through a memoryview, NumPy views an exporter's own memory (and
     keeps its read-only flag) instead of copying it.  */
  if (is_ndarray)
    array = Py_NewRef (dst);
  else
    {
      PyObject *view_obj = PyMemoryView_FromObject (dst);
      if (view_obj == NULL)
        goto done;
      array = PyObject_CallMethod (state->numpy, "asarray", "O", view_obj);
      Py_DECREF (view_obj);
    }
  if (array == NULL)
    goto done;
  flags = PyObject_GetAttrString (array, "flags");
  if (flags == NULL)
    goto done;
  {
    PyObject *w = PyObject_GetAttrString (flags, "writeable");
    writeable = w ? PyObject_IsTrue (w) : -1;
    Py_XDECREF (w);
  }
  if (writeable < 0)
    goto done;
  if (!writeable)
    {
      PyErr_Format (PyExc_ValueError, "%s is read-only", dst_name);
      goto done;
    }
  dtype = PyObject_GetAttrString (array, "dtype");
  if (dtype == NULL
      || check_same_kind (state->np_dtypes[src->dtype], dtype, dst_name) < 0)
    goto done;
  {
    PyObject *size_obj = PyObject_GetAttrString (array, "size");
    dst_size = size_obj ? PyLong_AsSsize_t (size_obj) : -1;
    Py_XDECREF (size_obj);
  }
  if (dst_size < 0)
    goto done;
  if (count > dst_size)
    {
      count_error (dst_name, count, "destination", dst_size);
      goto done;
    }
  staging = PyObject_CallMethod (state->numpy, "empty", "nO", count,
                                 state->np_dtypes[src->dtype]);
  if (staging == NULL
      || PyObject_GetBuffer (staging, &view, PyBUF_C_CONTIGUOUS
                                               | PyBUF_WRITABLE) < 0)
    goto done;
  result = guarded_copy (NULL, src, view.buf, -1, src->data, src->device,
                         (size_t) count * itemsize, stream);
  PyBuffer_Release (&view);
  if (result < 0)
    goto done;
  /* The flat iterator writes through to any layout, in C order.  */
  result = -1;
  flat = PyObject_GetAttrString (array, "flat");
  {
    PyObject *stop = PyLong_FromSsize_t (count);
    slice = stop ? PySlice_New (NULL, stop, NULL) : NULL;
    Py_XDECREF (stop);
  }
  if (flat != NULL && slice != NULL
      && PyObject_SetItem (flat, slice, staging) == 0)
    result = 0;
done:
  Py_XDECREF (array);
  Py_XDECREF (flags);
  Py_XDECREF (dtype);
  Py_XDECREF (staging);
  Py_XDECREF (flat);
  Py_XDECREF (slice);
  return result;
}



PyObject *
gmpy_copy_to_gpu (PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                  PyObject *kwnames)
{
  static const char *const names[] = {"src", "dest", "size", NULL};
  PyObject *arg[3];
  gmpy_devbuf dest;
  Py_ssize_t size;
  int found;

  if (gmpy_parse_args (args, nargs, kwnames, "copy_to_gpu", names, 3, -1, arg)
      < 0)
    return NULL;
  found = gmpy_devbuf_get (arg[1], &dest, "dest");
  if (found < 0)
    return NULL;
  if (found == 0)
    {
      PyErr_Format (PyExc_TypeError, "copy_to_gpu: dest must be a "
                    "DeviceArray, not %.100s", Py_TYPE (arg[1])->tp_name);
      return NULL;
    }
  if (gmpy_size_arg (arg[2], "size", &size) < 0
      || gmpy_copy_host_to_device (&dest, arg[0], size, NULL, "copy_to_gpu")
           < 0)
    return NULL;
  Py_RETURN_NONE;
}

PyObject *
gmpy_copy_from_gpu (PyObject *module, PyObject *const *args,
                    Py_ssize_t nargs, PyObject *kwnames)
{
  static const char *const names[] = {"src", "dest", "size", NULL};
  PyObject *arg[3];
  gmpy_devbuf src;
  Py_ssize_t size;
  int found;

  if (gmpy_parse_args (args, nargs, kwnames, "copy_from_gpu", names, 3, -1, arg)
      < 0)
    return NULL;
  found = gmpy_devbuf_get (arg[0], &src, "src");
  if (found < 0)
    return NULL;
  if (found == 0)
    {
      PyErr_Format (PyExc_TypeError, "copy_from_gpu: src must be a "
                    "DeviceArray, not %.100s", Py_TYPE (arg[0])->tp_name);
      return NULL;
    }
  if (gmpy_size_arg (arg[2], "size", &size) < 0
      || gmpy_copy_device_to_host (arg[1], &src, size, NULL, "copy_from_gpu")
           < 0)
    return NULL;
  Py_RETURN_NONE;
}

/* The number of elements of host object OBJ, as NumPy counts them.  */
static Py_ssize_t
host_size (PyObject *obj)
{
  PyObject *size = PyObject_CallMethod (gmpy_state_get ()->numpy, "size",
                                        "O", obj);
  Py_ssize_t n;

  if (size == NULL)
    return -1;
  n = PyLong_AsSsize_t (size);
  Py_DECREF (size);
  return n;
}

PyObject *
gmpy_copy (PyObject *module, PyObject *const *args, Py_ssize_t nargs,
           PyObject *kwnames)
{
  static const char *const names[] = {"dst", "src", "count", "stream", NULL};
  PyObject *arg[4];
  gmpy_devbuf dst, src;
  gm_stream *stream;
  Py_ssize_t count = -1;
  int dst_dev, src_dev;

  if (gmpy_parse_args (args, nargs, kwnames, "copy", names, 2, -1, arg) < 0)
    return NULL;
  dst_dev = gmpy_devbuf_get (arg[0], &dst, "dst");
  if (dst_dev < 0)
    return NULL;
  src_dev = gmpy_devbuf_get (arg[1], &src, "src");
  if (src_dev < 0)
    return NULL;
  if (arg[2] != NULL && arg[2] != Py_None
      && gmpy_size_arg (arg[2], "count", &count) < 0)
    return NULL;
  if (gmpy_stream_arg (arg[3], -1, &stream) < 0)
    return NULL;

  if (dst_dev && src_dev)
    {
      size_t nbytes;
      if (dst.dtype != src.dtype)
        {
          PyErr_Format (PyExc_TypeError, "copy: device arrays of different "
                        "dtypes (%s from %s); device copies need equal dtypes",
                        gm_dtypes[dst.dtype].name, gm_dtypes[src.dtype].name);
          return NULL;
        }
      if (count < 0)
        count = src.size;
      if (count > src.size)
        {
          count_error ("copy", count, "source", src.size);
          return NULL;
        }
      if (count > dst.size)
        {
          count_error ("copy", count, "destination", dst.size);
          return NULL;
        }
      if (dst.readonly)
        {
          PyErr_SetString (PyExc_ValueError, "copy: dst is read-only");
          return NULL;
        }
      if (stream != NULL)
        {
          int sdev = ((streampy_object *) arg[3])->device;
          if (sdev != dst.device && sdev != src.device)
            {
              PyErr_Format (PyExc_ValueError, "copy: the stream is on device "
                            "%d, the arrays on %d and %d", sdev, dst.device,
                            src.device);
              return NULL;
            }
        }
      nbytes = (size_t) count * gm_dtypes[dst.dtype].itemsize;
      if (guarded_copy (&dst, &src, dst.data, dst.device, src.data,
                        src.device, nbytes, stream) < 0)
        return NULL;
      gmpy_array_note_stream (arg[0], arg[3]);
      Py_RETURN_NONE;
    }
  if (dst_dev)
    {
      if (stream != NULL && ((streampy_object *) arg[3])->device != dst.device)
        {
          PyErr_SetString (PyExc_ValueError, "copy: the stream is not on the "
                                             "destination's device");
          return NULL;
        }
      if (count < 0 && (count = host_size (arg[1])) < 0)
        return NULL;
      if (gmpy_copy_host_to_device (&dst, arg[1], count, stream, "copy") < 0)
        return NULL;
      gmpy_array_note_stream (arg[0], arg[3]);
      Py_RETURN_NONE;
    }
  if (src_dev)
    {
      if (stream != NULL && ((streampy_object *) arg[3])->device != src.device)
        {
          PyErr_SetString (PyExc_ValueError, "copy: the stream is not on the "
                                             "source's device");
          return NULL;
        }
      if (count < 0)
        count = src.size;
      if (gmpy_copy_device_to_host (arg[0], &src, count, stream, "copy") < 0)
        return NULL;
      Py_RETURN_NONE;
    }
  PyErr_Format (PyExc_TypeError, "copy: neither dst (%.100s) nor src "
                "(%.100s) is device memory; use numpy.copyto for host copies",
                Py_TYPE (arg[0])->tp_name, Py_TYPE (arg[1])->tp_name);
  return NULL;
}
