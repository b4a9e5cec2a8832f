/* algo.h -- the stitching workload's kernel, as the bindings in this folder and in
   ../nanobind call it: PARTIAL_UPDATE[k] = mean (IMAGES[0:N]) +
   UPDATE[k] for k < 4, the mean summed in double (0 with no images),
   each output rounded once to float, as gpumem's own algo kernel
   computes it.  Every pointer walks its own stride (in elements); the
   bindings take C-contiguous arrays (gpumem::array's default layout),
   whose strides are 1.  */
#pragma once
#include <cstdint>
#include <stdexcept>

/* The CPU path, for host memory (gpumem's host backend).  */
inline void
algo_host (const float *images, std::int64_t images_stride,
           const float *update, std::int64_t update_stride,
           float *partial, std::int64_t partial_stride, std::int64_t n)
{
  double sum = 0.0;
  for (std::int64_t i = 0; i < n; i++)
    sum += (double) images[i * images_stride];
  double mean = n > 0 ? sum / (double) n : 0.0;
  float out[4];
  for (int k = 0; k < 4; k++)
    out[k] = (float) (mean + (double) update[k * update_stride]);
  for (int k = 0; k < 4; k++)
    partial[k * partial_stride] = out[k];
}

#ifdef ALGO_CUDA
/* The CUDA path (algo.cu), launched on STREAM (a cudaStream_t from
   gpumem::launch_stream; gpumem::launch_done waits for it where that is
   due).  Throws std::runtime_error when the launch fails.  */
void algo_cuda (const float *images, std::int64_t images_stride,
                const float *update, std::int64_t update_stride,
                float *partial, std::int64_t partial_stride, std::int64_t n,
                void *stream);
#endif

/* The host path for host memory (HOST), else the CUDA one on STREAM.
   Throws std::runtime_error for device memory in a module built without
   CUDA.  */
inline void
algo_run (bool host, void *stream, const float *images,
          std::int64_t images_stride, const float *update,
          std::int64_t update_stride, float *partial,
          std::int64_t partial_stride, std::int64_t n)
{
  if (host)
    return algo_host (images, images_stride, update, update_stride, partial,
                      partial_stride, n);
#ifdef ALGO_CUDA
  algo_cuda (images, images_stride, update, update_stride, partial,
             partial_stride, n, stream);
#else
  (void) stream;
  throw std::runtime_error ("algo: built without CUDA, this module takes "
                            "host memory only");
#endif
}
