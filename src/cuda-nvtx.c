/* cuda-nvtx.c -- NVTX for the CUDA backend: the tool behind nvtx.h's
   ranges (NVTX3, header-only: its calls cost next to nothing until a
   tool such as Nsight Systems or compute-sanitizer injects itself), and
   the backend's operations annotated, which backend-cuda.c puts in its
   table.  Each annotated operation asks the switch once (gm_nvtx_on);
   off, it goes straight to the operation beneath.

   Ranges live in the domain "gpumem", one category a kind (nvtx.h).

   Memory.  Every device allocation made while the switch is on is
   registered with the NVTX memory API (nvToolsExtMem.h) as a heap of
   sub-allocator usage holding one region, the array's own bytes, and
   unregistered when it is freed, so that compute-sanitizer's memcheck
   checks accesses against the array's extent (NVIDIA's "NVTX API for
   Compute Sanitizer"; --nvtx yes, the default since CUDA 12.0).  The
   addresses registered are remembered, so that a free unregisters
   exactly what was registered whatever the switch became meanwhile.  */

#define _POSIX_C_SOURCE 200809L
#include "config.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include <cuda_runtime_api.h>
#include <nvtx3/nvToolsExt.h>
#include <nvtx3/nvToolsExtMem.h>

#include "cuda-backend.h"
#include "nvtx.h"

static const char *const kind_names[GM_NVTX_NKINDS] = {
  [GM_NVTX_COPY] = "copy",
  [GM_NVTX_KERNEL] = "kernel",
  [GM_NVTX_COLLECTIVE] = "collective",
  [GM_NVTX_SYNC] = "synchronize",
  [GM_NVTX_ALLOC] = "memory",
};

static nvtxDomainHandle_t domain;
static pthread_once_t domain_once = PTHREAD_ONCE_INIT;

static void
domain_create (void)
{
  domain = nvtxDomainCreateA ("gpumem");
  for (int kind = 1; kind < GM_NVTX_NKINDS; kind++)
    nvtxDomainNameCategoryA (domain, (uint32_t) kind, kind_names[kind]);
}

/* gpumem's domain, made on first use: after the CUDA runtime started,
   as compute-sanitizer requires of NVTX calls.  */
static nvtxDomainHandle_t
gpumem_domain (void)
{
  pthread_once (&domain_once, domain_create);
  return domain;
}

static void
range_push (gm_nvtx_kind kind, const char *message)
{
  nvtxEventAttributes_t attributes = {0};

  attributes.version = NVTX_VERSION;
  attributes.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  attributes.category = (uint32_t) kind;
  attributes.messageType = NVTX_MESSAGE_TYPE_ASCII;
  attributes.message.ascii = message;
  nvtxDomainRangePushEx (gpumem_domain (), &attributes);
}

static void
range_pop (void)
{
  nvtxDomainRangePop (gpumem_domain ());
}

static const gm_nvtx_tool cuda_nvtx_tool = {range_push, range_pop};

void
gm_cuda_nvtx_attach (void)
{
  gm_nvtx_attach (&cuda_nvtx_tool);
}

/* The registered addresses: an open-addressing set (linear probing,
   deletion by backward shift), under its lock.  */
static uintptr_t *registered;
static size_t registered_room;      /* a power of 2, or 0 */
static atomic_size_t registered_count;
static pthread_mutex_t registered_lock = PTHREAD_MUTEX_INITIALIZER;

static size_t
slot_of (uintptr_t address)
{
  return (size_t) ((address >> 8) * UINT64_C (0x9e3779b97f4a7c15))
         & (registered_room - 1);
}

/* Adds ADDRESS (not 0, not present); false when no host memory.  */
static bool
set_add (uintptr_t address)
{
  if (2 * (registered_count + 1) > registered_room)
    {
      size_t old_room = registered_room;
      uintptr_t *old = registered;
      size_t room = old_room ? 2 * old_room : 64;
      uintptr_t *grown = calloc (room, sizeof *grown);

      if (grown == NULL)
        return false;
      registered = grown;
      registered_room = room;
      for (size_t i = 0; i < old_room; i++)
        if (old[i] != 0)
          {
            size_t j = slot_of (old[i]);
            while (registered[j] != 0)
              j = (j + 1) & (room - 1);
            registered[j] = old[i];
          }
      free (old);
    }
  size_t i = slot_of (address);
  while (registered[i] != 0)
    i = (i + 1) & (registered_room - 1);
  registered[i] = address;
  registered_count++;
  return true;
}

