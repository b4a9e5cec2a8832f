/* registry.c -- the table of native kernels, made from kernels.def.

   Each GM_KERNEL line becomes one gm_kernel entry: its parameters (for
   the Python wrappers, --list-kernels and the argument checks), an
   adapter that unpacks a checked gm_arg array into the typed call of
   gm_ref_NAME (host backend), and gm_launch_NAME, the same for
   gm_kernel_NAME (CUDA backend), which launchers.cu defines: this file
   is plain C and sees no CUDA header.  A GM_KERNEL_CUDA line has no C
   reference: its entry's run_host is NULL, and the host backend refuses
   it.  The test build (-DGM_TEST_KERNELS) also lists
   tests/kernels/test-kernels.def.  */

#include "config.h"

#include "gm.h"
#include "kernels.h"
#ifdef GM_TEST_KERNELS
#include "test-kernels.h"
#endif

#define GM_DT_bool GM_BOOL
#define GM_DT_int8 GM_INT8
#define GM_DT_int16 GM_INT16
#define GM_DT_int32 GM_INT32
#define GM_DT_int64 GM_INT64
#define GM_DT_uint8 GM_UINT8
#define GM_DT_uint16 GM_UINT16
#define GM_DT_uint32 GM_UINT32
#define GM_DT_uint64 GM_UINT64
#define GM_DT_float32 GM_FLOAT32
#define GM_DT_float64 GM_FLOAT64

/* The adapters.  */
#define GM_IN(I, NAME, T, LEN) GM_SEP_##I (const gm_ctype_##T *) args[I].ptr
#define GM_OUT(I, NAME, T, LEN) GM_SEP_##I (gm_ctype_##T *) args[I].ptr
#define GM_INOUT(I, NAME, T, LEN) GM_SEP_##I (gm_ctype_##T *) args[I].ptr
#define GM_SCALAR(I, NAME, T) GM_SEP_##I args[I].GM_FIELD_##T
#define GM_KERNEL(NAME, DOC, PARAMS)                                    \
  static void run_host_##NAME (const gm_arg *args)                      \
  {                                                                     \
    gm_ref_##NAME (PARAMS);                                             \
  }
/* A kernel without a C reference has no adapter: run_host is NULL, and
   the host backend refuses it.  */
#define GM_KERNEL_CUDA(NAME, DOC, PARAMS)
#include "kernels.def"
#ifdef GM_TEST_KERNELS
#include "test-kernels.def"
#endif
#undef GM_KERNEL
#undef GM_KERNEL_CUDA
#undef GM_IN
#undef GM_OUT
#undef GM_INOUT
#undef GM_SCALAR

/* The table.  */
#define GM_IN(I, NAME, T, LEN) {#NAME, GM_PARAM_IN, GM_DT_##T, LEN},
#define GM_OUT(I, NAME, T, LEN) {#NAME, GM_PARAM_OUT, GM_DT_##T, LEN},
#define GM_INOUT(I, NAME, T, LEN) {#NAME, GM_PARAM_INOUT, GM_DT_##T, LEN},
#define GM_SCALAR(I, NAME, T) {#NAME, GM_PARAM_SCALAR, GM_DT_##T, NULL},
#ifdef GM_HAVE_CUDA
#define GM_LAUNCH_CUDA(NAME) gm_launch_##NAME
#else
#define GM_LAUNCH_CUDA(NAME) NULL
#endif
#define GM_KERNEL(NAME, DOC, PARAMS)                                    \
  {#NAME, DOC,                                                          \
   (int) (sizeof ((gm_kernel_param[]) {PARAMS}) / sizeof (gm_kernel_param)), \
   {PARAMS}, run_host_##NAME, GM_LAUNCH_CUDA (NAME), NULL, NULL},
#define GM_KERNEL_CUDA(NAME, DOC, PARAMS)                               \
  {#NAME, DOC,                                                          \
   (int) (sizeof ((gm_kernel_param[]) {PARAMS}) / sizeof (gm_kernel_param)), \
   {PARAMS}, NULL, GM_LAUNCH_CUDA (NAME), NULL, NULL},

const gm_kernel gm_kernel_table[] = {
#include "kernels.def"
#ifdef GM_TEST_KERNELS
#include "test-kernels.def"
#endif
};

const int gm_kernel_count
  = (int) (sizeof gm_kernel_table / sizeof gm_kernel_table[0]);
