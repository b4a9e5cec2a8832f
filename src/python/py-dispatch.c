/* py-dispatch.c -- where a call of the Python layer goes: the one
   place that decides, from the call's stream= argument and the blocks
   open in its thread (a graph recording, a `with stream:` block, a
   gpumem.concurrent() block), whether the call is complete on return,
   queued on a stream, queued in the concurrent block or recorded, and
   which stream it uses (py-dispatch.h states the rule).  The call sites
   read the answer, a gmpy_dispatch; they ask no block themselves.  */

#include "gm-python.h"

/* The mode of a call naming STREAM (NULL: none) in this thread.  */
static gmpy_mode
mode_of (const gm_stream *stream)
{
  if (gmpy_graph_capture != NULL)
    return GMPY_GRAPH;
  if (stream != NULL)
    return GMPY_STREAM;
  return gmpy_concurrent_active () ? GMPY_CONCURRENT : GMPY_PLAIN;
}

/* gmpy_dispatch_get; CHECK_DEVICE: a given stream must be DEVICE's.  */
static int
dispatch_read (PyObject *stream_obj, int device, bool check_device,
               gmpy_dispatch *d)
{
  d->device = device;
  d->stream = NULL;
  d->stream_obj = NULL;
  if (stream_obj == Py_None)
    stream_obj = NULL;
  if (stream_obj == NULL && device >= 0)
    {
      /* The `with` block's list keeps its stream alive for the call.  */
      PyObject *current = gmpy_stream_current (device);
      if (current == NULL)
        return -1;
      if (current != Py_None)
        stream_obj = current;
      Py_DECREF (current);
    }
  else if (stream_obj != NULL)
    {
      if (!PyObject_TypeCheck (stream_obj, gmpy_state_get ()->stream_type))
        {
          PyErr_Format (PyExc_TypeError, "stream must be None or a "
                        "gpumem.Stream, not %.100s",
                        GMPY_TYPE_NAME (Py_TYPE (stream_obj)));
          return -1;
        }
      if (check_device && device >= 0
          && ((streampy_object *) stream_obj)->device != device)
        {
          PyErr_Format (PyExc_ValueError, "the stream is on device %d, the "
                        "data on device %d",
                        ((streampy_object *) stream_obj)->device, device);
          return -1;
        }
    }
  if (stream_obj != NULL)
    {
      d->stream_obj = stream_obj;
      d->stream = ((streampy_object *) stream_obj)->stream;
    }
  d->mode = mode_of (d->stream);
  return 0;
}

int
gmpy_dispatch_get (PyObject *stream_obj, int device, gmpy_dispatch *d)
{
  return dispatch_read (stream_obj, device, true, d);
}

int
gmpy_dispatch_any_device (PyObject *stream_obj, int device, gmpy_dispatch *d)
{
  return dispatch_read (stream_obj, device, false, d);
}

void
gmpy_dispatch_of (gm_stream *stream, gmpy_dispatch *d)
{
  d->device = -1;
  d->stream = stream;
  d->stream_obj = NULL;
  d->mode = mode_of (stream);
}

int
gmpy_dispatch_stream (gmpy_dispatch *d, int device, gm_stream **stream)
{
  if (d->mode == GMPY_CONCURRENT)
    {
      if (gmpy_concurrent_stream (device, &d->stream) < 0)
        return -1;
      d->mode = GMPY_STREAM;
    }
  if (stream != NULL)
    *stream = d->stream;
  return 0;
}

int
gmpy_dispatch_handle (int device, void **handle)
{
  gmpy_dispatch d;
  gm_stream *stream;

  *handle = NULL;
  /* No block open in any thread, the common case: the default stream,
     without asking the thread's blocks.  */
  if (!gmpy_concurrent_active () && !gmpy_stream_context_open ())
    stream = NULL;
  else if (gmpy_dispatch_get (NULL, device, &d) < 0
           || gmpy_dispatch_stream (&d, device, &stream) < 0)
    return -1;
  if (stream != NULL)
    {
      *handle = gm_backend_current->stream_handle (stream);
      return 0;
    }
  /* The default stream: the caller's work must see gpumem's non-blocking
     streams' (the ordering rule).  */
  if (gmpy_non_blocking_streams ()
      && gm_backend_current->join_streams != NULL)
    {
      gm_status status = gm_backend_current->join_streams (device);
      if (status != GM_OK)
        {
          gmpy_raise (status);
          return -1;
        }
    }
  return 0;
}

int
gmpy_dispatch_record (const gmpy_dispatch *d, const char *what)
{
  char refused[160];

  if (d->mode != GMPY_GRAPH)
    return 0;
  if (d->stream == NULL)
    return 1;
  snprintf (refused, sizeof refused, "%s with stream= (or in a `with "
            "stream:` block)", what);
  return gmpy_graph_refuse (refused);
}

int
gmpy_stream_arg (PyObject *obj, int device, gm_stream **stream)
{
  gmpy_dispatch d;

  *stream = NULL;
  if (gmpy_dispatch_get (obj, device, &d) < 0)
    return -1;
  *stream = d.stream;
  return 0;
}
