/* host-ipc.c -- the host backend's sharing: blocks in anonymous shared
   memory (memfd_create), whose descriptor the share server hands to
   consumers, who map it.  A mapping keeps its pages after every
   descriptor is closed, so a consumer's array stays whole when its
   producer exits, however it exits.  */

#define _GNU_SOURCE
#include "config.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "host-memory.h"
#include "share.h"

static gm_status
host_ipc_alloc (int device, size_t nbytes, gm_stream *stream, void **ptr,
                int *fd, void **ctx)
{
  void *map;
  (void) device;
  (void) stream;

  *fd = memfd_create ("gpumem-shared", MFD_CLOEXEC);
  if (*fd < 0)
    return gm_error_set (GM_ERR_UNAVAILABLE, 0, NULL, "cannot make shared "
                         "memory: memfd_create: %s", strerror (errno));
  if (ftruncate (*fd, (off_t) nbytes) != 0)
    {
      int saved = errno;
      close (*fd);
      return gm_error_set (GM_ERR_NOMEM, 0, NULL, "cannot make %zu bytes of "
                           "shared memory: %s", nbytes, strerror (saved));
    }
  map = mmap (NULL, nbytes, PROT_READ | PROT_WRITE, MAP_SHARED, *fd, 0);
  if (map == MAP_FAILED)
    {
      int saved = errno;
      close (*fd);
      return gm_error_set (GM_ERR_NOMEM, 0, NULL, "cannot map %zu bytes of "
                           "shared memory: %s", nbytes, strerror (saved));
    }
  *ptr = map;
  *ctx = NULL;
  return GM_OK;
}

/* Host work is complete when its call returns: nothing to order.  */
static gm_status
host_ipc_describe (int device, void *ctx, void *ptr, gm_stream *stream,
                   uint8_t opaque[GM_IPC_OPAQUE])
{
  (void) device;
  (void) ctx;
  (void) ptr;
  (void) stream;
  memset (opaque, 0, GM_IPC_OPAQUE);
  return GM_OK;
}

static void
host_ipc_release (int device, void *ctx, void *ptr, size_t nbytes)
{
  (void) device;
  (void) ctx;
  munmap (ptr, nbytes);
}

static gm_status
host_ipc_import (int device, int fd, const gm_ipc_handle *handle, void **ptr,
                 void **ctx)
{
  struct stat st;
  void *map;
  (void) device;

  /* The size comes from the handle, which the producer's descriptor
     must back: mapping past a file's end would fault on first touch.  */
  if (fstat (fd, &st) != 0 || st.st_size < 0
      || (uint64_t) st.st_size < handle->nbytes)
    {
      close (fd);
      return gm_error_set (GM_ERR_FAILED, 0, NULL, "the shared memory is "
                           "smaller than its handle says (%llu bytes)",
                           (unsigned long long) handle->nbytes);
    }
  map = mmap (NULL, handle->nbytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
              0);
  close (fd);
  if (map == MAP_FAILED)
    return gm_error_set (GM_ERR_NOMEM, 0, NULL, "cannot map %llu bytes of "
                         "shared memory: %s",
                         (unsigned long long) handle->nbytes,
                         strerror (errno));
  *ptr = map;
  *ctx = NULL;
  return GM_OK;
}

static void
host_ipc_unmap (int device, void *ctx, void *ptr, size_t nbytes)
{
  (void) device;
  (void) ctx;
  munmap (ptr, nbytes);
}

/* Any block of the host backend's malloc becomes shareable where it
   lies (host-backend.c).  */
static gm_status
host_ipc_adopt (int device, void *ptr, size_t nbytes, int *fd, void **ctx)
{
  (void) device;
  *ctx = NULL;
  return gm_host_share_in_place (ptr, nbytes, fd);
}

static void
host_ipc_disown (int device, void *ctx)
{
  (void) device;
  (void) ctx;
}

/* A simulated device is named by its index: processes on one node see
   the same host devices.  */
static gm_status
host_ipc_device_uuid (int device, uint8_t uuid[16])
{
  memset (uuid, 0, 16);
  memcpy (uuid, "host-device", 11);
  uuid[12] = (uint8_t) device;
  return GM_OK;
}

const gm_ipc_ops gm_host_ipc_ops = {
  .kind = GM_IPC_KIND_HOST,
  .alloc = host_ipc_alloc,
  .describe = host_ipc_describe,
  .release = host_ipc_release,
  .import = host_ipc_import,
  .unmap = host_ipc_unmap,
  .device_uuid = host_ipc_device_uuid,
  .adopt = host_ipc_adopt,
  .disown = host_ipc_disown,
};
