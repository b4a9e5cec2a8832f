/* test-kernels.h -- declares the test-only kernels of test-kernels.def,
   as kernels.h declares the others (kernels/kernel-decls.h).  Found
   through the test build's own include path (-I tests/kernels).  */

#ifndef GM_TEST_KERNELS_H
#define GM_TEST_KERNELS_H

#include "gm-launch.h"

#ifdef __CUDACC__
#include <cuda_runtime_api.h>
#endif

#define GM_KERNELS_DEF "test-kernels.def"
#include "kernel-decls.h"

#endif /* GM_TEST_KERNELS_H */
