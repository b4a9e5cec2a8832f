/* py-graph-record.c -- the recording behind gpumem.graph: what the
   call sites dispatched to a recording (GMPY_GRAPH) call while a `with
   gpumem.graph()` block is open in their thread.

   The recorder itself is plain C beneath this layer
   (src/engine/recorder.c): a recording stream per device, its graphs,
   its page-locked staging and which calls wait for which.  This file
   holds what Python owns for it and checks what a graph may take.
   Kernels and copies within one device are queued on the recording
   stream of their device.  A copy
   between device memory and a NumPy array goes through STAGING, page-
   locked memory of the recording's: the device copy reads or writes
   the staging, and at each replay the host copies the array into it
   before launching (uploads) or out of it after the wait (downloads);
   the array is held, and a replay checks that its memory is where it
   was (gmpy_graph_stage).  Registering the array's pages instead
   (cudaHostRegister) would refuse rows of one array, whose pages
   overlap, and pin a NumPy array for the graph's life.

   What cannot be recorded raises gpumem.Error: allocation, waiting
   for a device (gmpy_wait refuses it), copies between two devices or
   through host memory that is not the array itself, collectives, calls
   on a stream of their own.  The DeviceArrays the calls use are held in
   a list; free () of one a live graph uses is refused
   (gmpy_graph_check_free).

   This file calls none of the py-* files that consult it.  */

#include "gm-python.h"

#include <string.h>

/* Every recording whose graph lives (or is being captured), for
   gmpy_graph_check_free.  Guarded by the GIL.  */
static gmpy_graph_rec *live_recordings;

static int
rec_error (gmpy_graph_rec *rec, const char *what, const char *why)
{
  PyErr_Format (gmpy_state_get ()->error, "gpumem.graph %R: %s cannot be "
                "captured: %s", rec->name, what, why);
  return -1;
}

int
gmpy_graph_rec_begin (gmpy_graph_rec *rec)
{
  gm_status status;

  if (gmpy_graph_capture != NULL)
    {
      PyErr_Format (gmpy_state_get ()->error, "gpumem.graph %R: graph %R "
                    "is being captured in this thread already; graphs do "
                    "not nest", rec->name, gmpy_graph_capture->name);
      return -1;
    }
  if (gmpy_stream_context_open ())
    {
      PyErr_SetString (PyExc_RuntimeError, "gpumem.graph() cannot open "
                       "inside a `with stream:` block of this thread: close "
                       "that block first");
      return -1;
    }
  rec->held = PyList_New (0);
  if (rec->held == NULL)
    return -1;
  status = gm_recorder_begin (&rec->recorder);
  if (status != GM_OK)
    {
      Py_CLEAR (rec->held);
      return gmpy_raise_int (status);
    }
  rec->next = live_recordings;
  live_recordings = rec;
  gmpy_graph_capture = rec;
  /* Casters then ask the C API, which refuses them in a recording.  */
  gmpy_launch_blocks_note (true);
  return 0;
}

/* Lets go of what REC captured, keeping it on the live list.  */
static void
rec_drop (gmpy_graph_rec *rec)
{
  gm_recorder_drop (&rec->recorder);
  for (size_t i = 0; i < rec->nstages; i++)
    {
      Py_XDECREF (rec->stages[i].host);
      Py_XDECREF (rec->stages[i].root);
    }
  PyMem_RawFree (rec->stages);
  rec->stages = NULL;
  rec->nstages = rec->stages_cap = 0;
  Py_CLEAR (rec->held);
}

int
gmpy_graph_rec_end (gmpy_graph_rec *rec, bool discard)
{
  gm_status status;

  if (gmpy_graph_capture == rec)
    {
      gmpy_graph_capture = NULL;
      gmpy_launch_blocks_note (false);
    }
  status = gm_recorder_end (&rec->recorder);
  if (status != GM_OK || discard)
    {
      if (status != GM_OK && !discard)
        gmpy_raise (status);
      rec_drop (rec);
      return discard ? 0 : -1;
    }
  return 0;
}

void
gmpy_graph_rec_clear (gmpy_graph_rec *rec)
{
  if (gmpy_graph_capture == rec)
    gmpy_graph_rec_end (rec, true);
  rec_drop (rec);
  for (gmpy_graph_rec **p = &live_recordings; *p != NULL; p = &(*p)->next)
    if (*p == rec)
      {
        *p = rec->next;
        break;
      }
  rec->next = NULL;
}

int
gmpy_graph_rec_traverse (gmpy_graph_rec *rec, visitproc visit, void *arg)
{
  Py_VISIT (rec->name);
  Py_VISIT (rec->held);
  for (size_t i = 0; i < rec->nstages; i++)
    {
      Py_VISIT (rec->stages[i].host);
      Py_VISIT (rec->stages[i].root);
    }
  return 0;
}

