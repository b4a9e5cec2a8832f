/* comm.c -- the processes of a job working together (gpumem.comm's C
   layer, comm.h): the top of the collectives, which chooses between
   the job of one process, where every collective is local, MPI
   (comm-mpi.c) with NCCL beside it, and a transport the Python layer
   lends where gpumem has no MPI (comm-net.c).  */

#include "config.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "comm-engine.h"
#include "comm-net.h"
#include "nvtx.h"
#ifdef GM_HAVE_MPI
#include "comm-mpi.h"
#endif
#ifdef GM_HAVE_NCCL
#include "comm-nccl.h"
#endif

gm_status
gm_comm_init (void)
{
  if (gm_comm_engine_init () != GM_OK)
    return GM_ERR_UNAVAILABLE;
#ifdef GM_HAVE_MPI
  return gm_mpi_start ();
#else
  return GM_OK;
#endif
}

int
gm_comm_finalize (int status)
{
  const gm_comm_net *net = gm_comm_net_current ();

  if (status != 0 && net != NULL && net->size > 1)
    {
      fflush (stdout);
      fprintf (stderr, "gpumem: rank %d failed (exit %d); aborting the job\n",
               net->rank, status);
      fflush (stderr);
      net->abort (net->ctx);
    }
  if (status == 0 || gm_comm_size () == 1)
    {
#ifdef GM_HAVE_NCCL
      gm_nccl_shutdown ();
#endif
    }
  gm_comm_net_leave ();
#ifdef GM_HAVE_MPI
  gm_mpi_finalize (status);
#endif
  return status;
}

void
gm_comm_facts_get (gm_comm_facts *facts)
{
  memset (facts, 0, sizeof *facts);
  facts->thread_level = "";
  facts->transport = gm_comm_net_current () != NULL
                     ? gm_comm_net_current ()->name : "";
#ifdef GM_HAVE_MPI
  facts->mpi_built = true;
  gm_mpi_describe (facts);
#endif
#ifdef GM_HAVE_NCCL
  facts->nccl_built = true;
  facts->nccl_loaded = gm_nccl_describe (&facts->nccl_version,
                                         facts->nccl_path,
                                         sizeof facts->nccl_path,
                                         &facts->nccl_how);
  if (!facts->nccl_loaded)
    snprintf (facts->nccl_error, sizeof facts->nccl_error, "%s",
              gm_last_error ()->message);
#endif
}

gm_status
gm_comm_group_open (int handle, gm_comm_group *group)
{
#ifdef GM_HAVE_MPI
  return gm_mpi_group_open (handle, group);
#else
  (void) handle;
  (void) group;
  return gm_error_set (GM_ERR_UNAVAILABLE, 0, NULL,
                       "gpumem was built without MPI");
#endif
}

/* The local part of a collective in a job of one process.  */
static gm_status
run_alone (const gm_comm_call *call)
{
  size_t nbytes = call->count * gm_dtypes[call->dtype].itemsize;

  if (call->kind != GM_COMM_GATHER || nbytes == 0)
    return GM_OK;
  return gm_backend_current->copy (call->result, call->device, call->data,
                                   call->device, nbytes, call->stream);
}

/* gm_comm_run without its NVTX range.  */
static gm_status
run_call (const gm_comm_call *call)
{
  if (call->group != NULL && call->group->net != NULL)
    return gm_comm_net_run (call, call->group->net);
  if (gm_comm_net_joined () && gm_comm_size () > 1)
    return gm_comm_net_run (call, NULL);
#ifdef GM_HAVE_MPI
  if (gm_comm_size () > 1 || call->group != NULL)
    return gm_mpi_run (call);
#endif
  if (call->refused)
    return gm_error_set (GM_ERR_VALUE, 0, NULL, "arguments refused");
  return run_alone (call);
}

gm_status
gm_comm_run (const gm_comm_call *call)
{
  gm_status status;

  if (!gm_nvtx_on ())
    return run_call (call);
  gm_nvtx_push (GM_NVTX_COLLECTIVE, gm_comm_kind_name (call->kind),
                call->device,
                call->count * gm_dtypes[call->dtype].itemsize);
  status = run_call (call);
  gm_nvtx_pop ();
  return status;
}

/* Messages this rank sent to itself, oldest first.  */
typedef struct self_message
{
  struct self_message *next;
  int tag;
  size_t nbytes;
  unsigned char bytes[GM_COMM_MESSAGE_MAX];
} self_message;

