/* py-stream.c -- gpumem.Stream and gpumem.Event.

   A Stream is a queue of work on one device: copies and kernels given
   stream= are enqueued there and return at once.  Without stream= work
   runs on the device's default stream and completes before the call
   returns.  An Event marks a point in a stream, for waiting and timing.  */

#include "gm-python.h"

typedef struct eventpy_object
{
  PyObject_HEAD
  gm_event *event;
  int device;
  bool recorded;
} eventpy_object;

int
gmpy_stream_arg (PyObject *obj, int device, gm_stream **stream)
{
  gmpy_state *state = gmpy_state_get ();
  streampy_object *s;

  *stream = NULL;
  if (obj == NULL || obj == Py_None)
    return 0;
  if (!PyObject_TypeCheck (obj, state->stream_type))
    {
      PyErr_Format (PyExc_TypeError, "stream must be None or a "
                    "gpumem.Stream, not %.100s", Py_TYPE (obj)->tp_name);
      return -1;
    }
  s = (streampy_object *) obj;
  if (device >= 0 && s->device != device)
    {
      PyErr_Format (PyExc_ValueError, "the stream is on device %d, the "
                    "data on device %d", s->device, device);
      return -1;
    }
  *stream = s->stream;
  return 0;
}

static PyObject *
streampy_new (PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
  static char *keywords[] = {"device", NULL};
  PyObject *device_obj = Py_None;
  streampy_object *self;
  gm_status status;
  int device;

  if (!PyArg_ParseTupleAndKeywords (args, kwargs, "|O:Stream", keywords,
                                    &device_obj)
      || gmpy_device_arg (device_obj, &device) < 0)
    return NULL;
  self = (streampy_object *) type->tp_alloc (type, 0);
  if (self == NULL)
    return NULL;
  self->device = device;
  status = gm_backend_current->stream_create (device, &self->stream);
  if (status != GM_OK)
    {
      self->stream = NULL;
      Py_DECREF (self);
      return gmpy_raise (status);
    }
  return (PyObject *) self;
}

static void
streampy_dealloc (PyObject *self)
{
  streampy_object *s = (streampy_object *) self;
  PyTypeObject *type = Py_TYPE (self);

  PyObject_GC_UnTrack (self);
  if (s->stream != NULL)
    gm_backend_current->stream_destroy (s->stream);
  type->tp_free (self);
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
  return PyUnicode_FromFormat ("<gpumem.Stream on device %d at %p>",
                               s->device,
                               gm_backend_current->stream_handle (s->stream));
}

static PyGetSetDef streampy_getset[] = {
  {"device", streampy_get_device, NULL, "The stream's Device.", NULL},
  {"handle", streampy_get_handle, NULL,
   "The cudaStream_t as an int (0 on the host backend).", NULL},
  {NULL, NULL, NULL, NULL, NULL}
};

static PyMethodDef streampy_methods[] = {
  {"synchronize", streampy_synchronize, METH_NOARGS,
   "synchronize()\n--\n\nWait until all work in the stream is done."},
  {"query", streampy_query, METH_NOARGS,
   "query()\n--\n\nTrue when all work in the stream is done."},
  {NULL, NULL, 0, NULL}
};

static PyType_Slot streampy_slots[] = {
  {Py_tp_new, streampy_new},
  {Py_tp_dealloc, streampy_dealloc},
  {Py_tp_traverse, streampy_traverse},
  {Py_tp_repr, streampy_repr},
  {Py_tp_getset, streampy_getset},
  {Py_tp_methods, streampy_methods},
  {Py_tp_doc, "Stream(device=None)\n--\n\nA queue of asynchronous work on "
              "one device."},
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
  static char *keywords[] = {"device", NULL};
  PyObject *device_obj = Py_None;
  eventpy_object *self;
  gm_status status;
  int device;

  if (!PyArg_ParseTupleAndKeywords (args, kwargs, "|O:Event", keywords,
                                    &device_obj)
      || gmpy_device_arg (device_obj, &device) < 0)
    return NULL;
  self = (eventpy_object *) type->tp_alloc (type, 0);
  if (self == NULL)
    return NULL;
  self->device = device;
  status = gm_backend_current->event_create (device, &self->event);
  if (status != GM_OK)
    {
      self->event = NULL;
      Py_DECREF (self);
      return gmpy_raise (status);
    }
  return (PyObject *) self;
}

static void
eventpy_dealloc (PyObject *self)
{
  eventpy_object *e = (eventpy_object *) self;
  PyTypeObject *type = Py_TYPE (self);

  PyObject_GC_UnTrack (self);
  if (e->event != NULL)
    gm_backend_current->event_destroy (e->event);
  type->tp_free (self);
  Py_DECREF (type);
}

static PyObject *
eventpy_record (PyObject *self, PyObject *args, PyObject *kwargs)
{
  static char *keywords[] = {"stream", NULL};
  eventpy_object *e = (eventpy_object *) self;
  PyObject *stream_obj = Py_None;
  gm_stream *stream;
  gm_status status;

  if (!PyArg_ParseTupleAndKeywords (args, kwargs, "|O:record", keywords,
                                    &stream_obj)
      || gmpy_stream_arg (stream_obj, e->device, &stream) < 0)
    return NULL;
  status = gm_backend_current->event_record (e->event, stream);
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
                    "%.100s", Py_TYPE (end_obj)->tp_name);
      return NULL;
    }
  end = (eventpy_object *) end_obj;
  if (!start->recorded || !end->recorded)
    {
      PyErr_SetString (PyExc_ValueError, "both events must be recorded "
                                         "before elapsed_ms");
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
   "record(stream=None)\n--\n\nMark this point of STREAM (default: the "
   "default stream)."},
  {"synchronize", eventpy_synchronize, METH_NOARGS,
   "synchronize()\n--\n\nWait until the recorded point is reached."},
  {"query", eventpy_query, METH_NOARGS,
   "query()\n--\n\nTrue when the recorded point has been reached."},
  {"elapsed_ms", eventpy_elapsed_ms, METH_O,
   "elapsed_ms(end)\n--\n\nMilliseconds from this event to END."},
  {NULL, NULL, 0, NULL}
};

static PyType_Slot eventpy_slots[] = {
  {Py_tp_new, eventpy_new},
  {Py_tp_dealloc, eventpy_dealloc},
  {Py_tp_traverse, streampy_traverse},
  {Py_tp_methods, eventpy_methods},
  {Py_tp_doc, "Event(device=None)\n--\n\nA point in a stream, for waiting "
              "and timing."},
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
