/* test-launchers.cu -- the registry's adapters for the test-only kernels
   of test-kernels.def (kernels/kernel-launchers.h).  */

#include "test-kernels.h"

#define GM_KERNELS_DEF "test-kernels.def"
#include "kernel-launchers.h"
