/* comm-agree.c -- the ranks' agreement on a collective
   (comm-agree.h): its description, the comparison that makes every rank
   fail alike when the calls differ, and the choice of NCCL or MPI.  */

#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "comm-agree.h"
#include "comm-engine.h"
#include "comm-windows.h"
#ifdef GM_HAVE_NCCL
#include "comm-nccl.h"
#endif

void
gm_comm_describe (const gm_comm_call *call, size_t chunk_bytes,
                  gm_comm_desc *desc)
{
  uint64_t hash = 1469598103934665603u;   /* FNV-1a */

  memset (desc, 0, sizeof *desc);
  desc->kind = call->kind;
  desc->refused = call->refused;
  desc->chunk = (int64_t) chunk_bytes;
  desc->engine = gm_comm_engine_setting ();
  if (call->refused || call->kind == GM_COMM_BARRIER)
    return;
  desc->nccl = gm_nccl_verdict_for (call->kind, call->dtype, call->op);
#ifdef GM_HAVE_NCCL
  if (desc->nccl == GM_NCCL_OK)
    desc->device_key = (int64_t) gm_nccl_device_key (call->device);
#endif
  desc->ipc_key = (int64_t) gm_comm_ipc_key (call->device);
  desc->ipc_auto
    = gm_comm_ipc_auto (call->count * gm_dtypes[call->dtype].itemsize);
  desc->op = call->kind == GM_COMM_ALLREDUCE ? (int64_t) call->op : 0;
  desc->root = call->kind == GM_COMM_ALLREDUCE ? 0 : call->root;
  desc->dtype = call->dtype;
  desc->ndim = call->ndim;
  desc->count = (int64_t) call->count;
  for (int i = 0; i < call->ndim; i++)
    {
      hash = (hash ^ (uint64_t) call->shape[i]) * 1099511628211u;
      if (i < GM_COMM_DESC_DIMS)
        desc->dims[i] = call->shape[i];
    }
  desc->shape_hash = (int64_t) hash;
}

/* Writes "(4, 3)" or "a 6-dimensional shape" for DESC into BUF.  */
static void
format_shape (const gm_comm_desc *desc, char *buf, size_t size)
{
  size_t used = 0;

  if (desc->ndim > GM_COMM_DESC_DIMS)
    {
      snprintf (buf, size, "a %" PRId64 "-dimensional shape", desc->ndim);
      return;
    }
  used += (size_t) snprintf (buf, size, "(");
  for (int i = 0; i < desc->ndim && used < size; i++)
    used += (size_t) snprintf (buf + used, size - used, "%s%" PRId64,
                               i ? ", " : "", desc->dims[i]);
  if (used < size)
    snprintf (buf + used, size - used, desc->ndim == 1 ? ",)" : ")");
}

gm_status
gm_comm_compare (const gm_comm_desc *all, int n)
{
  const gm_comm_desc *first = &all[0];
  const char *name = gm_comm_kind_name ((gm_comm_kind) first->kind);

  for (int r = 0; r < n; r++)
    if (all[r].refused)
      return gm_error_set (GM_ERR_VALUE, 0, NULL,
                           "gpumem.comm.%s: rank %d refused its arguments "
                           "(its own error says why); no data was moved",
                           gm_comm_kind_name ((gm_comm_kind) all[r].kind), r);
  for (int r = 1; r < n; r++)
    {
      const gm_comm_desc *other = &all[r];

      if (other->kind != first->kind)
        return gm_error_set (GM_ERR_VALUE, 0, NULL,
                             "gpumem.comm: the ranks called different "
                             "collectives: rank 0 %s, rank %d %s", name, r,
                             gm_comm_kind_name ((gm_comm_kind) other->kind));
      if (other->engine != first->engine)
        return gm_error_set (GM_ERR_VALUE, 0, NULL,
                             "gpumem.comm.%s: the ranks set GPUMEM_COMM "
                             "differently: rank 0 '%s', rank %d '%s'", name,
                             gm_comm_engine_name ((gm_comm_engine)
                                                  first->engine), r,
                             gm_comm_engine_name ((gm_comm_engine)
                                                  other->engine));
      if (other->chunk != first->chunk)
        return gm_error_set (GM_ERR_VALUE, 0, NULL,
                             "gpumem.comm.%s: the ranks move data in "
                             "different chunks (GPUMEM_MPI_CHUNK): rank 0 "
                             "%" PRId64 " bytes, rank %d %" PRId64, name,
                             first->chunk, r, other->chunk);
      if (first->kind == GM_COMM_BARRIER)
        continue;
      if (other->dtype != first->dtype || other->count != first->count)
        return gm_error_set (GM_ERR_VALUE, 0, NULL,
                             "gpumem.comm.%s: the arrays differ across "
                             "ranks: rank 0 passes %" PRId64 " elements of "
                             "%s, rank %d %" PRId64 " elements of %s", name,
                             first->count, gm_dtypes[first->dtype].name, r,
                             other->count, gm_dtypes[other->dtype].name);
      if (other->ndim != first->ndim || other->shape_hash != first->shape_hash
          || memcmp (other->dims, first->dims, sizeof first->dims) != 0)
        {
          char mine[96], theirs[96];
          format_shape (first, mine, sizeof mine);
          format_shape (other, theirs, sizeof theirs);
          return gm_error_set (GM_ERR_VALUE, 0, NULL,
                               "gpumem.comm.%s: the arrays' shapes differ "
                               "across ranks: rank 0 passes %s, rank %d %s",
                               name, mine, r, theirs);
        }
      if (other->op != first->op)
        return gm_error_set (GM_ERR_VALUE, 0, NULL,
                             "gpumem.comm.%s: the ranks pass different ops: "
                             "rank 0 '%s', rank %d '%s'", name,
                             gm_comm_op_name ((gm_comm_op) first->op), r,
                             gm_comm_op_name ((gm_comm_op) other->op));
      if (other->root != first->root)
        return gm_error_set (GM_ERR_VALUE, 0, NULL,
                             "gpumem.comm.%s: the ranks name different "
                             "roots: rank 0 root=%" PRId64 ", rank %d "
                             "root=%" PRId64, name, first->root, r,
                             other->root);
    }
  return GM_OK;
}

