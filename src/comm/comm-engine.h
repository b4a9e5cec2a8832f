/* comm-engine.h -- which engine moves the data of a collective: NCCL
   (comm-nccl.c) or MPI and plain copies (comm-mpi.c, comm-devices.c), and
   the settings that choose it.

   No Python, MPI, CUDA or NCCL headers here.  */

#ifndef GM_COMM_ENGINE_H
#define GM_COMM_ENGINE_H

#include <stdbool.h>

#include "comm-job.h"

/* GPUMEM_COMM: auto (NCCL where it can move the data; else shared
   windows where the ranks share one device of one node and MPI would
   stage the data through host memory, for arrays of at least
   GM_COMM_IPC_MIN_BYTES_PER_RANK times the ranks; else MPI), nccl
   (NCCL or an error; reductions of dtypes NCCL has none of still take
   MPI), mpi (never NCCL nor windows), ipc (shared windows, comm-windows.h,
   or an error).  */
typedef enum gm_comm_engine
{
  GM_COMM_ENGINE_AUTO, GM_COMM_ENGINE_NCCL, GM_COMM_ENGINE_MPI,
  GM_COMM_ENGINE_IPC
} gm_comm_engine;

/* GPUMEM_COMM=auto moves a collective through shared windows rather
   than MPI's host staging from this many bytes a rank of the job: each
   rank's turns cost about the same whatever the size, staging grows with
   it (on an H200 the windows won from 1 MiB with 2 ranks and from 2 MiB
   with 4: bench/NOTES.md, "One GPU, several ranks").  */
#define GM_COMM_IPC_MIN_BYTES_PER_RANK ((size_t) 512 << 10)

/* Why NCCL can or cannot move a collective's data.  */
typedef enum gm_nccl_verdict
{
  GM_NCCL_OK,
  GM_NCCL_NOT_BUILT,       /* configured without NCCL */
  GM_NCCL_TURNED_OFF,      /* GPUMEM_COMM=mpi or ipc */
  GM_NCCL_HOST_MEMORY,     /* the backend's memory is not CUDA device memory */
  GM_NCCL_DTYPE,           /* NCCL cannot reduce this dtype */
  GM_NCCL_SHARED_DEVICE,   /* two ranks use one GPU */
  GM_NCCL_BARRIER,         /* a barrier moves no data: MPI's alone */
  GM_NCCL_NOT_LOADED       /* built in, but the library does not open */
} gm_nccl_verdict;

/* Reads GPUMEM_COMM and GPUMEM_COMM_TIMEOUT, once, before the backend
   starts (gm_comm_init calls it): the only place they are parsed.
   GM_OK, or GM_ERR_UNAVAILABLE naming the bad value.  */
gm_status gm_comm_engine_init (void);

gm_comm_engine gm_comm_engine_setting (void);
/* GPUMEM_COMM's value as written: "auto", "nccl", "mpi" or "ipc".  */
const char *gm_comm_engine_name (gm_comm_engine engine);

/* GPUMEM_COMM_TIMEOUT in milliseconds: how long a collective waits for
   the other ranks (or devices) before it gives up; 0: for ever.  */
long gm_comm_timeout_ms (void);

/* Whether NCCL can move a collective of KIND (with OP) on arrays of
   DTYPE in the backend's memory, as far as this process can tell.  */
gm_nccl_verdict gm_nccl_verdict_for (gm_comm_kind kind, gm_dtype dtype,
                                     gm_comm_op op);

/* The verdict in words ("the backend's memory is host memory").  */
const char *gm_nccl_verdict_text (gm_nccl_verdict verdict);

/* "nccl" when collectives on arrays on the ranks' default devices go
   through NCCL (dtypes NCCL cannot reduce still take MPI); "ipc" when
   they go through shared windows (GPUMEM_COMM=ipc, or every rank of the
   job on one node with one device among them, and MPI staging through
   host memory); else "mpi".  After gm_backend_init.  */
const char *gm_comm_backend_name (void);

/* Whether GPUMEM_COMM=auto moves a collective of NBYTES through shared
   windows when this rank shares its device with every other rank: the
   backend can share memory, MPI would stage device memory through host
   memory, and NBYTES is at least GM_COMM_IPC_MIN_BYTES_PER_RANK times
   the job's ranks.  */
bool gm_comm_ipc_auto (size_t nbytes);

#endif /* GM_COMM_ENGINE_H */
