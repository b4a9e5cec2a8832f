/* py-array-copy.c -- copies of DeviceArrays of any layout, fill and
   copy().

   Copies between a strided view and host memory go to the backend as
   rows (strided.c) when that takes few calls, else through a staging
   buffer covering the view's span; copies between two device layouts
   on one device likewise, else through host memory.  Every copy without
   a stream follows gmpy_copy_enter's rule (py-copy-engine.c).  Kernels,
   gpumem.copy and the collectives take contiguous memory only
   (gmpy_devbuf_get); gmpy_copy_strided serves gpumem.copy when a
   strided view is given.  */

#include "gm-python.h"

#include <string.h>

/* A strided copy taking more backend calls than this goes through a
   staging buffer instead (one copy of the view's whole span).  */
#define DIRECT_CALLS_MAX 64

/* A layout with every stride made non-negative: reversed axes are read
   from their other end.  */
typedef struct pos_layout
{
  char *data;                       /* element 0 of the flipped view */
  int64_t shape[GM_MAX_NDIM];
  int64_t strides[GM_MAX_NDIM];     /* bytes, >= 0 */
  bool flipped[GM_MAX_NDIM];
  bool any_flipped;
  size_t span;                      /* bytes from data to past the end */
} pos_layout;

static void
positive_layout (const arraypy_object *array, pos_layout *out)
{
  size_t itemsize = gm_dtypes[array->dtype].itemsize;
  bool empty = false;

  out->data = array->data;
  out->any_flipped = false;
  out->span = itemsize;
  for (int i = 0; i < array->ndim; i++)
    if (array->shape[i] == 0)
      empty = true;
  for (int i = 0; i < array->ndim; i++)
    {
      Py_ssize_t stride = array->strides[i];
      out->shape[i] = array->shape[i];
      out->flipped[i] = stride < 0 && array->shape[i] > 1;
      if (out->flipped[i])
        {
          /* An empty array may have no memory at all.  */
          if (!empty)
            out->data += stride * (array->shape[i] - 1);
          stride = -stride;
          out->any_flipped = true;
        }
      out->strides[i] = stride;
      if (array->shape[i] > 1)
        out->span += (size_t) stride * (size_t) (array->shape[i] - 1);
    }
  if (empty)
    out->span = 0;
}

/* C-contiguous strides of NDIM-dimensional SHAPE.  */
static void
c_strides (int ndim, const int64_t *shape, size_t itemsize, int64_t *strides)
{
  int64_t stride = (int64_t) itemsize;

  for (int i = ndim - 1; i >= 0; i--)
    {
      strides[i] = stride;
      stride *= shape[i] > 1 ? shape[i] : 1;
    }
}

/* NDIM-dimensional NumPy array OBJ with LAYOUT's flipped axes reversed
   (a view): a new reference or NULL.  */
static PyObject *
flip_axes (const pos_layout *layout, int ndim, PyObject *obj)
{
  PyObject *key = PyTuple_New (ndim), *result;

  for (int i = 0; key != NULL && i < ndim; i++)
    {
      PyObject *step = PyLong_FromLong (layout->flipped[i] ? -1 : 1);
      PyObject *slice = step ? PySlice_New (Py_None, Py_None, step) : NULL;
      Py_XDECREF (step);
      if (slice == NULL)
        Py_CLEAR (key);
      else
        PyTuple_SET_ITEM (key, i, slice);
    }
  if (key == NULL)
    return NULL;
  result = PyObject_GetItem (obj, key);
  Py_DECREF (key);
  return result;
}

/* One backend copy, with the GIL held.  Every caller runs inside
   gmpy_copy_enter / gmpy_copy_leave: the arrays are held and, without a
   stream, the work queued before is done, so the copy takes its usual
   time and free () from another thread leaves the memory to it.  0, or
   -1 with the backend's error set.  */
static int
held_copy (void *dst, int dst_device, const void *src, int src_device,
           size_t nbytes, gm_stream *stream)
{
  gm_status status = gm_backend_current->copy (dst, dst_device, src,
                                               src_device, nbytes, stream);
  return status == GM_OK ? 0 : gmpy_raise_int (status);
}

