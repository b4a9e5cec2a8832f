/* py-concurrent.c -- gpumem.concurrent(): devices that work at the same
   time.

   Inside `with gpumem.concurrent() as block:` the calls of this thread
   that name no stream are queued, not waited for: each device's on a
   stream of the block's own, in the order they were made, so devices
   work while the script queues work for the next one.  The queue itself
   is plain C beneath this layer (src/engine/queue.c): its streams, its
   bounce buffers, the copies into host memory that land when
   block.wait() returns or the block ends.  This file is its Python
   face: the block type, the waits (without the GIL, answering Ctrl-C),
   and the buffer exports that keep host destinations in place until
   they land.

   A block takes a queue when it opens and gives it back when it ends,
   so a block per iteration costs no stream creation; the queues are
   freed when the interpreter ends.  */

#include "gm-python.h"

#include "queue.h"

typedef struct concurrentpy_object
{
  PyObject_HEAD
  gm_queue *queue;             /* while open */
  bool shared;                 /* nested: the queue is the outer block's */
  struct concurrentpy_object *outer;   /* the block open before, or NULL */
} concurrentpy_object;

/* The innermost open block of this thread (its queue is the thread's,
   gm_queue_current).  Only touched with the GIL held.  */
static _Thread_local concurrentpy_object *current_block;
/* Whether the exit hook that frees the queues is registered.  */
static bool atexit_registered;

bool
gmpy_concurrent_active (void)
{
  return current_block != NULL;
}

int
gmpy_concurrent_stream (int device, gm_stream **stream)
{
  gm_queue *queue = gm_queue_current ();
  gm_status status;

  *stream = NULL;
  if (queue == NULL)
    return 0;
  status = gm_queue_stream (queue, device, stream);
  return status == GM_OK ? 0 : gmpy_raise_int (status);
}

int
gmpy_concurrent_check_pending (const void *ptr, size_t nbytes)
{
  gm_queue *queue = gm_queue_current ();
  gm_status status;

  if (queue == NULL)
    return 0;
  status = gm_queue_check_pending (queue, ptr, nbytes);
  return status == GM_OK ? 0 : gmpy_raise_int (status);
}

int
gmpy_concurrent_from_host (int device, void *dst, const void *src,
                           size_t nbytes)
{
  gm_queue *queue = gm_queue_current ();
  gm_status status;
  bool queued;

  if (queue == NULL)
    return 0;
  status = gm_queue_from_host (queue, device, dst, src, nbytes, &queued);
  if (status != GM_OK)
    return gmpy_raise_int (status);
  return queued;
}

/* Lets go of a landed copy's destination: the buffer export
   gmpy_concurrent_to_host kept.  */
static void
release_view (void *owner)
{
  PyBuffer_Release ((Py_buffer *) owner);
  PyMem_Free (owner);
}

int
gmpy_concurrent_to_host (Py_buffer *view, void *dst, const void *src,
                         int device, size_t nbytes)
{
  gm_queue *queue = gm_queue_current ();
  Py_buffer *kept;
  gm_status status;
  bool queued;

  if (queue == NULL || nbytes == 0)
    return 0;
  kept = PyMem_Malloc (sizeof *kept);
  if (kept == NULL)
    {
      PyErr_NoMemory ();
      return -1;
    }
  *kept = *view;
  status = gm_queue_to_host (queue, dst, src, device, nbytes, kept, &queued);
  if (status != GM_OK || !queued)
    PyMem_Free (kept);
  if (status != GM_OK)
    return gmpy_raise_int (status);
  return queued;
}

int
gmpy_concurrent_peer_copy (void *dst, int dst_device, const void *src,
                           int src_device, size_t nbytes)
{
  gm_queue *queue = gm_queue_current ();
  gm_status status;
  bool queued;

  if (queue == NULL)
    return 0;
  status = gm_queue_peer_copy (queue, dst, dst_device, src, src_device,
                               nbytes, &queued);
  if (status != GM_OK)
    return gmpy_raise_int (status);
  return queued;
}

int
gmpy_concurrent_launch_stream (int device, const int *peers, int npeers,
                               gm_stream **stream)
{
  gm_queue *queue = gm_queue_current ();

  *stream = NULL;
  if (queue == NULL)
    return 0;
  for (int i = 0; i < npeers; i++)
    {
      bool ordered;
      gm_status status = gm_queue_order (queue, device, peers[i], &ordered);
      if (status != GM_OK)
        return gmpy_raise_int (status);
      if (!ordered)
        {
          /* No stream order: wait for the peers' work instead, and
             launch synchronously.  */
          for (int j = 0; j < npeers; j++)
            if (gmpy_concurrent_join (peers[j]) < 0)
              return -1;
          return 0;
        }
    }
  return gmpy_concurrent_stream (device, stream);
}

int
gmpy_concurrent_after_launch (int device, const int *peers, int npeers)
{
  gm_queue *queue = gm_queue_current ();

  for (int i = 0; queue != NULL && i < npeers; i++)
    {
      bool ordered;
      gm_status status = gm_queue_order (queue, peers[i], device, &ordered);
      if (status != GM_OK)
        return gmpy_raise_int (status);
    }
  return 0;
}

