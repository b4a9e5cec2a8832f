/* py-copy-engine.c -- the copy engine under every copy of the Python
   layer: host objects to device memory and back (to_device,
   copy_to_host, copy_from_host, copy, copy_to_gpu, copy_from_gpu), and
   chunked, interruptible backend copies (DLPack's copies too).

   Every copy is checked whole before the first byte moves: the count
   against both sides, the dtypes (same_kind casting for host data of
   another dtype, equal dtypes on the device side), writability of the
   destination.  Host data already C-contiguous and of the device's dtype
   is copied straight from its buffer; anything else goes through NumPy
   into a contiguous buffer first.  */

#include "gm-python.h"

#include "chunked-copy.h"

/* Chunks smaller than this take tens of microseconds at most and keep
   the GIL: releasing and retaking it would cost more than it frees.
   Larger ones (src/engine/chunked-copy.c cuts them) run without it,
   and Ctrl-C is answered between them.  */
#define COPY_KEEP_GIL_MAX ((size_t) 1 << 20)

int
gmpy_copy_usable (const gmpy_copy_hold *hold)
{
  /* The destination is written; the source only read.  */
  for (int i = 0; i < 2; i++)
    if (hold->arrays[i] != NULL
        && gmpy_array_usable_for ((arraypy_object *) hold->arrays[i], i == 0)
           < 0)
      return -1;
  return 0;
}

int
gmpy_copy_enter (gmpy_copy_hold *hold, PyObject *dst_array, int dst_device,
                 PyObject *src_array, int src_device, gm_stream *stream)
{
  hold->arrays[0] = dst_array;
  hold->arrays[1] = src_array;
  hold->held[0] = hold->held[1] = NULL;
  if (gmpy_copy_usable (hold) < 0)
    return -1;
  /* From here free () from another thread, while the GIL is released
     (the wait below, a copy between chunks), only marks an array freed:
     its memory stays until gmpy_copy_leave.  */
  hold->held[0] = gmpy_array_hold (dst_array);
  hold->held[1] = gmpy_array_hold (src_array);
  /* A backend copy without a stream waits for the work queued before it
     on its devices, and py-array-copy.c's copies and small ones keep the
     GIL: behind a long kernel they would block the program with no way
     to see Ctrl-C.  So that work is waited for here, as gmpy_wait waits;
     the copies then take their usual microseconds.  */
  if (stream == NULL
      && ((dst_device >= 0 && gmpy_wait (dst_device, NULL) < 0)
          || (src_device >= 0 && src_device != dst_device
              && gmpy_wait (src_device, NULL) < 0)
          || gmpy_copy_usable (hold) < 0))
    {
      gmpy_copy_leave (hold);
      return -1;
    }
  return 0;
}

void
gmpy_copy_leave (gmpy_copy_hold *hold)
{
  gmpy_array_unhold (hold->held[0]);
  gmpy_array_unhold (hold->held[1]);
  hold->held[0] = hold->held[1] = NULL;
}

/* What a copy's chunks do around them (gm_copy_step): the GIL let go
   during large ones; between them Ctrl-C answered and the arrays
   checked again, since the Python code run meanwhile (a signal
   handler) may have freed one.  */
typedef struct copy_step_ctx
{
  const gmpy_copy_hold *hold;
  PyThreadState *saved;
  bool raised;                 /* the step set a Python exception */
} copy_step_ctx;

static gm_status
chunk_between (void *ctx, size_t done)
{
  copy_step_ctx *c = ctx;

  if (PyErr_CheckSignals () < 0 || gmpy_copy_usable (c->hold) < 0)
    {
      c->raised = true;
      return GM_ERR_FAILED;
    }
  return GM_OK;
}

static void
chunk_leave (void *ctx, size_t n)
{
  copy_step_ctx *c = ctx;

  if (n >= COPY_KEEP_GIL_MAX)
    c->saved = PyEval_SaveThread ();
}

static void
chunk_enter (void *ctx)
{
  copy_step_ctx *c = ctx;

  if (c->saved != NULL)
    PyEval_RestoreThread (c->saved);
  c->saved = NULL;
}