/* Runs a strided copy PLAN (with the GIL held, inside gmpy_copy_enter,
   as held_copy); 0, or -1 with the backend's error set.  */
static int
run_plan (const gm_copy_plan *plan, char *dst, int dst_device,
          const char *src, int src_device, gm_stream *stream)
{
  gm_status status = gm_strided_copy (plan, dst, dst_device, src,
                                      src_device, stream);
  return status == GM_OK ? 0 : gmpy_raise_int (status);
}

/* A new numpy.ndarray of ARRAY's shape and dtype, C-contiguous.  */
static PyObject *
host_empty (const arraypy_object *array)
{
  gmpy_state *state = gmpy_state_get ();
  PyObject *shape = gmpy_shape_tuple (array->ndim, array->shape);

  if (shape == NULL)
    return NULL;
  return PyObject_CallMethod (state->numpy, "empty", "NO", shape,
                              state->np_dtypes[array->dtype]);
}

/* The memory of numpy array HOST (C-contiguous) in VIEW; 0 or -1.  */
static int
host_buffer (PyObject *host, Py_buffer *view, bool writable)
{
  return PyObject_GetBuffer (host, view, PyBUF_C_CONTIGUOUS
                                         | (writable ? PyBUF_WRITABLE : 0));
}

/* A numpy.ndarray over the bytes of SPAN (a uint8 array) with LAYOUT's
   shape and strides and ARRAY's dtype: a new reference or NULL.  */
static PyObject *
span_view (const arraypy_object *array, const pos_layout *layout,
           PyObject *span)
{
  gmpy_state *state = gmpy_state_get ();
  PyObject *shape = gmpy_shape_tuple (array->ndim, array->shape);
  PyObject *strides = PyTuple_New (array->ndim);
  PyObject *ndarray = NULL, *kwargs = NULL, *result = NULL;

  if (shape == NULL || strides == NULL)
    goto done;
  for (int i = 0; i < array->ndim; i++)
    {
      PyObject *s = PyLong_FromLongLong (layout->strides[i]);
      if (s == NULL)
        goto done;
      PyTuple_SET_ITEM (strides, i, s);
    }
  ndarray = PyObject_GetAttrString (state->numpy, "ndarray");
  kwargs = Py_BuildValue ("{s:O,s:O,s:O,s:O}", "shape", shape, "dtype",
                          state->np_dtypes[array->dtype], "buffer", span,
                          "strides", strides);
  if (ndarray != NULL && kwargs != NULL)
    {
      PyObject *empty = PyTuple_New (0);
      if (empty != NULL)
        result = PyObject_Call (ndarray, empty, kwargs);
      Py_XDECREF (empty);
    }
done:
  Py_XDECREF (shape);
  Py_XDECREF (strides);
  Py_XDECREF (ndarray);
  Py_XDECREF (kwargs);
  return result;
}

/* A uint8 numpy array of NBYTES holding LAYOUT's span of ARRAY's memory,
   copied and complete: a new reference or NULL.  Called inside
   gmpy_copy_enter (ARRAY held).  */
static PyObject *
download_span (const arraypy_object *array, const pos_layout *layout,
               gm_stream *stream)
{
  PyObject *span = PyObject_CallMethod (gmpy_state_get ()->numpy, "empty",
                                        "ns", (Py_ssize_t) layout->span,
                                        "uint8");
  Py_buffer buf;
  int rc;

  if (span == NULL)
    return NULL;
  if (host_buffer (span, &buf, true) < 0)
    {
      Py_DECREF (span);
      return NULL;
    }
  rc = held_copy (buf.buf, -1, layout->data, array->device, layout->span,
                  stream);
  PyBuffer_Release (&buf);
  if (rc < 0 || (stream != NULL && gmpy_wait (array->device, stream) < 0))
    Py_CLEAR (span);
  return span;
}

