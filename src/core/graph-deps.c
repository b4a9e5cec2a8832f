/* graph-deps.c -- which earlier calls of a graph each recorded call
   must wait for: memory met and written (graph-deps.h).  */

#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "graph-deps.h"

bool
gm_graph_reserve (void **array, size_t *cap, size_t need, size_t size)
{
  size_t grown;
  void *block;

  if (need <= *cap)
    return true;
  grown = *cap ? 2 * *cap : 16;
  while (grown < need)
    grown *= 2;
  block = realloc (*array, grown * size);
  if (block == NULL)
    return false;
  *array = block;
  *cap = grown;
  return true;
}

/* Whether calls A and B of DEPS touch the same bytes, one writing.  */
static bool
conflict (const gm_graph_deps *deps, const gm_graph_deps_call *a,
          const gm_graph_access *b, size_t nb)
{
  const gm_graph_access *as = deps->accesses + a->first_access;

  for (size_t i = 0; i < a->naccess; i++)
    for (size_t j = 0; j < nb; j++)
      if ((as[i].write || b[j].write) && as[i].nbytes > 0 && b[j].nbytes > 0
          && as[i].ptr < b[j].ptr + b[j].nbytes
          && b[j].ptr < as[i].ptr + as[i].nbytes)
        return true;
  return false;
}

gm_status
gm_graph_deps_add (gm_graph_deps *deps, int device,
                   const gm_graph_access *access, size_t naccess,
                   size_t *index, const size_t **after, size_t *nafter)
{
  size_t k = deps->ncalls, stamp = k + 1, first_dep = deps->ndeps, kept = 0;
  gm_graph_deps_call *call;

  if (device < 0 || device > 255)
    return gm_error_set (GM_ERR_VALUE, 0, NULL, "a graph's call on no "
                         "device");
  /* Everything this call may need, before anything changes.  */
  if (!gm_graph_reserve ((void **) &deps->calls, &deps->calls_cap, k + 1,
                sizeof *deps->calls)
      || !gm_graph_reserve ((void **) &deps->accesses, &deps->accesses_cap,
                   deps->naccesses + naccess, sizeof *deps->accesses)
      || !gm_graph_reserve ((void **) &deps->deps, &deps->deps_cap, deps->ndeps + k,
                   sizeof *deps->deps)
      || !gm_graph_reserve ((void **) &deps->after, &deps->after_cap, k + 1,
                   sizeof *deps->after))
    goto nomem;
  if (!gm_graph_reserve ((void **) &deps->marks, &deps->marks_cap, k + 1,
                sizeof *deps->marks)
      || !gm_graph_reserve ((void **) &deps->stack, &deps->stack_cap, k + 1,
                   sizeof *deps->stack))
    goto nomem;
  if ((size_t) device >= (size_t) deps->ndev)
    {
      size_t *grown = realloc (deps->per_device,
                               (size_t) (device + 1) * sizeof *grown);
      if (grown == NULL)
        goto nomem;
      memset (grown + deps->ndev, 0,
              (size_t) (device + 1 - deps->ndev) * sizeof *grown);
      deps->per_device = grown;
      deps->ndev = device + 1;
    }
  /* Searches are stamped with the number of the call they are for, one
     more than any earlier search's.  */
  deps->marks[k] = 0;

  /* The calls met, latest first; one that a later kept call already
     waits for (marked by its search) is left out.  */
  for (size_t c = k; c-- > 0;)
    {
      const gm_graph_deps_call *earlier = &deps->calls[c];
      size_t top = 0;

      if (earlier->device != device || deps->marks[c] == stamp
          || !conflict (deps, earlier, access, naccess))
        continue;
      deps->deps[first_dep + kept++] = c;
      deps->stack[top++] = c;
      while (top > 0)
        {
          const gm_graph_deps_call *seen = &deps->calls[deps->stack[--top]];
          for (size_t e = 0; e < seen->ndeps; e++)
            {
              size_t up = deps->deps[seen->first_dep + e];
              if (deps->marks[up] != stamp)
                {
                  deps->marks[up] = stamp;
                  deps->stack[top++] = up;
                }
            }
        }
    }
  /* Earliest first.  */
  for (size_t i = 0; i < kept / 2; i++)
    {
      size_t swap = deps->deps[first_dep + i];
      deps->deps[first_dep + i] = deps->deps[first_dep + kept - 1 - i];
      deps->deps[first_dep + kept - 1 - i] = swap;
    }
  for (size_t i = 0; i < kept; i++)
    deps->after[i] = deps->calls[deps->deps[first_dep + i]].index;

  call = &deps->calls[k];
  call->device = device;
  call->index = deps->per_device[device]++;
  call->first_access = deps->naccesses;
  call->naccess = naccess;
  call->first_dep = first_dep;
  call->ndeps = kept;
  if (naccess > 0)
    memcpy (deps->accesses + deps->naccesses, access,
            naccess * sizeof *access);
  deps->naccesses += naccess;
  deps->ndeps += kept;
  deps->ncalls = k + 1;
  *index = call->index;
  *after = deps->after;
  *nafter = kept;
  return GM_OK;
nomem:
  return gm_error_set (GM_ERR_HOST_NOMEM, 0, NULL, "no memory to order a "
                       "graph's calls");
}

void
gm_graph_deps_free (gm_graph_deps *deps)
{
  free (deps->calls);
  free (deps->accesses);
  free (deps->deps);
  free (deps->marks);
  free (deps->stack);
  free (deps->after);
  free (deps->per_device);
  memset (deps, 0, sizeof *deps);
}
