/* py-concurrent.c -- gpumem.concurrent(): devices that work at the same
   time.

   Inside `with gpumem.concurrent() as block:` the calls of this thread
   that name no stream are queued, not waited for: each device's on a
   stream of the block's own, in the order they were made, so devices
   work while the script queues work for the next one.  Copies from host
   memory read it when the call is made (small ones into a page-locked
   bounce buffer of the device; larger ones are synchronous); copies
   into host memory go into the device's bounce buffer and land in the
   destination when block.wait() returns or the block ends, which wait
   for every device's work.  A bounce buffer per device keeps the
   devices from waiting on each other; none is allocated per call once
   the first round has sized them.

   The streams and bounce buffers (an "engine") outlive the block: a
   block takes a free engine when it opens and gives it back when it
   ends, so a block per iteration costs no stream creation.  Engines are
   freed when the interpreter ends.  */

#include "gm-python.h"

#include <string.h>

/* Copies of more than this between host memory and a device are
   synchronous inside a block (the bounce buffers stay small).  */
#define CC_BOUNCE_MAX ((size_t) 64 << 20)
#define CC_BOUNCE_MIN ((size_t) 64 << 10)
#define CC_ALIGN 256

typedef struct cc_device
{
  gm_stream *stream;          /* made at first use */
  char *bounce;               /* page-locked, BOUNCE_SIZE bytes */
  size_t bounce_size;
  size_t bounce_used;         /* taken since the last wait */
  char **spent;               /* outgrown bounce buffers still in flight */
  int nspent, spent_cap;
  bool busy;                  /* work queued since the last wait */
} cc_device;

/* A copy into host memory waiting to land: NBYTES from the bounce
   buffer at SRC into DST, which VIEW (a buffer export held until then)
   keeps alive and in place.  */
typedef struct cc_landing
{
  char *dst;
  const char *src;
  size_t nbytes;
  Py_buffer view;
} cc_landing;

typedef struct cc_engine
{
  int ndev;
  cc_device *dev;
  cc_landing *landings;
  size_t nlandings, landings_cap;
  struct cc_engine *next;      /* in the free list */
} cc_engine;

typedef struct concurrentpy_object
{
  PyObject_HEAD
  cc_engine *engine;           /* while open */
  bool shared;                 /* nested: the engine is the outer block's */
  struct concurrentpy_object *outer;   /* the block open before, or NULL */
} concurrentpy_object;

/* The innermost open block of this thread.  Only touched with the GIL
   held; per thread, since a block orders the calls of one thread.  */
static _Thread_local concurrentpy_object *current_block;
/* Engines not in use, and whether the exit hook that frees them is
   registered.  Guarded by the GIL.  */
static cc_engine *free_engines;
static bool atexit_registered;

static void
engine_destroy (cc_engine *engine)
{
  for (int d = 0; d < engine->ndev; d++)
    {
      cc_device *dev = &engine->dev[d];
      if (dev->stream != NULL)
        gm_backend_current->stream_destroy (dev->stream);
      if (dev->bounce != NULL)
        gm_backend_current->host_free (dev->bounce);
      for (int i = 0; i < dev->nspent; i++)
        gm_backend_current->host_free (dev->spent[i]);
      PyMem_RawFree (dev->spent);
    }
  PyMem_RawFree (engine->dev);
  PyMem_RawFree (engine->landings);
  PyMem_RawFree (engine);
}

/* Py_AtExit hook: the backend is still up (it ends after Python).  */
static void
free_all_engines (void)
{
  while (free_engines != NULL)
    {
      cc_engine *engine = free_engines;
      free_engines = engine->next;
      if (gm_backend_current != NULL)
        engine_destroy (engine);
    }
}

static cc_engine *
engine_take (void)
{
  cc_engine *engine = free_engines;
  int ndev = gm_backend_current->device_count ();

  if (engine != NULL)
    {
      free_engines = engine->next;
      engine->next = NULL;
      return engine;
    }
  if (!atexit_registered && Py_AtExit (free_all_engines) == 0)
    atexit_registered = true;
  engine = PyMem_RawCalloc (1, sizeof *engine);
  if (engine != NULL)
    engine->dev = PyMem_RawCalloc ((size_t) ndev, sizeof *engine->dev);
  if (engine == NULL || engine->dev == NULL)
    {
      PyMem_RawFree (engine);
      PyErr_NoMemory ();
      return NULL;
    }
  engine->ndev = ndev;
  return engine;
}

