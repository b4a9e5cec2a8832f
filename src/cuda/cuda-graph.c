/* cuda-graph.c -- the CUDA backend's graphs: stream capture.

   graph_begin starts capturing the stream (cudaStreamBeginCapture, in
   cudaStreamCaptureModeRelaxed: the first launch of a JIT kernel loads
   its code, which the stricter modes refuse during a capture); every
   copy, memset and launch later queued on it becomes a node of the
   graph instead of running.  graph_end ends the capture and instantiates
   the graph; graph_launch queues the instance (cudaGraphLaunch) on the
   stream given, or with none on the device's legacy default stream,
   behind all the work queued before on gpumem's streams (Ordering in
   cuda-backend.c), for the caller to wait for.

   Work a kernel's launcher allocates and frees on the captured stream
   (cudaMallocAsync / cudaFreeAsync: the algo kernel's scratch) becomes
   a pair of memory nodes of the graph, whose memory CUDA keeps in the
   graph's own pool, not gpumem's: a replay books nothing.

   A capture is one stream, yet its calls need not be one chain:
   graph_order, called before each call the recorder queues, sets the
   capture's dependencies (cudaStreamUpdateCaptureDependencies) to the
   nodes that end the earlier calls named, so that the graph has the
   branches the recorder found (graph-deps.h).  The nodes that end a
   call are the capture's dependencies after it, read at the next
   graph_order (cudaStreamGetCaptureInfo): the one leaf of the chain a
   call queues (a kernel, a copy, or an allocation, kernel and free),
   or, for a call that queued nothing, the nodes it was set to wait
   for.  */

#include "config.h"

#include <stdbool.h>
#include <stdlib.h>

#include "cuda-internal.h"
#include "cuda-status.h"
#include "graph-deps.h"

/* The nodes that end each call graph_order numbered: ENDS[i] is
   NODES[first .. first + count).  WANT: graph_order's scratch.  */
struct gm_cuda_capture
{
  size_t ncalls;
  struct
  {
    size_t first, count;
  } *ends;
  size_t ends_cap;
  cudaGraphNode_t *nodes, *want;
  size_t nnodes, nodes_cap, want_cap;
};

static void
capture_free (gm_stream *stream)
{
  struct gm_cuda_capture *capture = stream->capture;

  stream->capture = NULL;
  if (capture == NULL)
    return;
  free (capture->ends);
  free (capture->nodes);
  free (capture->want);
  free (capture);
}


struct gm_graph
{
  int device;
  cudaGraph_t graph;
  cudaGraphExec_t exec;
};

gm_status
gm_cuda_graph_begin (gm_stream *stream)
{
  gm_status status = GM_OK;

  GM_CUDA_CHECK_ALIVE ();
  status = gm_cuda_use_device (stream->device);
  if (status != GM_OK)
    goto done;
  capture_free (stream);
  stream->capture = calloc (1, sizeof *stream->capture);
  if (stream->capture == NULL)
    {
      status = gm_error_set (GM_ERR_HOST_NOMEM, 0, NULL,
                             "no memory for a graph's capture");
      goto done;
    }
  GM_CUDA_CHECK (cudaStreamBeginCapture (stream->handle,
                                         cudaStreamCaptureModeRelaxed));
done:
  if (status != GM_OK)
    capture_free (stream);
  return status;
}

gm_status
gm_cuda_graph_end (gm_stream *stream, gm_graph **out)
{
  gm_status status = GM_OK;
  gm_graph *graph = NULL;
  cudaGraph_t captured = NULL;

  *out = NULL;
  capture_free (stream);
  status = gm_cuda_use_device (stream->device);
  if (status != GM_OK)
    goto done;
  /* Ends the capture whatever comes after, so that the stream works
     again as before graph_begin.  */
  GM_CUDA_CHECK (cudaStreamEndCapture (stream->handle, &captured));
  graph = calloc (1, sizeof *graph);
  if (graph == NULL)
    {
      status = gm_error_set (GM_ERR_HOST_NOMEM, 0, NULL,
                             "no memory for a graph");
      goto done;
    }
  graph->device = stream->device;
  GM_CUDA_CHECK (cudaGraphInstantiateWithFlags (&graph->exec, captured, 0));
  graph->graph = captured;
  captured = NULL;
  *out = graph;
  graph = NULL;
done:
  if (captured != NULL && cudaGraphDestroy (captured) != cudaSuccess)
    cudaGetLastError ();
  free (graph);
  return status;
}

gm_status
gm_cuda_graph_launch (gm_graph *graph, gm_stream *stream)
{
  gm_status status = GM_OK;

  GM_CUDA_CHECK_ALIVE ();
  status = gm_cuda_join (graph->device, stream);
  if (status == GM_OK)
    status = gm_cuda_use_device (graph->device);
  if (status != GM_OK)
    goto done;
  GM_CUDA_CHECK (cudaGraphLaunch (graph->exec,
                                  gm_cuda_queue_on (graph->device, stream)));
done:
  return status;
}