/* Removes ADDRESS; whether it was there.  */
static bool
set_remove (uintptr_t address)
{
  size_t mask = registered_room - 1, i, j;

  if (registered_count == 0)
    return false;
  for (i = slot_of (address); registered[i] != address; i = (i + 1) & mask)
    if (registered[i] == 0)
      return false;
  registered[i] = 0;
  registered_count--;
  /* Move up the entries after the hole that probed past it.  */
  for (j = (i + 1) & mask; registered[j] != 0; j = (j + 1) & mask)
    {
      size_t home = slot_of (registered[j]);
      if (((j - home) & mask) >= ((j - i) & mask))
        {
          registered[i] = registered[j];
          registered[j] = 0;
          i = j;
        }
    }
  return true;
}

/* Registers PTR, NBYTES bytes, as a heap holding one region of the same
   bytes.  */
static void
memory_register (void *ptr, size_t nbytes)
{
  nvtxMemVirtualRangeDesc_t range = {nbytes, ptr};
  nvtxMemHeapDesc_t heap = {0};
  nvtxMemRegionsRegisterBatch_t regions = {0};
  bool added;

  pthread_mutex_lock (&registered_lock);
  added = set_add ((uintptr_t) ptr);
  pthread_mutex_unlock (&registered_lock);
  if (!added)
    return;
  heap.extCompatID = NVTX_EXT_COMPATID_MEM;
  heap.structSize = sizeof heap;
  heap.usage = NVTX_MEM_HEAP_USAGE_TYPE_SUB_ALLOCATOR;
  heap.type = NVTX_MEM_TYPE_VIRTUAL_ADDRESS;
  heap.typeSpecificDescSize = sizeof range;
  heap.typeSpecificDesc = &range;
  heap.messageType = NVTX_MESSAGE_TYPE_ASCII;
  heap.message.ascii = "gpumem pool allocation";
  regions.extCompatID = NVTX_EXT_COMPATID_MEM;
  regions.structSize = sizeof regions;
  regions.regionType = NVTX_MEM_TYPE_VIRTUAL_ADDRESS;
  regions.heap = nvtxMemHeapRegister (gpumem_domain (), &heap);
  regions.regionCount = 1;
  regions.regionDescElementSize = sizeof range;
  regions.regionDescElements = &range;
  nvtxMemRegionsRegister (gpumem_domain (), &regions);
}

/* Unregisters PTR's region and heap if memory_register registered them.  */
static void
memory_unregister (void *ptr)
{
  nvtxMemRegionRef_t ref;
  nvtxMemRegionsUnregisterBatch_t regions = {0};
  bool removed;

  pthread_mutex_lock (&registered_lock);
  removed = set_remove ((uintptr_t) ptr);
  pthread_mutex_unlock (&registered_lock);
  if (!removed)
    return;
  ref.pointer = ptr;
  regions.extCompatID = NVTX_EXT_COMPATID_MEM;
  regions.structSize = sizeof regions;
  regions.refType = NVTX_MEM_REGION_REF_TYPE_POINTER;
  regions.refCount = 1;
  regions.refElementSize = sizeof ref;
  regions.refElements = &ref;
  nvtxMemRegionsUnregister (gpumem_domain (), &regions);
  /* A heap of virtual memory is named by its address.  */
  nvtxMemHeapUnregister (gpumem_domain (), (nvtxMemHeapHandle_t) ptr);
}

/* The annotated operations: each does what the gm_cuda_* function of
   the same name does (cuda-backend.h).  */

static const char *
direction (int dst_device, int src_device)
{
  if (src_device < 0)
    return dst_device < 0 ? "HtoH" : "HtoD";
  if (dst_device < 0)
    return "DtoH";
  return dst_device == src_device ? "DtoD" : "PtoP";
}

gm_status
gm_cuda_nvtx_malloc (int device, size_t nbytes, gm_stream *stream,
                     void **ptr)
{
  gm_status status;

  if (!gm_nvtx_on ())
    return gm_cuda_malloc (device, nbytes, stream, ptr);
  gm_nvtx_push (GM_NVTX_ALLOC, "alloc %zu bytes on device %d", nbytes,
                device);
  status = gm_cuda_malloc (device, nbytes, stream, ptr);
  if (status == GM_OK)
    memory_register (*ptr, nbytes);
  gm_nvtx_pop ();
  return status;
}

