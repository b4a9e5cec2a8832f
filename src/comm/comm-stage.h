/* comm-stage.h -- how a collective's data reaches a transport that
   cannot read device memory: through host memory kept between
   collectives (pinned where the backend gives it), a chunk at a time.
   Shared by the transports beneath gpumem.comm (MPI, comm-mpi.c; one the
   Python layer lends, comm-net.c).

   No Python, MPI, CUDA or NCCL headers here.  One transport runs a
   process's collectives, under its own lock: the staging memory is that
   transport's while it holds the lock.  */

#ifndef GM_COMM_STAGE_H
#define GM_COMM_STAGE_H

#include <stdbool.h>
#include <stddef.h>

#include "comm-job.h"

/* The settings every transport reads as it starts: GPUMEM_MPI_CHUNK
   (a size, 16 bytes to MAX_CHUNK; default MAX_CHUNK) into *CHUNK_BYTES,
   the most bytes a chunk moves, and GPUMEM_MPI_CUDA_AWARE into *AWARE:
   -1 unset, else 1 or 0 as set, whether the transport takes device
   addresses (0 also stages the host backend's memory, so that tests
   without a GPU run the staging code).  GM_OK, or GM_ERR_UNAVAILABLE
   naming the bad value.  */
gm_status gm_comm_stage_settings (size_t max_chunk, size_t *chunk_bytes,
                                  int *aware);

/* Host memory of at least NBYTES, kept for later calls: the backend's
   pinned memory where it gives it, else plain memory (slower copies).
   NULL when the host has none (the caller cannot stay in step with the
   other ranks: it ends the job).  */
char *gm_comm_staging_get (size_t nbytes);

/* Lets go of the memory gm_comm_staging_get kept.  */
void gm_comm_staging_release (void);

/* One staging copy of NBYTES, unless an earlier one failed (*STATUS is
   not GM_OK): the collective goes on with the other ranks either way,
   and *STATUS keeps the first error.  DEVICE -1 is host memory.  */
void gm_comm_stage (gm_status *status, void *dst, int dst_device,
                    const void *src, int src_device, size_t nbytes);

/* One chunk of a collective that works on CALL's array in place: N
   elements at BUF.  GM_OK, or a status after which the job cannot go
   on (the transport failed).  */
typedef gm_status (*gm_comm_chunk_fn) (void *ctx, const gm_comm_call *call,
                                       void *buf, size_t n);

/* Runs FN (with CTX) over CALL's array in chunks of at most CHUNK_BYTES.
   STAGED: each chunk goes through host memory, copied there first where
   STAGE_IN and back where STAGE_OUT (a broadcast's root only sends, the
   others only receive; a reduction does both).  GM_OK; the first
   staging copy's error (the chunks still ran); *BROKEN true when FN
   failed or no host memory was left (the chunks stopped there: the
   caller ends the job).  */
gm_status gm_comm_run_chunks (const gm_comm_call *call, size_t chunk_bytes,
                              bool staged, bool stage_in, bool stage_out,
                              gm_comm_chunk_fn fn, void *ctx, bool *broken);

/* How many elements of ITEMSIZE bytes a gather among SIZE ranks moves
   a chunk: the root stages one chunk from every rank, so chunks shrink
   with the job to keep that near CHUNK_BYTES, down to 1 MiB.  */
size_t gm_comm_gather_chunk (size_t chunk_bytes, int size, size_t itemsize);

/* One chunk of a gather staged through host memory: on the root
   (ROOT true) HOST holds every rank's NBYTES, rank R's at R * NBYTES,
   this rank's in place already; elsewhere HOST holds this rank's.  */
typedef gm_status (*gm_comm_gather_fn) (void *ctx, const gm_comm_call *call,
                                        void *host, size_t nbytes,
                                        bool root);

/* Gathers every rank's array into the root's CALL->result through host
   memory, row R from rank R, a chunk of every rank's array at a time
   (gm_comm_gather_chunk); RANK and SIZE are this rank and the ranks of
   CALL's group.  Returns as gm_comm_run_chunks does.  */
gm_status gm_comm_run_gather (const gm_comm_call *call, int rank, int size,
                              size_t chunk_bytes, gm_comm_gather_fn fn,
                              void *ctx, bool *broken);

#endif /* GM_COMM_STAGE_H */
