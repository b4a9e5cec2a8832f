/* host-share.c -- the host backend's sharing: blocks in anonymous shared
   memory (memfd_create), whose descriptor the share server hands to
   consumers, who map it.  A mapping keeps its pages after every
   descriptor is closed, so a consumer's array stays whole when its
   producer exits, however it exits.  The file is sealed at its size
   (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL), so no holder of its
   descriptor can make another's mapping fault, and a consumer maps only
   a file so sealed, of at least the block's size.  */

#define _GNU_SOURCE
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "host-memory.h"
#include "share.h"

#define HOST_IPC_SEALS (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)

static gm_status
host_ipc_alloc (int device, size_t nbytes, gm_stream *stream, void **ptr,
                int *fd, void **ctx)
{
  void *map;
  (void) device;
  (void) stream;

  *fd = memfd_create ("gpumem-shared", MFD_CLOEXEC | MFD_ALLOW_SEALING);
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
  if (fcntl (*fd, F_ADD_SEALS, HOST_IPC_SEALS) != 0)
    {
      int saved = errno;
      close (*fd);
      return gm_error_set (GM_ERR_UNAVAILABLE, 0, NULL, "cannot seal shared "
                           "memory: %s", strerror (saved));
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

/* A read-only descriptor of the file FD: opened again through /proc, as
   a new open file that cannot be mapped for writing.  The file is made
   mode 0400 first (memfd_create makes it 0777): a consumer reopening
   its descriptor through /proc/self/fd/N is checked against the mode,
   so that no user but the producer's (and root) can open the file for
   writing.  No write seal: the producer, and the consumers it shares
   the block with writable, keep writing the same file.  */
static int
host_ipc_readonly_fd (int fd)
{
  char path[64];

  if (fchmod (fd, S_IRUSR) != 0)
    return -1;
  snprintf (path, sizeof path, "/proc/self/fd/%d", fd);
  return open (path, O_RDONLY | O_CLOEXEC);
}

static gm_status
host_ipc_import (int device, int fd, const gm_ipc_handle *handle, void **ptr,
                 void **ctx)
{
  struct stat st;
  int seals;
  void *map;
  (void) device;

  /* The size comes from the handle, which the descriptor must back
     whole and for good: mapping past a file's end, or a file that
     shrinks later, would fault on touch.  A block shared where it lies
     (adopt) is a file of whole pages, so the file may be longer.  */
  seals = fcntl (fd, F_GET_SEALS);
  if (fstat (fd, &st) != 0 || !S_ISREG (st.st_mode) || st.st_size < 0
      || (uint64_t) st.st_size < handle->nbytes || seals < 0
      || (seals & (F_SEAL_SHRINK | F_SEAL_GROW)) != (F_SEAL_SHRINK
                                                     | F_SEAL_GROW))
    {
      close (fd);
      return gm_error_set (GM_ERR_FAILED, 0, NULL, "the shared memory its "
                           "producer sent is not a sealed block of the %llu "
                           "bytes its handle says",
                           (unsigned long long) handle->nbytes);
    }
  map = mmap (NULL, handle->nbytes,
              handle->readonly ? PROT_READ : PROT_READ | PROT_WRITE,
              MAP_SHARED, fd, 0);
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
  .readonly_fd = host_ipc_readonly_fd,
  .import = host_ipc_import,
  .unmap = host_ipc_unmap,
  .device_uuid = host_ipc_device_uuid,
  .adopt = host_ipc_adopt,
  .disown = host_ipc_disown,
};
