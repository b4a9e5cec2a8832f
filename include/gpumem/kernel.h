/* gpumem/kernel.h -- the kernel author's header: plain C, no Python, no
   CUDA.

   What a kernel's C reference and its CUDA launcher are written against:
   the C type of each dtype name a parameter may use (gm_ctype_float32,
   ...), one checked argument (gm_arg), the launch shape (gm_launch_cfg:
   a launcher picks grid and block itself when GRID[0] is 0) and the
   limit of parameters (GM_MAX_KERNEL_PARAMS).  It compiles as C and
   C++ (nvcc included) with nothing but this folder on the include
   path.  */

#ifndef GPUMEM_KERNEL_H
#define GPUMEM_KERNEL_H

#include "gm-launch.h"

#endif /* GPUMEM_KERNEL_H */
