/* kernel-launchers.h -- defines gm_launch_NAME for the kernels of one
   .def file: the adapter that unpacks checked arguments (gm_arg) into a
   typed call of the launcher gm_kernel_NAME.  CUDA C only.

   No include guard: include it after the header that declares the
   kernels, with GM_KERNELS_DEF naming the .def file; it is undefined
   after.  */

#ifndef GM_KERNELS_DEF
#error "kernel-launchers.h needs GM_KERNELS_DEF"
#endif

#define GM_IN(I, NAME, T, LEN) GM_SEP_##I (const gm_ctype_##T *) args[I].ptr
#define GM_OUT(I, NAME, T, LEN) GM_SEP_##I (gm_ctype_##T *) args[I].ptr
#define GM_INOUT(I, NAME, T, LEN) GM_SEP_##I (gm_ctype_##T *) args[I].ptr
#define GM_SCALAR(I, NAME, T) GM_SEP_##I args[I].GM_FIELD_##T
#define GM_KERNEL(NAME, DOC, PARAMS)                                    \
  int gm_launch_##NAME (const gm_arg *args, const gm_launch_cfg *cfg,  \
                        void *stream)                                   \
  {                                                                     \
    return (int) gm_kernel_##NAME (PARAMS, cfg, (cudaStream_t) stream); \
  }
#define GM_KERNEL_CUDA(NAME, DOC, PARAMS)                               \
  int gm_launch_##NAME (const gm_arg *args, const gm_launch_cfg *cfg,  \
                        void *stream)                                   \
  {                                                                     \
    return (int) gm_kernel_##NAME (PARAMS, cfg, (cudaStream_t) stream); \
  }
#include GM_KERNELS_DEF
#undef GM_KERNEL
#undef GM_KERNEL_CUDA
#undef GM_IN
#undef GM_OUT
#undef GM_INOUT
#undef GM_SCALAR
#undef GM_KERNELS_DEF
