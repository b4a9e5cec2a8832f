/* saxpy.cu -- y = a x + y, the worked example of kernels/README.

   Y[i] = A * X[i] + Y[i] for i < N, one element per thread per turn of
   a grid-stride loop, so any grid covers any N.  The product and the
   sum are rounded separately (no fused multiply-add), as plain C
   computes them, so the result equals gm_ref_saxpy's bit for bit.  X
   and Y may be the same array.

   Launch shape (gm_launch_shape, gpumem/kernel.h).  With CFG->grid[0]
   == 0 the launcher chooses blocks of
   min (SAXPY_BLOCK, max threads per block) threads, and enough of
   them for one element a thread, but at most SAXPY_BLOCKS_PER_SM per
   SM, the most that fit at once; the loop does the rest.  Otherwise
   CFG->grid and CFG->block are used as given, in up to three
   dimensions.  */

#include "kernels.h"

#include <cuda_runtime.h>
#include <stdint.h>

enum
{
  SAXPY_BLOCK = 256,
  SAXPY_BLOCKS_PER_SM = 8
};

static __global__ void
saxpy_kernel (int64_t n, float a, const float *x, float *y)
{
  unsigned int threads = blockDim.x * blockDim.y * blockDim.z;
  unsigned int thread
    = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  uint64_t block = blockIdx.x
                   + (uint64_t) gridDim.x
                     * (blockIdx.y + (uint64_t) gridDim.y * blockIdx.z);
  uint64_t stride = (uint64_t) gridDim.x * gridDim.y * gridDim.z * threads;

  if (n <= 0)
    return;
  for (uint64_t i = block * threads + thread; i < (uint64_t) n; i += stride)
    y[i] = __fadd_rn (__fmul_rn (a, x[i]), y[i]);
}

/* Enqueue on STREAM, on the current device, Y[i] = A * X[i] + Y[i] for
   i < N (nothing for N <= 0), shaped by CFG as the top of this file
   says; CFG may be NULL, meaning the launcher chooses.  Returns
   cudaGetLastError () after the launch: cudaSuccess once the work is
   enqueued, a launch error otherwise, or cudaErrorInvalidConfiguration
   without launching for a grid or block of no threads or of more than
   GM_MAX_BLOCKS blocks; a kernel fault shows later, at
   synchronization.  */
cudaError_t
gm_kernel_saxpy (int64_t n, float a, const float *x, float *y,
                 const gm_launch_cfg *cfg, cudaStream_t stream)
{
  unsigned int grid[3], block[3];

  if (gm_launch_shape (cfg, n > 0 ? (uint64_t) n : 0, SAXPY_BLOCK,
                       SAXPY_BLOCKS_PER_SM, grid, block) != 0)
    return cudaErrorInvalidConfiguration;
  saxpy_kernel<<<GM_DIM3 (grid), GM_DIM3 (block), 0, stream>>> (n, a, x, y);
  return cudaGetLastError ();
}