static void
engine_give_back (cc_engine *engine)
{
  engine->next = free_engines;
  free_engines = engine;
}

/* The engine of this thread's open block, or NULL.  */
static cc_engine *
active_engine (void)
{
  return current_block != NULL ? current_block->engine : NULL;
}

bool
gmpy_concurrent_active (void)
{
  return current_block != NULL;
}

/* DEVICE's state in ENGINE with its stream made: 0 or -1.  */
static int
device_ready (cc_engine *engine, int device, cc_device **out)
{
  cc_device *dev = &engine->dev[device];

  if (dev->stream == NULL)
    {
      gm_status status = gm_backend_current->stream_create (device,
                                                            &dev->stream);
      if (status != GM_OK)
        {
          dev->stream = NULL;
          return gmpy_raise_int (status);
        }
    }
  dev->busy = true;
  *out = dev;
  return 0;
}

int
gmpy_concurrent_stream (int device, gm_stream **stream)
{
  cc_engine *engine = active_engine ();
  cc_device *dev = NULL;

  *stream = NULL;
  if (engine == NULL)
    return 0;
  if (device_ready (engine, device, &dev) < 0)
    return -1;
  *stream = dev->stream;
  return 0;
}

/* NBYTES of DEV's bounce buffer in *PTR; NULL when the copy is too large
   for one (the caller copies synchronously).  An outgrown buffer may
   still be in use by queued copies: it is kept until the next wait.
   0 or -1.  */
static int
bounce_take (cc_device *dev, size_t nbytes, char **ptr)
{
  size_t need = (nbytes + CC_ALIGN - 1) / CC_ALIGN * CC_ALIGN;
  size_t size;
  void *fresh;
  gm_status status;

  *ptr = NULL;
  if (nbytes > CC_BOUNCE_MAX)
    return 0;
  if (dev->bounce != NULL && dev->bounce_size - dev->bounce_used >= need)
    {
      *ptr = dev->bounce + dev->bounce_used;
      dev->bounce_used += need;
      return 0;
    }
  size = dev->bounce_size * 2;
  if (size < CC_BOUNCE_MIN)
    size = CC_BOUNCE_MIN;
  while (size < need)
    size *= 2;
  if (dev->bounce != NULL)
    {
      if (dev->nspent == dev->spent_cap)
        {
          int cap = dev->spent_cap ? 2 * dev->spent_cap : 4;
          char **grown = PyMem_RawRealloc (dev->spent,
                                           (size_t) cap * sizeof *grown);
          if (grown == NULL)
            {
              PyErr_NoMemory ();
              return -1;
            }
          dev->spent = grown;
          dev->spent_cap = cap;
        }
      dev->spent[dev->nspent++] = dev->bounce;
      dev->bounce = NULL;
      dev->bounce_size = dev->bounce_used = 0;
    }
  status = gm_backend_current->host_alloc (size, &fresh);
  if (status != GM_OK)
    return gmpy_raise_int (status);
  dev->bounce = fresh;
  dev->bounce_size = size;
  dev->bounce_used = need;
  *ptr = dev->bounce;
  return 0;
}

/* Whether [PTR, PTR + NBYTES) overlaps host memory a queued copy of
   ENGINE will write: ValueError then (-1), else 0.  */
static int
check_not_pending (cc_engine *engine, const char *ptr, size_t nbytes)
{
  for (size_t i = 0; i < engine->nlandings; i++)
    {
      const cc_landing *l = &engine->landings[i];
      if (ptr < l->dst + l->nbytes && l->dst < ptr + nbytes)
        {
          PyErr_SetString (PyExc_ValueError,
                           "this host memory is the destination of a copy "
                           "queued in the open gpumem.concurrent() block: it "
                           "is filled when the block ends or its wait() "
                           "returns; read it after that");
          return -1;
        }
    }
  return 0;
}

int
gmpy_concurrent_check_pending (const void *ptr, size_t nbytes)
{
  cc_engine *engine = active_engine ();

  return engine != NULL ? check_not_pending (engine, ptr, nbytes) : 0;
}

