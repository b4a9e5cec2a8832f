/* cuda-launch.c -- the CUDA backend's kernel launches: built-in
   kernels through their launchers, JIT kernels (jit.c) loaded into the
   device on first use, and the reduction of N arrays (cuda-reduce.cu).  */

#define _POSIX_C_SOURCE 200809L
#include "config.h"

#include <stdint.h>

#include <cuda_runtime_api.h>

#include "cuda-internal.h"
#include "cuda-reduce.h"
#include "cuda-status.h"
#include "jit.h"

/* Checks the parameters FUNCTION, KERNEL's loaded code, reports
   (cudaFuncGetParamInfo: each one's size, until the index past the
   last is refused) against KERNEL's signature: their count, and each
   one's size, 8 bytes for an array (a pointer) and the dtype's for a
   scalar.  A driver or runtime without the call checks nothing.  */
static gm_status
check_params (const gm_kernel *kernel, cudaKernel_t function)
{
#if CUDART_VERSION >= 12040
  size_t offset, size, sizes[GM_MAX_KERNEL_PARAMS + 1];
  int n = 0;

  for (; n <= GM_MAX_KERNEL_PARAMS; n++)
    {
      cudaError_t err = cudaFuncGetParamInfo ((const void *) function,
                                              (size_t) n, &offset, &size);
      if (err != cudaSuccess)
        {
          cudaGetLastError ();
          if (err != cudaErrorInvalidValue)
            return GM_OK;
          break;
        }
      sizes[n] = size;
    }
  if (n != kernel->nparams)
    return gm_error_set (GM_ERR_VALUE, 0, NULL, "jit: kernel '%s': the "
                         "signature lists %d parameter%s but the compiled "
                         "kernel takes %d%s", kernel->name, kernel->nparams,
                         kernel->nparams == 1 ? "" : "s", n,
                         n > GM_MAX_KERNEL_PARAMS ? " or more" : "");
  for (int i = 0; i < n; i++)
    {
      const gm_kernel_param *param = &kernel->params[i];
      size_t want = param->kind == GM_PARAM_SCALAR
                    ? gm_dtypes[param->dtype].itemsize : sizeof (void *);
      if (sizes[i] != want)
        return gm_error_set (GM_ERR_VALUE, 0, NULL, "jit: kernel '%s': "
                             "parameter %d ('%s') is %s %s of %zu bytes in "
                             "the signature, but the compiled kernel's "
                             "parameter %d has %zu bytes", kernel->name, i,
                             param->name,
                             param->kind == GM_PARAM_SCALAR ? "a scalar"
                                                            : "an array of",
                             gm_dtypes[param->dtype].name, want, i,
                             sizes[i]);
    }
#else
  (void) kernel;
  (void) function;
#endif
  return GM_OK;
}

/* The jit_load member (gm-backend.h): loads JIT KERNEL's code, once,
   into every device (cudaLibraryLoadData), finds it by its lowered name
   and checks its parameters (check_params).  GM_ERR_CUDA when the code
   does not load (another architecture); GM_ERR_VALUE when it has no
   such kernel or its parameters are not the signature's, and then the
   code stays unloaded, so that every call says so again.  */
gm_status
gm_cuda_jit_load (const gm_kernel *kernel, int device)
{
  gm_jit_code *code = kernel->jit;
  gm_status status = gm_cuda_use_device (device);
  cudaLibrary_t library = NULL;
  cudaKernel_t function;

  if (status != GM_OK || code->function != NULL)
    return status;
  GM_CUDA_CHECK (cudaLibraryLoadData (&library, code->image, NULL, NULL, 0,
                                      NULL, NULL, 0));
  if (cudaLibraryGetKernel (&function, library, code->entry) != cudaSuccess)
    {
      cudaGetLastError ();
      status = gm_error_set (GM_ERR_VALUE, 0, NULL, "jit: kernel '%s': the "
                             "compiled code has no kernel '%s'", kernel->name,
                             code->entry);
      goto done;
    }
  status = check_params (kernel, function);
  if (status != GM_OK)
    goto done;
  code->library = library;
  code->function = function;
  library = NULL;
done:
  if (library != NULL)
    cudaLibraryUnload (library);
  return status;
}

