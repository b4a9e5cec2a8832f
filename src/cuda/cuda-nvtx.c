/* cuda-nvtx.c -- NVTX for the CUDA backend: the tool behind nvtx.h's
   ranges (NVTX3, header-only: its calls cost next to nothing until a
   tool such as Nsight Systems or compute-sanitizer injects itself), and
   the backend's operations annotated, which cuda-backend.c puts in its
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
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>

#include <cuda_runtime_api.h>
#include <nvtx3/nvToolsExt.h>

#include "cuda-internal.h"
#include "nvtx.h"

static const char *const kind_names[GM_NVTX_NKINDS] = {
  [GM_NVTX_COPY] = "copy",
  [GM_NVTX_KERNEL] = "kernel",
  [GM_NVTX_COLLECTIVE] = "collective",
  [GM_NVTX_SYNC] = "synchronize",
  [GM_NVTX_ALLOC] = "memory",
};

static nvtxDomainHandle_t gpumem_domain_handle;
static pthread_once_t domain_once = PTHREAD_ONCE_INIT;

static void
domain_create (void)
{
  gpumem_domain_handle = nvtxDomainCreateA ("gpumem");
  if (gpumem_domain_handle == NULL)
    return;
  for (int kind = 1; kind < GM_NVTX_NKINDS; kind++)
    nvtxDomainNameCategoryA (gpumem_domain_handle, (uint32_t) kind,
                             kind_names[kind]);
}

/* gpumem's domain, made on first use: after the CUDA runtime started,
   as compute-sanitizer requires of NVTX calls.  NULL when no tool is
   attached: NVTX3's calls then return NULL, and a tool attaches only at
   a process's first NVTX call, so it stays NULL and the ranges can skip
   every NVTX call.  */
static nvtxDomainHandle_t
gpumem_domain (void)
{
  pthread_once (&domain_once, domain_create);
  return gpumem_domain_handle;
}

/* The names registered with the tool, one a (what, device): WHAT is a
   string of static storage, so its address names it.  An open-addressing
   table that only grows; readers take no lock (an entry's key is stored
   last, with release), writers take the lock.  When it is full, ranges
   fall back to WHAT as plain text.  */
enum { NAMES_ROOM = 1024 };

typedef struct registered_name
{
  _Atomic (const char *) what;
  int device;
  nvtxStringHandle_t handle;
} registered_name;

static registered_name registered_names[NAMES_ROOM];
static pthread_mutex_t names_lock = PTHREAD_MUTEX_INITIALIZER;

static size_t
name_slot (const char *what, int device)
{
  uint64_t key = (uint64_t) (uintptr_t) what ^ ((uint64_t) device << 48);

  return (size_t) ((key * UINT64_C (0x9e3779b97f4a7c15)) >> 54)
         & (NAMES_ROOM - 1);
}

/* The slot of (WHAT, DEVICE), or the free slot where it would go (its
   what NULL); NULL when the table is full.  */
static registered_name *
name_find (const char *what, int device)
{
  size_t i = name_slot (what, device);

  for (size_t n = 0; n < NAMES_ROOM; n++, i = (i + 1) & (NAMES_ROOM - 1))
    {
      registered_name *slot = &registered_names[i];
      const char *key = atomic_load_explicit (&slot->what,
                                              memory_order_acquire);
      if (key == NULL || (key == what && slot->device == device))
        return slot;
    }
  return NULL;
}

/* The string registered for "WHAT" or "WHAT on device DEVICE" in
   DOMAIN, registering it on first use; NULL when the table is full or
   the tool gave none.  */
static nvtxStringHandle_t
name_handle (nvtxDomainHandle_t domain, const char *what, int device)
{
  registered_name *slot = name_find (what, device);
  char text[96];

  if (slot != NULL && atomic_load_explicit (&slot->what,
                                            memory_order_acquire) != NULL)
    return slot->handle;
  pthread_mutex_lock (&names_lock);
  slot = name_find (what, device);
  if (slot != NULL && atomic_load_explicit (&slot->what,
                                            memory_order_relaxed) == NULL)
    {
      if (device >= 0)
        snprintf (text, sizeof text, "%s on device %d", what, device);
      else
        snprintf (text, sizeof text, "%s", what);
      slot->device = device;
      slot->handle = nvtxDomainRegisterStringA (domain, text);
      atomic_store_explicit (&slot->what, what, memory_order_release);
    }
  pthread_mutex_unlock (&names_lock);
  return slot != NULL ? slot->handle : NULL;
}

static void
attributes_init (nvtxEventAttributes_t *attributes, gm_nvtx_kind kind)
{
  *attributes = (nvtxEventAttributes_t) {0};
  attributes->version = NVTX_VERSION;
  attributes->size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  attributes->category = (uint32_t) kind;
}

