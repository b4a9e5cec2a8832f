/* comm-job.h -- the job gpumem runs in: this process's rank among the
   job's processes and among its node's, and the names of the
   collectives and their ops.  The layer beneath the collectives'
   engines (comm-engine.h, comm-nccl.h, comm-devices.h) and the MPI
   code (comm-mpi.h), which all read it; comm.h, above them, runs
   collectives.

   No Python and no MPI headers here.  Until MPI starts (and without
   MPI) the job is this one process: rank 0 of 1.  */

#ifndef GM_COMM_JOB_H
#define GM_COMM_JOB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gm.h"

int gm_comm_rank (void);            /* this process's rank (0 alone) */
int gm_comm_size (void);            /* the number of processes (1 alone) */
int gm_comm_local_rank (void);      /* the rank among this node's */
int gm_comm_local_size (void);      /* the processes on this node */
bool gm_comm_cuda_aware (void);     /* MPI takes device addresses */
/* Whether RANK (of 0 .. size-1) runs on this process's node: true for
   this rank itself, false for a number that is not a rank.  */
bool gm_comm_same_node (int rank);

/* Whether to start (or join) MPI, in *YES: GPUMEM_MPI when set
   (gm_env_bool's spellings; any other value is an error, set), else
   whether an MPI launcher started this process (its environment names a
   rank: OMPI_COMM_WORLD_SIZE, PMIX_RANK, PMI_RANK or PMI_SIZE).
   *FORBIDDEN: GPUMEM_MPI says no.  */
gm_status gm_comm_launched (bool *yes, bool *forbidden);

/* The device this process uses by default: its node-local rank modulo
   the backend's device count (0 without MPI).  After gm_backend_init.  */
int gm_comm_default_device (void);

typedef enum gm_comm_kind
{
  GM_COMM_BARRIER, GM_COMM_BCAST, GM_COMM_ALLREDUCE, GM_COMM_GATHER
} gm_comm_kind;

/* allreduce's ops are the backends' reduce ops (gm.h).  */
typedef gm_reduce_op gm_comm_op;
#define GM_COMM_SUM GM_REDUCE_SUM
#define GM_COMM_MAX GM_REDUCE_MAX
#define GM_COMM_MIN GM_REDUCE_MIN

/* The name of KIND ("bcast") and of OP ("sum").  */
const char *gm_comm_kind_name (gm_comm_kind kind);
const char *gm_comm_op_name (gm_comm_op op);

/* GM_OK when arrays of DTYPE can be reduced with OP; else GM_ERR_TYPE
   saying why (float16 has no MPI type to reduce; complex numbers have
   no order, so no max or min).  */
gm_status gm_comm_op_check (gm_dtype dtype, gm_comm_op op);

/* A transport a layer above lends (comm-net.h).  */
typedef struct gm_comm_net gm_comm_net;

/* A communicator the script made (an mpi4py one: gpumem.comm's comm=),
   as gm_comm_group_open (comm.h) found it, or as a transport over it
   (NET) where gpumem has no MPI of its own.  */
typedef struct gm_comm_group
{
  int handle;               /* MPI's Fortran handle of it (MPI_Comm_c2f) */
  int rank;                 /* this process's rank in it */
  int size;                 /* its processes */
  const gm_comm_net *net;   /* its transport, or NULL: MPI's HANDLE */
} gm_comm_group;

/* One rank's part in a collective.  */
typedef struct gm_comm_call
{
  gm_comm_kind kind;
  /* This rank refused its own arguments (and has its own error to
     report): the collective still meets the other ranks, so that they
     fail too instead of waiting for this one.  */
  bool refused;
  gm_comm_op op;            /* allreduce */
  int root;                 /* bcast, gather */
  gm_dtype dtype;
  int ndim;
  const int64_t *shape;     /* NDIM dimensions */
  size_t count;             /* elements */
  void *data;               /* in place for bcast and allreduce; gather's
                               source */
  int device;               /* DATA's device */
  void *result;             /* gather on the root: size * COUNT elements
                               on DEVICE */
  gm_stream *stream;        /* NULL: complete on return; else queued on
                               this stream of DEVICE where NCCL runs it */
  /* NULL: among the job's ranks (gpumem's own duplicate of the world);
     else among GROUP's, ROOT a rank of GROUP, moved by MPI alone.  */
  const gm_comm_group *group;
} gm_comm_call;

/* What this process knows of MPI and NCCL (gpumem --config).  */
typedef struct gm_comm_facts
{
  bool mpi_built;             /* configure found MPI */
  bool mpi_in_use;            /* gpumem started MPI, or joined it */
  bool mpi_joined;            /* MPI ran before gpumem (mpi4py started it) */
  int mpi_major, mpi_minor;   /* the standard's version */
  char mpi_library[256];      /* MPI_Get_library_version's first line */
  char mpi_path[4096];        /* the library's file */
  const char *thread_level;   /* "MPI_THREAD_MULTIPLE"; "" unless in use */
  /* The transport the job runs over where gpumem has no MPI of its own
     ("mpi4py", comm-net.h), else "".  */
  const char *transport;
  bool nccl_built;            /* configure found NCCL */
  bool nccl_loaded;           /* its library opens (comm-nccl-load.h) */
  int nccl_version;           /* ncclGetVersion's: 22703 for 2.27.3 */
  char nccl_path[4096];
  const char *nccl_how;       /* how it was found: "GPUMEM_NCCL", ... */
  char nccl_error[GM_ERROR_MESSAGE_MAX];   /* why it does not open */
} gm_comm_facts;

/* Records what MPI said of this process once it started (comm-mpi.c
   and comm-net.c call it): RANK of SIZE processes, NODE_RANK of the NODE_SIZE
   on this node, and AWARE, whether MPI takes device addresses.  */
void gm_comm_job_set (int rank, int size, int node_rank, int node_size,
                      bool aware);

/* Records which node every rank runs on (comm-mpi.c and comm-net.c
   call it): NODE_OF[R], for R < size, is the same number for ranks on
   one node and different for ranks on different ones; copied.
   GPUMEM_TEST_RANKS_PER_NODE=K instead puts ranks 0..K-1 on one node,
   K..2K-1 on the next, and so on: how tests on one machine reach the
   refusals for ranks on another node.  GM_OK; GM_ERR_VALUE for a bad
   GPUMEM_TEST_RANKS_PER_NODE; GM_ERR_HOST_NOMEM.  */
gm_status gm_comm_job_set_nodes (const int *node_of, int size);

#endif /* GM_COMM_JOB_H */
