/* fault-ref.c -- the CPU reference of fault.cu.  */

#include "test-kernels.h"

/* Does nothing, and leaves OUT as it was.  The host backend runs
   kernels as plain C in the program's own process, where a wild store
   would corrupt memory or kill the program rather than raise
   gpumem.CudaError, so there is no fault to imitate; tests of kernel
   faults need the CUDA backend.  */
void
gm_ref_fault (float *out)
{
  (void) out;
}