void
gm_cuda_graph_destroy (gm_graph *graph)
{
  if (graph == NULL)
    return;
  /* At shutdown the runtime may be unloading: quiet, as every dealloc.  */
  if (!gm_cuda_lost () && gm_cuda_use_device (graph->device) == GM_OK)
    {
      if (cudaGraphExecDestroy (graph->exec) != cudaSuccess)
        cudaGetLastError ();
      if (cudaGraphDestroy (graph->graph) != cudaSuccess)
        cudaGetLastError ();
    }
  free (graph);
}

gm_status
gm_cuda_graph_order (gm_stream *stream, const size_t *after, size_t nafter)
{
  gm_status status = GM_OK;
  struct gm_cuda_capture *capture = stream->capture;
  const cudaGraphNode_t *current = NULL;
  size_t ncurrent = 0, nwant = 0;
  enum cudaStreamCaptureStatus state;
  cudaError_t err;

  GM_CUDA_CHECK_ALIVE ();
  if (capture == NULL)
    return gm_error_set (GM_ERR_VALUE, 0, NULL, "the stream records no "
                         "graph");
  for (size_t i = 0; i < nafter; i++)
    if (after[i] >= capture->ncalls)
      return gm_error_set (GM_ERR_VALUE, 0, NULL, "a graph's call %zu "
                           "waits for call %zu, not recorded before it",
                           capture->ncalls, after[i]);
  status = gm_cuda_use_device (stream->device);
  if (status != GM_OK)
    goto done;
  if (capture->ncalls == 0)
    {
      /* The capture's first call waits for nothing already.  */
      capture->ncalls = 1;
      goto done;
    }
  /* The nodes that end the previous call.  */
#if CUDART_VERSION >= 13000
  GM_CUDA_CHECK (cudaStreamGetCaptureInfo (stream->handle, &state, NULL,
                                           NULL, &current, NULL,
                                           &ncurrent));
#else
  GM_CUDA_CHECK (cudaStreamGetCaptureInfo_v2 (stream->handle, &state, NULL,
                                              NULL, &current, &ncurrent));
#endif
  if (state != cudaStreamCaptureStatusActive)
    {
      status = gm_error_set (GM_ERR_VALUE, 0, NULL, "the stream's capture "
                             "was invalidated");
      goto done;
    }
  if (!gm_graph_reserve ((void **) &capture->ends, &capture->ends_cap, capture->ncalls,
                        sizeof *capture->ends)
      || !gm_graph_reserve ((void **) &capture->nodes, &capture->nodes_cap,
                           capture->nnodes + ncurrent,
                           sizeof *capture->nodes))
    {
      status = gm_error_set (GM_ERR_HOST_NOMEM, 0, NULL, "no memory to "
                             "order a graph's calls");
      goto done;
    }
  capture->ends[capture->ncalls - 1].first = capture->nnodes;
  capture->ends[capture->ncalls - 1].count = ncurrent;
  for (size_t i = 0; i < ncurrent; i++)
    capture->nodes[capture->nnodes++] = current[i];

  /* The nodes that end the calls AFTER names, each once.  */
  for (size_t i = 0; i < nafter; i++)
    {
      size_t first = capture->ends[after[i]].first;
      size_t count = capture->ends[after[i]].count;

      if (!gm_graph_reserve ((void **) &capture->want, &capture->want_cap,
                            nwant + count, sizeof *capture->want))
        {
          status = gm_error_set (GM_ERR_HOST_NOMEM, 0, NULL, "no memory "
                                 "to order a graph's calls");
          goto done;
        }
      for (size_t j = 0; j < count; j++)
        {
          cudaGraphNode_t node = capture->nodes[first + j];
          bool seen = false;

          for (size_t k = 0; k < nwant && !seen; k++)
            seen = capture->want[k] == node;
          if (!seen)
            capture->want[nwant++] = node;
        }
    }
#if CUDART_VERSION >= 13000
  err = cudaStreamUpdateCaptureDependencies (stream->handle,
                                             nwant > 0 ? capture->want
                                                       : NULL,
                                             NULL, nwant,
                                             cudaStreamSetCaptureDependencies);
#else
  err = cudaStreamUpdateCaptureDependencies (stream->handle,
                                             nwant > 0 ? capture->want
                                                       : NULL,
                                             nwant,
                                             cudaStreamSetCaptureDependencies);
#endif
  /* A runtime that refuses an empty set leaves the call after the
     previous one: a chain, slower, as right.  */
  if (err == cudaErrorInvalidValue && nwant == 0)
    {
      cudaGetLastError ();
      err = cudaSuccess;
    }
  GM_CUDA_CHECK (err);
  capture->ncalls++;
done:
  return status;
}
