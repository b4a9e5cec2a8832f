/* comm.c -- the processes of a job working together (gpumem.comm's C
   layer, comm.h): the top of the collectives, which chooses between
   the job of one process, where every collective is local, and MPI
   (comm-mpi.c) with NCCL beside it.  */

#include "config.h"

#include "comm.h"
#include "comm-engine.h"
#include "nvtx.h"
#ifdef GM_HAVE_MPI
#include "comm-mpi.h"
#endif
#ifdef GM_HAVE_NCCL
#include "comm-nccl.h"
#endif

gm_status
gm_comm_init (void)
{
  if (gm_comm_engine_init () != GM_OK)
    return GM_ERR_UNAVAILABLE;
#ifdef GM_HAVE_MPI
  return gm_mpi_start ();
#else
  return GM_OK;
#endif
}

int
gm_comm_finalize (int status)
{
  if (status == 0 || gm_comm_size () == 1)
    {
#ifdef GM_HAVE_NCCL
      gm_nccl_shutdown ();
#endif
    }
#ifdef GM_HAVE_MPI
  gm_mpi_finalize (status);
#endif
  return status;
}

/* The local part of a collective in a job of one process.  */
static gm_status
run_alone (const gm_comm_call *call)
{
  size_t nbytes = call->count * gm_dtypes[call->dtype].itemsize;

  if (call->kind != GM_COMM_GATHER || nbytes == 0)
    return GM_OK;
  return gm_backend_current->copy (call->result, call->device, call->data,
                                   call->device, nbytes, call->stream);
}

/* gm_comm_run without its NVTX range.  */
static gm_status
run_call (const gm_comm_call *call)
{
#ifdef GM_HAVE_MPI
  if (gm_comm_size () > 1)
    return gm_mpi_run (call);
#endif
  if (call->refused)
    return gm_error_set (GM_ERR_VALUE, 0, NULL, "arguments refused");
  return run_alone (call);
}

gm_status
gm_comm_run (const gm_comm_call *call)
{
  gm_status status;

  if (!gm_nvtx_on ())
    return run_call (call);
  gm_nvtx_push (GM_NVTX_COLLECTIVE, gm_comm_kind_name (call->kind),
                call->device,
                call->count * gm_dtypes[call->dtype].itemsize);
  status = run_call (call);
  gm_nvtx_pop ();
  return status;
}