int
gmpy_concurrent_from_host (int device, void *dst, const void *src,
                           size_t nbytes)
{
  cc_engine *engine = active_engine ();
  cc_device *dev = NULL;
  char *bounce;
  gm_status status;

  if (engine == NULL || nbytes == 0)
    return 0;
  if (check_not_pending (engine, src, nbytes) < 0
      || device_ready (engine, device, &dev) < 0
      || bounce_take (dev, nbytes, &bounce) < 0)
    return -1;
  if (bounce == NULL)
    return 0;
  /* The source is read now: the script may change it once the call
     returns, as after a synchronous copy.  */
  memcpy (bounce, src, nbytes);
  status = gm_backend_current->copy (dst, device, bounce, -1, nbytes,
                                     dev->stream);
  if (status != GM_OK)
    return gmpy_raise_int (status);
  return 1;
}

int
gmpy_concurrent_to_host (Py_buffer *view, void *dst, const void *src,
                         int device, size_t nbytes)
{
  cc_engine *engine = active_engine ();
  cc_device *dev = NULL;
  cc_landing *landing;
  char *bounce;
  gm_status status;

  if (engine == NULL || nbytes == 0)
    return 0;
  if (device_ready (engine, device, &dev) < 0
      || bounce_take (dev, nbytes, &bounce) < 0)
    return -1;
  if (bounce == NULL)
    return 0;
  if (engine->nlandings == engine->landings_cap)
    {
      size_t cap = engine->landings_cap ? 2 * engine->landings_cap : 16;
      cc_landing *grown = PyMem_RawRealloc (engine->landings,
                                            cap * sizeof *grown);
      if (grown == NULL)
        {
          PyErr_NoMemory ();
          return -1;
        }
      engine->landings = grown;
      engine->landings_cap = cap;
    }
  status = gm_backend_current->copy (bounce, -1, src, device, nbytes,
                                     dev->stream);
  if (status != GM_OK)
    return gmpy_raise_int (status);
  landing = &engine->landings[engine->nlandings++];
  landing->dst = dst;
  landing->src = bounce;
  landing->nbytes = nbytes;
  landing->view = *view;
  return 1;
}

/* Makes the open block's stream of WAITER wait, without blocking the
   host, for the work queued so far on its stream of DEVICE.  The
   streams are ordered through their handles, as another library's
   would be (foreign_stream_wait records an event and makes the handle
   wait for it).  1 when done; 0 when the backend's streams have no
   handles (its work is done during each call: nothing to order); -1
   with an exception.  */
static int
order_after (cc_engine *engine, int waiter, int device)
{
  const gm_backend *backend = gm_backend_current;
  cc_device *later = NULL, *earlier = NULL;
  void *handle;
  gm_status status;

  if (device_ready (engine, waiter, &later) < 0
      || device_ready (engine, device, &earlier) < 0)
    return -1;
  handle = backend->stream_handle (later->stream);
  if (handle == NULL || backend->stream_handle (earlier->stream) == NULL)
    return 0;
  status = backend->foreign_stream_wait (device, earlier->stream, handle);
  if (status != GM_OK)
    return gmpy_raise_int (status);
  return 1;
}

int
gmpy_concurrent_peer_copy (void *dst, int dst_device, const void *src,
                           int src_device, size_t nbytes)
{
  cc_engine *engine = active_engine ();
  cc_device *to = NULL;
  gm_status status;
  int ordered;

  if (engine == NULL || nbytes == 0)
    return 0;
  /* The copy waits for the work queued for the source's device (which
     may write SRC), and that device's later work waits for the copy
     (which reads SRC).  Where streams cannot be ordered, the caller's
     synchronous copy is as good.  */
  ordered = order_after (engine, dst_device, src_device);
  if (ordered <= 0)
    return ordered;
  if (device_ready (engine, dst_device, &to) < 0)
    return -1;
  status = gm_backend_current->copy (dst, dst_device, src, src_device,
                                     nbytes, to->stream);
  if (status != GM_OK)
    return gmpy_raise_int (status);
  return order_after (engine, src_device, dst_device) < 0 ? -1 : 1;
}