PyObject *
gmpy_array_strided_to_host (arraypy_object *array, gm_stream *stream)
{
  size_t itemsize = gm_dtypes[array->dtype].itemsize;
  int64_t host_strides[GM_MAX_NDIM];
  PyObject *result = NULL, *tmp = NULL;
  gmpy_copy_hold hold;
  pos_layout layout;
  gm_copy_plan plan;
  gm_status status;

  if (gmpy_array_usable_for (array, false) < 0)
    return NULL;
  positive_layout (array, &layout);
  c_strides (array->ndim, layout.shape, itemsize, host_strides);
  status = gm_strided_plan (array->ndim, layout.shape, itemsize, host_strides,
                            layout.strides, &plan);
  if (status != GM_OK)
    return gmpy_raise (status);
  if (gmpy_copy_enter (&hold, NULL, -1, (PyObject *) array, array->device,
                       stream) < 0)
    return NULL;
  if (plan.calls <= DIRECT_CALLS_MAX)
    {
      Py_buffer buf;
      tmp = host_empty (array);
      if (tmp == NULL || host_buffer (tmp, &buf, true) < 0)
        goto done;
      if (run_plan (&plan, buf.buf, -1, layout.data, array->device,
                    stream) < 0)
        {
          PyBuffer_Release (&buf);
          goto done;
        }
      PyBuffer_Release (&buf);
      /* The host buffer is ours: complete before it is read.  */
      if (stream != NULL && gmpy_wait (array->device, stream) < 0)
        goto done;
    }
  else
    {
      /* A strided view of the staged span: made contiguous below.  */
      PyObject *span = download_span (array, &layout, stream);
      if (span == NULL)
        goto done;
      tmp = span_view (array, &layout, span);
      Py_DECREF (span);
      if (tmp == NULL)
        goto done;
    }
  if (layout.any_flipped)
    {
      Py_SETREF (tmp, flip_axes (&layout, array->ndim, tmp));
      if (tmp == NULL)
        goto done;
    }
  /* One copy into C order, only where TMP is not in it already.  */
  if (layout.any_flipped || plan.calls > DIRECT_CALLS_MAX)
    result = PyObject_CallMethod (gmpy_state_get ()->numpy,
                                  "ascontiguousarray", "O", tmp);
  else
    result = Py_NewRef (tmp);
done:
  gmpy_copy_leave (&hold);
  Py_XDECREF (tmp);
  return result;
}

/* SRC as a C-contiguous numpy array of ARRAY's dtype and shape, its
   flipped axes reversed as LAYOUT says: SRC is broadcast to the shape
   when BROADCAST, else must have as many elements (any shape).  Its
   dtype must cast to ARRAY's under NumPy's same_kind rule, unless
   UNSAFE.  A new reference, or NULL (TypeError, ValueError).  */
static PyObject *
host_source (const arraypy_object *array, const pos_layout *layout,
             PyObject *src, bool broadcast, bool unsafe, const char *what)
{
  gmpy_state *state = gmpy_state_get ();
  PyObject *np_src, *shaped = NULL, *result = NULL, *shape, *dtype = NULL;
  PyObject *ok;

  np_src = PyObject_CallMethod (state->numpy, "asarray", "O", src);
  if (np_src == NULL)
    return NULL;
  if (!unsafe)
    {
      dtype = PyObject_GetAttrString (np_src, "dtype");
      ok = dtype ? PyObject_CallMethod (state->numpy, "can_cast", "OOs",
                                        dtype, state->np_dtypes[array->dtype],
                                        "same_kind")
                 : NULL;
      if (ok == NULL)
        goto done;
      if (ok != Py_True)
        {
          Py_DECREF (ok);
          PyErr_Format (PyExc_TypeError, "%s: %S cannot be stored in a %s "
                        "array (NumPy's same_kind casting)", what, dtype,
                        gm_dtypes[array->dtype].name);
          goto done;
        }
      Py_DECREF (ok);
    }
  shape = gmpy_shape_tuple (array->ndim, array->shape);
  if (shape == NULL)
    goto done;
  if (broadcast)
    shaped = PyObject_CallMethod (state->numpy, "broadcast_to", "OO", np_src,
                                  shape);
  else
    {
      PyObject *size = PyObject_GetAttrString (np_src, "size");
      Py_ssize_t n = size ? PyLong_AsSsize_t (size) : -1;
      Py_XDECREF (size);
      if (n == -1 && PyErr_Occurred ())
        {
          Py_DECREF (shape);
          goto done;
        }
      if (n != array->size)
        PyErr_Format (PyExc_ValueError, "%s has %zd elements; the "
                      "DeviceArray has %zd", what, n, array->size);
      else
        shaped = PyObject_CallMethod (np_src, "reshape", "O", shape);
    }
  Py_DECREF (shape);
  if (shaped == NULL)
    goto done;
  if (layout->any_flipped)
    {
      Py_SETREF (shaped, flip_axes (layout, array->ndim, shaped));
      if (shaped == NULL)
        goto done;
    }
  result = PyObject_CallMethod (state->numpy, "ascontiguousarray", "OO",
                                shaped, state->np_dtypes[array->dtype]);
done:
  Py_DECREF (np_src);
  Py_XDECREF (shaped);
  Py_XDECREF (dtype);
  return result;
}