static void
range_push (gm_nvtx_kind kind, const char *what, int device, uint64_t bytes)
{
  nvtxDomainHandle_t domain = gpumem_domain ();
  nvtxEventAttributes_t attributes;
  nvtxStringHandle_t name;

  if (domain == NULL)
    return;
  attributes_init (&attributes, kind);
  name = name_handle (domain, what, device);
  if (name != NULL)
    {
      attributes.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
      attributes.message.registered = name;
    }
  else
    {
      attributes.messageType = NVTX_MESSAGE_TYPE_ASCII;
      attributes.message.ascii = what;
    }
  if (bytes != GM_NVTX_NO_BYTES)
    {
      attributes.payloadType = NVTX_PAYLOAD_TYPE_UNSIGNED_INT64;
      attributes.payload.ullValue = bytes;
    }
  nvtxDomainRangePushEx (domain, &attributes);
}

/* A name of any lifetime goes as plain text: the tool copies it.  */
static void
range_push_name (gm_nvtx_kind kind, const char *name)
{
  nvtxDomainHandle_t domain = gpumem_domain ();
  nvtxEventAttributes_t attributes;

  if (domain == NULL)
    return;
  attributes_init (&attributes, kind);
  attributes.messageType = NVTX_MESSAGE_TYPE_ASCII;
  attributes.message.ascii = name;
  nvtxDomainRangePushEx (domain, &attributes);
}

static void
range_pop (void)
{
  nvtxDomainHandle_t domain = gpumem_domain ();

  if (domain != NULL)
    nvtxDomainRangePop (domain);
}

static const gm_nvtx_tool cuda_nvtx_tool = {range_push, range_push_name,
                                            range_pop};

void
gm_cuda_nvtx_attach (void)
{
  gm_nvtx_attach (&cuda_nvtx_tool);
}

/* The annotated operations: each does what the gm_cuda_* function of
   the same name does (cuda-internal.h).  */

/* A copy's range name: its direction (HtoD, ..., PtoP between devices),
   2-D or not.  */
static const char *
direction (int dst_device, int src_device, bool two_d)
{
  static const char *const names[2][5] = {
    {"copy HtoH", "copy HtoD", "copy DtoH", "copy DtoD", "copy PtoP"},
    {"copy HtoH 2-D", "copy HtoD 2-D", "copy DtoH 2-D", "copy DtoD 2-D",
     "copy PtoP 2-D"},
  };
  int which;

  if (src_device < 0)
    which = dst_device < 0 ? 0 : 1;
  else if (dst_device < 0)
    which = 2;
  else
    which = dst_device == src_device ? 3 : 4;
  return names[two_d][which];
}

gm_status
gm_cuda_nvtx_malloc (int device, size_t nbytes, gm_stream *stream,
                     void **ptr)
{
  gm_status status;

  if (!gm_nvtx_on ())
    return gm_cuda_malloc (device, nbytes, stream, ptr);
  gm_nvtx_push (GM_NVTX_ALLOC, "alloc", device, nbytes);
  status = gm_cuda_malloc (device, nbytes, stream, ptr);
  gm_nvtx_pop ();
  return status;
}

gm_status
gm_cuda_nvtx_free (int device, void *ptr, size_t nbytes,
                   gm_stream *stream)
{
  gm_status status;

  if (!gm_nvtx_on ())
    return gm_cuda_free (device, ptr, nbytes, stream);
  gm_nvtx_push (GM_NVTX_ALLOC, "free", device, GM_NVTX_NO_BYTES);
  status = gm_cuda_free (device, ptr, nbytes, stream);
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
  gm_nvtx_push (GM_NVTX_COPY, direction (dst_device, src_device, false), -1,
                nbytes);
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
  gm_nvtx_push (GM_NVTX_COPY, direction (dst_device, src_device, true), -1,
                (uint64_t) width * height);
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
  gm_nvtx_push (GM_NVTX_COPY, "memset", device, nbytes);
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
  gm_nvtx_push_name (GM_NVTX_KERNEL, kernel->name);
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
  gm_nvtx_push (GM_NVTX_SYNC, stream != NULL
                ? "wait for a stream" : "wait for the default stream",
                device, GM_NVTX_NO_BYTES);
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
  gm_nvtx_push (GM_NVTX_SYNC, "synchronize", device, GM_NVTX_NO_BYTES);
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
  gm_nvtx_push (GM_NVTX_SYNC, "wait for an event", event->device,
                GM_NVTX_NO_BYTES);
  status = gm_cuda_event_wait (event, timeout_us);
  gm_nvtx_pop ();
  return status;
}
