/* race.cu -- the CUDA half of bindings.cpp's tail_into (GM_BIND_CUDA):
   a kernel that reads the tail of one array into another, to catch a
   launch that does not wait for an input's pending write.  */
#include <cuda_runtime.h>

#include <cstdint>

__global__ static void
tail_kernel (const float *x, std::int64_t offset, float *out, std::int64_t n)
{
  std::int64_t i = blockIdx.x * (std::int64_t) blockDim.x + threadIdx.x;
  if (i < n)
    out[i] = x[offset + i];
}

/* OUT[i] = X[OFFSET + i] for i < N, launched on STREAM (a cudaStream_t).
   0, or the cudaError_t of the launch.  */
int
gm_bind_tail (const float *x, std::int64_t offset, float *out,
              std::int64_t n, void *stream)
{
  tail_kernel<<<(unsigned) ((n + 255) / 256), 256, 0,
                static_cast<cudaStream_t> (stream)>>> (x, offset, out, n);
  return (int) cudaGetLastError ();
}

/* Waits for STREAM's work: 0 or its cudaError_t.  */
int
gm_bind_sync (void *stream)
{
  return (int) cudaStreamSynchronize (static_cast<cudaStream_t> (stream));
}
