/* py-graph.c -- gpumem.graph: the calls of a block recorded once and
   replayed.

       with gpumem.graph() as g:      # records, runs nothing
           kernel(a, b, n)
           gpumem.copy_from_gpu(b, host, n)
       for _ in range(k):
           g()                         # runs them all, complete on return

   The recorder (py-graph-record.c) takes the block's calls; this file
   opens and closes the recording and replays it: the NumPy arrays the
   uploads read are checked and copied into their staging, one graph per
   device is launched (devices work at the same time), every device is
   waited for, and the downloads land in their arrays.  A replay
   allocates nothing.  */

#include "gm-python.h"

#include <stddef.h>
#include <string.h>

#include <structmember.h>

typedef struct graphpy_object
{
  PyObject_HEAD
#ifdef GMPY_VECTORCALL
  vectorcallfunc vectorcall;   /* g(): graphpy_vectorcall */
#endif
  gmpy_graph_rec rec;
  bool entered;                /* the with statement ran once */
} graphpy_object;

#ifdef GMPY_VECTORCALL
static PyObject *graphpy_vectorcall (PyObject *self, PyObject *const *args,
                                     size_t nargsf, PyObject *kwnames);
#endif

static PyObject *
graphpy_new (PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
  static char *keywords[] = {"name", NULL};
  PyObject *name = NULL;
  graphpy_object *self;

  if (!PyArg_ParseTupleAndKeywords (args, kwargs, "|U:graph", keywords,
                                    &name))
    return NULL;
  self = (graphpy_object *) GMPY_TYPE_ALLOC (type);
  if (self == NULL)
    return NULL;
#ifdef GMPY_VECTORCALL
  self->vectorcall = graphpy_vectorcall;
#endif
  self->rec.name = name != NULL
                     ? Py_NewRef (name)
                     : PyUnicode_FromFormat ("at %p", (void *) self);
  if (self->rec.name == NULL)
    {
      Py_DECREF (self);
      return NULL;
    }
  return (PyObject *) self;
}

static void
graphpy_dealloc (PyObject *self)
{
  graphpy_object *graph = (graphpy_object *) self;
  PyTypeObject *type = Py_TYPE (self);

  PyObject_GC_UnTrack (self);
  /* The backend ends after Python: at exit it is still up.  */
  if (gm_backend_current != NULL)
    gmpy_graph_rec_clear (&graph->rec);
  Py_CLEAR (graph->rec.name);
  GMPY_TYPE_FREE (type, self);
  Py_DECREF (type);
}

static int
graphpy_traverse (PyObject *self, visitproc visit, void *arg)
{
  Py_VISIT (Py_TYPE (self));
  return gmpy_graph_rec_traverse (&((graphpy_object *) self)->rec, visit,
                                  arg);
}

static PyObject *
graphpy_enter (PyObject *self, PyObject *unused)
{
  graphpy_object *graph = (graphpy_object *) self;

  if (graph->entered)
    {
      PyErr_SetString (PyExc_RuntimeError, "this gpumem.graph() was "
                       "captured already; make a new one for another with");
      return NULL;
    }
  if (gmpy_graph_rec_begin (&graph->rec) < 0)
    return NULL;
  graph->entered = true;
  return Py_NewRef (self);
}

static PyObject *
graphpy_exit (PyObject *self, PyObject *args)
{
  graphpy_object *graph = (graphpy_object *) self;
  PyObject *exc_type = Py_None;

  if (PyTuple_GET_SIZE (args) > 0)
    exc_type = PyTuple_GET_ITEM (args, 0);
  if (!graph->rec.recorder.capturing)
    {
      PyErr_SetString (PyExc_RuntimeError, "this gpumem.graph() is not "
                       "being captured");
      return NULL;
    }
  /* A block that raised records nothing; its exception goes on.  */
  if (gmpy_graph_rec_end (&graph->rec, exc_type != Py_None) < 0)
    return NULL;
  Py_RETURN_FALSE;
}

/* -1 with gpumem.Error unless STAGE's array still has its memory where
   the capture found it.  CHECKED is the array that owns the memory of
   the stage checked just before in this replay (NULL for the first):
   no Python code runs between the two checks, so its memory is where
   that check found it.  */
