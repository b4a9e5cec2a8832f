/* comm-net.c -- collectives over a transport a layer above lends
   (comm-net.h): the ranks' agreement, then NCCL, the shared windows or
   the transport itself, which moves device data through host memory.

   Every collective starts with one small all-gather of what each rank
   passes (comm-agree.h), so that a rank with other sizes or dtypes,
   another collective or a refused argument makes every rank fail alike
   instead of leaving some waiting for ever or reading past a buffer.
   One mutex keeps the transport's operations to one thread at a time.
   A transport that fails leaves this rank out of step with the others:
   the job ends (the transport's abort), as it does when MPI fails.  */

#include "config.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm-agree.h"
#include "comm-engine.h"
#include "comm-net.h"
#include "comm-stage.h"
#include "comm-watchdog.h"
#include "comm-windows.h"
#ifdef GM_HAVE_NCCL
#include "comm-nccl.h"
#endif

/* Data moves in chunks of at most this many bytes (GPUMEM_MPI_CHUNK
   changes it, for tests), as over MPI.  */
#define NET_CHUNK ((size_t) 64 << 20)

static const gm_comm_net *job_net;
static bool left;
static size_t chunk_bytes = NET_CHUNK;
/* GPUMEM_MPI_CUDA_AWARE (gm_comm_stage_settings): -1 unset (device
   memory is staged, host memory is not), else 1 or 0.  */
static int aware = -1;
static pthread_mutex_t net_lock = PTHREAD_MUTEX_INITIALIZER;
/* The transport of the collective running, for the callbacks of NCCL's
   rendezvous and the shared windows, which take no context, and for the
   watchdog, whose thread reads it.  */
static const gm_comm_net *_Atomic running;

/* Ends the job after printing WHAT.  Does not return.  */
static void
fatal_on (const gm_comm_net *net, const char *what)
{
  fflush (stdout);
  fprintf (stderr, "gpumem: rank %d: %s; aborting the job\n", net->rank,
           what);
  fflush (stderr);
  net->abort (net->ctx);
  abort ();
}

/* The watchdog's end of the job (gm_watchdog_expire_fn), through the
   transport of the collective that waited (a comm= group's, or the
   job's).  */
static void
expire (const char *message)
{
  const gm_comm_net *net = running != NULL ? running : job_net;

  if (net == NULL)
    {
      fprintf (stderr, "gpumem: %s; aborting\n", message);
      abort ();
    }
  fatal_on (net, message);
}

#ifdef GM_HAVE_NCCL
/* How NCCL's engine shares its unique id (gm_nccl_share_fn).  */
static gm_status
share_bytes (void *bytes, size_t nbytes)
{
  return running->bcast (running->ctx, bytes, nbytes, 0);
}
#endif

static gm_status
ipc_allgather (const void *mine, void *all, size_t nbytes)
{
  /* MINE NULL: this rank's bytes are in place in ALL; the transport
     takes a separate source.  */
  if (mine == NULL)
    {
      gm_status status;
      void *copy = malloc (nbytes);

      if (copy == NULL)
        return gm_error_set (GM_ERR_HOST_NOMEM, 0, NULL,
                             "out of host memory for the windows' exchange");
      memcpy (copy, (char *) all + (size_t) running->rank * nbytes, nbytes);
      status = running->allgather (running->ctx, copy, all, nbytes);
      free (copy);
      return status;
    }
  return running->allgather (running->ctx, mine, all, nbytes);
}

static gm_status
ipc_barrier (void)
{
  return running->barrier (running->ctx);
}

static const gm_comm_ipc_net ipc_net = {ipc_allgather, ipc_barrier};

gm_status
gm_comm_net_join (const gm_comm_net *net, int node_rank, int node_size,
                  const int *node_of)
{
  gm_status status;

  if (job_net != NULL || left)
    return gm_error_set (GM_ERR_VALUE, 0, NULL, "gpumem's job has a "
                         "transport already");
  if (net->size < 1 || net->rank < 0 || net->rank >= net->size
      || node_size < 1 || node_rank < 0 || node_rank >= node_size)
    return gm_error_set (GM_ERR_VALUE, 0, NULL, "the transport says this "
                         "is rank %d of %d, %d of %d on its node", net->rank,
                         net->size, node_rank, node_size);
  if (gm_comm_stage_settings (NET_CHUNK, &chunk_bytes, &aware) != GM_OK)
    return GM_ERR_UNAVAILABLE;
  status = gm_comm_job_set_nodes (node_of, net->size);
  if (status != GM_OK)
    return status == GM_ERR_VALUE ? GM_ERR_UNAVAILABLE : status;
  job_net = net;
  gm_comm_job_set (net->rank, net->size, node_rank, node_size, aware == 1);
  if (net->size > 1
      && gm_comm_watchdog_start (gm_comm_timeout_ms (), expire) != GM_OK)
    return GM_ERR_UNAVAILABLE;
  return GM_OK;
}

const gm_comm_net *
gm_comm_net_current (void)
{
  return job_net;
}

