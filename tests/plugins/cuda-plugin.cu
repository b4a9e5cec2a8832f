/* cuda-plugin.cu -- a CUDA kernel plugin for tests/test_plugins.py and
   bench/launch_overhead.py, built with nvcc as a user would build one:
   c_scale has a launcher and a C reference (the test compares them),
   c_axpy a launcher only, which the host backend refuses.  */

#include <gpumem/kernel.h>

GM_PLUGIN_KERNEL (c_scale, "x[i] = a * x[i] for i < n.",
  GM_SCALAR (0, n, int64)
  GM_SCALAR (1, a, float32)
  GM_INOUT  (2, x, float32, "n"))

GM_PLUGIN_KERNEL_CUDA (c_axpy, "y[i] = a * x[i] + y[i] for i < n.",
  GM_SCALAR (0, n, int64)
  GM_SCALAR (1, a, float32)
  GM_IN     (2, x, float32, "n")
  GM_INOUT  (3, y, float32, "n"))

static __global__ void
scale_kernel (int64_t n, float a, float *x)
{
  int64_t stride = (int64_t) gridDim.x * blockDim.x;
  for (int64_t i = blockIdx.x * (int64_t) blockDim.x + threadIdx.x; i < n;
       i += stride)
    x[i] = __fmul_rn (a, x[i]);
}

static __global__ void
axpy_kernel (int64_t n, float a, const float *x, float *y)
{
  int64_t stride = (int64_t) gridDim.x * blockDim.x;
  for (int64_t i = blockIdx.x * (int64_t) blockDim.x + threadIdx.x; i < n;
       i += stride)
    y[i] = __fadd_rn (__fmul_rn (a, x[i]), y[i]);
}

/* Enqueues scale_kernel on STREAM, shaped by gm_launch_shape: blocks of
   256, at most 8 a SM, a grid-stride loop for the rest.  */
cudaError_t
gm_kernel_c_scale (int64_t n, float a, float *x, const gm_launch_cfg *cfg,
                   cudaStream_t stream)
{
  unsigned int grid[3], block[3];

  if (gm_launch_shape (cfg, n > 0 ? (uint64_t) n : 0, 256, 8, grid, block))
    return cudaErrorInvalidConfiguration;
  scale_kernel<<<GM_DIM3 (grid), GM_DIM3 (block), 0, stream>>> (n, a, x);
  return cudaGetLastError ();
}

/* The same on the CPU, bit for bit (one rounding a product).  */
void
gm_ref_c_scale (int64_t n, float a, float *x)
{
  for (int64_t i = 0; i < n; i++)
    x[i] = a * x[i];
}

cudaError_t
gm_kernel_c_axpy (int64_t n, float a, const float *x, float *y,
                  const gm_launch_cfg *cfg, cudaStream_t stream)
{
  unsigned int grid[3], block[3];

  if (gm_launch_shape (cfg, n > 0 ? (uint64_t) n : 0, 256, 8, grid, block))
    return cudaErrorInvalidConfiguration;
  axpy_kernel<<<GM_DIM3 (grid), GM_DIM3 (block), 0, stream>>> (n, a, x, y);
  return cudaGetLastError ();
}

GM_PLUGIN_TABLE (c_scale, c_axpy)