int
gmpy_array_strided_from_host (arraypy_object *array, PyObject *src,
                              bool broadcast, bool unsafe, gm_stream *stream,
                              const char *what)
{
  size_t itemsize = gm_dtypes[array->dtype].itemsize;
  int64_t host_strides[GM_MAX_NDIM];
  PyObject *host;
  gmpy_copy_hold hold;
  pos_layout layout;
  gm_copy_plan plan;
  gm_status status;
  Py_buffer buf;
  int rc = -1;

  if (gmpy_array_usable (array) < 0)
    return -1;
  if (array->readonly)
    {
      PyErr_SetString (PyExc_ValueError, "the DeviceArray is read-only");
      return -1;
    }
  positive_layout (array, &layout);
  host = host_source (array, &layout, src, broadcast, unsafe, what);
  if (host == NULL)
    return -1;
  /* Converting SRC ran Python code, which may have freed the array:
     gmpy_copy_enter checks it again.  */
  if (host_buffer (host, &buf, false) < 0)
    {
      Py_DECREF (host);
      return -1;
    }
  if (gmpy_copy_enter (&hold, (PyObject *) array, array->device, NULL, -1,
                       stream) < 0)
    {
      PyBuffer_Release (&buf);
      Py_DECREF (host);
      return -1;
    }
  c_strides (array->ndim, layout.shape, itemsize, host_strides);
  status = gm_strided_plan (array->ndim, layout.shape, itemsize,
                            layout.strides, host_strides, &plan);
  if (status != GM_OK)
    gmpy_raise (status);
  else if (plan.calls <= DIRECT_CALLS_MAX)
    rc = run_plan (&plan, layout.data, array->device, buf.buf, -1, stream);
  else
    {
      /* Read, modify and write back the view's whole span: the bytes
         between its elements are written with the values they had.  */
      PyObject *span = download_span (array, &layout, stream), *view = NULL;
      if (span != NULL)
        view = span_view (array, &layout, span);
      /* A wait for STREAM let other threads run: the array is held, but
         refused once freed.  */
      if (view != NULL && PyObject_SetItem (view, Py_Ellipsis, host) == 0
          && gmpy_copy_usable (&hold) == 0)
        {
          Py_buffer span_buf;
          if (host_buffer (span, &span_buf, false) == 0)
            {
              rc = held_copy (layout.data, array->device, span_buf.buf, -1,
                              layout.span, stream);
              PyBuffer_Release (&span_buf);
            }
        }
      Py_XDECREF (view);
      Py_XDECREF (span);
    }
  PyBuffer_Release (&buf);
  /* HOST goes with this call: the copy must be done with it.  */
  if (rc == 0 && stream != NULL && gmpy_wait (array->device, stream) < 0)
    rc = -1;
  gmpy_copy_leave (&hold);
  Py_DECREF (host);
  return rc;
}