static int
stage_check (graphpy_object *graph, const gmpy_graph_stage *stage,
             PyObject *checked)
{
  Py_buffer view;
  bool same = false;

  /* The array that owns the memory is asked only when the host object
     is not that array itself (which the second check asks), and once a
     replay for the rows of one array.  */
  if (stage->root == stage->host || stage->root == checked)
    same = true;
  else if (PyObject_GetBuffer (stage->root, &view, PyBUF_STRIDED_RO) == 0)
    {
      same = view.buf == stage->root_buf && view.len == stage->root_len;
      PyBuffer_Release (&view);
    }
  if (same
      && PyObject_GetBuffer (stage->host, &view,
                             PyBUF_C_CONTIGUOUS
                               | (stage->to_device ? 0 : PyBUF_WRITABLE))
           == 0)
    {
      same = view.buf == stage->buf && view.len == stage->len;
      PyBuffer_Release (&view);
    }
  else
    same = false;
  if (same)
    return 0;
  PyErr_Clear ();
  PyErr_Format (gmpy_state_get ()->error, "gpumem.graph %R: the host array "
                "the graph copies %s was resized, reallocated or made "
                "read-only since the capture; capture the graph again",
                graph->rec.name, stage->to_device ? "from" : "into");
  return -1;
}

/* The one device of GRAPH's work, or -1 when it has several or none.  */
static int
only_device (const graphpy_object *graph)
{
  int device = -1;

  for (int d = 0; d < graph->rec.recorder.ndev; d++)
    if (graph->rec.recorder.graphs[d] != NULL)
      {
        if (device >= 0)
          return -1;
        device = d;
      }
  return device;
}

static PyObject *
graphpy_replay_with (graphpy_object *graph, PyObject *stream_obj)
{
  gmpy_graph_rec *rec = &graph->rec;
  gm_stream *stream = NULL;
  int failed = 0;

  if (!rec->recorder.ready)
    {
      PyErr_Format (PyExc_RuntimeError, "gpumem.graph %R: %s", rec->name,
                    rec->recorder.capturing
                      ? "a replay inside its own capture"
                      : "nothing captured (the with block never ran, "
                        "raised or failed)");
      return NULL;
    }
  if (gmpy_graph_refuse ("a replay of another graph") < 0)
    return NULL;
  if (stream_obj != NULL && stream_obj != Py_None)
    {
      int device = only_device (graph);
      if (rec->nstages > 0 || device < 0)
        {
          PyErr_Format (PyExc_ValueError, "gpumem.graph %R: stream= needs "
                        "a graph of one device's work that copies no host "
                        "memory (its host copies land when a replay "
                        "without stream= returns)", rec->name);
          return NULL;
        }
      gmpy_dispatch d;
      if (gmpy_dispatch_get (stream_obj, device, &d) < 0)
        return NULL;
      stream = d.stream;
    }
  for (size_t i = 0; i < rec->nstages; i++)
    if (stage_check (graph, &rec->stages[i],
                     i > 0 ? rec->stages[i - 1].root : NULL) < 0)
      return NULL;
  /* Work an open concurrent() block queued on these devices goes first,
     as it would for the calls recorded.  */
  for (int d = 0; d < rec->recorder.ndev; d++)
    if (rec->recorder.graphs[d] != NULL && gmpy_concurrent_join (d) < 0)
      return NULL;
  /* From here to the end the staging is this thread's; the waits let
     other threads run, and one may call the graph too.  */
  if (rec->replaying)
    {
      PyErr_Format (PyExc_RuntimeError, "gpumem.graph %R: this graph is "
                    "being replayed by another thread", rec->name);
      return NULL;
    }
  rec->replaying = true;
  for (size_t i = 0; i < rec->nstages; i++)
    if (rec->stages[i].to_device)
      memcpy (rec->stages[i].staging, rec->stages[i].buf,
              rec->stages[i].nbytes);
  for (int d = 0; d < rec->recorder.ndev; d++)
    if (rec->recorder.graphs[d] != NULL)
      {
        /* Without stream=, on the device's default stream: after the
           work queued before on any of gpumem's streams.  */
        gm_status status
          = gm_backend_current->graph_launch (rec->recorder.graphs[d],
                                              stream);
        if (status != GM_OK)
          {
            gmpy_raise (status);
            failed = 1;
            break;
          }
      }
  if (stream != NULL)
    {
      rec->replaying = false;
      if (failed)
        return NULL;
      Py_RETURN_NONE;
    }
  /* Every device launched is waited for, also after an error.  */
  for (int d = 0; d < rec->recorder.ndev; d++)
    if (rec->recorder.graphs[d] != NULL)
      {
        if (!failed)
          failed = gmpy_wait (d, NULL) < 0;
        else
          {
            gm_status status;
            Py_BEGIN_ALLOW_THREADS
            do
              status = gm_backend_current->wait (d, NULL, 50000);
            while (status == GM_ERR_NOT_READY);
            Py_END_ALLOW_THREADS
          }
      }
  if (!failed)
    for (size_t i = 0; i < rec->nstages; i++)
      if (!rec->stages[i].to_device)
        memcpy (rec->stages[i].buf, rec->stages[i].staging,
                rec->stages[i].nbytes);
  rec->replaying = false;
  if (failed)
    return NULL;
  Py_RETURN_NONE;
}