/* Holds the N ARRAYS (NULL entries skipped) of a call on DEVICE for
   REC's graph: 0, or -1 with gpumem.Error when one is on another
   device.  */
static int
hold_arrays (gmpy_graph_rec *rec, int device, PyObject *const *arrays, int n)
{
  for (int i = 0; i < n; i++)
    {
      if (arrays[i] == NULL)
        continue;
      if (gmpy_array_check (arrays[i])
          && ((arraypy_object *) arrays[i])->device != device)
        {
          char why[160];
          snprintf (why, sizeof why, "it uses memory of devices %d and %d; "
                    "a graph runs on each device apart, so each call must "
                    "keep to one device",
                    device, ((arraypy_object *) arrays[i])->device);
          return rec_error (rec, "a call across devices", why);
        }
      if (PyList_Append (rec->held, arrays[i]) < 0)
        return -1;
      /* A graph replays this address: the memory never moves.  */
      {
        gm_block *block = gmpy_array_block (arrays[i]);
        if (block != NULL)
          gm_block_expose (block, GM_BLOCK_EXPOSED_POINTER);
      }
    }
  return 0;
}

int
gmpy_graph_stream (int device, PyObject *const *arrays, int n,
                   const gm_graph_access *access, size_t naccess,
                   gm_stream **stream)
{
  gmpy_graph_rec *rec = gmpy_graph_capture;
  gm_status status;

  if (hold_arrays (rec, device, arrays, n) < 0)
    return -1;
  status = gm_recorder_stream (&rec->recorder, device, access, naccess,
                               stream);
  return status == GM_OK ? 0 : gmpy_raise_int (status);
}

PyObject *
gmpy_graph_rec_dependencies (const gmpy_graph_rec *rec)
{
  const gm_graph_deps *deps = &rec->recorder.deps;
  PyObject *all = PyTuple_New ((Py_ssize_t) deps->ncalls);

  for (size_t i = 0; all != NULL && i < deps->ncalls; i++)
    {
      const gm_graph_deps_call *call = &deps->calls[i];
      PyObject *one = PyTuple_New ((Py_ssize_t) call->ndeps);

      for (size_t e = 0; one != NULL && e < call->ndeps; e++)
        {
          PyObject *number
            = PyLong_FromSize_t (deps->deps[call->first_dep + e]);
          if (number == NULL)
            Py_CLEAR (one);
          else
            PyTuple_SET_ITEM (one, (Py_ssize_t) e, number);
        }
      if (one == NULL)
        Py_CLEAR (all);
      else
        PyTuple_SET_ITEM (all, (Py_ssize_t) i, one);
    }
  return all;
}

/* The object that owns the memory HOST exports: the last object of its
   chain of .base attributes that exports a buffer.  A new reference.  */
static PyObject *
root_of (PyObject *host)
{
  PyObject *root = Py_NewRef (host);

  for (int depth = 0; depth < 64; depth++)
    {
      PyObject *base = PyObject_GetAttrString (root, "base");

      if (base == NULL)
        {
          PyErr_Clear ();
          break;
        }
      if (base == Py_None || !PyObject_CheckBuffer (base))
        {
          Py_DECREF (base);
          break;
        }
      Py_SETREF (root, base);
    }
  return root;
}