/* The shared windows' half of gm_comm_choose_engine, once NCCL was
   not chosen.  */
static gm_status
choose_ipc (const gm_comm_desc *all, int n, uint64_t *ipc_key)
{
  int who = -1;

  *ipc_key = 0;
  if (all[0].engine != GM_COMM_ENGINE_IPC
      && all[0].engine != GM_COMM_ENGINE_AUTO)
    return GM_OK;
  for (int r = 0; r < n && who < 0; r++)
    if (all[r].ipc_key == 0 || all[r].ipc_key != all[0].ipc_key)
      who = r;
  if (all[0].engine == GM_COMM_ENGINE_AUTO)
    {
      for (int r = 0; r < n && who < 0; r++)
        if (!all[r].ipc_auto)
          who = r;
      if (who < 0)
        *ipc_key = (uint64_t) all[0].ipc_key;
      return GM_OK;
    }
  if (who >= 0)
    return gm_error_set (GM_ERR_UNAVAILABLE, 0, NULL,
                         "gpumem.comm.%s: GPUMEM_COMM=ipc, but rank %d %s; "
                         "no data was moved",
                         gm_comm_kind_name ((gm_comm_kind) all[0].kind), who,
                         all[who].ipc_key == 0
                           ? "cannot share memory (its backend cannot)"
                           : "uses another device or node than rank 0");
  *ipc_key = (uint64_t) all[0].ipc_key;
  return GM_OK;
}

gm_status
gm_comm_choose_engine (const gm_comm_desc *all, int n, uint64_t *layout,
                       uint64_t *ipc_key)
{
  static uint64_t checked_hash;   /* the last layout seen, its verdict */
  static gm_nccl_verdict checked_verdict;
  uint64_t hash = 1469598103934665603u;
  gm_nccl_verdict verdict = GM_NCCL_OK;
  int who = 0;

  *layout = 0;
  *ipc_key = 0;
  if (all[0].kind == GM_COMM_BARRIER)
    return GM_OK;
  for (int r = 0; r < n && verdict == GM_NCCL_OK; r++)
    if (all[r].nccl != GM_NCCL_OK)
      {
        verdict = (gm_nccl_verdict) all[r].nccl;
        who = r;
      }
  for (int r = 0; r < n && verdict == GM_NCCL_OK; r++)
    hash = (hash ^ (uint64_t) all[r].device_key) * 1099511628211u;
  if (hash == 0)
    hash = 1;
  if (verdict == GM_NCCL_OK && hash == checked_hash)
    verdict = checked_verdict;
  else if (verdict == GM_NCCL_OK)
    {
      /* Ranks sharing a GPU (or whose GPU CUDA cannot name) cannot be
         one NCCL communicator.  Checked once a layout.  */
      for (int r = 0; r < n && verdict == GM_NCCL_OK; r++)
        {
          bool shared = all[r].device_key == 0;
          for (int q = r + 1; q < n && !shared; q++)
            shared = all[q].device_key == all[r].device_key;
          if (shared)
            {
              verdict = GM_NCCL_SHARED_DEVICE;
              who = r;
            }
        }
      checked_hash = hash;
      checked_verdict = verdict;
    }
  if (verdict == GM_NCCL_OK)
    *layout = hash;
  else if (all[0].engine != GM_COMM_ENGINE_NCCL)
    return choose_ipc (all, n, ipc_key);
  else if (all[0].engine == GM_COMM_ENGINE_NCCL
           && verdict != GM_NCCL_DTYPE)
    return gm_error_set (GM_ERR_UNAVAILABLE, 0, NULL,
                         "gpumem.comm.%s: GPUMEM_COMM=nccl, but NCCL cannot "
                         "run it: rank %d: %s; no data was moved",
                         gm_comm_kind_name ((gm_comm_kind) all[0].kind), who,
                         gm_nccl_verdict_text (verdict));
  return GM_OK;
}

