/* kernels.h -- the one interface between native kernels and gpumem.

   Every kernel is listed once in kernels.def.  From that list this header
   declares, for kernel NAME with parameters P...:

     cudaError_t gm_kernel_NAME (P..., const gm_launch_cfg *CFG,
                                 cudaStream_t STREAM);   (NAME.cu)
     void gm_ref_NAME (P...);                            (NAME-ref.c)

   The launcher enqueues the kernel on STREAM on the current device and
   returns cudaGetLastError ().  The reference computes the same result on
   the CPU; the host backend runs it, and the tests compare the two.

   This header is C and CUDA C; it includes no Python and no gpumem
   internals.  */

#ifndef GM_KERNELS_H
#define GM_KERNELS_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The C type of each dtype name a kernel parameter may use.  */
typedef float gm_ctype_float32;
typedef double gm_ctype_float64;
typedef int8_t gm_ctype_int8;
typedef int16_t gm_ctype_int16;
typedef int32_t gm_ctype_int32;
typedef int64_t gm_ctype_int64;
typedef uint8_t gm_ctype_uint8;
typedef uint16_t gm_ctype_uint16;
typedef uint32_t gm_ctype_uint32;
typedef uint64_t gm_ctype_uint64;

/* How a launch is shaped.  GRID[0] == 0 means the launcher chooses grid
   and block itself from SM_COUNT and MAX_THREADS_PER_BLOCK (read off the
   device once by the backend); otherwise GRID and BLOCK are used as
   given, already checked against the device's limits.  */
typedef struct gm_launch_cfg
{
  unsigned int grid[3];
  unsigned int block[3];
  int sm_count;
  int max_threads_per_block;
} gm_launch_cfg;

/* Separators for parameter lists made from kernels.def: parameter 0 has
   none before it, every later one a comma.  */
#define GM_SEP_0
#define GM_SEP_1 ,
#define GM_SEP_2 ,
#define GM_SEP_3 ,
#define GM_SEP_4 ,
#define GM_SEP_5 ,
#define GM_SEP_6 ,
#define GM_SEP_7 ,
#define GM_SEP_8 ,
#define GM_SEP_9 ,
#define GM_SEP_10 ,
#define GM_SEP_11 ,
#define GM_SEP_12 ,
#define GM_SEP_13 ,
#define GM_SEP_14 ,
#define GM_SEP_15 ,
#define GM_MAX_KERNEL_PARAMS 16

/* Prototypes from the registry.  */
#define GM_IN(I, NAME, T, LEN) GM_SEP_##I const gm_ctype_##T *NAME
#define GM_OUT(I, NAME, T, LEN) GM_SEP_##I gm_ctype_##T *NAME
#define GM_INOUT(I, NAME, T, LEN) GM_SEP_##I gm_ctype_##T *NAME
#define GM_SCALAR(I, NAME, T) GM_SEP_##I gm_ctype_##T NAME
#if defined (__CUDACC__) || defined (GM_HAVE_CUDA)
#include <cuda_runtime_api.h>
#define GM_KERNEL(NAME, DOC, PARAMS)                                      \
  cudaError_t gm_kernel_##NAME (PARAMS, const gm_launch_cfg *cfg,        \
                                cudaStream_t stream);                    \
  void gm_ref_##NAME (PARAMS);
#else
#define GM_KERNEL(NAME, DOC, PARAMS) void gm_ref_##NAME (PARAMS);
#endif
#include "kernels.def"
#ifdef GM_TEST_KERNELS
#include "test-kernels.def"
#endif
#undef GM_KERNEL
#undef GM_IN
#undef GM_OUT
#undef GM_INOUT
#undef GM_SCALAR

#ifdef __cplusplus
}
#endif

#endif /* GM_KERNELS_H */
