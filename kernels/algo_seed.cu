/* algo_seed.cu -- the stitching workload's original kernel, exactly as
   specified.

   The workload's specification launches this loop <<<1,1>>>:

     for i < number_of_images:
       for k < 4:
         partial_update[k] = images[i] + update[k]

   It is shipped unchanged, as the placeholder for "some calculation"
   that the reference workload was written around: one thread, every
   iteration kept (PARTIAL_UPDATE may alias the inputs, so the compiler
   cannot skip to the last image), so that a script can reproduce the
   workload as specified.  Its result is IMAGES[N - 1] + UPDATE[k], and
   with no images PARTIAL_UPDATE is left as it was.  For a parallel
   kernel that computes something meaningful see algo.cu.  */

#include "kernels.h"

#include <cuda_runtime.h>

static __global__ void
algo_seed_kernel (const float *images, const float *update,
                  float *partial_update, int64_t number_of_images)
{
  for (int64_t i = 0; i < number_of_images; i++)
    for (int k = 0; k < 4; k++)
      partial_update[k] = images[i] + update[k];
}

/* Enqueue on STREAM, on the current device, the stitching workload's
   original kernel over IMAGES[0:NUMBER_OF_IMAGES], UPDATE[0:4] and PARTIAL_UPDATE[0:4], as
   one block of one thread.  CFG's grid and block are ignored: the
   specification launches it <<<1,1>>>, and more threads would only race on
   the same four outputs.  Returns cudaGetLastError () after the launch:
   cudaSuccess once the work is enqueued, a launch error otherwise; a
   kernel fault shows later, at synchronization.  */
cudaError_t
gm_kernel_algo_seed (const float *images, const float *update,
                     float *partial_update, int64_t number_of_images,
                     const gm_launch_cfg *cfg, cudaStream_t stream)
{
  (void) cfg;
  algo_seed_kernel<<<1, 1, 0, stream>>> (images, update, partial_update,
                                         number_of_images);
  return cudaGetLastError ();
}
