"""A kernel that writes one element past a DeviceArray of 1000 floats made
right after a 64 MiB array was freed: run by tests/gpu-sanitize-nvtx.sh
under compute-sanitizer's memcheck, which must report the write whether
GPUMEM_NVTX is on or off (each array is its own allocation of its exact
size).  memcheck makes the faulting launch fail, at the launch or at the
synchronize; the script prints which, and exits 0 either way (the
verdict is memcheck's)."""

import gpumem

N = 1000

PAST_END = r"""
extern "C" __global__ void past_end (long long n, float *y)
{
  if (blockIdx.x == 0 && threadIdx.x == 0)
    y[n] = 1.0f;
}
"""

# A large array freed just before: its memory may be where the small one
# lands.
big = gpumem.empty(16 << 20, "float32")
big.fill(0)
gpumem.synchronize()
del big
small = gpumem.zeros(N, "float32")
kernel = gpumem.jit(PAST_END, "past_end", "int64 n, float32 *y[n]")
try:
    kernel(N, small, grid=1, block=1)
    print("launch: ok", flush=True)
    gpumem.synchronize()
    print("synchronize: ok")
except gpumem.Error as exc:
    print("launch or synchronize:", type(exc).__name__, exc)
