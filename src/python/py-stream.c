/* py-stream.c -- gpumem.Stream and gpumem.Event.

   A Stream is a queue of work on one device: copies and kernels given
   stream= are enqueued there and return at once.  Without stream= work
   goes to the stream of the innermost `with stream:` block of this
   thread for the data's device, if any, and is then queued there too;
   else it runs on the device's default stream and completes before the
   call returns.  An Event marks a point in a stream, for waiting and
   timing.  */

#include "gm-python.h"


PyObject *
gmpy_current_stream_fn (PyObject *module, PyObject *args, PyObject *kwargs)
{
  static char *keywords[] = {"device", NULL};
  PyObject *device_obj = Py_None;
  int device;

  if (!PyArg_ParseTupleAndKeywords (args, kwargs, "|O:current_stream",
                                    keywords, &device_obj)
      || gmpy_device_arg (device_obj, &device) < 0)
    return NULL;
  return gmpy_stream_current (device);
}

/* Counts S (just made) when it is non-blocking.  */
static void
note_non_blocking (streampy_object *s)
{
  s->non_blocking
    = (gm_backend_current->stream_flags (s->stream)
       & GM_STREAM_NON_BLOCKING) != 0;
  if (s->non_blocking)
    gmpy_non_blocking_note (true);
}

static PyObject *
streampy_new (PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
  static char *keywords[] = {"device", "non_blocking", NULL};
  PyObject *device_obj = Py_None, *non_blocking_obj = Py_False;
  streampy_object *self;
  gm_status status;
  int device, non_blocking;

  if (!PyArg_ParseTupleAndKeywords (args, kwargs, "|O$O:Stream", keywords,
                                    &device_obj, &non_blocking_obj))
    return NULL;
  if (!PyBool_Check (non_blocking_obj))
    {
      PyErr_Format (PyExc_TypeError, "Stream: non_blocking must be True or "
                    "False, not %.100s", GMPY_TYPE_NAME (Py_TYPE (non_blocking_obj)));
      return NULL;
    }
  non_blocking = non_blocking_obj == Py_True;
  if (gmpy_device_arg (device_obj, &device) < 0)
    return NULL;
  self = (streampy_object *) GMPY_TYPE_ALLOC (type);
  if (self == NULL)
    return NULL;
  self->device = device;
  self->external = false;
  status = gm_backend_current->stream_create (device,
                                              non_blocking
                                              ? GM_STREAM_NON_BLOCKING : 0,
                                              &self->stream);
  if (status != GM_OK)
    {
      self->stream = NULL;
      Py_DECREF (self);
      return gmpy_raise (status);
    }
  note_non_blocking (self);
  return (PyObject *) self;
}

static void
streampy_dealloc (PyObject *self)
{
  streampy_object *s = (streampy_object *) self;
  PyTypeObject *type = Py_TYPE (self);

  PyObject_GC_UnTrack (self);
  if (s->non_blocking)
    gmpy_non_blocking_note (false);
  if (s->stream != NULL)
    gm_backend_current->stream_destroy (s->stream);
  GMPY_TYPE_FREE (type, self);
  Py_DECREF (type);
}

static int
streampy_traverse (PyObject *self, visitproc visit, void *arg)
{
  Py_VISIT (Py_TYPE (self));
  return 0;
}

static PyObject *
streampy_synchronize (PyObject *self, PyObject *unused)
{
  streampy_object *s = (streampy_object *) self;
  if (gmpy_wait (s->device, s->stream) < 0)
    return NULL;
  Py_RETURN_NONE;
}

static PyObject *
streampy_query (PyObject *self, PyObject *unused)
{
  bool done;
  gm_status status
    = gm_backend_current->stream_query (((streampy_object *) self)->stream,
                                        &done);
  if (status != GM_OK)
    return gmpy_raise (status);
  return PyBool_FromLong (done);
}

