/* comm-job.c -- the job gpumem runs in: rank, size, the node's ranks,
   and the names of the collectives and their ops (comm-job.h).  MPI
   (comm-mpi.c) fills the facts in once it starts; until then the job
   is this one process.  */

#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "comm-job.h"
#include "gm-env.h"

static int world_rank, world_size = 1;
static int local_rank, local_size = 1;
static bool cuda_aware;
/* node_of[R]: rank R's node, as gm_comm_job_set_nodes says; NULL until
   MPI has told (the job is then this one process).  */
static int *node_of;

const char *
gm_comm_kind_name (gm_comm_kind kind)
{
  switch (kind)
    {
    case GM_COMM_BARRIER:
      return "barrier";
    case GM_COMM_BCAST:
      return "bcast";
    case GM_COMM_ALLREDUCE:
      return "allreduce";
    case GM_COMM_GATHER:
      return "gather";
    }
  return "?";
}

/* The ops are the backends' reduce ops (gm.h).  */
const char *
gm_comm_op_name (gm_comm_op op)
{
  return gm_reduce_op_name (op);
}

gm_status
gm_comm_op_check (gm_dtype dtype, gm_comm_op op)
{
  if (dtype == GM_FLOAT16)
    return gm_error_set (GM_ERR_TYPE, 0, NULL,
                         "allreduce cannot reduce float16 arrays: MPI has no "
                         "float16 type (bcast and gather move them); use "
                         "float32");
  if (gm_dtypes[dtype].kind == 'c' && op != GM_COMM_SUM)
    return gm_error_set (GM_ERR_TYPE, 0, NULL,
                         "allreduce op='%s' is not defined for %s: complex "
                         "numbers have no order (op='sum' is)",
                         gm_comm_op_name (op), gm_dtypes[dtype].name);
  return GM_OK;
}

int
gm_comm_rank (void)
{
  return world_rank;
}

int
gm_comm_size (void)
{
  return world_size;
}

int
gm_comm_local_rank (void)
{
  return local_rank;
}

int
gm_comm_local_size (void)
{
  return local_size;
}

bool
gm_comm_cuda_aware (void)
{
  return cuda_aware;
}

bool
gm_comm_same_node (int rank)
{
  if (rank < 0 || rank >= world_size)
    return false;
  if (rank == world_rank)
    return true;
  return node_of != NULL && node_of[rank] == node_of[world_rank];
}

int
gm_comm_default_device (void)
{
  int count = gm_backend_current ? gm_backend_current->device_count () : 0;
  return count > 0 ? local_rank % count : 0;
}

void
gm_comm_job_set (int rank, int size, int node_rank, int node_size,
                 bool aware)
{
  world_rank = rank;
  world_size = size;
  local_rank = node_rank;
  local_size = node_size;
  cuda_aware = aware;
}

gm_status
gm_comm_job_set_nodes (const int *nodes, int size)
{
  size_t per_node = 0;
  int *copy;

  if (gm_env_count ("GPUMEM_TEST_RANKS_PER_NODE", 0, 0, 1 << 20, &per_node)
      != GM_OK)
    return GM_ERR_VALUE;
  copy = malloc (sizeof *copy * (size_t) size);
  if (copy == NULL)
    return gm_error_set (GM_ERR_HOST_NOMEM, 0, NULL,
                         "out of host memory for the job's node table");
  for (int r = 0; r < size; r++)
    copy[r] = per_node > 0 ? (int) ((size_t) r / per_node) : nodes[r];
  free (node_of);
  node_of = copy;
  return GM_OK;
}

gm_status
gm_comm_launched (bool *yes, bool *forbidden)
{
  static const char *const names[] = {
    "OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"
  };
  const char *force = getenv ("GPUMEM_MPI");

  *forbidden = false;
  if (force != NULL && *force != '\0')
    {
      gm_status status = gm_env_bool ("GPUMEM_MPI", false, yes);
      *forbidden = status == GM_OK && !*yes;
      return status;
    }
  *yes = false;
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (getenv (names[i]) != NULL)
      *yes = true;
  return GM_OK;
}
