/* comm.h -- the processes of an MPI job working together: the C layer
   under gpumem.comm, on top of the job's facts (comm-job.h) and the
   engines that move a collective's data (MPI, comm-mpi.h; NCCL,
   comm-nccl.h).

   No Python and no MPI headers here.  Without MPI built in (configure
   --without-mpi), or when the program was not started by an MPI launcher
   (mpirun, srun), the job is this one process: rank 0 of 1, and every
   collective is local.  */

#ifndef GM_COMM_H
#define GM_COMM_H

#include "comm-job.h"
#include "gm.h"

/* Starts MPI when the program was started by an MPI launcher (its
   environment names a rank: OMPI_COMM_WORLD_SIZE, PMIX_RANK, PMI_RANK or
   PMI_SIZE; GPUMEM_MPI=1 forces a start, GPUMEM_MPI=0 forbids one, in
   any of gm_env_bool's spellings; a bad value of it, of
   GPUMEM_MPI_CUDA_AWARE or of GPUMEM_MPI_CHUNK is an error), and
   learns this process's rank and node-local rank.  Call once, before the
   backend starts.  GM_OK, or GM_ERR_UNAVAILABLE saying why.  */
gm_status gm_comm_init (void);

/* Ends MPI, once Python has finished.  When STATUS (the program's exit
   status) is not 0 and the job has more than one process, prints
   "gpumem: rank R failed (exit N); aborting the job" and ends the whole
   job with MPI_Abort, so that the other ranks do not wait for this one
   for ever; does not return then.  Returns STATUS.  Call before the
   backend shuts down (a CUDA-aware MPI may still hold device memory).  */
int gm_comm_finalize (int status);

/* Runs CALL together with the other ranks' calls.  First every rank
   learns what every other passes (kind, dtype, shape, op, root, refusal)
   with one small all-gather, and all of them fail alike, before any data
   moves, when the calls differ.  Then the data moves: directly where MPI
   can read the memory (the host backend's, or device memory with a
   CUDA-aware MPI), else through pinned host memory, in chunks.  Blocks
   until this rank's part is done; call without the GIL.  Where every
   rank's memory is CUDA device memory on a GPU of its own, NCCL moves
   the data instead (comm-engine.h says when; GPUMEM_COMM chooses), on
   CALL->stream when given, and this returns once it is queued there.
   A collective that waits longer than GPUMEM_COMM_TIMEOUT, or whose
   NCCL part fails, ends the job (MPI_Abort) with a message.
   GM_OK; GM_ERR_VALUE when the ranks' calls differ or one refused its
   arguments (gm_last_error says which, unless CALL->refused); a
   backend's status when staging through host memory failed (the
   collective is still completed with the other ranks).  */
gm_status gm_comm_run (const gm_comm_call *call);

/* Finds the communicator whose Fortran handle is HANDLE (mpi4py's
   Comm.py2f ()) and this process's rank and size in it, into *GROUP,
   for gm_comm_call.group.  GM_OK; GM_ERR_VALUE when HANDLE is no
   communicator, MPI_COMM_NULL or an intercommunicator;
   GM_ERR_UNAVAILABLE when gpumem does not use MPI (it did not start or
   join it, or it has been finalized).  */
gm_status gm_comm_group_open (int handle, gm_comm_group *group);

/* Messages of a few hundred bytes between two ranks: how a rank hands
   another the handle of an array it shares (gpumem.comm.send_shared).
   gm_comm_send sends the NBYTES (at most GM_COMM_MESSAGE_MAX) at BYTES
   to rank DEST with TAG (0 .. GM_COMM_TAG_MAX) and returns without
   waiting for the receive; a message to this rank itself (also in a job
   of one process) waits here for its own gm_comm_try_recv.
   gm_comm_try_recv takes the oldest message from SOURCE with TAG into
   BUF (GM_COMM_MESSAGE_MAX bytes) when one has arrived: GM_OK with its
   length in *NBYTES, GM_ERR_NOT_READY when none has (call it again);
   messages from one rank with one tag arrive in the order sent.  Both:
   GM_ERR_VALUE for a rank or tag out of range; GM_ERR_UNAVAILABLE when
   MPI fails; GM_ERR_HOST_NOMEM.  Call without the GIL.  */
/* Fills FACTS; any time, MPI started or not.  */
void gm_comm_facts_get (gm_comm_facts *facts);

#define GM_COMM_MESSAGE_MAX 1024
#define GM_COMM_TAG_MAX 32767
gm_status gm_comm_send (int dest, int tag, const void *bytes, size_t nbytes);
gm_status gm_comm_try_recv (int source, int tag, void *buf, size_t *nbytes);

#endif /* GM_COMM_H */