/* g() and g(stream=S): no tuple, no dict.  The limited API of 3.11 has
   no vectorcall: g() is graphpy_call there.  */
#ifdef GMPY_VECTORCALL
static PyObject *
graphpy_vectorcall (PyObject *self, PyObject *const *args, size_t nargsf,
                    PyObject *kwnames)
{
  Py_ssize_t nargs = PyVectorcall_NARGS (nargsf);
  Py_ssize_t nkw = kwnames != NULL ? PyTuple_GET_SIZE (kwnames) : 0;
  PyObject *stream_obj = NULL;

  if (nargs == 0 && nkw == 0)
    return graphpy_replay_with ((graphpy_object *) self, NULL);
  if (nargs + nkw > 1
      || (nkw == 1
          && (!PyUnicode_Check (PyTuple_GET_ITEM (kwnames, 0))
              || PyUnicode_CompareWithASCIIString (
                   PyTuple_GET_ITEM (kwnames, 0), "stream") != 0)))
    goto wrong;
  stream_obj = args[0];
  return graphpy_replay_with ((graphpy_object *) self, stream_obj);
wrong:
  PyErr_SetString (PyExc_TypeError, "graph() takes one optional argument, "
                   "stream");
  return NULL;
}
#endif

static PyObject *
graphpy_call (PyObject *self, PyObject *args, PyObject *kwargs)
{
  static char *keywords[] = {"stream", NULL};
  PyObject *stream_obj = NULL;

  if (!PyArg_ParseTupleAndKeywords (args, kwargs, "|O:graph", keywords,
                                    &stream_obj))
    return NULL;
  return graphpy_replay_with ((graphpy_object *) self, stream_obj);
}

static PyObject *
graphpy_replay (PyObject *self, PyObject *args, PyObject *kwargs)
{
  return graphpy_call (self, args, kwargs);
}

static PyObject *
graphpy_get_devices (PyObject *self, void *closure)
{
  gmpy_graph_rec *rec = &((graphpy_object *) self)->rec;
  PyObject *list = PyList_New (0);

  for (int d = 0; list != NULL && rec->recorder.graphs != NULL
                  && d < rec->recorder.ndev; d++)
    if (rec->recorder.graphs[d] != NULL)
      {
        PyObject *index = PyLong_FromLong (d);
        if (index == NULL || PyList_Append (list, index) < 0)
          Py_CLEAR (list);
        Py_XDECREF (index);
      }
  if (list == NULL)
    return NULL;
  Py_SETREF (list, PyList_AsTuple (list));
  return list;
}

static PyObject *
graphpy_get_dependencies (PyObject *self, void *closure)
{
  return gmpy_graph_rec_dependencies (&((graphpy_object *) self)->rec);
}

static PyObject *
graphpy_get_host_copies (PyObject *self, void *closure)
{
  return PyLong_FromSize_t (((graphpy_object *) self)->rec.nstages);
}

static PyObject *
graphpy_get_name (PyObject *self, void *closure)
{
  return Py_NewRef (((graphpy_object *) self)->rec.name);
}

