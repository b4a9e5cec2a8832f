/* cuda-status.c -- cudaError_t to gpumem's status, and the error that
   lost the CUDA context (cuda-status.h).  */

#include "config.h"

#include "cuda-status.h"

/* The error that lost the context, once one has.  */
static cudaError_t lost_error = cudaSuccess;

bool
gm_cuda_is_sticky (cudaError_t err)
{
  switch (err)
    {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorHardwareStackError:
    case cudaErrorAssert:
    case cudaErrorLaunchTimeout:
    case cudaErrorECCUncorrectable:
      return true;
    default:
      return false;
    }
}

bool
gm_cuda_lost (void)
{
  return lost_error != cudaSuccess;
}

gm_status
gm_cuda_lost_status (void)
{
  return gm_error_set (GM_ERR_CUDA, lost_error, cudaGetErrorName (lost_error),
                       "the CUDA context was lost after %s (%s): no more "
                       "device work can run in this process; start it again",
                       cudaGetErrorName (lost_error),
                       cudaGetErrorString (lost_error));
}

gm_status
gm_cuda_status (cudaError_t err, const char *call, const char *file,
                int line)
{
  if (gm_cuda_is_sticky (err) && lost_error == cudaSuccess)
    lost_error = err;
  else
    cudaGetLastError ();
  if (err == cudaErrorMemoryAllocation)
    return gm_error_set (GM_ERR_NOMEM, err, cudaGetErrorName (err),
                         "%s: %s", cudaGetErrorName (err),
                         cudaGetErrorString (err));
  if (gm_cuda_is_sticky (err))
    return gm_error_set (GM_ERR_CUDA, err, cudaGetErrorName (err),
                         "%s (%s) in %s at %s:%d; the CUDA context is lost: "
                         "no more device work can run in this process",
                         cudaGetErrorName (err), cudaGetErrorString (err),
                         call, file, line);
  return gm_error_set (GM_ERR_CUDA, err, cudaGetErrorName (err),
                       "%s (%s) in %s at %s:%d", cudaGetErrorName (err),
                       cudaGetErrorString (err), call, file, line);
}