/* Writes NBYTES-sized PATTERN into all N elements at DATA on DEVICE:
   memset when its bytes are all equal, else the first element, then
   copies that double the filled part.  Called inside gmpy_copy_enter.
   0 or -1.  */
static int
fill_contiguous (char *data, int device, Py_ssize_t n, size_t itemsize,
                 const unsigned char *pattern, gm_stream *stream)
{
  bool uniform = true;
  Py_ssize_t done = 1;

  if (n == 0)
    return 0;
  for (size_t i = 1; i < itemsize; i++)
    uniform = uniform && pattern[i] == pattern[0];
  if (uniform)
    {
      gm_status status = gm_backend_current->memset (
        data, device, pattern[0], (size_t) n * itemsize, stream);
      return status == GM_OK ? 0 : gmpy_raise_int (status);
    }
  /* From pageable memory the backend holds the bytes when it returns.  */
  if (held_copy (data, device, pattern, -1, itemsize, stream) < 0)
    return -1;
  while (done < n)
    {
      Py_ssize_t more = done < n - done ? done : n - done;
      if (held_copy (data + (size_t) done * itemsize, device, data, device,
                     (size_t) more * itemsize, stream) < 0)
        return -1;
      done += more;
    }
  if (stream == NULL)
    return gmpy_wait (device, NULL);
  return 0;
}

int
gmpy_array_fill_value (arraypy_object *array, PyObject *value)
{
  gmpy_state *state = gmpy_state_get ();
  size_t itemsize = gm_dtypes[array->dtype].itemsize;
  unsigned char pattern[16];
  PyObject *scalar, *ndim;
  gmpy_dispatch d;
  gm_stream *stream;
  Py_buffer buf;
  long dims;
  int rc;

  if (gmpy_array_usable (array) < 0)
    return -1;
  if (array->readonly)
    {
      PyErr_SetString (PyExc_ValueError, "the DeviceArray is read-only");
      return -1;
    }
  scalar = PyObject_CallMethod (state->numpy, "array", "OO", value,
                                state->np_dtypes[array->dtype]);
  if (scalar == NULL)
    return -1;
  ndim = PyObject_GetAttrString (scalar, "ndim");
  dims = ndim ? PyLong_AsLong (ndim) : -1;
  Py_XDECREF (ndim);
  if (dims != 0)
    {
      Py_DECREF (scalar);
      if (!PyErr_Occurred ())
        PyErr_Format (PyExc_ValueError, "fill needs a scalar, not %.100s "
                      "of %ld dimensions", GMPY_TYPE_NAME (Py_TYPE (value)),
                      dims);
      return -1;
    }
  if (host_buffer (scalar, &buf, false) < 0)
    {
      Py_DECREF (scalar);
      return -1;
    }
  memcpy (pattern, buf.buf, itemsize);
  PyBuffer_Release (&buf);
  if (gmpy_array_usable (array) < 0
      || gmpy_dispatch_get (NULL, array->device, &d) < 0)
    {
      Py_DECREF (scalar);
      return -1;
    }
  stream = d.stream;
  if (array->contiguous)
    {
      gmpy_copy_hold hold;
      rc = gmpy_copy_enter (&hold, (PyObject *) array, array->device, NULL,
                            -1, stream);
      if (rc == 0)
        {
          rc = fill_contiguous (array->data, array->device, array->size,
                                itemsize, pattern, stream);
          gmpy_copy_leave (&hold);
        }
    }
  else
    rc = gmpy_array_strided_from_host (array, scalar, true, false, stream,
                                       "value");
  Py_DECREF (scalar);
  if (rc == 0)
    gmpy_array_note_stream ((PyObject *) array, &d);
  return rc;
}

PyObject *
gmpy_array_fill (PyObject *self, PyObject *value)
{
  if (gmpy_array_prepare (&self, 1) < 0
      || gmpy_array_fill_value ((arraypy_object *) self, value) < 0)
    return NULL;
  Py_RETURN_NONE;
}

