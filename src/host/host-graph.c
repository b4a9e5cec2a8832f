/* host-graph.c -- the host backend's graphs: a growing list of recorded
   calls (host-graph.h).  */

#include "config.h"

#include <stdlib.h>

#include "graph-deps.h"
#include "host-graph.h"

gm_graph *
gm_host_graph_new (int device)
{
  gm_graph *graph = calloc (1, sizeof *graph);

  if (graph == NULL)
    {
      gm_error_set (GM_ERR_HOST_NOMEM, 0, NULL, "no memory for a graph");
      return NULL;
    }
  graph->device = device;
  return graph;
}

gm_status
gm_host_graph_add (gm_graph *graph, const gm_host_op *op)
{
  if (!gm_graph_reserve ((void **) &graph->ops, &graph->cap,
                         graph->nops + 1, sizeof *graph->ops))
    return gm_error_set (GM_ERR_HOST_NOMEM, 0, NULL,
                         "no memory to record a graph's call");
  graph->ops[graph->nops++] = *op;
  return GM_OK;
}

void
gm_host_graph_free (gm_graph *graph)
{
  if (graph == NULL)
    return;
  free (graph->ops);
  free (graph);
}
