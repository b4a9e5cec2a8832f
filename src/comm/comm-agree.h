/* comm-agree.h -- how the ranks agree on a collective before its data
   moves: each describes its own call in a few integers, every rank
   gets every description (comm-mpi.c gathers them), and every rank
   reaches the same verdict from them: the calls match or not, and NCCL
   or MPI moves the data.

   No Python, MPI, CUDA or NCCL headers here.  */

#ifndef GM_COMM_AGREE_H
#define GM_COMM_AGREE_H

#include <stddef.h>
#include <stdint.h>

#include "comm-job.h"

#define GM_COMM_DESC_DIMS 4

/* What one rank passes, as every rank compares it.  */
typedef struct gm_comm_desc
{
  int64_t kind, refused, op, root, dtype, ndim, count, shape_hash, chunk;
  int64_t dims[GM_COMM_DESC_DIMS];
  /* GPUMEM_COMM, whether NCCL can move this rank's part (a
     gm_nccl_verdict) and the GPU it would use (gm_nccl_device_key).  */
  int64_t engine, nccl, device_key;
  /* The device as shared windows name it (gm_comm_ipc_key; 0: this rank
     cannot take part), and whether GPUMEM_COMM=auto would take them
     (gm_comm_ipc_auto).  */
  int64_t ipc_key, ipc_auto;
} gm_comm_desc;

#define GM_COMM_DESC_WORDS ((int) (sizeof (gm_comm_desc) / sizeof (int64_t)))

/* Describes CALL, this rank's part, in DESC; CHUNK_BYTES is the size
   of the chunks MPI moves data in (GPUMEM_MPI_CHUNK), which every rank
   must share.  */
void gm_comm_describe (const gm_comm_call *call, size_t chunk_bytes,
                       gm_comm_desc *desc);

/* Compares the N descriptions ALL (rank R's at ALL[R]) with rank 0's:
   GM_OK, or GM_ERR_VALUE naming the first difference (or the first rank
   that refused its arguments).  Every rank has the same ALL, so every
   rank reaches the same verdict.  */
gm_status gm_comm_compare (const gm_comm_desc *all, int n);

/* Which engine moves the data of the collective the N descriptions ALL
   describe (they compare equal).  NCCL when every rank's part can go
   through it and no two ranks share a GPU: *LAYOUT becomes a number
   naming every rank's GPU (the same on every rank, never 0), else 0.
   Otherwise shared windows (comm-windows.h) when every rank names the same
   device of one node and GPUMEM_COMM is ipc, or auto and every rank
   would take them: *IPC_KEY becomes that device's key, else 0.  Else
   MPI.  GM_ERR_UNAVAILABLE, on every rank alike, when GPUMEM_COMM=nccl
   and NCCL cannot (a dtype NCCL cannot reduce still goes through MPI),
   or GPUMEM_COMM=ipc and shared windows cannot.  */
gm_status gm_comm_choose_engine (const gm_comm_desc *all, int n,
                                 uint64_t *layout, uint64_t *ipc_key);

#endif /* GM_COMM_AGREE_H */
