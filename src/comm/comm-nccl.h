/* comm-nccl.h -- the NCCL engine: collectives on CUDA device memory
   across the ranks of an MPI job (one communicator per rank's device)
   and across the devices of one process (one communicator per device).
   Built only with NCCL (configure --with-nccl).  No Python, MPI, CUDA or
   NCCL headers here.  */

#ifndef GM_COMM_NCCL_H
#define GM_COMM_NCCL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "comm-job.h"
#include "comm-devices.h"

/* Copies NBYTES at BYTES from rank 0 to every rank (MPI_Bcast); the
   job layer gives it, so that this file needs no MPI.  */
typedef gm_status (*gm_nccl_share_fn) (void *bytes, size_t nbytes);

/* A number that names DEVICE's GPU across the job (its host's name and
   its PCI address), so that ranks sharing one GPU are seen; 0 when CUDA
   cannot say.  */
uint64_t gm_nccl_device_key (int device);

/* Runs CALL with the job's other ranks on NCCL.  Every rank calls it
   together, after the job layer agreed on the call; LAYOUT names every
   rank's device (the same number on every rank), and the communicator
   for it is made at first need from an ncclUniqueId that rank 0 makes
   and SHARE broadcasts.  With CALL->stream the collective is queued on
   that stream and this returns; without, it runs on an engine stream
   that first waits for all work queued on the device's default stream
   (and so every gpumem stream), and this waits for it, polling NCCL's
   asynchronous error, at most GPUMEM_COMM_TIMEOUT.  Call without the
   GIL.  GM_OK; else a status with gm_last_error saying what failed, and
   *BROKEN true when this rank can no longer stay in step with the
   others (NCCL failed or timed out: the communicator is aborted, and
   the caller must end the job).  */
gm_status gm_nccl_run_rank (const gm_comm_call *call, uint64_t layout,
                            int rank, int size, gm_nccl_share_fn share,
                            bool *broken);

/* Runs CALL over the devices of this process on NCCL
   (comm-devices.h says what; one communicator per device, made by
   ncclCommInitAll at first need for that list of devices).  */
gm_status gm_nccl_run_devices (const gm_comm_devices_call *call);

/* Destroys every communicator (the rank form's by ncclCommAbort, which
   waits for no other rank) and engine stream.  Before the backend shuts
   down.  */
void gm_nccl_shutdown (void);

/* Opens NCCL where it is not open yet (comm-nccl-load.h): true with
   its version (ncclGetVersion: 22703 for 2.27.3) in *VERSION, the path
   of the library into PATH (SIZE bytes; empty where the loader cannot
   tell) and how it was found in *HOW; false, with the reason in
   gm_last_error, where NCCL cannot be opened.  */
bool gm_nccl_describe (int *version, char *path, size_t size,
                       const char **how);

#endif /* GM_COMM_NCCL_H */
