/* cuda-nvtx.c -- NVTX for the CUDA backend: the tool behind nvtx.h's
   ranges (NVTX3, header-only: its calls cost next to nothing until a
   tool such as Nsight Systems or compute-sanitizer injects itself), and
   the backend's operations annotated, which backend-cuda.c puts in its
   table.  Each annotated operation asks the switch once (gm_nvtx_on);
   off, it goes straight to the operation beneath.

   Ranges live in the domain "gpumem", one category a kind (nvtx.h).

   Memory is not registered with the NVTX memory API: that API tells
   memcheck the extents a sub-allocator carves from its own blocks, and
   gpumem has none; each DeviceArray is its own stream-ordered allocation
   of its exact size, whose extent memcheck knows without NVTX.  */

#define _POSIX_C_SOURCE 200809L
#include "config.h"

#include <pthread.h>
#include <stdint.h>

#include <cuda_runtime_api.h>
#include <nvtx3/nvToolsExt.h>

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
  gm_nvtx_pop ();
  return status;
}

gm_status
gm_cuda_nvtx_free (int device, void *ptr, gm_stream *stream)
{
  gm_status status;

  if (!gm_nvtx_on ())
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