static PyObject *
streampy_from_handle (PyObject *cls, PyObject *args, PyObject *kwargs)
{
  static char *keywords[] = {"handle", "device", NULL};
  PyObject *handle_obj, *device_obj = Py_None;
  PyTypeObject *type = (PyTypeObject *) cls;
  streampy_object *self;
  gm_status status;
  long long value;
  int device;

  if (!PyArg_ParseTupleAndKeywords (args, kwargs, "O|O:from_handle",
                                    keywords, &handle_obj, &device_obj))
    return NULL;
  if (gmpy_stream_number (handle_obj, "from_handle: the handle", &value) < 0)
    return NULL;
  if (value < 0)
    {
      PyErr_Format (PyExc_ValueError, "from_handle: the handle %lld is not "
                    "a CUDA stream (a cudaStream_t's value is not negative)",
                    value);
      return NULL;
    }
  if (gmpy_device_arg (device_obj, &device) < 0)
    return NULL;
  self = (streampy_object *) GMPY_TYPE_ALLOC (type);
  if (self == NULL)
    return NULL;
  self->device = device;
  self->external = true;
  status = gm_backend_current->stream_wrap (device,
                                             (void *) (uintptr_t) value,
                                             &self->stream);
  if (status != GM_OK)
    {
      self->stream = NULL;
      Py_DECREF (self);
      return gmpy_raise (status);
    }
  note_non_blocking (self);
  return (PyObject *) self;
}

/* Refused inside a gpumem.concurrent() block of this thread, as that
   block is refused inside this one (py-concurrent.c): the stream would
   take the block's calls for its device, unordered with the block's
   queues of the other devices and not waited for by its end.  */
static PyObject *
streampy_enter (PyObject *self, PyObject *unused)
{
  if (gmpy_concurrent_active ())
    {
      PyErr_SetString (PyExc_RuntimeError, "a `with stream:` block cannot "
                       "open inside a gpumem.concurrent() block of this "
                       "thread (its calls would be neither ordered with the "
                       "block's nor waited for by its end): pass stream= "
                       "to the calls that should go there instead");
      return NULL;
    }
  if (gmpy_stream_context_push (self) < 0)
    return NULL;
  return Py_NewRef (self);
}

static PyObject *
streampy_exit (PyObject *self, PyObject *args)
{
  if (gmpy_stream_context_pop (self) < 0)
    return NULL;
  Py_RETURN_FALSE;
}

static PyObject *
streampy_wait_event (PyObject *self, PyObject *event_obj)
{
  streampy_object *s = (streampy_object *) self;
  eventpy_object *e;
  gm_status status;

  if (!PyObject_TypeCheck (event_obj, gmpy_state_get ()->event_type))
    {
      PyErr_Format (PyExc_TypeError, "wait_event needs a gpumem.Event, not "
                    "%.100s", GMPY_TYPE_NAME (Py_TYPE (event_obj)));
      return NULL;
    }
  e = (eventpy_object *) event_obj;
  status = gm_backend_current->stream_wait_event (s->device, s->stream,
                                                  e->event);
  if (status != GM_OK)
    return gmpy_raise (status);
  Py_RETURN_NONE;
}

static PyObject *
streampy_wait_stream (PyObject *self, PyObject *other_obj)
{
  streampy_object *s = (streampy_object *) self, *other;
  gm_event *event = NULL;
  gm_status status;

  if (!PyObject_TypeCheck (other_obj, Py_TYPE (self)))
    {
      PyErr_Format (PyExc_TypeError, "wait_stream needs a gpumem.Stream, not "
                    "%.100s", GMPY_TYPE_NAME (Py_TYPE (other_obj)));
      return NULL;
    }
  other = (streampy_object *) other_obj;
  /* An event recorded now on OTHER marks the work queued there so far;
     destroying it after the wait is queued is allowed.  */
  status = gm_backend_current->event_create (other->device, 0, &event);
  if (status == GM_OK)
    status = gm_backend_current->event_record (event, other->stream);
  if (status == GM_OK)
    status = gm_backend_current->stream_wait_event (s->device, s->stream,
                                                    event);
  if (event != NULL)
    gm_backend_current->event_destroy (event);
  if (status != GM_OK)
    return gmpy_raise (status);
  Py_RETURN_NONE;
}

static PyObject *
streampy_get_external (PyObject *self, void *closure)
{
  return PyBool_FromLong (((streampy_object *) self)->external);
}

static PyObject *
streampy_get_non_blocking (PyObject *self, void *closure)
{
  return PyBool_FromLong (((streampy_object *) self)->non_blocking);
}

