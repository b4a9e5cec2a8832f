/* recorder.c -- the graph recorder (recorder.h).

   Each device the recorded calls use gets a stream of the recorder's
   own, which the backend records (graph_begin) instead of running what
   is queued on it; the capture's end turns each into a graph
   (graph_end).  Copies between a device and host memory go through
   staging, page-locked memory of the recorder's that outlives the
   graphs: the caller copies its host memory into it before a replay or
   out of it after.  */

#include "config.h"

#include "recorder.h"

#include <stdlib.h>

/* Staging comes from blocks of this size (a larger stage gets a block
   of its own), aligned as device copies like.  */
#define ARENA ((size_t) 64 << 10)
#define ALIGN 256

static _Thread_local gm_recorder *current_recorder;

gm_recorder *
gm_recorder_current (void)
{
  return current_recorder;
}

gm_status
gm_recorder_begin (gm_recorder *rec)
{
  int ndev = gm_backend_current->device_count ();

  rec->streams = calloc ((size_t) ndev, sizeof *rec->streams);
  rec->graphs = calloc ((size_t) ndev, sizeof *rec->graphs);
  if (rec->streams == NULL || rec->graphs == NULL)
    {
      gm_recorder_drop (rec);
      return gm_error_set (GM_ERR_HOST_NOMEM, 0, NULL, "out of host memory "
                           "for a graph's devices");
    }
  rec->ndev = ndev;
  rec->capturing = true;
  current_recorder = rec;
  return GM_OK;
}

gm_status
gm_recorder_end (gm_recorder *rec)
{
  gm_status first = GM_OK;

  if (current_recorder == rec)
    current_recorder = NULL;
  rec->capturing = false;
  for (int d = 0; d < rec->ndev; d++)
    if (rec->streams[d] != NULL)
      {
        gm_status status = gm_backend_current->graph_end (rec->streams[d],
                                                          &rec->graphs[d]);
        if (status != GM_OK && first == GM_OK)
          first = status;
      }
  rec->ready = first == GM_OK;
  return first;
}

void
gm_recorder_drop (gm_recorder *rec)
{
  if (current_recorder == rec)
    current_recorder = NULL;
  for (int d = 0; d < rec->ndev; d++)
    {
      if (rec->graphs != NULL && rec->graphs[d] != NULL)
        gm_backend_current->graph_destroy (rec->graphs[d]);
      if (rec->streams != NULL && rec->streams[d] != NULL)
        gm_backend_current->stream_destroy (rec->streams[d]);
    }
  free (rec->streams);
  free (rec->graphs);
  rec->streams = NULL;
  rec->graphs = NULL;
  for (size_t i = 0; i < rec->narenas; i++)
    gm_backend_current->host_free (rec->arenas[i]);
  free (rec->arenas);
  rec->arenas = NULL;
  rec->narenas = rec->arenas_cap = rec->arena_used = rec->arena_size = 0;
  gm_graph_deps_free (&rec->deps);
  rec->capturing = false;
  rec->ready = false;
}

gm_status
gm_recorder_stream (gm_recorder *rec, int device,
                    const gm_graph_access *access, size_t naccess,
                    gm_stream **stream)
{
  const size_t *after;
  size_t index, nafter;
  gm_status status;

  if (rec->streams[device] == NULL)
    {
      gm_stream *fresh = NULL;

      status = gm_backend_current->stream_create (device, 0, &fresh);
      if (status == GM_OK)
        {
          status = gm_backend_current->graph_begin (fresh);
          if (status != GM_OK)
            gm_backend_current->stream_destroy (fresh);
        }
      if (status != GM_OK)
        return status;
      rec->streams[device] = fresh;
    }
  *stream = rec->streams[device];
  status = gm_graph_deps_add (&rec->deps, device, access, naccess, &index,
                              &after, &nafter);
  if (status == GM_OK && gm_backend_current->graph_order != NULL)
    status = gm_backend_current->graph_order (*stream, after, nafter);
  return status;
}

gm_status
gm_recorder_staging (gm_recorder *rec, size_t nbytes, char **ptr)
{
  size_t need = (nbytes + ALIGN - 1) / ALIGN * ALIGN;
  size_t size = need > ARENA ? need : ARENA;
  gm_status status;
  void *block;

  if (rec->narenas > 0 && rec->arena_used + need <= rec->arena_size)
    {
      *ptr = rec->arenas[rec->narenas - 1] + rec->arena_used;
      rec->arena_used += need;
      return GM_OK;
    }
  if (rec->narenas == rec->arenas_cap)
    {
      size_t cap = rec->arenas_cap ? 2 * rec->arenas_cap : 4;
      char **arenas = realloc (rec->arenas, cap * sizeof *arenas);
      if (arenas == NULL)
        return gm_error_set (GM_ERR_HOST_NOMEM, 0, NULL, "out of host "
                             "memory for a graph's staging");
      rec->arenas = arenas;
      rec->arenas_cap = cap;
    }
  status = gm_backend_current->host_alloc (size, &block);
  if (status != GM_OK)
    return status;
  rec->arenas[rec->narenas++] = block;
  rec->arena_size = size;
  rec->arena_used = need;
  *ptr = block;
  return GM_OK;
}

gm_status
gm_recorder_copy (gm_recorder *rec, int device, void *dst, int dst_device,
                  const void *src, int src_device, size_t nbytes)
{
  gm_graph_access access[2] = {{dst, nbytes, true}, {src, nbytes, false}};
  gm_stream *stream;
  gm_status status = gm_recorder_stream (rec, device, access, 2, &stream);

  if (status == GM_OK)
    status = gm_backend_current->copy (dst, dst_device, src, src_device,
                                       nbytes, stream);
  return status;
}