int
gmpy_guarded_copy (const gmpy_devbuf *dst_buf, const gmpy_devbuf *src_buf,
                   void *dst, int dst_device, const void *src,
                   int src_device, size_t nbytes, const gmpy_dispatch *d)
{
  gm_stream *stream = d->stream;
  gmpy_dispatch plain;
  gmpy_copy_hold hold;
  copy_step_ctx ctx = {&hold, NULL, false};
  gm_copy_step step = {&ctx, chunk_between, chunk_leave, chunk_enter};
  gm_status status;

  /* A recorded copy goes to the recorder (py-graph-record.c); one on a
     stream of its own is refused.  */
  if (nbytes > 0 && d->mode == GMPY_GRAPH)
    {
      if (gmpy_dispatch_record (d, "a copy") < 0)
        return -1;
      if ((dst_buf != NULL && gmpy_devbuf_usable (dst_buf) < 0)
          || (src_buf != NULL && gmpy_devbuf_usable (src_buf) < 0))
        return -1;
      if (gm_copy_overlaps (dst, src, nbytes))
        return gmpy_graph_refuse ("a copy between overlapping ranges");
      return gmpy_graph_device_copy (dst_buf, src_buf, dst, dst_device, src,
                                     src_device, nbytes);
    }

  /* CUDA leaves the result of a copy between overlapping ranges
     undefined; on every backend it goes through host memory instead,
     complete on return, so that the result is that of memmove (and of
     NumPy's assignment between overlapping views).  */
  if (gm_copy_overlaps (dst, src, nbytes))
    {
      void *between = PyMem_RawMalloc (nbytes);
      int result;

      if (between == NULL)
        {
          PyErr_NoMemory ();
          return -1;
        }
      gmpy_dispatch_of (NULL, &plain);
      result = gmpy_guarded_copy (NULL, src_buf, between, -1, src,
                                  src_device, nbytes, &plain);
      if (result == 0)
        result = gmpy_guarded_copy (dst_buf, NULL, dst, dst_device,
                                    between, -1, nbytes, &plain);
      PyMem_RawFree (between);
      return result;
    }

  /* Inside a gpumem.concurrent() block: host data goes to its device's
     queue, a copy within one device is queued on its stream, one between
     devices on the destination's, ordered with the source's; the rest
     (into host memory the caller did not hand to
     gmpy_concurrent_to_host, or what the block declines) stays
     synchronous, waiting below for the block's work on the devices
     involved.  */
  if (d->mode == GMPY_CONCURRENT && nbytes > 0 && dst_device >= 0)
    {
      int queued = 0;

      if ((dst_buf != NULL && gmpy_devbuf_usable (dst_buf) < 0)
          || (src_buf != NULL && gmpy_devbuf_usable (src_buf) < 0))
        return -1;
      if (src_device < 0)
        queued = gmpy_concurrent_from_host (dst_device, dst, src, nbytes);
      else if (src_device != dst_device)
        queued = gmpy_concurrent_peer_copy (dst, dst_device, src, src_device,
                                            nbytes);
      else
        {
          gmpy_dispatch block = *d;
          if (gmpy_dispatch_stream (&block, dst_device, &stream) < 0)
            return -1;
        }
      if (queued < 0)
        return -1;
      if (queued > 0)
        return 0;
    }
  if (gmpy_copy_enter (&hold, dst_buf != NULL ? dst_buf->array : NULL,
                       dst_device, src_buf != NULL ? src_buf->array : NULL,
                       src_device, stream) < 0)
    return -1;
  /* Before the first chunk no Python code ran since gmpy_copy_enter
     looked at the arrays.  */
  status = gm_copy_chunked (dst, dst_device, src, src_device, nbytes, stream,
                            &step);
  if (status != GM_OK && !ctx.raised)
    gmpy_raise (status);
  gmpy_copy_leave (&hold);
  return status == GM_OK ? 0 : -1;
}