static PyObject *
streampy_get_device (PyObject *self, void *closure)
{
  return gmpy_device_get (((streampy_object *) self)->device);
}

static PyObject *
streampy_get_handle (PyObject *self, void *closure)
{
  return PyLong_FromVoidPtr (gm_backend_current->stream_handle (
    ((streampy_object *) self)->stream));
}

static PyObject *
streampy_repr (PyObject *self)
{
  streampy_object *s = (streampy_object *) self;
  return PyUnicode_FromFormat ("<gpumem.Stream%s on device %d at %p>",
                               s->external ? " (external)" : "", s->device,
                               gm_backend_current->stream_handle (s->stream));
}

static PyGetSetDef streampy_getset[] = {
  {"device", streampy_get_device, NULL, "The stream's Device.", NULL},
  {"handle", streampy_get_handle, NULL,
   "The cudaStream_t as an int (on the host backend 0, or what\n"
   "from_handle was given).", NULL},
  {"non_blocking", streampy_get_non_blocking, NULL,
   "True for a non-blocking stream (Stream(non_blocking=True), or a\n"
   "from_handle stream that CUDA made non-blocking): not ordered with\n"
   "the default stream by CUDA.  gpumem's calls without stream= still\n"
   "see the work gpumem queued on it; other libraries' work on the\n"
   "default stream does not wait for it.", NULL},
  {"external", streampy_get_external, NULL,
   "True for a stream made by Stream.from_handle (gpumem does not own\n"
   "or destroy it).", NULL},
  {NULL, NULL, NULL, NULL, NULL}
};

static PyMethodDef streampy_methods[] = {
  {"synchronize", streampy_synchronize, METH_NOARGS,
   "synchronize($self)\n--\n\nWait until all work in the stream is done."},
  {"query", streampy_query, METH_NOARGS,
   "query($self)\n--\n\nTrue when all work in the stream is done."},
  {"wait_event", streampy_wait_event, METH_O,
   "wait_event($self, event, /)\n--\n\n"
   "Make work queued on this stream from now on wait until EVENT's\n"
   "recorded point is reached; the host does not wait.  Nothing when\n"
   "EVENT was never recorded."},
  {"wait_stream", streampy_wait_stream, METH_O,
   "wait_stream($self, stream, /)\n--\n\n"
   "Make work queued on this stream from now on wait for all work queued\n"
   "on STREAM so far; the host does not wait."},
  {"from_handle", (PyCFunction) (void (*) (void)) streampy_from_handle,
   METH_CLASS | METH_VARARGS | METH_KEYWORDS,
   "from_handle($cls, handle, device=None)\n--\n\n"
   "A Stream over a cudaStream_t made by other code (HANDLE, an int; 1\n"
   "and 2 are CUDA's legacy and per-thread default streams), on DEVICE\n"
   "(default: the current one).  gpumem never destroys it: it must\n"
   "outlive the Stream and the work queued on it."},
  {"__enter__", streampy_enter, METH_NOARGS,
   "__enter__($self)\n--\n\n"
   "Start a with block: calls without stream= on data of this stream's\n"
   "device, in this thread, are queued on it (and are not complete when\n"
   "they return) until the block ends.  RuntimeError inside a\n"
   "gpumem.concurrent() block of this thread."},
  {"__exit__", streampy_exit, METH_VARARGS,
   "__exit__($self, *exc_info)\n--\n\n"
   "End the with block, in any order and from any thread: the current\n"
   "stream is again the innermost open block's.  Does not wait."},
  {NULL, NULL, 0, NULL}
};

static PyType_Slot streampy_slots[] = {
  {Py_tp_new, streampy_new},
  {Py_tp_dealloc, streampy_dealloc},
  {Py_tp_traverse, streampy_traverse},
  {Py_tp_repr, streampy_repr},
  {Py_tp_getset, streampy_getset},
  {Py_tp_methods, streampy_methods},
  {Py_tp_doc, "Stream(device=None, *, non_blocking=False)\n--\n\nA queue "
              "of asynchronous work on one device.\n\nnon_blocking=True "
              "(CuPy's name) makes a CUDA non-blocking stream,\nnot ordered "
              "with the legacy default stream by CUDA; gpumem's\ncalls "
              "without stream= still see all work gpumem queued on it,\nbut "
              "other libraries' work on the default stream does not.\n"
              "`with stream:` makes it the current stream of its device in "
              "this\nthread (gpumem.current_stream)."},
  {0, NULL}
};