int
gmpy_concurrent_join (int device)
{
  gm_queue *queue = gm_queue_current ();
  gm_stream *stream = queue != NULL ? gm_queue_busy_stream (queue, device)
                                    : NULL;

  return stream != NULL ? gmpy_wait (device, stream) : 0;
}

/* Waits for every device's work in QUEUE, then lands the host copies
   (when all the work succeeded), releases their buffers and resets the
   bounce buffers.  INTERRUPTIBLE (wait()): Ctrl-C raises
   KeyboardInterrupt at once and leaves everything queued (the block's
   end waits for it).  Otherwise (the block's end) it waits to the end
   whatever happens: after Ctrl-C it goes on waiting, without the GIL and
   deaf to signals, since the memory the work uses may be freed as soon
   as the block is left.  0, or -1 with the first exception set (the
   work's error, or KeyboardInterrupt).  */
static int
queue_drain (gm_queue *queue, bool interruptible)
{
  PyObject *exc_type = NULL, *exc_value = NULL, *exc_tb = NULL;
  bool failed = false;

  for (int d = 0; d < gm_queue_devices (queue); d++)
    {
      gm_stream *stream = gm_queue_busy_stream (queue, d);
      bool interrupted;

      if (stream == NULL)
        continue;
      if (gmpy_wait (d, stream) == 0)
        {
          gm_queue_idle (queue, d);
          continue;
        }
      interrupted = PyErr_ExceptionMatches (PyExc_KeyboardInterrupt);
      if (interrupted && interruptible)
        return -1;
      failed = true;
      if (exc_type == NULL)
        PyErr_Fetch (&exc_type, &exc_value, &exc_tb);
      else
        PyErr_Clear ();
      if (interrupted)
        {
          gm_status status;
          Py_BEGIN_ALLOW_THREADS
          do
            status = gm_backend_current->wait (d, stream, 50000);
          while (status == GM_ERR_NOT_READY);
          Py_END_ALLOW_THREADS
        }
      gm_queue_idle (queue, d);
    }
  gm_queue_land (queue, failed, release_view);
  if (exc_type != NULL)
    {
      PyErr_Restore (exc_type, exc_value, exc_tb);
      return -1;
    }
  return 0;
}

static PyObject *
concurrentpy_new (PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
  if (PyTuple_GET_SIZE (args) != 0
      || (kwargs != NULL && PyDict_GET_SIZE (kwargs) != 0))
    {
      PyErr_SetString (PyExc_TypeError, "concurrent() takes no arguments");
      return NULL;
    }
  return GMPY_TYPE_ALLOC (type);
}

static void
concurrentpy_dealloc (PyObject *self)
{
  PyTypeObject *type = Py_TYPE (self);

  /* An open block is on the thread's list, which does not own it; a
     block is only freed once closed (the with statement holds it).  */
  PyObject_GC_UnTrack (self);
  GMPY_TYPE_FREE (type, self);
  Py_DECREF (type);
}

static int
concurrentpy_traverse (PyObject *self, visitproc visit, void *arg)
{
  Py_VISIT (Py_TYPE (self));
  return 0;
}

/* Refused inside a `with stream:` block of this thread, as that is
   refused inside a block (py-stream.c): its stream would take the
   block's calls for its device, unordered with the block's queues and
   not waited for by the block's end.  */
static PyObject *
concurrentpy_enter (PyObject *self, PyObject *unused)
{
  concurrentpy_object *block = (concurrentpy_object *) self;

  if (block->queue != NULL)
    {
      PyErr_SetString (PyExc_RuntimeError, "this gpumem.concurrent() block "
                       "is already open; make a new one for another with");
      return NULL;
    }
  if (gmpy_stream_context_open ())
    {
      PyErr_SetString (PyExc_RuntimeError, "gpumem.concurrent() cannot open "
                       "inside a `with stream:` block of this thread (that "
                       "stream would take the block's calls for its device, "
                       "unordered with the block and not waited for by its "
                       "end): close the `with stream:` block first, or pass "
                       "stream= to the calls that should go there");
      return NULL;
    }
  if (current_block != NULL)
    {
      /* Nested: the same streams, so the order of the calls holds.  */
      block->queue = current_block->queue;
      block->shared = true;
    }
  else
    {
      gm_status status;
      if (!atexit_registered && Py_AtExit (gm_queue_free_all) == 0)
        atexit_registered = true;
      status = gm_queue_take (&block->queue);
      if (status != GM_OK)
        {
          block->queue = NULL;
          return gmpy_raise (status);
        }
      block->shared = false;
    }
  block->outer = current_block;
  Py_INCREF (self);               /* the thread's list holds it */
  current_block = block;
  gmpy_launch_blocks_note (true);
  gm_queue_set_current (block->queue);
  return Py_NewRef (self);
}