/* Launches JIT KERNEL (jit.c compiled it) with ARGS on STREAM of the
   current device: its code is loaded on first use (gm_cuda_jit_load).
   Without grid and block in CFG, blocks of 256 threads, and enough of
   them for one thread per element of the longest minimum length among
   the arrays.  GM_ERR_CUDA when the code does not load (another
   architecture) or the launch fails.  */
static gm_status
launch_jit (const gm_kernel *kernel, const gm_arg *args,
            const gm_launch_cfg *cfg, int device, gm_stream *stream)
{
  gm_jit_code *code = kernel->jit;
  unsigned int grid[3], block[3];
  void *params[GM_MAX_KERNEL_PARAMS];
  gm_status status = GM_OK;
  uint64_t n = 0;

  if (code->function == NULL)
    {
      status = gm_cuda_jit_load (kernel, device);
      if (status != GM_OK)
        return status;
    }
  for (int i = 0; i < kernel->nparams; i++)
    {
      int64_t need = 0;
      if (kernel->params[i].kind != GM_PARAM_SCALAR
          && gm_kernel_eval_length (kernel, kernel->params[i].length, args,
                                    &need) == GM_OK
          && need > 0 && (uint64_t) need > n)
        n = (uint64_t) need;
      params[i] = (void *) &args[i];
    }
  if (gm_launch_shape (cfg, n, 256, 0, grid, block) != 0)
    return gm_error_set (GM_ERR_VALUE, 0, NULL, "%s: %llu threads need more "
                         "than 2^31 - 1 blocks: give grid= and block=",
                         kernel->name, (unsigned long long) n);
  {
    dim3 grid_dim = {grid[0], grid[1], grid[2]};
    dim3 block_dim = {block[0], block[1], block[2]};
    GM_CUDA_CHECK (cudaLaunchKernel ((const void *) code->function, grid_dim,
                                     block_dim, params, 0,
                                     gm_cuda_queue_on (device, stream)));
  }
done:
  return status;
}

gm_status
gm_cuda_launch (const gm_kernel *kernel, const gm_arg *args,
             const gm_launch_cfg *cfg, int device, gm_stream *stream)
{
  gm_status status = gm_cuda_use_device (device);
  gm_launch_cfg full = *cfg;
  cudaError_t err;

  if (status != GM_OK)
    return status;
  status = gm_cuda_join (device, stream);
  if (status != GM_OK)
    return status;
  full.sm_count = gm_cuda_props (device)->sm_count;
  full.max_threads_per_block
    = gm_cuda_props (device)->max_threads_per_block;
  if (kernel->jit != NULL)
    return launch_jit (kernel, args, &full, device, stream);
  if (kernel->launch_cuda == NULL)
    return gm_error_set (GM_ERR_UNAVAILABLE, 0, NULL, "kernel '%s' (%s) has "
                         "only a C reference, no CUDA launcher: the cuda "
                         "backend cannot run it (the host backend can)",
                         kernel->name,
                         kernel->origin ? kernel->origin : "built in");
  err = (cudaError_t) kernel->launch_cuda (args, &full,
                                           (void *) gm_cuda_queue_on (device,
                                                                      stream));
  if (err != cudaSuccess)
    status = gm_cuda_status (err, kernel->name, __FILE__, __LINE__);
  return status;
}

/* The reduce member (gm.h): the arguments checked before anything is
   queued; with STREAM NULL the kernel goes on the legacy default stream
   and is waited for (Ordering, cuda-backend.c).  */
gm_status
gm_cuda_reduce (void *dst, void *const *srcs, int n, size_t count,
                gm_dtype dtype, gm_reduce_op op, int device,
                gm_stream *stream)
{
  gm_status status = gm_reduce_check (n, dtype, op);
  cudaError_t err;

  if (status == GM_OK)
    status = gm_cuda_use_device (device);
  if (status == GM_OK && count > 0)
    status = gm_cuda_join (device, stream);
  if (status != GM_OK || count == 0)
    return status;
  err = (cudaError_t) gm_cuda_reduce_launch (dst, srcs, n, count, dtype, op,
                                             gm_cuda_props (device)->sm_count,
                                             (void *) gm_cuda_handle_of (stream));
  if (err != cudaSuccess)
    return gm_cuda_status (err, "reduce", __FILE__, __LINE__);
  if (stream == NULL)
    GM_CUDA_CHECK (cudaStreamSynchronize (cudaStreamLegacy));
done:
  return status;
}
