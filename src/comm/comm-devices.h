/* comm-devices.h -- collectives over arrays on several devices of this
   one process (gpumem.allreduce_devices, gpumem.bcast_devices): on NCCL
   with one communicator per device where NCCL can move the memory, else
   by plain copies through host memory and loops in C.  No MPI: one
   process needs no launcher.  No Python, CUDA or NCCL headers here.  */

#ifndef GM_COMM_DEVICES_H
#define GM_COMM_DEVICES_H

#include <stddef.h>

#include "comm-job.h"

typedef struct gm_comm_devices_call
{
  gm_comm_kind kind;        /* GM_COMM_ALLREDUCE or GM_COMM_BCAST */
  gm_comm_op op;            /* allreduce */
  int root;                 /* bcast: the index of the array to copy */
  gm_dtype dtype;
  size_t count;             /* elements of each array */
  int n;                    /* arrays */
  void *const *data;        /* N arrays of COUNT elements, in place */
  const int *devices;       /* their devices, all different */
} gm_comm_devices_call;

/* Runs CALL: every array becomes the elementwise OP of all (allreduce),
   or a copy of the root's (bcast).  The caller checked the arguments
   (same dtype and count, distinct devices, OP defined for DTYPE).  Sees
   all work queued before on the arrays' devices, and is complete when it
   returns.  Call without the GIL.  GM_OK; GM_ERR_UNAVAILABLE when
   GPUMEM_COMM=nccl and NCCL cannot move these arrays (nothing moved);
   a backend's or NCCL's status when moving failed; GM_ERR_CUDA when
   NCCL did not finish within GPUMEM_COMM_TIMEOUT (its communicators are
   aborted then; the arrays' contents are undefined).  */
gm_status gm_comm_devices_run (const gm_comm_devices_call *call);

#endif /* GM_COMM_DEVICES_H */
