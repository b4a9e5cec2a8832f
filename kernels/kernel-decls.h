/* kernel-decls.h -- declares the kernels of one .def file.

   No include guard: include it once for each .def file, with
   GM_KERNELS_DEF naming that file (a string); it is undefined after.
   For kernel NAME with parameters P... it declares (GM_KERNEL_CUDA
   lines: all but the C reference)

     void gm_ref_NAME (P...);                              (NAME-ref.c)
     int gm_launch_NAME (const gm_arg *ARGS, const gm_launch_cfg *CFG,
                         void *STREAM);                    (launchers.cu)

   and, where CUDA C is compiled (__CUDACC__), the launcher itself:

     cudaError_t gm_kernel_NAME (P..., const gm_launch_cfg *CFG,
                                 cudaStream_t STREAM);     (NAME.cu)

   The launcher enqueues the kernel on STREAM on the current device and
   returns cudaGetLastError ().  gm_launch_NAME unpacks checked
   arguments into a call of it, for the registry, which is plain C.  */

#ifndef GM_KERNELS_DEF
#error "kernel-decls.h needs GM_KERNELS_DEF"
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define GM_IN(I, NAME, T, LEN) GM_SEP_##I const gm_ctype_##T *NAME
#define GM_OUT(I, NAME, T, LEN) GM_SEP_##I gm_ctype_##T *NAME
#define GM_INOUT(I, NAME, T, LEN) GM_SEP_##I gm_ctype_##T *NAME
#define GM_SCALAR(I, NAME, T) GM_SEP_##I gm_ctype_##T NAME
#ifdef __CUDACC__
#define GM_KERNEL_CUDA(NAME, DOC, PARAMS)                                 \
  cudaError_t gm_kernel_##NAME (PARAMS, const gm_launch_cfg *cfg,        \
                                cudaStream_t stream);                    \
  int gm_launch_##NAME (const gm_arg *args, const gm_launch_cfg *cfg,    \
                        void *stream);
#else
#define GM_KERNEL_CUDA(NAME, DOC, PARAMS)                                 \
  int gm_launch_##NAME (const gm_arg *args, const gm_launch_cfg *cfg,    \
                        void *stream);
#endif
/* Written out, not through GM_KERNEL_CUDA: PARAMS expands to a list
   with commas before it could be passed on.  */
#ifdef __CUDACC__
#define GM_KERNEL(NAME, DOC, PARAMS)                                      \
  cudaError_t gm_kernel_##NAME (PARAMS, const gm_launch_cfg *cfg,        \
                                cudaStream_t stream);                    \
  int gm_launch_##NAME (const gm_arg *args, const gm_launch_cfg *cfg,    \
                        void *stream);                                   \
  void gm_ref_##NAME (PARAMS);
#else
#define GM_KERNEL(NAME, DOC, PARAMS)                                      \
  int gm_launch_##NAME (const gm_arg *args, const gm_launch_cfg *cfg,    \
                        void *stream);                                   \
  void gm_ref_##NAME (PARAMS);
#endif
#include GM_KERNELS_DEF
#undef GM_KERNEL
#undef GM_KERNEL_CUDA
#undef GM_IN
#undef GM_OUT
#undef GM_INOUT
#undef GM_SCALAR

#ifdef __cplusplus
}
#endif

#undef GM_KERNELS_DEF
