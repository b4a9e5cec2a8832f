/* cuda-graph.c -- the CUDA backend's graphs: stream capture.

   graph_begin starts capturing the stream (cudaStreamBeginCapture, in
   cudaStreamCaptureModeRelaxed: the first launch of a JIT kernel loads
   its code, which the stricter modes refuse during a capture); every
   copy, memset and launch later queued on it becomes a node of the
   graph instead of running.  graph_end ends the capture and instantiates
   the graph; graph_launch queues the instance (cudaGraphLaunch) and,
   with no stream, waits for it.

   Work a kernel's launcher allocates and frees on the captured stream
   (cudaMallocAsync / cudaFreeAsync: the algo kernel's scratch) becomes
   a pair of memory nodes of the graph, whose memory CUDA keeps in the
   graph's own pool, not gpumem's: a replay books nothing.  */

#include "config.h"

#include <stdlib.h>

#include "cuda-backend.h"
#include "cuda-status.h"

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
  GM_CUDA_CHECK (cudaStreamBeginCapture (stream->handle,
                                         cudaStreamCaptureModeRelaxed));
done:
  return status;
}

gm_status
gm_cuda_graph_end (gm_stream *stream, gm_graph **out)
{
  gm_status status = GM_OK;
  gm_graph *graph = NULL;
  cudaGraph_t captured = NULL;

  *out = NULL;
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
  cudaStream_t handle = gm_cuda_queue_on (graph->device, stream);

  GM_CUDA_CHECK_ALIVE ();
  status = gm_cuda_use_device (graph->device);
  if (status != GM_OK)
    goto done;
  GM_CUDA_CHECK (cudaGraphLaunch (graph->exec, handle));
  if (stream == NULL)
    GM_CUDA_CHECK (cudaStreamSynchronize (handle));
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
