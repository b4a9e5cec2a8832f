/* fabric_pool.c -- whether a CUDA memory pool made with fabric handles
   (as well as POSIX descriptors) leaves the process's heap whole, in
   plain C with no gpumem: the steps gpumem's exportable pool takes
   (src/cuda/cuda-pools.c: create, keep freed memory, export the pool's
   descriptor; allocate, export a block's pointer, free), then malloc
   churn that makes glibc consolidate its heap, where a corruption
   aborts.  docs/sharing.md says why GPUMEM_SHARE_HANDLE=fabric is
   refused; this asks whether the cause is gpumem's.

     cc -O1 -I/usr/local/cuda/include fabric_pool.c -o fabric_pool \
        -L/usr/local/cuda/lib64 -lcudart
     ./fabric_pool posix | fabric      (exit 0: the heap held)  */

#include <cuda_runtime_api.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(call)                                                       \
  do                                                                      \
    {                                                                     \
      cudaError_t err_ = (call);                                          \
      if (err_ != cudaSuccess)                                            \
        {                                                                 \
          printf ("%s: %s (%s)\n", #call, cudaGetErrorName (err_),        \
                  cudaGetErrorString (err_));                             \
          return 1;                                                       \
        }                                                                 \
    }                                                                     \
  while (0)

/* Allocations and frees of many sizes, large ones among them, so that
   glibc consolidates its free chunks (and checks them) many times.  */
static void
churn (void)
{
  void *held[512] = {0};
  uint32_t x = 12345;

  for (int i = 0; i < 200000; i++)
    {
      int slot;
      x ^= x << 13, x ^= x >> 17, x ^= x << 5;
      slot = (int) (x % 512);
      free (held[slot]);
      held[slot] = malloc ((x >> 9) % 4 == 0 ? 70000 + x % 300000
                                             : 16 + x % 2000);
      if (held[slot] != NULL)
        memset (held[slot], 1, 16);
    }
  for (int i = 0; i < 512; i++)
    free (held[i]);
}

int
main (int argc, char **argv)
{
  int fabric = argc > 1 && strcmp (argv[1], "fabric") == 0;
  struct cudaMemPoolProps props;
  struct cudaMemPoolPtrExportData exported;
  cudaMemPool_t pool;
  uint64_t threshold = UINT64_MAX;
  int types = 0, fd = -1;
  void *ptrs[64];

  CHECK (cudaSetDevice (0));
  CHECK (cudaDeviceGetAttribute (&types,
                                 cudaDevAttrMemoryPoolSupportedHandleTypes,
                                 0));
  printf ("pool handle types %#x; making a pool with %s\n", types,
          fabric ? "POSIX descriptors and fabric handles"
                 : "POSIX descriptors");
  memset (&props, 0, sizeof props);
  props.allocType = cudaMemAllocationTypePinned;
  props.handleTypes = (enum cudaMemAllocationHandleType)
    (cudaMemHandleTypePosixFileDescriptor
     | (fabric ? cudaMemHandleTypeFabric : 0));
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = 0;
  CHECK (cudaMemPoolCreate (&pool, &props));
  CHECK (cudaMemPoolSetAttribute (pool, cudaMemPoolAttrReleaseThreshold,
                                  &threshold));
  CHECK (cudaMemPoolExportToShareableHandle (
      &fd, pool, cudaMemHandleTypePosixFileDescriptor, 0));
  churn ();
  for (int round = 0; round < 20; round++)
    {
      for (int i = 0; i < 64; i++)
        {
          CHECK (cudaMallocFromPoolAsync (&ptrs[i], (size_t) (i + 1) << 16,
                                          pool, 0));
          CHECK (cudaMemPoolExportPointer (&exported, ptrs[i]));
        }
      CHECK (cudaStreamSynchronize (0));
      for (int i = 0; i < 64; i++)
        CHECK (cudaFreeAsync (ptrs[i], 0));
      CHECK (cudaStreamSynchronize (0));
      churn ();
    }
  CHECK (cudaMemPoolDestroy (pool));
  churn ();
  printf ("the heap held: 20 rounds of 64 blocks, exported and freed\n");
  return 0;
}
