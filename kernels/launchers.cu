/* launchers.cu -- the registry's adapters for the kernels of kernels.def
   (kernel-launchers.h); compiled by nvcc, so that the registry itself is
   plain C and sees no CUDA header.  */

#include "kernels.h"

#define GM_KERNELS_DEF "kernels.def"
#include "kernel-launchers.h"
