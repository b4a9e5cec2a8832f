/* spin.cu -- a kernel that takes as long as asked, for the tests of
   asynchrony, events, stream ordering and Ctrl-C while waiting.  */

#include "test-kernels.h"

#include <cuda_runtime.h>
#include <stdint.h>

enum
{
  /* Each nap lasts between 0 and twice this, so the wait overshoots
     by at most 0.1 ms.  */
  SPIN_NAP_NS = 50000
};

/* The longest wait whose nanoseconds fit in 64 bits (some 292 years).  */
#define SPIN_MAX_MS ((int64_t) (UINT64_MAX / 1000000))

/* Nanoseconds on the GPU's global timer, which runs at the same rate
   whatever the SM clock.  */
static __device__ __forceinline__ uint64_t
global_timer_ns (void)
{
  uint64_t ns;

  asm volatile ("mov.u64 %0, %%globaltimer;" : "=l"(ns));
  return ns;
}

static __global__ void
spin_kernel (int64_t milliseconds, int32_t *out)
{
  if (milliseconds > 0)
    {
      uint64_t wait_ns
        = (uint64_t) (milliseconds < SPIN_MAX_MS ? milliseconds : SPIN_MAX_MS)
          * 1000000;
      uint64_t start = global_timer_ns ();

      /* Napping rather than spinning leaves the SM's issue slots to
         kernels that run beside this one.  */
      while (global_timer_ns () - start < wait_ns)
        __nanosleep (SPIN_NAP_NS);
    }
  out[0] = 1;
}

/* Enqueue on STREAM, on the current device, one thread that waits
   MILLISECONDS milliseconds (not at all when MILLISECONDS <= 0) and
   then sets OUT[0] = 1.  CFG is ignored.  Returns cudaGetLastError ()
   after the launch: cudaSuccess once the work is enqueued, a launch
   error otherwise.  */
cudaError_t
gm_kernel_spin (int64_t milliseconds, int32_t *out, const gm_launch_cfg *cfg,
                cudaStream_t stream)
{
  (void) cfg;
  spin_kernel<<<1, 1, 0, stream>>> (milliseconds, out);
  return cudaGetLastError ();
}
