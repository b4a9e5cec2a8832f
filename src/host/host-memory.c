/* host-memory.c -- the host backend's device memory.  Each block is a
   private anonymous mapping of its own, whole pages (so aligned at
   least as cudaMalloc's blocks are), and stays one until a share is
   asked: gm_host_share_in_place then puts shared memory (a memfd) under
   it where it lies, so that any array shares by reference and plain
   allocations cost no descriptor.  */

#define _GNU_SOURCE
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "host-memory.h"

pthread_mutex_t gm_host_work_lock = PTHREAD_MUTEX_INITIALIZER;
static size_t host_reserved[GM_HOST_MAX_DEVICES];

/* NBYTES rounded up to whole pages.  */
static size_t
page_round (size_t nbytes)
{
  size_t page = (size_t) sysconf (_SC_PAGESIZE);
  return (nbytes + page - 1) / page * page;
}

gm_status
gm_host_malloc (int device, size_t nbytes, gm_stream *stream, void **ptr)
{
  void *map;
  (void) stream;

  if (nbytes > SIZE_MAX - 2 * (size_t) sysconf (_SC_PAGESIZE))
    return gm_error_set (GM_ERR_NOMEM, 0, NULL, "%zu bytes is too large",
                         nbytes);
  map = mmap (NULL, page_round (nbytes), PROT_READ | PROT_WRITE,
              MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (map == MAP_FAILED)
    return gm_error_set (GM_ERR_NOMEM, 0, NULL,
                         "host memory exhausted allocating %zu bytes",
                         nbytes);
  pthread_mutex_lock (&gm_host_work_lock);
  host_reserved[device] += nbytes;
  pthread_mutex_unlock (&gm_host_work_lock);
  *ptr = map;
  return GM_OK;
}

gm_status
gm_host_free (int device, void *ptr, size_t nbytes, gm_stream *stream)
{
  (void) stream;

  pthread_mutex_lock (&gm_host_work_lock);
  host_reserved[device] -= nbytes;
  munmap (ptr, page_round (nbytes));
  pthread_mutex_unlock (&gm_host_work_lock);
  return GM_OK;
}

gm_status
gm_host_share_in_place (void *ptr, size_t nbytes, int *fd)
{
  size_t length = page_round (nbytes);
  gm_status status = GM_OK;
  void *map = MAP_FAILED;

  *fd = memfd_create ("gpumem-shared", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (*fd < 0)
    return gm_error_set (GM_ERR_UNAVAILABLE, 0, NULL, "cannot make shared "
                         "memory: memfd_create: %s", strerror (errno));
  /* Sealed at its size, as every shared block is (host-share.c): no
     holder of the descriptor can shrink it under the producer.  */
  if (ftruncate (*fd, (off_t) length) != 0
      || fcntl (*fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)
         != 0
      || (map = mmap (NULL, length, PROT_READ | PROT_WRITE, MAP_SHARED, *fd,
                      0)) == MAP_FAILED)
    {
      status = gm_error_set (GM_ERR_NOMEM, 0, NULL, "cannot make %zu bytes "
                             "of shared memory: %s", nbytes,
                             strerror (errno));
      goto done;
    }
  /* No copy or kernel writes the block meanwhile (they hold gm_host_work_lock),
     and the move replaces the private pages with the shared ones in one
     step, so no thread sees the address unmapped.  */
  pthread_mutex_lock (&gm_host_work_lock);
  memcpy (map, ptr, length);
  if (mremap (map, length, length, MREMAP_MAYMOVE | MREMAP_FIXED, ptr)
      == MAP_FAILED)
    status = gm_error_set (GM_ERR_FAILED, 0, NULL, "cannot put shared "
                           "memory under an array: mremap: %s",
                           strerror (errno));
  else
    map = MAP_FAILED;
  pthread_mutex_unlock (&gm_host_work_lock);
done:
  if (map != MAP_FAILED)
    munmap (map, length);
  if (status != GM_OK)
    {
      close (*fd);
      *fd = -1;
    }
  return status;
}

gm_status
gm_host_reserved (int device, size_t *bytes)
{
  *bytes = host_reserved[device];
  return GM_OK;
}

gm_status
gm_host_release_cached (int device, size_t *reserved_after)
{
  *reserved_after = host_reserved[device];
  return GM_OK;
}
