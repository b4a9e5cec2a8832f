/* py-graph-record.c -- the recorder behind gpumem.graph: what the call
   sites consult while a `with gpumem.graph()` block is open in their
   thread.

   Each device the recorded calls use gets a stream of the recording's
   own, which the backend records (graph_begin) instead of running what
   is queued on it; the block's end turns each into a graph (graph_end).
   Kernels and copies within one device are queued there.  A copy
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

/* Stages take page-locked memory from blocks of this size (a larger
   stage gets a block of its own), aligned as device copies like.  */
#define REC_ARENA ((size_t) 64 << 10)
#define REC_ALIGN 256

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
  int ndev = gm_backend_current->device_count ();

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
  rec->streams = PyMem_RawCalloc ((size_t) ndev, sizeof *rec->streams);
  rec->graphs = PyMem_RawCalloc ((size_t) ndev, sizeof *rec->graphs);
  rec->held = PyList_New (0);
  if (rec->streams == NULL || rec->graphs == NULL || rec->held == NULL)
    {
      gmpy_graph_rec_clear (rec);
      if (!PyErr_Occurred ())
        PyErr_NoMemory ();
      return -1;
    }
  rec->ndev = ndev;
  rec->capturing = true;
  rec->next = live_recordings;
  live_recordings = rec;
  gmpy_graph_capture = rec;
  return 0;
}

/* Lets go of what REC captured, keeping it on the live list.  */
static void
rec_drop (gmpy_graph_rec *rec)
{
  for (int d = 0; d < rec->ndev; d++)
    {
      if (rec->graphs != NULL && rec->graphs[d] != NULL)
        gm_backend_current->graph_destroy (rec->graphs[d]);
      if (rec->streams != NULL && rec->streams[d] != NULL)
        gm_backend_current->stream_destroy (rec->streams[d]);
    }
  PyMem_RawFree (rec->streams);
  PyMem_RawFree (rec->graphs);
  rec->streams = NULL;
  rec->graphs = NULL;
  for (size_t i = 0; i < rec->nstages; i++)
    {
      Py_XDECREF (rec->stages[i].host);
      Py_XDECREF (rec->stages[i].root);
    }
  PyMem_RawFree (rec->stages);
  rec->stages = NULL;
  rec->nstages = rec->stages_cap = 0;
  for (size_t i = 0; i < rec->narenas; i++)
    gm_backend_current->host_free (rec->arenas[i]);
  PyMem_RawFree (rec->arenas);
  rec->arenas = NULL;
  rec->narenas = rec->arenas_cap = rec->arena_used = rec->arena_size = 0;
  Py_CLEAR (rec->held);
  gm_graph_deps_free (&rec->deps);
  rec->ready = false;
}

int
gmpy_graph_rec_end (gmpy_graph_rec *rec, bool discard)
{
  gm_status first = GM_OK;

  if (gmpy_graph_capture == rec)
    gmpy_graph_capture = NULL;
  rec->capturing = false;
  /* Every capture ends, whatever failed, so that the streams work.  */
  for (int d = 0; d < rec->ndev; d++)
    if (rec->streams[d] != NULL)
      {
        gm_status status = gm_backend_current->graph_end (rec->streams[d],
                                                          &rec->graphs[d]);
        if (status != GM_OK && first == GM_OK)
          {
            first = status;
            if (!discard)
              gmpy_raise (status);
          }
      }
  if (first != GM_OK || discard)
    {
      rec_drop (rec);
      return discard ? 0 : -1;
    }
  rec->ready = true;
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

/* DEVICE's recording stream of REC, begun at first use.  0 or -1.  */
static int
rec_device_stream (gmpy_graph_rec *rec, int device, gm_stream **out)
{
  gm_status status;

  if (rec->streams[device] == NULL)
    {
      gm_stream *stream = NULL;

      status = gm_backend_current->stream_create (device, &stream);
      if (status == GM_OK)
        {
          status = gm_backend_current->graph_begin (stream);
          if (status != GM_OK)
            gm_backend_current->stream_destroy (stream);
        }
      if (status != GM_OK)
        return gmpy_raise_int (status);
      rec->streams[device] = stream;
    }
  *out = rec->streams[device];
  return 0;
}

int
gmpy_graph_stream (int device, PyObject *const *arrays, int n,
                   const gm_graph_access *access, size_t naccess,
                   gm_stream **stream)
{
  gmpy_graph_rec *rec = gmpy_graph_capture;
  const size_t *after;
  size_t index, nafter;
  gm_status status;

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
    }
  if (rec_device_stream (rec, device, stream) < 0)
    return -1;
  status = gm_graph_deps_add (&rec->deps, device, access, naccess, &index,
                              &after, &nafter);
  if (status == GM_OK && gm_backend_current->graph_order != NULL)
    status = gm_backend_current->graph_order (*stream, after, nafter);
  return status == GM_OK ? 0 : gmpy_raise_int (status);
}

PyObject *
gmpy_graph_rec_dependencies (const gmpy_graph_rec *rec)
{
  const gm_graph_deps *deps = &rec->deps;
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

/* NBYTES of REC's page-locked staging in *PTR.  0 or -1.  */
static int
rec_staging (gmpy_graph_rec *rec, size_t nbytes, char **ptr)
{
  size_t need = (nbytes + REC_ALIGN - 1) / REC_ALIGN * REC_ALIGN;
  gm_status status;
  void *block;

  if (rec->narenas > 0 && rec->arena_used + need <= rec->arena_size)
    {
      *ptr = rec->arenas[rec->narenas - 1] + rec->arena_used;
      rec->arena_used += need;
      return 0;
    }
  if (rec->narenas == rec->arenas_cap)
    {
      size_t cap = rec->arenas_cap ? 2 * rec->arenas_cap : 4;
      char **arenas = PyMem_RawRealloc (rec->arenas, cap * sizeof *arenas);
      if (arenas == NULL)
        {
          PyErr_NoMemory ();
          return -1;
        }
      rec->arenas = arenas;
      rec->arenas_cap = cap;
    }
  status = gm_backend_current->host_alloc (need > REC_ARENA ? need
                                                            : REC_ARENA,
                                           &block);
  if (status != GM_OK)
    return gmpy_raise_int (status);
  rec->arenas[rec->narenas++] = block;
  rec->arena_size = need > REC_ARENA ? need : REC_ARENA;
  rec->arena_used = need;
  *ptr = block;
  return 0;
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
  if (rec_staging (rec, nbytes, &stage.staging) < 0)
    goto fail;
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
  gm_graph_access access[2] = {{dst, nbytes, true},
                                {src, nbytes, false}};
  gm_stream *stream;
  gm_status status;

  if (dst_device < 0 || src_device < 0)
    return rec_error (rec, "a copy through host memory other than a "
                      "C-contiguous array of the device array's dtype",
                      "a graph copies to and from the NumPy array named at "
                      "capture only; convert it before the block");
  if (dst_device != src_device)
    return rec_error (rec, "a copy between two devices", "a graph runs on "
                      "each device apart; copy between devices outside it");
  if (gmpy_graph_stream (dst_device, arrays, 2, access, 2, &stream) < 0)
    return -1;
  status = gm_backend_current->copy (dst, dst_device, src, src_device,
                                     nbytes, stream);
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