static PyObject *
concurrentpy_exit (PyObject *self, PyObject *args)
{
  concurrentpy_object *block = (concurrentpy_object *) self;
  PyObject *exc_type = Py_None;
  int result;

  if (PyTuple_GET_SIZE (args) > 0)
    exc_type = PyTuple_GET_ITEM (args, 0);
  if (current_block != block)
    {
      PyErr_SetString (PyExc_RuntimeError, "this gpumem.concurrent() block is "
                       "not the innermost open one of this thread");
      return NULL;
    }
  /* Whatever ended the block, its work ends before the block does: the
     memory it uses may be freed right after.  A wait error is raised
     unless the body raised already (that exception goes on).  */
  result = queue_drain (block->queue, false);
  current_block = block->outer;
  gmpy_launch_blocks_note (false);
  gm_queue_set_current (current_block != NULL ? current_block->queue : NULL);
  block->outer = NULL;
  if (!block->shared)
    gm_queue_give_back (block->queue);
  block->queue = NULL;
  Py_DECREF (self);
  if (result < 0 && exc_type == Py_None)
    return NULL;
  PyErr_Clear ();
  Py_RETURN_FALSE;
}

static PyObject *
concurrentpy_wait (PyObject *self, PyObject *unused)
{
  concurrentpy_object *block = (concurrentpy_object *) self;

  if (block->queue == NULL || current_block == NULL
      || current_block->queue != block->queue)
    {
      PyErr_SetString (PyExc_RuntimeError, "wait() needs the block open in "
                       "this thread (inside its with statement)");
      return NULL;
    }
  if (gmpy_graph_refuse ("concurrent().wait() (a synchronization)") < 0
      || queue_drain (block->queue, true) < 0)
    return NULL;
  Py_RETURN_NONE;
}

static PyObject *
concurrentpy_get_open (PyObject *self, void *closure)
{
  return PyBool_FromLong (((concurrentpy_object *) self)->queue != NULL);
}

static PyObject *
concurrentpy_repr (PyObject *self)
{
  return PyUnicode_FromFormat ("<gpumem.concurrent block, %s>",
                               ((concurrentpy_object *) self)->queue
                                 ? "open" : "closed");
}

static PyMethodDef concurrentpy_methods[] = {
  {"__enter__", concurrentpy_enter, METH_NOARGS,
   "__enter__($self)\n--\n\nOpen the block in this thread; RuntimeError inside\n"
   "a `with stream:` block of this thread."},
  {"__exit__", concurrentpy_exit, METH_VARARGS,
   "__exit__($self, *exc_info)\n--\n\n"
   "Wait for all the block's work on every device (also when the body\n"
   "raised, or on Ctrl-C), land its copies into host memory, and close\n"
   "it.  An error of the work is raised unless the body raised one."},
  {"wait", concurrentpy_wait, METH_NOARGS,
   "wait($self)\n--\n\n"
   "Wait until all the work queued in the block so far is done on every\n"
   "device, and land its copies into host memory; the block stays open.\n"
   "Ctrl-C raises KeyboardInterrupt (the block's end then waits)."},
  {NULL, NULL, 0, NULL}
};

static PyGetSetDef concurrentpy_getset[] = {
  {"open", concurrentpy_get_open, NULL,
   "True between the with statement's start and end.", NULL},
  {NULL, NULL, NULL, NULL, NULL}
};

static PyType_Slot concurrentpy_slots[] = {
  {Py_tp_new, concurrentpy_new},
  {Py_tp_dealloc, concurrentpy_dealloc},
  {Py_tp_traverse, concurrentpy_traverse},
  {Py_tp_methods, concurrentpy_methods},
  {Py_tp_getset, concurrentpy_getset},
  {Py_tp_repr, concurrentpy_repr},
  {Py_tp_doc,
   "concurrent()\n--\n\n"
   "A block in which devices work at the same time:\n\n"
   "    with gpumem.concurrent() as block:\n"
   "        ...            # calls without stream= are queued per device\n"
   "        block.wait()   # optional: everything so far done and landed\n\n"
   "In this thread, kernels and copies that name no stream are queued on\n"
   "a stream of the block for their device, in call order, and return at\n"
   "once.  Copies from host memory read it during the call.  Copies into\n"
   "host memory fill it when wait() returns or the block ends; until then\n"
   "it keeps its old contents, and handing it to a gpumem copy raises\n"
   "ValueError.  The block's end waits for all its work, also when the\n"
   "body raises.  Host copies of more than 64 MiB are complete on return.\n"
   "Other calls (allocation, zeros, synchronize) keep their contract."},
  {0, NULL}
};

static PyType_Spec concurrentpy_spec = {
  .name = "gpumem.concurrent",
  .basicsize = sizeof (concurrentpy_object),
  .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
  .slots = concurrentpy_slots,
};

int
gmpy_concurrent_init (PyObject *module, gmpy_state *state)
{
  PyObject *type = PyType_FromModuleAndSpec (module, &concurrentpy_spec,
                                             NULL);
  int rc;

  (void) state;
  if (type == NULL)
    return -1;
  rc = PyModule_AddObjectRef (module, "concurrent", type);
  Py_DECREF (type);
  return rc;
}
