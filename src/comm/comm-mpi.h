/* comm-mpi.h -- MPI beneath gpumem.comm: starting and ending it, and
   the collectives of a job of more than one process (comm-mpi.c).  Built
   only with MPI (configure --with-mpi); comm.c calls it.  No Python or
   MPI headers here.  */

#ifndef GM_COMM_MPI_H
#define GM_COMM_MPI_H

#include "comm-job.h"

/* Starts MPI when an MPI launcher started the program, or joins MPI
   that runs already, as gm_comm_init says (comm.h), and records the
   job's facts (gm_comm_job_set).  GM_OK also when MPI was not to start;
   GM_ERR_UNAVAILABLE saying why.  */
gm_status gm_mpi_start (void);

/* Ends MPI if it started: with STATUS not 0 in a job of more than one
   process, aborts the whole job (gm_comm_finalize says how) and does
   not return.  */
void gm_mpi_finalize (int status);

/* Fills FACTS's MPI fields, as gm_comm_facts_get says (comm.h).  */
void gm_mpi_describe (gm_comm_facts *facts);

/* gm_comm_group_open (comm.h).  */
gm_status gm_mpi_group_open (int handle, gm_comm_group *group);

/* Runs CALL with the job's other ranks, as gm_comm_run says (comm.h);
   the job has more than one process.  */
gm_status gm_mpi_run (const gm_comm_call *call);

/* Sends the NBYTES at BYTES (a few hundred: MPI sends them at once,
   without waiting for the receive) to rank DEST with TAG, on a
   communicator of gpumem's own.  GM_OK, or GM_ERR_UNAVAILABLE.  */
gm_status gm_mpi_send (int dest, int tag, const void *bytes, size_t nbytes);

/* Takes the next message from rank SOURCE with TAG into BUF (CAP bytes)
   when one has arrived, without waiting: GM_OK and its length in
   *NBYTES; GM_ERR_NOT_READY when none has; GM_ERR_VALUE when it is
   longer than CAP (it is dropped); GM_ERR_UNAVAILABLE.  */
gm_status gm_mpi_try_recv (int source, int tag, void *buf, size_t cap,
                           size_t *nbytes);

#endif /* GM_COMM_MPI_H */