/* True when the bytes of A's and B's views may overlap.  */
static bool
spans_overlap (const arraypy_object *a, const arraypy_object *b)
{
  pos_layout la, lb;

  positive_layout (a, &la);
  positive_layout (b, &lb);
  if (la.span == 0 || lb.span == 0)
    return false;
  return la.data < lb.data + lb.span && lb.data < la.data + la.span;
}

int
gmpy_array_assign (arraypy_object *dst, arraypy_object *src,
                   gm_stream *stream)
{
  size_t itemsize = gm_dtypes[dst->dtype].itemsize;
  bool same_shape = dst->ndim == src->ndim;
  PyObject *host;
  int rc;

  if (gmpy_array_usable (dst) < 0 || gmpy_array_usable_for (src, false) < 0)
    return -1;
  if (dst->readonly)
    {
      PyErr_SetString (PyExc_ValueError, "the DeviceArray is read-only");
      return -1;
    }
  for (int i = 0; same_shape && i < dst->ndim; i++)
    same_shape = dst->shape[i] == src->shape[i];
  if (same_shape && dst->size == 0)
    return 0;
  if (same_shape && dst->dtype == src->dtype && dst->device == src->device
      && !spans_overlap (dst, src))
    {
      int64_t shape[GM_MAX_NDIM], dst_strides[GM_MAX_NDIM];
      int64_t src_strides[GM_MAX_NDIM];
      char *dst_data = dst->data, *src_data = src->data;
      gm_copy_plan plan;
      gm_status status;

      /* Reverse the axes DST walks backwards in both layouts.  */
      for (int i = 0; i < dst->ndim; i++)
        {
          shape[i] = dst->shape[i];
          dst_strides[i] = dst->strides[i];
          src_strides[i] = src->strides[i];
          if (dst_strides[i] < 0 && shape[i] > 1)
            {
              dst_data += dst_strides[i] * (shape[i] - 1);
              src_data += src_strides[i] * (shape[i] - 1);
              dst_strides[i] = -dst_strides[i];
              src_strides[i] = -src_strides[i];
            }
        }
      status = gm_strided_plan (dst->ndim, shape, itemsize, dst_strides,
                                src_strides, &plan);
      if (status != GM_OK)
        return gmpy_raise_int (status);
      if (plan.calls <= DIRECT_CALLS_MAX)
        {
          gmpy_copy_hold hold;

          if (gmpy_copy_enter (&hold, (PyObject *) dst, dst->device,
                               (PyObject *) src, src->device, stream) < 0)
            return -1;
          rc = run_plan (&plan, dst_data, dst->device, src_data, src->device,
                         stream);
          if (rc == 0 && stream == NULL && gmpy_wait (dst->device, NULL) < 0)
            rc = -1;
          gmpy_copy_leave (&hold);
          return rc;
        }
    }
  /* Through host memory: SRC is read whole before DST is written, so
     overlapping views assign as NumPy's do.  */
  {
    gmpy_dispatch src_d;
    if (gmpy_dispatch_get (NULL, src->device, &src_d) < 0)
      return -1;
    /* Complete on return, whatever the stream: HOST is read next.  */
    host = gmpy_array_strided_to_host (src, src_d.stream);
  }
  if (host == NULL)
    return -1;
  rc = gmpy_array_strided_from_host (dst, host, true, true, stream, "value");
  Py_DECREF (host);
  return rc;
}

PyObject *
gmpy_array_copy (PyObject *self, PyObject *unused)
{
  arraypy_object *array = (arraypy_object *) self, *copy;
  gmpy_dispatch d;
  gm_stream *stream;

  if (gmpy_array_usable_for (array, false) < 0
      || gmpy_dispatch_get (NULL, array->device, &d) < 0)
    return NULL;
  stream = d.stream;
  copy = gmpy_array_new_in (array->ndim, array->shape, array->dtype,
                            array->device, stream, array->memory);
  if (copy == NULL)
    return NULL;
  if (array->contiguous)
    {
      gmpy_copy_hold hold;
      int rc = gmpy_copy_enter (&hold, (PyObject *) copy, array->device,
                                (PyObject *) array, array->device, stream);
      if (rc == 0)
        {
          rc = held_copy (copy->data, array->device, array->data,
                          array->device, gmpy_array_nbytes (array), stream);
          if (rc == 0 && stream == NULL && gmpy_wait (array->device, NULL) < 0)
            rc = -1;
          gmpy_copy_leave (&hold);
        }
      if (rc < 0)
        Py_CLEAR (copy);
      else
        gmpy_array_note_stream ((PyObject *) copy, &d);
    }
  else if (gmpy_array_assign (copy, array, stream) < 0)
    Py_CLEAR (copy);
  else
    gmpy_array_note_stream ((PyObject *) copy, &d);
  return (PyObject *) copy;
}

