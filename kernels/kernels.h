/* kernels.h -- the one interface between native kernels and gpumem.

   Every kernel is listed once in kernels.def; kernel-decls.h declares,
   from that list, each kernel's C reference (NAME-ref.c), its CUDA
   launcher (NAME.cu, declared only where CUDA C is compiled) and the
   adapter the registry calls (launchers.cu).  A launcher whose
   parameters differ from its kernels.def line does not compile: the
   .cu files are built with -Werror=missing-declarations, and a
   definition that does not match its declaration has none.

   The launch types (gm_arg, gm_launch_cfg, gm_ctype_*) are plain C, in
   gm-launch.h.  This header adds CUDA's runtime API only for CUDA C;
   it includes no Python and no gpumem internals.  */

#ifndef GM_KERNELS_H
#define GM_KERNELS_H

#include "gm-launch.h"

#ifdef __CUDACC__
#include <cuda_runtime_api.h>
#endif

#define GM_KERNELS_DEF "kernels.def"
#include "kernel-decls.h"

#ifdef __CUDACC__
/* Frees algo's scratch areas on DEVICE (algo.cu); gm_kernels_release
   (launchers.cu) calls it.  */
void gm_kernel_algo_release (int device);
#endif

#endif /* GM_KERNELS_H */
