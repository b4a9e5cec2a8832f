/* fill.cu -- a test kernel without a C reference (GM_KERNEL_CUDA in
   test-kernels.def): Y[i] = VALUE for i < N, one element per thread per
   turn of a grid-stride loop, shaped by gm_launch_shape (blocks of 256,
   at most 8 per SM).  The tests check that the cuda backend runs it
   and the host backend refuses it.  */

#include "test-kernels.h"

#include <cuda_runtime.h>
#include <stdint.h>

static __global__ void
fill_kernel (int64_t n, float value, float *y)
{
  int64_t stride = (int64_t) gridDim.x * blockDim.x;

  for (int64_t i = blockIdx.x * (int64_t) blockDim.x + threadIdx.x; i < n;
       i += stride)
    y[i] = value;
}

/* Enqueues fill_kernel on STREAM; cudaErrorInvalidConfiguration for a
   launch shape gm_launch_shape refuses, else cudaGetLastError ().  */
cudaError_t
gm_kernel_fill (int64_t n, float value, float *y, const gm_launch_cfg *cfg,
                cudaStream_t stream)
{
  unsigned int grid[3], block[3];

  if (gm_launch_shape (cfg, n > 0 ? (uint64_t) n : 0, 256, 8, grid, block))
    return cudaErrorInvalidConfiguration;
  fill_kernel<<<GM_DIM3 (grid), GM_DIM3 (block), 0, stream>>> (n, value, y);
  return cudaGetLastError ();
}