static PyType_Spec streampy_spec = {
  .name = "gpumem.Stream",
  .basicsize = sizeof (streampy_object),
  .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_IMMUTABLETYPE,
  .slots = streampy_slots,
};

/* Events.  */

static PyObject *
eventpy_new (PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
  static char *keywords[] = {"device", "timing", "blocking", "interprocess",
                             NULL};
  PyObject *device_obj = Py_None, *timing_obj = Py_None;
  eventpy_object *self;
  gm_status status;
  int device, timing, blocking = 0, interprocess = 0;

  if (!PyArg_ParseTupleAndKeywords (args, kwargs, "|O$Opp:Event", keywords,
                                    &device_obj, &timing_obj, &blocking,
                                    &interprocess)
      || gmpy_device_arg (device_obj, &device) < 0)
    return NULL;
  timing = timing_obj == Py_None ? !interprocess
                                 : PyObject_IsTrue (timing_obj);
  if (timing < 0)
    return NULL;
  if (timing && interprocess)
    {
      PyErr_SetString (PyExc_ValueError, "an interprocess Event cannot "
                       "time: leave timing out or pass timing=False");
      return NULL;
    }
  self = (eventpy_object *) GMPY_TYPE_ALLOC (type);
  if (self == NULL)
    return NULL;
  self->device = device;
  self->timing = timing;
  self->interprocess = interprocess;
  status = gm_backend_current->event_create (
    device, (timing ? GM_EVENT_TIMING : 0u)
              | (blocking ? GM_EVENT_BLOCKING : 0u)
              | (interprocess ? GM_EVENT_INTERPROCESS : 0u),
    &self->event);
  if (status != GM_OK)
    {
      self->event = NULL;
      Py_DECREF (self);
      return gmpy_raise (status);
    }
  return (PyObject *) self;
}

PyObject *
gmpy_event_wrap (gm_event *event, int device, PyObject *shared)
{
  eventpy_object *self
    = (eventpy_object *) GMPY_TYPE_ALLOC (gmpy_state_get ()->event_type);
  if (self == NULL)
    {
      gm_backend_current->event_destroy (event);
      return NULL;
    }
  self->event = event;
  self->device = device;
  self->interprocess = true;
  self->shared = Py_NewRef (shared);
  return (PyObject *) self;
}

static void
eventpy_dealloc (PyObject *self)
{
  eventpy_object *e = (eventpy_object *) self;
  PyTypeObject *type = Py_TYPE (self);

  PyObject_GC_UnTrack (self);
  /* The event goes before the shared memory and lease it uses.  */
  if (e->event != NULL)
    gm_backend_current->event_destroy (e->event);
  Py_CLEAR (e->shared);
  GMPY_TYPE_FREE (type, self);
  Py_DECREF (type);
}

static PyObject *
eventpy_record (PyObject *self, PyObject *args, PyObject *kwargs)
{
  static char *keywords[] = {"stream", NULL};
  eventpy_object *e = (eventpy_object *) self;
  PyObject *stream_obj = Py_None;
  gmpy_dispatch d;
  gm_status status;

  if (!PyArg_ParseTupleAndKeywords (args, kwargs, "|O:record", keywords,
                                    &stream_obj)
      || gmpy_dispatch_get (stream_obj, e->device, &d) < 0)
    return NULL;
  status = gm_backend_current->event_record (e->event, d.stream);
  if (status != GM_OK)
    return gmpy_raise (status);
  e->recorded = true;
  Py_RETURN_NONE;
}

static PyObject *
eventpy_synchronize (PyObject *self, PyObject *unused)
{
  eventpy_object *e = (eventpy_object *) self;

  for (;;)
    {
      gm_status status;
      Py_BEGIN_ALLOW_THREADS
      status = gm_backend_current->event_wait (e->event, 50000);
      Py_END_ALLOW_THREADS
      if (status == GM_OK)
        Py_RETURN_NONE;
      if (status != GM_ERR_NOT_READY)
        return gmpy_raise (status);
      if (PyErr_CheckSignals () < 0)
        return NULL;
    }
}

