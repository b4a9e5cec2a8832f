/* algo.cu -- algo.h's CUDA path: one block sums the images in double
   (a tree in shared memory), then four threads write the outputs.  */
#include "algo.h"

#include <cuda_runtime.h>
#include <stdexcept>
#include <string>

constexpr int threads = 256;

__global__ static void
algo_kernel (const float *images, std::int64_t images_stride,
             const float *update, std::int64_t update_stride, float *partial,
             std::int64_t partial_stride, std::int64_t n)
{
  __shared__ double sums[threads];
  double sum = 0.0;
  for (std::int64_t i = threadIdx.x; i < n; i += threads)
    sum += (double) images[i * images_stride];
  sums[threadIdx.x] = sum;
  __syncthreads ();
  for (int half = threads / 2; half > 0; half /= 2)
    {
      if ((int) threadIdx.x < half)
        sums[threadIdx.x] += sums[threadIdx.x + half];
      __syncthreads ();
    }
  /* Every input is read before the first output is written, so the
     outputs may overlap the inputs.  */
  __shared__ float out[4];
  if (threadIdx.x < 4)
    out[threadIdx.x] = (float) (sums[0] / (double) (n > 0 ? n : 1)
                                + (double) update[threadIdx.x
                                                  * update_stride]);
  __syncthreads ();
  if (threadIdx.x < 4)
    partial[threadIdx.x * partial_stride] = out[threadIdx.x];
}

void
algo_cuda (const float *images, std::int64_t images_stride,
           const float *update, std::int64_t update_stride, float *partial,
           std::int64_t partial_stride, std::int64_t n, void *stream)
{
  cudaStream_t s = static_cast<cudaStream_t> (stream);
  algo_kernel<<<1, threads, 0, s>>> (images, images_stride, update,
                                     update_stride, partial, partial_stride,
                                     n);
  cudaError_t status = cudaGetLastError ();
  if (status != cudaSuccess)
    throw std::runtime_error (std::string ("algo: ")
                              + cudaGetErrorString (status));
}
