/* launchers.cu -- the registry's adapters for the kernels of kernels.def
   (kernel-launchers.h); compiled by nvcc, so that the registry itself is
   plain C and sees no CUDA header.  */

#include "kernels.h"

#define GM_KERNELS_DEF "kernels.def"
#include "kernel-launchers.h"

/* What the built-in kernels keep between launches is algo's per-stream
   scratch (algo.cu).  */
void
gm_kernels_release (int device)
{
  gm_kernel_algo_release (device);
}
