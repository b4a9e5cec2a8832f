/* graph-deps.h -- which earlier calls of a graph each recorded call
   must wait for (graph-deps.c).

   Each call names the memory it touches: ranges of addresses, each read
   or written.  A call waits for an earlier call of the same device when
   a range of one meets a range of the other and either writes it
   (read after write, write after read, write after write); of those it
   keeps only the ones no other kept one already waits for (a transitive
   reduction), so that a chain a -> b -> c gives c the one edge b -> c.
   Calls that share no written memory get no edge: they may run at the
   same time.  Plain C, no backend and no Python: the recorder runs it
   for every backend and passes the result to the backend's
   graph_order.  */

#ifndef GM_GRAPH_DEPS_H
#define GM_GRAPH_DEPS_H

#include <stdbool.h>
#include <stddef.h>

#include "gm.h"

/* NBYTES at PTR, which the call reads, or writes when WRITE.  */
typedef struct gm_graph_access
{
  const char *ptr;
  size_t nbytes;
  bool write;
} gm_graph_access;

typedef struct gm_graph_deps_call
{
  int device;
  size_t index;                /* among the calls of its device, from 0 */
  size_t first_access, naccess;
  size_t first_dep, ndeps;     /* in deps: the calls it waits for */
} gm_graph_deps_call;

/* The calls of one recording, all devices; zero it to start.  */
typedef struct gm_graph_deps
{
  gm_graph_deps_call *calls;
  size_t ncalls, calls_cap;
  gm_graph_access *accesses;
  size_t naccesses, accesses_cap;
  size_t *deps;                /* numbers of calls, in the whole list */
  size_t ndeps, deps_cap;
  size_t *marks;               /* per call: the last search that met it */
  size_t marks_cap;
  size_t *stack;               /* the search's calls to visit */
  size_t stack_cap;
  size_t *after;               /* the last add's AFTER, device numbering */
  size_t after_cap;
  size_t *per_device;          /* per device: how many calls it has */
  int ndev;
} gm_graph_deps;

/* Adds a call of DEVICE (0 .. 255) touching the NACCESS ranges ACCESS
   (ranges of 0 bytes touch nothing).  On GM_OK, *AFTER[0 .. *NAFTER)
   are the numbers, among DEVICE's calls (0 for its first), of the
   earlier calls it must wait for, valid until the next add; the call
   itself is DEVICE's call number *INDEX.  GM_ERR_HOST_NOMEM with the
   error set leaves DEPS as it was.  */
gm_status gm_graph_deps_add (gm_graph_deps *deps, int device,
                             const gm_graph_access *access, size_t naccess,
                             size_t *index, const size_t **after,
                             size_t *nafter);
/* Frees what DEPS holds and zeroes it.  */
void gm_graph_deps_free (gm_graph_deps *deps);
/* Grows *ARRAY (of SIZE-byte items, *CAP of them, doubling) to hold
   NEED; false when memory runs out (*ARRAY is then as it was).  The
   graph files' one growable-array helper.  */
bool gm_graph_reserve (void **array, size_t *cap, size_t need, size_t size);

#endif /* GM_GRAPH_DEPS_H */
