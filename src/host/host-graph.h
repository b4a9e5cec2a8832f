/* host-graph.h -- the host backend's graphs: the list of copies, memsets,
   kernel launches and reduces a recording stream was given, run again in order
   (host-graph.c).  Plain data: host-backend.c records into it and runs
   it, so that this file calls nothing of the backend's.  */

#ifndef GM_HOST_GRAPH_H
#define GM_HOST_GRAPH_H

#include <stddef.h>

#include "gm.h"

typedef enum gm_host_op_kind
{
  GM_HOST_OP_COPY,         /* memmove of WIDTH bytes, HEIGHT rows */
  GM_HOST_OP_MEMSET,       /* VALUE into WIDTH bytes at DST */
  GM_HOST_OP_LAUNCH,       /* KERNEL's C reference on ARGS */
  GM_HOST_OP_REDUCE        /* REDUCE's arrays into DST */
} gm_host_op_kind;

/* One recorded call, its arguments copied.  */
typedef struct gm_host_op
{
  gm_host_op_kind kind;
  void *dst;
  const void *src;
  size_t dpitch, spitch, width, height;
  int value;
  const gm_kernel *kernel;
  gm_arg args[GM_MAX_KERNEL_PARAMS];
  struct
  {
    void *srcs[GM_REDUCE_MAX_INPUTS];
    int n;
    size_t count;
    gm_dtype dtype;
    gm_reduce_op op;
  } reduce;
} gm_host_op;

struct gm_graph
{
  int device;
  gm_host_op *ops;
  size_t nops, cap;
};

/* A new empty graph of DEVICE, or NULL with the error set.  */
gm_graph *gm_host_graph_new (int device);
/* Appends a copy of OP to GRAPH: GM_OK, or GM_ERR_HOST_NOMEM with the
   error set (GRAPH unchanged).  */
gm_status gm_host_graph_add (gm_graph *graph, const gm_host_op *op);
/* Frees GRAPH; NULL does nothing.  */
void gm_host_graph_free (gm_graph *graph);

#endif /* GM_HOST_GRAPH_H */
