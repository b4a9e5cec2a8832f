/* cuda-host-numa.c -- page-locked host memory on the NUMA node of the
   current device, for the backend's host_alloc (cuda-memory.c).

   cudaMallocHost places its pages where the calling thread runs.  On a
   machine of several NUMA nodes, a block for the current device is
   mapped here instead, its pages preferred on the node the device names
   (cudaDevAttrHostNumaId; mbind with MPOL_PREFERRED, so that a full node
   does not fail the allocation), and page-locked with cudaHostRegister.
   Where the machine has one node, the device names none, or any step
   refuses, the caller uses cudaMallocHost as before.  The blocks made
   here are listed, so that the free finds its way.  */

#define _GNU_SOURCE
#include "config.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "cuda-internal.h"

/* mbind's policy (linux/mempolicy.h), and the nodes its mask covers.  */
#define NUMA_MPOL_PREFERRED 1
#define NUMA_MAX_NODES 1024

typedef struct numa_block
{
  void *ptr;
  size_t size;
  struct numa_block *next;
} numa_block;

static pthread_mutex_t numa_lock = PTHREAD_MUTEX_INITIALIZER;
static numa_block *numa_blocks;

/* Whether the machine has more than one NUMA node: read once.  */
static bool
several_nodes (void)
{
  static int known = -1;

  if (known < 0)
    known = access ("/sys/devices/system/node/node1", F_OK) == 0;
  return known == 1;
}

#ifdef SYS_mbind
bool
gm_cuda_numa_host_alloc (size_t nbytes, void **ptr)
{
  unsigned long mask[NUMA_MAX_NODES / (8 * sizeof (unsigned long))] = {0};
  size_t page = (size_t) sysconf (_SC_PAGESIZE), size;
  int device = -1, node = -1;
  numa_block *block;
  void *map;

  if (!several_nodes () || cudaGetDevice (&device) != cudaSuccess
      || cudaDeviceGetAttribute (&node, cudaDevAttrHostNumaId, device)
         != cudaSuccess)
    {
      cudaGetLastError ();
      return false;
    }
  if (node < 0 || node >= NUMA_MAX_NODES || nbytes > SIZE_MAX - page)
    return false;
  size = (nbytes + page - 1) / page * page;
  block = malloc (sizeof *block);
  if (block == NULL)
    return false;
  map = mmap (NULL, size, PROT_READ | PROT_WRITE,
              MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (map == MAP_FAILED)
    {
      free (block);
      return false;
    }
  mask[node / (8 * sizeof (unsigned long))]
    |= 1ul << (node % (8 * sizeof (unsigned long)));
  if (syscall (SYS_mbind, map, size, NUMA_MPOL_PREFERRED, mask,
               (unsigned long) NUMA_MAX_NODES + 1, 0u) != 0
      || cudaHostRegister (map, size, cudaHostRegisterPortable)
         != cudaSuccess)
    {
      cudaGetLastError ();
      munmap (map, size);
      free (block);
      return false;
    }
  block->ptr = map;
  block->size = size;
  pthread_mutex_lock (&numa_lock);
  block->next = numa_blocks;
  numa_blocks = block;
  pthread_mutex_unlock (&numa_lock);
  *ptr = map;
  return true;
}
#else
bool
gm_cuda_numa_host_alloc (size_t nbytes, void **ptr)
{
  (void) nbytes, (void) ptr;
  return false;
}
#endif

bool
gm_cuda_numa_host_free (void *ptr)
{
  numa_block **link, *block = NULL;

  pthread_mutex_lock (&numa_lock);
  for (link = &numa_blocks; *link != NULL; link = &(*link)->next)
    if ((*link)->ptr == ptr)
      {
        block = *link;
        *link = block->next;
        break;
      }
  pthread_mutex_unlock (&numa_lock);
  if (block == NULL)
    return false;
  if (cudaHostUnregister (block->ptr) != cudaSuccess)
    cudaGetLastError ();
  munmap (block->ptr, block->size);
  free (block);
  return true;
}