static bool
is_strided (PyObject *obj)
{
  return gmpy_array_check (obj) && !((arraypy_object *) obj)->contiguous;
}

int
gmpy_copy_strided (PyObject *dst, PyObject *src, PyObject *count,
                   PyObject *stream_obj)
{
  arraypy_object *view;
  Py_ssize_t n = -1;
  gmpy_dispatch d;
  gm_stream *stream;
  PyObject *host;
  int rc;

  if (!is_strided (dst) && !is_strided (src))
    return 0;
  view = (arraypy_object *) (is_strided (dst) ? dst : src);
  if (gmpy_array_usable (view) < 0)
    return -1;
  if (count != NULL && count != Py_None)
    {
      if (gmpy_size_arg (count, "count", &n) < 0)
        return -1;
      if (n != view->size)
        {
          PyErr_Format (PyExc_ValueError, "copy: %s is a strided view of %zd "
                        "elements; count must be None or %zd", view == (void *)
                        dst ? "dst" : "src", view->size, view->size);
          return -1;
        }
    }
  if (gmpy_dispatch_get (stream_obj, view->device, &d) < 0)
    return -1;
  stream = d.stream;
  /* Between devices: through host memory, complete on return.  */
  if (gmpy_array_check (dst) && gmpy_array_check (src)
      && ((arraypy_object *) dst)->device != ((arraypy_object *) src)->device)
    stream = NULL;
  if (!gmpy_array_check (dst))
    {
      /* Into a host array of as many elements, as copy_to_host (out=).  */
      PyObject *result = PyObject_CallMethod (src, "copy_to_host", "OO", dst,
                                              stream_obj ? stream_obj
                                                         : Py_None);
      if (result == NULL)
        return -1;
      Py_DECREF (result);
      return 1;
    }
  if (gmpy_array_check (src))
    {
      arraypy_object *a = (arraypy_object *) dst, *b = (arraypy_object *) src;
      bool same_shape = a->ndim == b->ndim;
      if (a->dtype != b->dtype)
        {
          PyErr_Format (PyExc_TypeError, "copy: device arrays of different "
                        "dtypes (%s from %s); device copies need equal "
                        "dtypes", gm_dtypes[a->dtype].name,
                        gm_dtypes[b->dtype].name);
          return -1;
        }
      if (a->size != b->size)
        {
          PyErr_Format (PyExc_ValueError, "copy: dst has %zd elements, src "
                        "%zd; a copy with a strided view copies all of it",
                        a->size, b->size);
          return -1;
        }
      for (int i = 0; same_shape && i < a->ndim; i++)
        same_shape = a->shape[i] == b->shape[i];
      if (same_shape)
        {
          if (gmpy_array_assign (a, b, stream) < 0)
            return -1;
          gmpy_array_note_stream (dst, &d);
          return 1;
        }
    }
  /* Through host memory: SRC there first (complete), unless it is there
     already; then into DST, complete on return.  */
  if (!gmpy_array_check (src))
    host = Py_NewRef (src);
  else
    host = gmpy_array_strided_to_host ((arraypy_object *) src, NULL);
  if (host == NULL)
    return -1;
  rc = gmpy_array_strided_from_host ((arraypy_object *) dst, host, false,
                                     false, stream, "src");
  if (rc == 0)
    gmpy_array_note_stream (dst, &d);
  Py_DECREF (host);
  return rc < 0 ? -1 : 1;
}