int
gmpy_concurrent_launch_stream (int device, const int *peers, int npeers,
                               gm_stream **stream)
{
  cc_engine *engine = active_engine ();

  *stream = NULL;
  if (engine == NULL)
    return 0;
  for (int i = 0; i < npeers; i++)
    {
      int ordered = order_after (engine, device, peers[i]);
      if (ordered < 0)
        return -1;
      if (ordered == 0)
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
  cc_engine *engine = active_engine ();

  for (int i = 0; engine != NULL && i < npeers; i++)
    if (order_after (engine, peers[i], device) < 0)
      return -1;
  return 0;
}

int
gmpy_concurrent_join (int device)
{
  cc_engine *engine = active_engine ();
  cc_device *dev = NULL;

  if (engine == NULL || device < 0 || device >= engine->ndev)
    return 0;
  dev = &engine->dev[device];
  if (dev->stream == NULL || !dev->busy)
    return 0;
  return gmpy_wait (device, dev->stream);
}

/* Waits for every device's work in ENGINE, then lands the host copies
   (when all the work succeeded), releases their buffers and resets the
   bounce buffers.  INTERRUPTIBLE (wait()): Ctrl-C raises
   KeyboardInterrupt at once and leaves everything queued (the block's
   end waits for it).  Otherwise (the block's end) it waits to the end
   whatever happens: after Ctrl-C it goes on waiting, without the GIL and
   deaf to signals, since the memory the work uses may be freed as soon
   as the block is left.  0, or -1 with the first exception set (the
   work's error, or KeyboardInterrupt).  */
static int
engine_drain (cc_engine *engine, bool interruptible)
{
  PyObject *exc_type = NULL, *exc_value = NULL, *exc_tb = NULL;
  bool failed = false;

  for (int d = 0; d < engine->ndev; d++)
    {
      cc_device *dev = &engine->dev[d];
      bool interrupted;

      if (dev->stream == NULL || !dev->busy)
        continue;
      if (gmpy_wait (d, dev->stream) == 0)
        {
          dev->busy = false;
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
            status = gm_backend_current->wait (d, dev->stream, 50000);
          while (status == GM_ERR_NOT_READY);
          Py_END_ALLOW_THREADS
        }
      dev->busy = false;
    }
  for (size_t i = 0; i < engine->nlandings; i++)
    {
      cc_landing *l = &engine->landings[i];
      if (!failed)
        memcpy (l->dst, l->src, l->nbytes);
      PyBuffer_Release (&l->view);
    }
  engine->nlandings = 0;
  for (int d = 0; d < engine->ndev; d++)
    {
      cc_device *dev = &engine->dev[d];
      dev->bounce_used = 0;
      for (int i = 0; i < dev->nspent; i++)
        gm_backend_current->host_free (dev->spent[i]);
      dev->nspent = 0;
    }
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
  return type->tp_alloc (type, 0);
}

static void
concurrentpy_dealloc (PyObject *self)
{
  PyTypeObject *type = Py_TYPE (self);

  /* An open block is on the thread's list, which does not own it; a
     block is only freed once closed (the with statement holds it).  */
  PyObject_GC_UnTrack (self);
  type->tp_free (self);
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

  if (block->engine != NULL)
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
      block->engine = current_block->engine;
      block->shared = true;
    }
  else
    {
      block->engine = engine_take ();
      if (block->engine == NULL)
        return NULL;
      block->shared = false;
    }
  block->outer = current_block;
  Py_INCREF (self);               /* the thread's list holds it */
  current_block = block;
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
  result = engine_drain (block->engine, false);
  current_block = block->outer;
  block->outer = NULL;
  if (!block->shared)
    engine_give_back (block->engine);
  block->engine = NULL;
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

  if (block->engine == NULL || current_block == NULL
      || current_block->engine != block->engine)
    {
      PyErr_SetString (PyExc_RuntimeError, "wait() needs the block open in "
                       "this thread (inside its with statement)");
      return NULL;
    }
  if (gmpy_graph_refuse ("concurrent().wait() (a synchronization)") < 0
      || engine_drain (block->engine, true) < 0)
    return NULL;
  Py_RETURN_NONE;
}

static PyObject *
concurrentpy_get_open (PyObject *self, void *closure)
{
  return PyBool_FromLong (((concurrentpy_object *) self)->engine != NULL);
}

static PyObject *
concurrentpy_repr (PyObject *self)
{
  return PyUnicode_FromFormat ("<gpumem.concurrent block, %s>",
                               ((concurrentpy_object *) self)->engine
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