static PyObject *
eventpy_query (PyObject *self, PyObject *unused)
{
  bool done;
  gm_status status
    = gm_backend_current->event_query (((eventpy_object *) self)->event,
                                       &done);
  if (status != GM_OK)
    return gmpy_raise (status);
  return PyBool_FromLong (done);
}

static PyObject *
eventpy_elapsed_ms (PyObject *self, PyObject *end_obj)
{
  eventpy_object *start = (eventpy_object *) self, *end;
  gm_status status;
  float ms;

  if (!PyObject_TypeCheck (end_obj, Py_TYPE (self)))
    {
      PyErr_Format (PyExc_TypeError, "elapsed_ms needs a gpumem.Event, not "
                    "%.100s", GMPY_TYPE_NAME (Py_TYPE (end_obj)));
      return NULL;
    }
  end = (eventpy_object *) end_obj;
  if (!start->recorded || !end->recorded)
    {
      PyErr_SetString (PyExc_ValueError, "both events must be recorded "
                                         "before elapsed_ms");
      return NULL;
    }
  if (!start->timing || !end->timing)
    {
      PyErr_SetString (PyExc_ValueError, "elapsed_ms needs events made with "
                                         "timing=True");
      return NULL;
    }
  /* Both must have completed; wait for the end one (Ctrl-C honoured).  */
  if (eventpy_synchronize (end_obj, NULL) == NULL)
    return NULL;
  Py_DECREF (Py_None);
  status = gm_backend_current->event_elapsed_ms (start->event, end->event,
                                                 &ms);
  if (status != GM_OK)
    return gmpy_raise (status);
  return PyFloat_FromDouble (ms);
}

static PyMethodDef eventpy_methods[] = {
  {"record", (PyCFunction) (void (*) (void)) eventpy_record,
   METH_VARARGS | METH_KEYWORDS,
   "record($self, stream=None)\n--\n\nMark this point of STREAM (default: the "
   "current stream of the\nevent's device, see Stream.__enter__, else its "
   "default stream)."},
  {"synchronize", eventpy_synchronize, METH_NOARGS,
   "synchronize($self)\n--\n\nWait until the recorded point is reached."},
  {"query", eventpy_query, METH_NOARGS,
   "query($self)\n--\n\nTrue when the recorded point has been reached."},
  {"elapsed_ms", eventpy_elapsed_ms, METH_O,
   "elapsed_ms($self, end, /)\n--\n\nMilliseconds from this event to END."},
  {NULL, NULL, 0, NULL}
};

static PyType_Slot eventpy_slots[] = {
  {Py_tp_new, eventpy_new},
  {Py_tp_dealloc, eventpy_dealloc},
  {Py_tp_traverse, streampy_traverse},
  {Py_tp_methods, eventpy_methods},
  {Py_tp_doc, "Event(device=None, *, timing=True, blocking=False, "
              "interprocess=False)\n--\n\n"
              "A point in a stream, for waiting and timing.\n\n"
              "interprocess=True makes an event that gpumem.share hands to\n"
              "other processes of this node (timing is then off);\n"
              "timing=False makes a lighter event that elapsed_ms refuses;\n"
              "blocking=True creates it with CUDA's cudaEventBlockingSync\n"
              "(other code's cudaEventSynchronize then sleeps; gpumem's own\n"
              "waits poll and nap either way)."},
  {0, NULL}
};

static PyType_Spec eventpy_spec = {
  .name = "gpumem.Event",
  .basicsize = sizeof (eventpy_object),
  .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_IMMUTABLETYPE,
  .slots = eventpy_slots,
};

int
gmpy_stream_init (PyObject *module, gmpy_state *state)
{
  state->stream_type = (PyTypeObject *) PyType_FromModuleAndSpec (
    module, &streampy_spec, NULL);
  if (state->stream_type == NULL
      || PyModule_AddType (module, state->stream_type) < 0)
    return -1;
  state->event_type = (PyTypeObject *) PyType_FromModuleAndSpec (
    module, &eventpy_spec, NULL);
  if (state->event_type == NULL
      || PyModule_AddType (module, state->event_type) < 0)
    return -1;
  return 0;
}