static self_message *self_first;
static pthread_mutex_t self_lock = PTHREAD_MUTEX_INITIALIZER;

static gm_status
check_peer (int rank, int tag, const char *what)
{
  if (rank < 0 || rank >= gm_comm_size ())
    return gm_error_set (GM_ERR_VALUE, 0, NULL,
                         "%s %d is not a rank: the job has %d process%s "
                         "(ranks 0 to %d)", what, rank, gm_comm_size (),
                         gm_comm_size () == 1 ? "" : "es",
                         gm_comm_size () - 1);
  if (tag < 0 || tag > GM_COMM_TAG_MAX)
    return gm_error_set (GM_ERR_VALUE, 0, NULL,
                         "tag %d is out of range: 0 to %d", tag,
                         GM_COMM_TAG_MAX);
  return GM_OK;
}

/* A message to or from another rank: over the job's transport, else
   MPI.  */
static gm_status
send_other (int dest, int tag, const void *bytes, size_t nbytes)
{
  const gm_comm_net *net = gm_comm_net_current ();
  gm_status status;

  if (net != NULL)
    {
      status = net->send (net->ctx, dest, tag, bytes, nbytes);
      return status == GM_OK ? GM_OK : GM_ERR_UNAVAILABLE;
    }
#ifdef GM_HAVE_MPI
  return gm_mpi_send (dest, tag, bytes, nbytes);
#else
  return gm_error_set (GM_ERR_UNAVAILABLE, 0, NULL, "no MPI carries "
                       "messages between ranks");
#endif
}

static gm_status
try_recv_other (int source, int tag, void *buf, size_t *nbytes)
{
  const gm_comm_net *net = gm_comm_net_current ();
  gm_status status;

  if (net != NULL)
    {
      status = net->try_recv (net->ctx, source, tag, buf, GM_COMM_MESSAGE_MAX,
                              nbytes);
      return status == GM_OK || status == GM_ERR_NOT_READY
             || status == GM_ERR_VALUE ? status : GM_ERR_UNAVAILABLE;
    }
#ifdef GM_HAVE_MPI
  return gm_mpi_try_recv (source, tag, buf, GM_COMM_MESSAGE_MAX, nbytes);
#else
  return gm_error_set (GM_ERR_UNAVAILABLE, 0, NULL, "no MPI carries "
                       "messages between ranks");
#endif
}

gm_status
gm_comm_send (int dest, int tag, const void *bytes, size_t nbytes)
{
  gm_status status = check_peer (dest, tag, "dest");
  self_message *message, **last;

  if (status != GM_OK)
    return status;
  if (nbytes > GM_COMM_MESSAGE_MAX)
    return gm_error_set (GM_ERR_VALUE, 0, NULL, "a message of %zu bytes is "
                         "longer than %d", nbytes, GM_COMM_MESSAGE_MAX);
  if (dest != gm_comm_rank ())
    return send_other (dest, tag, bytes, nbytes);
  message = malloc (sizeof *message);
  if (message == NULL)
    return gm_error_set (GM_ERR_HOST_NOMEM, 0, NULL,
                         "out of host memory for a message");
  message->next = NULL;
  message->tag = tag;
  message->nbytes = nbytes;
  memcpy (message->bytes, bytes, nbytes);
  pthread_mutex_lock (&self_lock);
  for (last = &self_first; *last != NULL; last = &(*last)->next)
    ;
  *last = message;
  pthread_mutex_unlock (&self_lock);
  return GM_OK;
}

gm_status
gm_comm_try_recv (int source, int tag, void *buf, size_t *nbytes)
{
  gm_status status = check_peer (source, tag, "source");
  self_message *found = NULL;

  if (status != GM_OK)
    return status;
  if (source != gm_comm_rank ())
    return try_recv_other (source, tag, buf, nbytes);
  pthread_mutex_lock (&self_lock);
  for (self_message **p = &self_first; *p != NULL; p = &(*p)->next)
    if ((*p)->tag == tag)
      {
        found = *p;
        *p = found->next;
        break;
      }
  pthread_mutex_unlock (&self_lock);
  if (found == NULL)
    return GM_ERR_NOT_READY;
  memcpy (buf, found->bytes, found->nbytes);
  *nbytes = found->nbytes;
  free (found);
  return GM_OK;
}
