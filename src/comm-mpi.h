/* comm-mpi.h -- MPI beneath gpumem.comm: starting and ending it, and
   the collectives of a job of more than one process (comm-mpi.c).  Built
   only with MPI (configure --with-mpi); comm.c calls it.  No Python or
   MPI headers here.  */

#ifndef GM_COMM_MPI_H
#define GM_COMM_MPI_H

#include "comm-job.h"

/* Starts MPI when an MPI launcher started the program, as gm_comm_init
   says (comm.h), and records the job's facts (gm_comm_job_set).  GM_OK
   also when MPI was not to start; GM_ERR_UNAVAILABLE saying why.  */
gm_status gm_mpi_start (void);

/* Ends MPI if it started: with STATUS not 0 in a job of more than one
   process, aborts the whole job (gm_comm_finalize says how) and does
   not return.  */
void gm_mpi_finalize (int status);

/* Runs CALL with the job's other ranks, as gm_comm_run says (comm.h);
   the job has more than one process.  */
gm_status gm_mpi_run (const gm_comm_call *call);

#endif /* GM_COMM_MPI_H */