static PyObject *
graphpy_repr (PyObject *self)
{
  gmpy_graph_rec *rec = &((graphpy_object *) self)->rec;

  return PyUnicode_FromFormat ("<gpumem.graph %R, %s>", rec->name,
                               rec->recorder.capturing ? "capturing"
                               : rec->recorder.ready ? "ready" : "empty");
}

static PyMethodDef graphpy_methods[] = {
  {"__enter__", graphpy_enter, METH_NOARGS,
   "__enter__($self)\n--\n\nStart recording this thread's calls."},
  {"__exit__", graphpy_exit, METH_VARARGS,
   "__exit__($self, *exc_info)\n--\n\n"
   "End the recording and make the graph (one per device used).  When\n"
   "the block raised, nothing is kept and the exception goes on."},
  {"replay", (PyCFunction) (void (*) (void)) graphpy_replay,
   METH_VARARGS | METH_KEYWORDS,
   "replay($self, stream=None)\n--\n\n"
   "Run the recorded calls again, as g() does: complete on return (the\n"
   "host arrays read and written), or queued on STREAM for a graph of\n"
   "one device's work that copies no host memory."},
  {NULL, NULL, 0, NULL}
};

static PyGetSetDef graphpy_getset[] = {
  {"name", graphpy_get_name, NULL, "The graph's name, for messages.",
   NULL},
  {"dependencies", graphpy_get_dependencies, NULL,
   "For each call recorded, in order: the tuple of the numbers (from 0)\n"
   "of the earlier calls it waits for.  Calls that share no memory one\n"
   "of them writes wait for none of each other: they may run at the\n"
   "same time (docs/graphs.md).", NULL},
  {"devices", graphpy_get_devices, NULL,
   "The devices the graph runs on: one graph each.", NULL},
  {"host_copies", graphpy_get_host_copies, NULL,
   "How many copies to or from host arrays a replay stages.", NULL},
  {NULL, NULL, NULL, NULL, NULL}
};

static PyMemberDef graphpy_members[] = {
#ifdef GMPY_VECTORCALL
  {"__vectorcalloffset__", T_PYSSIZET,
   offsetof (graphpy_object, vectorcall), READONLY, NULL},
#endif
  {NULL, 0, 0, 0, NULL}
};

static PyType_Slot graphpy_slots[] = {
  {Py_tp_members, graphpy_members},
  {Py_tp_new, graphpy_new},
  {Py_tp_dealloc, graphpy_dealloc},
  {Py_tp_traverse, graphpy_traverse},
  {Py_tp_call, graphpy_call},
  {Py_tp_methods, graphpy_methods},
  {Py_tp_getset, graphpy_getset},
  {Py_tp_repr, graphpy_repr},
  {Py_tp_doc,
   "graph(name=None)\n--\n\n"
   "Calls recorded once and replayed:\n\n"
   "    with gpumem.graph() as g:\n"
   "        ...     # kernels and copies: recorded, not run\n"
   "    g()         # runs them all again; complete on return\n\n"
   "Kernels, copies within a device and copies between a device and a\n"
   "NumPy array are recorded; the arrays named at capture are read and\n"
   "written at every replay.  Allocation, synchronization, copies between\n"
   "devices, collectives and calls with stream= raise gpumem.Error.  The\n"
   "arrays a graph uses stay alive while it lives; free() of one is\n"
   "refused.  See docs/graphs.md."},
  {0, NULL}
};

static PyType_Spec graphpy_spec = {
  .name = "gpumem.graph",
  .basicsize = sizeof (graphpy_object),
#ifdef GMPY_VECTORCALL
  .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC
           | Py_TPFLAGS_HAVE_VECTORCALL,
#else
  .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
#endif
  .slots = graphpy_slots,
};

int
gmpy_graph_init (PyObject *module, gmpy_state *state)
{
  PyObject *type = PyType_FromModuleAndSpec (module, &graphpy_spec, NULL);
  int rc;

  (void) state;
  if (type == NULL)
    return -1;
  rc = PyModule_AddObjectRef (module, "graph", type);
  Py_DECREF (type);
  return rc;
}