bool
gm_comm_net_joined (void)
{
  return job_net != NULL || left;
}

void
gm_comm_net_leave (void)
{
  pthread_mutex_lock (&net_lock);
  if (job_net != NULL)
    {
      running = job_net;
      gm_comm_staging_release ();
      gm_comm_ipc_shutdown (&ipc_net);
      running = NULL;
      job_net = NULL;
      left = true;
    }
  pthread_mutex_unlock (&net_lock);
}

/* Exchanges CALL's description over NET and compares them; then, among
   the job's ranks, chooses the engine (gm_comm_choose_engine sets
   *LAYOUT and *IPC_KEY).  A communicator of the script's is the
   transport's alone.  */
static gm_status
agree (const gm_comm_call *call, const gm_comm_net *net, uint64_t *layout,
       uint64_t *ipc_key)
{
  gm_comm_desc mine, *all;
  gm_status status;

  gm_comm_describe (call, chunk_bytes, &mine);
  all = malloc (sizeof *all * (size_t) net->size);
  if (all == NULL)
    fatal_on (net, "out of host memory for the ranks' descriptions");
  if (net->allgather (net->ctx, &mine, all, sizeof mine) != GM_OK)
    fatal_on (net, gm_last_error ()->message);
  status = gm_comm_compare (all, net->size);
  *layout = 0;
  *ipc_key = 0;
  if (status == GM_OK && call->group == NULL)
    status = gm_comm_choose_engine (all, net->size, layout, ipc_key);
  free (all);
  return status;
}

static gm_status
bcast_chunk (void *ctx, const gm_comm_call *call, void *buf, size_t n)
{
  const gm_comm_net *net = ctx;

  return net->bcast (net->ctx, buf, n * gm_dtypes[call->dtype].itemsize,
                     call->root);
}

static gm_status
allreduce_chunk (void *ctx, const gm_comm_call *call, void *buf, size_t n)
{
  const gm_comm_net *net = ctx;

  return net->allreduce (net->ctx, buf, n, call->dtype, call->op);
}

static gm_status
gather_chunk (void *ctx, const gm_comm_call *call, void *host, size_t nbytes,
              bool root)
{
  const gm_comm_net *net = ctx;

  return net->gather (net->ctx, host, root ? host : NULL, nbytes,
                      call->root);
}

/* Moves CALL's data over NET, through host memory where the backend's
   memory is not the host's.  */
static gm_status
run_transport (const gm_comm_call *call, const gm_comm_net *net)
{
  bool staged = aware >= 0 ? aware == 0
                            : gm_backend_current->mpi_needs_staging;
  bool broken = false;
  bool root = net->rank == call->root;
  gm_status status;

  if (call->kind == GM_COMM_BCAST)
    status = gm_comm_run_chunks (call, chunk_bytes, staged, root, !root,
                                 bcast_chunk, (void *) net, &broken);
  else if (call->kind == GM_COMM_ALLREDUCE)
    status = gm_comm_run_chunks (call, chunk_bytes, staged, true, true,
                                 allreduce_chunk, (void *) net, &broken);
  else
    status = gm_comm_run_gather (call, net->rank, net->size, chunk_bytes,
                                 gather_chunk, (void *) net, &broken);
  if (broken)
    fatal_on (net, gm_last_error ()->message);
  return status;
}

gm_status
gm_comm_net_run (const gm_comm_call *call, const gm_comm_net *net)
{
  gm_status status, moved;
  uint64_t layout, ipc_key;

  pthread_mutex_lock (&net_lock);
  if (net == NULL)
    net = job_net;
  if (net == NULL)
    {
      pthread_mutex_unlock (&net_lock);
      return gm_error_set (GM_ERR_UNAVAILABLE, 0, NULL,
                           "MPI has been finalized: gpumem.comm's "
                           "collectives cannot run after MPI.Finalize()");
    }
  running = net;
  gm_comm_watchdog_arm (gm_comm_kind_name (call->kind));
  status = agree (call, net, &layout, &ipc_key);
  /* A barrier is the agreement itself: no rank passes its all-gather
     before every rank has called.  */
  if (status != GM_OK || call->kind == GM_COMM_BARRIER)
    goto done;
#ifdef GM_HAVE_NCCL
  if (layout != 0)
    {
      bool broken;
      status = gm_nccl_run_rank (call, layout, net->rank, net->size,
                                 share_bytes, &broken);
      if (broken)
        fatal_on (net, gm_last_error ()->message);
      goto done;
    }
#endif
  /* The transport reads the memory behind the device's back: the work
     queued on it must be done first.  A failed synchronize is reported
     after the collective, which still meets the other ranks.  */
  status = gm_backend_current->device_synchronize (call->device);
  moved = ipc_key != 0 ? gm_comm_ipc_run (call, ipc_key, chunk_bytes,
                                          &ipc_net)
                       : run_transport (call, net);
  if (status == GM_OK)
    status = moved;
done:
  gm_comm_watchdog_disarm ();
  running = NULL;
  pthread_mutex_unlock (&net_lock);
  return status;
}
