/* scale.cu -- a gpumem kernel plugin kept in the user's own tree.

   Two kernels, written in the notation of gpumem's kernels/kernels.def:
     scale (n, a, x)     x[i] = a * x[i], on the GPU and on the CPU
     norm2 (n, x, out)   out[0] = sum of x[i]^2, on the CPU only here

   Built with nvcc it has CUDA launchers (and C references the host
   backend runs); built by a C++ compiler alone (no CUDA toolkit:
   make CUDA=no) it has only the C references.  Makefile says how;
   run.py uses it.  gpumem-kernels(7) is the manual.  */

#include <gpumem/kernel.h>

#ifdef __CUDACC__
GM_PLUGIN_KERNEL (scale, "x[i] = a * x[i] for i < n.",
  GM_SCALAR (0, n, int64)
  GM_SCALAR (1, a, float32)
  GM_INOUT  (2, x, float32, "n"))

static __global__ void
scale_kernel (int64_t n, float a, float *x)
{
  int64_t stride = (int64_t) gridDim.x * blockDim.x;

  for (int64_t i = blockIdx.x * (int64_t) blockDim.x + threadIdx.x; i < n;
       i += stride)
    x[i] = __fmul_rn (a, x[i]);
}

/* The launcher: enqueue on STREAM, shape from gm_launch_shape (blocks
   of 256 threads, at most 8 a multiprocessor, a grid-stride loop for
   the rest, or the caller's grid= and block=).  */
cudaError_t
gm_kernel_scale (int64_t n, float a, float *x, const gm_launch_cfg *cfg,
                 cudaStream_t stream)
{
  unsigned int grid[3], block[3];

  if (gm_launch_shape (cfg, n > 0 ? (uint64_t) n : 0, 256, 8, grid, block))
    return cudaErrorInvalidConfiguration;
  scale_kernel<<<GM_DIM3 (grid), GM_DIM3 (block), 0, stream>>> (n, a, x);
  return cudaGetLastError ();
}
#else
GM_PLUGIN_KERNEL_HOST (scale, "x[i] = a * x[i] for i < n.",
  GM_SCALAR (0, n, int64)
  GM_SCALAR (1, a, float32)
  GM_INOUT  (2, x, float32, "n"))
#endif

/* The C reference: the same, on the CPU, bit for bit.  */
void
gm_ref_scale (int64_t n, float a, float *x)
{
  for (int64_t i = 0; i < n; i++)
    x[i] = a * x[i];
}

GM_PLUGIN_KERNEL_HOST (norm2, "out[0] = sum of x[i]^2 for i < n, in double.",
  GM_SCALAR (0, n, int64)
  GM_IN     (1, x, float64, "n")
  GM_OUT    (2, out, float64, "1"))

void
gm_ref_norm2 (int64_t n, const double *x, double *out)
{
  double sum = 0;

  for (int64_t i = 0; i < n; i++)
    sum += x[i] * x[i];
  out[0] = sum;
}

GM_PLUGIN_TABLE (scale, norm2)