gm_status
gm_cuda_nvtx_free (int device, void *ptr, gm_stream *stream)
{
  gm_status status;
  bool ranged = gm_nvtx_on ();

  /* Unregistered whatever the switch says: it may have been on at the
     allocation.  The set is empty unless it ever was.  */
  if (__builtin_expect (atomic_load_explicit (&registered_count,
                                             memory_order_relaxed) != 0, 0))
    memory_unregister (ptr);
  if (!ranged)
    return gm_cuda_free (device, ptr, stream);
  gm_nvtx_push (GM_NVTX_ALLOC, "free on device %d", device);
  status = gm_cuda_free (device, ptr, stream);
  gm_nvtx_pop ();
  return status;
}

gm_status
gm_cuda_nvtx_copy (void *dst, int dst_device, const void *src,
                   int src_device, size_t nbytes, gm_stream *stream)
{
  gm_status status;

  if (!gm_nvtx_on ())
    return gm_cuda_copy (dst, dst_device, src, src_device, nbytes, stream);
  gm_nvtx_push (GM_NVTX_COPY, "copy %s %zu bytes",
                direction (dst_device, src_device), nbytes);
  status = gm_cuda_copy (dst, dst_device, src, src_device, nbytes, stream);
  gm_nvtx_pop ();
  return status;
}

gm_status
gm_cuda_nvtx_copy2d (void *dst, size_t dpitch, int dst_device,
                     const void *src, size_t spitch, int src_device,
                     size_t width, size_t height, gm_stream *stream)
{
  gm_status status;

  if (!gm_nvtx_on ())
    return gm_cuda_copy2d (dst, dpitch, dst_device, src, spitch, src_device,
                           width, height, stream);
  gm_nvtx_push (GM_NVTX_COPY, "copy %s %zu bytes (%zu rows of %zu)",
                direction (dst_device, src_device), width * height, height,
                width);
  status = gm_cuda_copy2d (dst, dpitch, dst_device, src, spitch, src_device,
                           width, height, stream);
  gm_nvtx_pop ();
  return status;
}

gm_status
gm_cuda_nvtx_memset (void *dst, int device, int value, size_t nbytes,
                     gm_stream *stream)
{
  gm_status status;

  if (!gm_nvtx_on ())
    return gm_cuda_memset (dst, device, value, nbytes, stream);
  gm_nvtx_push (GM_NVTX_COPY, "memset %zu bytes", nbytes);
  status = gm_cuda_memset (dst, device, value, nbytes, stream);
  gm_nvtx_pop ();
  return status;
}

gm_status
gm_cuda_nvtx_launch (const gm_kernel *kernel, const gm_arg *args,
                     const gm_launch_cfg *cfg, int device, gm_stream *stream)
{
  gm_status status;

  if (!gm_nvtx_on ())
    return gm_cuda_launch (kernel, args, cfg, device, stream);
  gm_nvtx_push (GM_NVTX_KERNEL, "kernel %s", kernel->name);
  status = gm_cuda_launch (kernel, args, cfg, device, stream);
  gm_nvtx_pop ();
  return status;
}

gm_status
gm_cuda_nvtx_wait (int device, gm_stream *stream, long timeout_us)
{
  gm_status status;

  if (!gm_nvtx_on ())
    return gm_cuda_wait (device, stream, timeout_us);
  gm_nvtx_push (GM_NVTX_SYNC, "wait for %s on device %d",
                stream != NULL ? "a stream" : "the default stream", device);
  status = gm_cuda_wait (device, stream, timeout_us);
  gm_nvtx_pop ();
  return status;
}

gm_status
gm_cuda_nvtx_device_synchronize (int device)
{
  gm_status status;

  if (!gm_nvtx_on ())
    return gm_cuda_device_synchronize (device);
  gm_nvtx_push (GM_NVTX_SYNC, "synchronize device %d", device);
  status = gm_cuda_device_synchronize (device);
  gm_nvtx_pop ();
  return status;
}

gm_status
gm_cuda_nvtx_event_wait (gm_event *event, long timeout_us)
{
  gm_status status;

  if (!gm_nvtx_on ())
    return gm_cuda_event_wait (event, timeout_us);
  gm_nvtx_push (GM_NVTX_SYNC, "wait for an event on device %d",
                event->device);
  status = gm_cuda_event_wait (event, timeout_us);
  gm_nvtx_pop ();
  return status;
}
