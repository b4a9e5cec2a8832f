/* pool_paths.cu -- probe: what a 1 MiB cudaMallocAsync + cudaFreeAsync
   pair costs, in microseconds, from CUDA's default pool, from a pool
   made with POSIX descriptor handles (gpumem's exportable pool,
   src/cuda/cuda-pools.c) through cudaMallocFromPoolAsync, and from
   that pool made the device's current pool (cudaDeviceSetMemPool) and
   reached through plain cudaMallocAsync: whether the exportable pool's
   cost is the pool's or the call's.  Each path's median of 9 batches
   of 20,000 pairs on the legacy stream, the paths in turn ABCABC.

     nvcc -O2 -o pool_paths bench/probes/pool_paths.cu && ./pool_paths  */

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <cuda_runtime.h>

#define CHECK(call)                                                       \
  do                                                                      \
    {                                                                     \
      cudaError_t err_ = (call);                                          \
      if (err_ != cudaSuccess)                                            \
        {                                                                 \
          std::fprintf (stderr, "%s: %s\n", #call,                        \
                        cudaGetErrorString (err_));                       \
          std::exit (1);                                                  \
        }                                                                 \
    }                                                                     \
  while (0)

enum path { DEFAULT_POOL, FROM_POOL, CURRENT_POOL, NPATHS };
static const char *const names[NPATHS]
    = {"default pool, cudaMallocAsync", "POSIX pool, cudaMallocFromPoolAsync",
       "POSIX pool as current, cudaMallocAsync"};

static double
batch_us (path p, cudaMemPool_t def, cudaMemPool_t made, int calls)
{
  const size_t nbytes = 1 << 20;
  void *ptr;

  CHECK (cudaDeviceSetMemPool (0, p == CURRENT_POOL ? made : def));
  auto start = std::chrono::steady_clock::now ();
  for (int i = 0; i < calls; i++)
    {
      if (p == FROM_POOL)
        CHECK (cudaMallocFromPoolAsync (&ptr, nbytes, made,
                                        cudaStreamLegacy));
      else
        CHECK (cudaMallocAsync (&ptr, nbytes, cudaStreamLegacy));
      CHECK (cudaFreeAsync (ptr, cudaStreamLegacy));
    }
  std::chrono::duration<double, std::micro> took
      = std::chrono::steady_clock::now () - start;
  CHECK (cudaStreamSynchronize (cudaStreamLegacy));
  return took.count () / calls;
}

int
main ()
{
  cudaMemPool_t def, made;
  cudaMemPoolProps props = {};
  unsigned long long no_limit = ~0ull;
  std::vector<double> runs[NPATHS];

  CHECK (cudaSetDevice (0));
  CHECK (cudaDeviceGetDefaultMemPool (&def, 0));
  props.allocType = cudaMemAllocationTypePinned;
  props.handleTypes = cudaMemHandleTypePosixFileDescriptor;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = 0;
  CHECK (cudaMemPoolCreate (&made, &props));
  CHECK (cudaMemPoolSetAttribute (def, cudaMemPoolAttrReleaseThreshold,
                                  &no_limit));
  CHECK (cudaMemPoolSetAttribute (made, cudaMemPoolAttrReleaseThreshold,
                                  &no_limit));
  for (int p = 0; p < NPATHS; p++)
    batch_us ((path) p, def, made, 2000);
  for (int b = 0; b < 9; b++)
    for (int p = 0; p < NPATHS; p++)
      runs[p].push_back (batch_us ((path) p, def, made, 20000));
  CHECK (cudaDeviceSetMemPool (0, def));
  for (int p = 0; p < NPATHS; p++)
    {
      std::sort (runs[p].begin (), runs[p].end ());
      std::printf ("%-42s %7.3f us (min %.3f, max %.3f)\n", names[p],
                   runs[p][4], runs[p][0], runs[p][8]);
    }
  std::printf ("from pool / default %.3fx, current pool / default %.3fx\n",
               runs[FROM_POOL][4] / runs[DEFAULT_POOL][4],
               runs[CURRENT_POOL][4] / runs[DEFAULT_POOL][4]);
  CHECK (cudaMemPoolDestroy (made));
  return 0;
}
