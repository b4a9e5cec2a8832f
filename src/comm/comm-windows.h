/* comm-windows.h -- collectives between ranks of one node that share one
   device, through memory they all map (share.h): each rank keeps a window
   of shareable memory on the device, maps every other rank's, and the
   data moves by device copies and a device reduction, the ranks taking
   turns between barriers, never through host memory.  What NCCL cannot do (it takes one GPU a
   rank) and MPI does only by staging through pinned host memory.

   No MPI headers: comm-mpi.c passes the two exchanges this needs.  */

#ifndef GM_COMM_IPC_H
#define GM_COMM_IPC_H

#include <stddef.h>
#include <stdint.h>

#include "comm-job.h"

/* The exchanges between the job's ranks the windows need; called with
   the job's other ranks in step.  */
typedef struct gm_comm_ipc_net
{
  /* Every rank's NBYTES at MINE into ALL, rank R's at ALL + R * NBYTES;
     MINE NULL: this rank's are in place there already.  */
  gm_status (*allgather) (const void *mine, void *all, size_t nbytes);
  /* Returns once every rank has called it.  */
  gm_status (*barrier) (void);
} gm_comm_ipc_net;

/* A number naming DEVICE of this process on this node, the same in every
   process that sees that device, never 0; 0 where the backend cannot
   share memory between processes (or cannot name the device).  Ranks
   whose keys are equal can run collectives here.  */
uint64_t gm_comm_ipc_key (int device);

/* Runs CALL (bcast, allreduce or gather; the ranks agreed on it, and
   every rank's KEY for CALL->device is equal) with the job's other ranks,
   moving a few times CHUNK_BYTES (GPUMEM_MPI_CHUNK) a round.  Sees the work queued before on the
   device and is complete on return (CALL->stream is not used).  Every
   rank's result has the same bits: the last rank reduces, in rank order,
   and every rank copies its result.  GM_OK; on every rank alike
   GM_ERR_NOMEM / GM_ERR_FAILED when a rank could not make or map a
   window (nothing moved); a backend's status when a copy or reduction
   failed here (the collective still meets the other ranks).  */
gm_status gm_comm_ipc_run (const gm_comm_call *call, uint64_t key,
                           size_t chunk_bytes, const gm_comm_ipc_net *net);

/* Unmaps the other ranks' windows and lets go of this rank's.  With
   NET, every rank at once at the end of the job (before MPI ends and the
   backend shuts down), after a barrier that no rank passes before every
   map of its window is gone.  */
void gm_comm_ipc_shutdown (const gm_comm_ipc_net *net);

#endif /* GM_COMM_IPC_H */
