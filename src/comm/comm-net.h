/* comm-net.h -- a job whose messages a layer above carries: the
   transport the Python layer lends where gpumem was built without MPI
   (the binary wheel runs its collectives over mpi4py's communicators).
   comm.c runs a collective over it the way it runs one over MPI: the
   ranks agree first (comm-agree.h), then NCCL, the shared windows or the
   transport itself moves the data, the transport through host memory
   (comm-stage.h).

   No Python, MPI, CUDA or NCCL headers here.  */

#ifndef GM_COMM_NET_H
#define GM_COMM_NET_H

#include <stdbool.h>
#include <stddef.h>

#include "comm-job.h"

/* A transport: the operations of one group of processes (every process
   of the job, or a communicator of the script's), each called with the
   group's other processes in step, one at a time, without the GIL.  Each
   returns GM_OK, or an error set with gm_error_set after which this
   process cannot stay in step (the caller ends the job).  */
struct gm_comm_net
{
  void *ctx;                    /* passed to each operation */
  const char *name;             /* "mpi4py" */
  int rank, size;               /* this process in the group, the group */
  /* Every process's NBYTES at MINE into ALL, process R's at
     ALL + R * NBYTES.  */
  gm_status (*allgather) (void *ctx, const void *mine, void *all,
                          size_t nbytes);
  /* The NBYTES at BUF of process ROOT into every other's BUF.  */
  gm_status (*bcast) (void *ctx, void *buf, size_t nbytes, int root);
  /* COUNT elements of DTYPE at BUF, in place, reduced with OP over the
     group (bool: sum and max are a logical or, min a logical and).  */
  gm_status (*allreduce) (void *ctx, void *buf, size_t count,
                          gm_dtype dtype, gm_comm_op op);
  /* Every process's NBYTES into ROOT's ALL, process R's at
     ALL + R * NBYTES; the root's own are in place there already, and
     ALL is NULL elsewhere.  */
  gm_status (*gather) (void *ctx, const void *mine, void *all,
                       size_t nbytes, int root);
  gm_status (*barrier) (void *ctx);
  /* Sends the NBYTES at BYTES (a few hundred) to process DEST with TAG
     without waiting for the receive.  */
  gm_status (*send) (void *ctx, int dest, int tag, const void *bytes,
                     size_t nbytes);
  /* Takes the oldest message from SOURCE with TAG into BUF (CAP bytes)
     when one has arrived: GM_OK with its length in *NBYTES;
     GM_ERR_NOT_READY when none has; GM_ERR_VALUE when it is longer than
     CAP (it is dropped).  */
  gm_status (*try_recv) (void *ctx, int source, int tag, void *buf,
                         size_t cap, size_t *nbytes);
  /* Ends the whole job (the caller has said why); does not return.  */
  void (*abort) (void *ctx);
};

/* Makes NET (kept, not copied) the job's transport: this process is
   NET->rank of NET->size, NODE_RANK of the NODE_SIZE on its node, and
   NODE_OF[R] names rank R's node (gm_comm_job_set_nodes).  Before the
   first array, so that the node-local rank chooses the default device
   (chosen at first use).  Starts
   the watchdog (GPUMEM_COMM_TIMEOUT) in a job of several processes.
   GM_OK; GM_ERR_VALUE when a transport is in use already or the facts
   do not fit; GM_ERR_UNAVAILABLE.  */
gm_status gm_comm_net_join (const gm_comm_net *net, int node_rank,
                            int node_size, const int *node_of);

/* The job's transport, or NULL (none joined, or it left).  */
const gm_comm_net *gm_comm_net_current (void);

/* Whether a transport joined, whether it left since or not: the job's
   collectives are then the transport's, and raise once it has left.  */
bool gm_comm_net_joined (void);

/* Stops using the job's transport while it still runs (before the MPI
   beneath it ends): the shared windows are let go of, every rank at
   once, and later collectives raise.  */
void gm_comm_net_leave (void);

/* Runs CALL over NET (the job's, or CALL->group's) as gm_comm_run says
   (comm.h).  */
gm_status gm_comm_net_run (const gm_comm_call *call, const gm_comm_net *net);

#endif /* GM_COMM_NET_H */
