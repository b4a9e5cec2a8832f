/* recorder.h -- the graph recorder (recorder.c): calls recorded once
   per device and replayed as graphs.  Plain C beneath the Python layer
   (gpumem.graph is its Python face, src/python/py-graph-record.c and
   py-graph.c); any C caller may record with it.  One thread at a time
   uses a recorder (the Python layer holds the GIL).  */

#ifndef GM_RECORDER_H
#define GM_RECORDER_H

#include "gm.h"
#include "graph-deps.h"

#include <stdbool.h>
#include <stddef.h>

typedef struct gm_recorder
{
  int ndev;
  gm_stream **streams;         /* per device: begun at its first call */
  gm_graph **graphs;           /* per device, once captured */
  char **arenas;               /* the page-locked blocks staging uses */
  size_t narenas, arenas_cap, arena_used, arena_size;
  gm_graph_deps deps;          /* which calls wait for which */
  bool capturing, ready;
} gm_recorder;

/* The recorder capturing in this thread, or NULL.  */
gm_recorder *gm_recorder_current (void);

/* Begins a capture in REC (zeroed) for every device of the current
   backend, as this thread's recorder.  */
gm_status gm_recorder_begin (gm_recorder *rec);
/* Ends REC's capture: each device's becomes a graph, every one ending
   whatever failed (so that the streams work).  The first failure's
   status; REC is then to be dropped.  */
gm_status gm_recorder_end (gm_recorder *rec);
/* Lets go of what REC holds (graphs, streams, staging, dependencies);
   it is empty, and may begin again.  */
void gm_recorder_drop (gm_recorder *rec);
/* The recording stream of DEVICE for the next call, in *STREAM, begun
   at first use; the call touches the NACCESS ranges ACCESS, and the
   stream is told which earlier calls it waits for (graph-deps.h): queue
   the call on it at once.  */
gm_status gm_recorder_stream (gm_recorder *rec, int device,
                              const gm_graph_access *access, size_t naccess,
                              gm_stream **stream);
/* NBYTES of REC's page-locked staging in *PTR, which lives as long as
   REC's graphs.  */
gm_status gm_recorder_staging (gm_recorder *rec, size_t nbytes, char **ptr);
/* Records a copy of NBYTES from SRC to DST, both memory of DEVICE (or
   its staging, SRC_DEVICE or DST_DEVICE -1), on DEVICE's stream.  */
gm_status gm_recorder_copy (gm_recorder *rec, int device, void *dst,
                            int dst_device, const void *src, int src_device,
                            size_t nbytes);

#endif /* GM_RECORDER_H */