int
gmpy_graph_host_copy (const gmpy_devbuf *dev, const Py_buffer *view,
                      size_t nbytes, bool to_device)
{
  gmpy_graph_rec *rec = gmpy_graph_capture;
  gmpy_graph_stage stage = {0};
  gm_graph_access access[2];
  const char *host = view->buf;
  gm_stream *stream;
  gm_status status;
  Py_buffer root_view;

  if (view->obj == NULL)
    return rec_error (rec, "a copy with host memory of no Python object",
                      "copy to or from a NumPy array");
  /* What the stage keeps, first: finding the root may run Python code
     (a .base attribute), as the argument's conversion did (__index__,
     the host object's buffer), and either may have freed DEV's array.
     After the check below no Python code runs until the stage is kept,
     so that a copy queued on the capture always has its stage.  */
  stage.host = Py_NewRef (view->obj);
  stage.buf = view->buf;
  stage.len = view->len;
  stage.nbytes = nbytes;
  stage.to_device = to_device;
  stage.root = root_of (view->obj);
  if (PyObject_GetBuffer (stage.root, &root_view, PyBUF_STRIDED_RO) == 0)
    {
      stage.root_buf = root_view.buf;
      stage.root_len = root_view.len;
      PyBuffer_Release (&root_view);
    }
  else
    {
      PyErr_Clear ();
      Py_SETREF (stage.root, Py_NewRef (view->obj));
      stage.root_buf = stage.buf;
      stage.root_len = stage.len;
    }
  if (gmpy_devbuf_usable (dev) < 0)
    goto fail;
  /* At a replay the uploads are staged before the graph runs and the
     downloads land after it: an upload from memory a download of the
     same graph writes would read the old bytes.  */
  for (size_t i = 0; i < rec->nstages; i++)
    {
      const gmpy_graph_stage *s = &rec->stages[i];
      if (s->to_device != to_device && !s->to_device
          && host < s->buf + s->nbytes && s->buf < host + nbytes)
        {
          rec_error (rec, "a copy from host memory an earlier copy of the "
                     "graph writes", "a replay stages every upload before "
                     "the graph runs; end the graph at that copy and "
                     "replay two graphs");
          goto fail;
        }
    }
  if (rec->nstages == rec->stages_cap)
    {
      size_t cap = rec->stages_cap ? 2 * rec->stages_cap : 8;
      gmpy_graph_stage *stages = PyMem_RawRealloc (rec->stages,
                                                   cap * sizeof *stages);
      if (stages == NULL)
        {
          PyErr_NoMemory ();
          goto fail;
        }
      rec->stages = stages;
      rec->stages_cap = cap;
    }
  status = gm_recorder_staging (&rec->recorder, nbytes, &stage.staging);
  if (status != GM_OK)
    {
      gmpy_raise (status);
      goto fail;
    }
  access[0].ptr = dev->data;
  access[0].nbytes = nbytes;
  access[0].write = to_device;
  access[1].ptr = stage.staging;
  access[1].nbytes = nbytes;
  access[1].write = !to_device;
  if (gmpy_graph_stream (dev->device, &dev->array, 1, access, 2, &stream)
      < 0)
    goto fail;
  if (to_device)
    status = gm_backend_current->copy (dev->data, dev->device, stage.staging,
                                       -1, nbytes, stream);
  else
    status = gm_backend_current->copy (stage.staging, -1, dev->data,
                                       dev->device, nbytes, stream);
  if (status != GM_OK)
    {
      gmpy_raise (status);
      goto fail;
    }
  rec->stages[rec->nstages++] = stage;
  return 0;
fail:
  Py_DECREF (stage.host);
  Py_DECREF (stage.root);
  return -1;
}

int
gmpy_graph_device_copy (const gmpy_devbuf *dst_buf,
                        const gmpy_devbuf *src_buf, void *dst,
                        int dst_device, const void *src, int src_device,
                        size_t nbytes)
{
  gmpy_graph_rec *rec = gmpy_graph_capture;
  PyObject *arrays[2] = {dst_buf != NULL ? dst_buf->array : NULL,
                         src_buf != NULL ? src_buf->array : NULL};
  gm_status status;

  if (dst_device < 0 || src_device < 0)
    return rec_error (rec, "a copy through host memory other than a "
                      "C-contiguous array of the device array's dtype",
                      "a graph copies to and from the NumPy array named at "
                      "capture only; convert it before the block");
  if (dst_device != src_device)
    return rec_error (rec, "a copy between two devices", "a graph runs on "
                      "each device apart; copy between devices outside it");
  if (hold_arrays (rec, dst_device, arrays, 2) < 0)
    return -1;
  status = gm_recorder_copy (&rec->recorder, dst_device, dst, dst_device,
                             src, src_device, nbytes);
  return status == GM_OK ? 0 : gmpy_raise_int (status);
}

/* Whether [A, A + AN) and [B, B + BN) meet.  */
static bool
overlap (const char *a, size_t an, const char *b, size_t bn)
{
  return a < b + bn && b < a + an;
}

int
gmpy_graph_check_free (arraypy_object *array)
{
  const char *mem = array->alloc != NULL ? array->alloc : array->data;
  size_t nbytes = array->alloc != NULL
                    ? array->alloc_bytes
                    : (size_t) array->size * gm_dtypes[array->dtype].itemsize;

  for (gmpy_graph_rec *rec = live_recordings; rec != NULL; rec = rec->next)
    {
      Py_ssize_t n = rec->held != NULL ? PyList_GET_SIZE (rec->held) : 0;

      for (Py_ssize_t i = 0; i < n; i++)
        {
          PyObject *item = PyList_GET_ITEM (rec->held, i);
          arraypy_object *used = (arraypy_object *) item;

          if (!gmpy_array_check (item) || used->device != array->device)
            continue;
          if (item == (PyObject *) array
              || overlap (mem, nbytes, used->data,
                          (size_t) used->size
                            * gm_dtypes[used->dtype].itemsize))
            {
              PyErr_Format (gmpy_state_get ()->error, "free(): graph %R "
                            "uses this array's memory; delete the graph "
                            "first (del, or let it go)", rec->name);
              return -1;
            }
        }
    }
  return 0;
}