int
gmpy_backend_copy (void *dst, int dst_device, const void *src,
                   int src_device, size_t nbytes, gm_stream *stream)
{
  gmpy_dispatch d;

  gmpy_dispatch_of (stream, &d);
  return gmpy_guarded_copy (NULL, NULL, dst, dst_device, src, src_device,
                            nbytes, &d);
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

/* Resolves *COUNT, the elements the copy WHAT moves (< 0: all of the
   source), and checks it against each side whose number of elements is
   known (-1: not yet, or checked already): the device side first (the
   destination when DEVICE_IS_DST), then the other.  Each side is
   checked once a call: a count given is checked against the side known
   first, the other side when its size is read.  0, or -1 with
   ValueError.  */
static int
copy_count (const char *what, Py_ssize_t *count, bool device_is_dst,
            Py_ssize_t device_n, Py_ssize_t other_n)
{
  const char *sides[2] = {device_is_dst ? "destination" : "source",
                          device_is_dst ? "source" : "destination"};
  Py_ssize_t sizes[2] = {device_n, other_n};
  Py_ssize_t source_n = device_is_dst ? other_n : device_n;

  if (*count < 0 && source_n >= 0)
    *count = source_n;
  for (int i = 0; i < 2; i++)
    if (*count >= 0 && sizes[i] >= 0 && *count > sizes[i])
      {
        PyErr_Format (PyExc_ValueError,
                      "%s: %zd elements asked for, but the %s has only %zd",
                      what, *count, sides[i], sizes[i]);
        return -1;
      }
  return 0;
}

int
gmpy_copy_device_to_device (const gmpy_devbuf *dst, const gmpy_devbuf *src,
                            Py_ssize_t count, const gmpy_dispatch *d)
{
  if (dst->dtype != src->dtype)
    {
      PyErr_Format (PyExc_TypeError, "copy: device arrays of different "
                    "dtypes (%s from %s); device copies need equal dtypes",
                    gm_dtypes[dst->dtype].name, gm_dtypes[src->dtype].name);
      return -1;
    }
  if (copy_count ("copy", &count, false, src->size, dst->size) < 0)
    return -1;
  if (dst->readonly)
    {
      PyErr_SetString (PyExc_ValueError, "copy: dst is read-only");
      return -1;
    }
  if (d->stream_obj != NULL)
    {
      int sdev = ((streampy_object *) d->stream_obj)->device;
      if (sdev != dst->device && sdev != src->device)
        {
          PyErr_Format (PyExc_ValueError, "copy: the stream is on device "
                        "%d, the arrays on %d and %d", sdev, dst->device,
                        src->device);
          return -1;
        }
    }
  return gmpy_guarded_copy (dst, src, dst->data, dst->device, src->data,
                            src->device,
                            (size_t) count * gm_dtypes[dst->dtype].itemsize,
                            d);
}

int
gmpy_copy_host_to_device (const gmpy_devbuf *dst, PyObject *src,
                          Py_ssize_t count, const gmpy_dispatch *d,
                          const char *src_name)
{
  /* A count given is checked against the destination now, before the
     source is looked at; all of the source, once it is counted.  */
  Py_ssize_t dst_unchecked = count < 0 ? dst->size : -1;
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
  if (copy_count (src_name, &count, true, dst->size, -1) < 0)
    return -1;

  if (PyObject_CheckBuffer (src)
      && PyObject_GetBuffer (src, &view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT)
           == 0)
    {
      if (gm_dtype_from_format (view.format, (size_t) view.itemsize)
          == (int) dst->dtype)
        {
          Py_ssize_t n = view.len / view.itemsize;
          if (copy_count (src_name, &count, true, dst_unchecked, n) < 0)
            result = -1;
          else if (count > 0 && d->mode == GMPY_GRAPH && d->stream == NULL)
            result = gmpy_graph_host_copy (dst, &view,
                                           (size_t) count * itemsize, true);
          else
            result = gmpy_guarded_copy (dst, NULL, dst->data, dst->device,
                                        view.buf, -1,
                                        (size_t) count * itemsize, d);
          PyBuffer_Release (&view);
          return result;
        }
      /* Converted below into new memory, where the block could no
         longer see that this data is still to be filled.  */
      result = gmpy_concurrent_check_pending (view.buf, (size_t) view.len);
      PyBuffer_Release (&view);
      if (result < 0)
        return -1;
      result = -1;
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
  if (copy_count (src_name, &count, true, dst_unchecked, src_size) < 0)
    goto done;
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
  result = gmpy_guarded_copy (dst, NULL, dst->data, dst->device, view.buf,
                              -1, (size_t) count * itemsize, d);
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
                          Py_ssize_t count, const gmpy_dispatch *d,
                          const char *dst_name)
{
  gmpy_state *state = gmpy_state_get ();
  size_t itemsize = gm_dtypes[src->dtype].itemsize;
  PyObject *array = NULL, *dtype = NULL, *flags = NULL, *staging = NULL;
  PyObject *flat = NULL, *slice = NULL, *ndarray_type;
  Py_ssize_t dst_size;
  Py_buffer view;
  int result = -1, writeable, is_ndarray;

  if (copy_count (dst_name, &count, false, src->size, -1) < 0)
    return -1;

  if (PyObject_CheckBuffer (dst)
      && PyObject_GetBuffer (dst, &view, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS
                                           | PyBUF_FORMAT) == 0)
    {
      if (gm_dtype_from_format (view.format, (size_t) view.itemsize)
          == (int) src->dtype)
        {
          Py_ssize_t n = view.len / view.itemsize;
          int queued = 0;

          if (copy_count (dst_name, &count, false, -1, n) < 0)
            result = -1;
          else if (count > 0 && d->mode == GMPY_GRAPH && d->stream == NULL)
            result = gmpy_graph_host_copy (src, &view,
                                           (size_t) count * itemsize, false);
          else if (d->mode == GMPY_CONCURRENT
                   && (queued = gmpy_devbuf_usable (src) < 0 ? -1
                       : gmpy_concurrent_to_host (&view, view.buf,
                                                  src->data, src->device,
                                                  (size_t) count * itemsize))
                        != 0)
            {
              /* Queued: the block holds VIEW until the bytes land.  */
              if (queued > 0)
                return 0;
              result = -1;
            }
          else
            result = gmpy_guarded_copy (NULL, src, view.buf, -1, src->data,
                                        src->device,
                                        (size_t) count * itemsize, d);
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
                    dst_name, GMPY_TYPE_NAME (Py_TYPE (dst)));
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
  if (copy_count (dst_name, &count, false, -1, dst_size) < 0)
    goto done;
  staging = PyObject_CallMethod (state->numpy, "empty", "nO", count,
                                 state->np_dtypes[src->dtype]);
  if (staging == NULL
      || PyObject_GetBuffer (staging, &view, PyBUF_C_CONTIGUOUS
                                               | PyBUF_WRITABLE) < 0)
    goto done;
  result = gmpy_guarded_copy (NULL, src, view.buf, -1, src->data,
                              src->device, (size_t) count * itemsize, d);
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
