"""A kernel that writes one element past a DeviceArray living where the
pool held a larger block: run by tests/gpu-sanitize-nvtx.sh under
compute-sanitizer's memcheck, which must report the write when
GPUMEM_NVTX=1 registers the array's extent (cuda-nvtx.c).  Prints
'past-end launched' once the faulting kernel was queued, then what the
synchronize said; exits 0 either way (the verdict is memcheck's)."""

import gpumem

N = 1000

PAST_END = r"""
extern "C" __global__ void past_end (long long n, float *y)
{
  if (blockIdx.x == 0 && threadIdx.x == 0)
    y[n] = 1.0f;
}
"""

# The pool keeps the freed 64 MiB, and the small array is carved from it.
big = gpumem.empty(16 << 20, "float32")
big.fill(0)
gpumem.synchronize()
del big
small = gpumem.zeros(N, "float32")
kernel = gpumem.jit(PAST_END, "past_end", "int64 n, float32 *y[n]")
kernel(N, small, grid=1, block=1)
print("past-end launched", flush=True)
try:
    gpumem.synchronize()
    print("synchronize: ok")
except gpumem.Error as exc:
    print("synchronize:", type(exc).__name__, exc)
