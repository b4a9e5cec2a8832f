/* fault.cu -- a kernel that faults, for the tests of kernel errors.

   The kernel stores to address 0, which no GPU or host mapping ever
   covers, so the launch succeeds and the stream fails later with
   cudaErrorIllegalAddress.  That error is sticky: every later CUDA
   call in the process's context fails too, so a test runs it in a
   process of its own.  */

#include "test-kernels.h"

#include <cuda_runtime.h>

/* UNMAPPED comes from the host, so the compiler sees an ordinary store
   through a pointer and cannot fold away, or turn into a trap, a store
   it knows to be through null; a trap would report
   cudaErrorLaunchFailure instead.  */
static __global__ void
fault_kernel (float *unmapped)
{
  *(volatile float *) unmapped = 1.0f;
}

/* Enqueue on STREAM, on the current device, one thread that writes
   through an unmapped address (not through OUT, which is left as it
   was).  CFG is ignored.  Returns cudaGetLastError () after the
   launch, cudaSuccess as a rule; the fault shows at the next
   synchronization of STREAM, as cudaErrorIllegalAddress.  */
cudaError_t
gm_kernel_fault (float *out, const gm_launch_cfg *cfg, cudaStream_t stream)
{
  (void) out;
  (void) cfg;
  fault_kernel<<<1, 1, 0, stream>>> ((float *) NULL);
  return cudaGetLastError ();
}
