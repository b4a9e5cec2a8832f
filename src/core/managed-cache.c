/* managed-cache.c -- freed blocks of managed memory kept for the next
   request of their size.

   The stream-ordered pool of managed memory serves and takes back a
   block of 1 MiB in about 2.3 us (cudaMallocFromPoolAsync and
   cudaFreeAsync, one H100: bench/NOTES.md), a device pool in about 1.3;
   a program that runs iterations makes and frees arrays of the same few
   sizes.  So a block freed in the legacy default stream's order is
   kept, by device and exact size, and serves the next request of that
   size in that order.  That order makes the reuse what the backend's
   own reuse would be: the block was freed behind all the work queued
   before the free (gpumem's calls without stream= run on the legacy
   stream, which follows every blocking stream, and the keep joins the
   non-blocking ones to it, as the backend's free does), and its new
   owner's work comes after.  A block that was given advice (read-mostly,
   a preferred location) goes back to the backend instead, so that no
   array inherits another's.

   At most KEEP_BLOCKS blocks of at most KEEP_LARGEST bytes and
   KEEP_BYTES in all a device: large arrays cost the backend little
   beside their size, and memory kept here is memory the device's other
   allocations cannot have (any allocation the device refuses, device or
   managed, first gives it all back: gm_mem_alloc_with).  The backend is
   called outside the lock.  */

#define _POSIX_C_SOURCE 200809L
#include "config.h"

#include <pthread.h>
#include <stdlib.h>

#include "gm-backend.h"
#include "gm-memory.h"
#include "managed-cache.h"

#define KEEP_BLOCKS 64
#define KEEP_LARGEST ((size_t) 32 << 20)
#define KEEP_BYTES ((size_t) 256 << 20)

typedef struct kept_block
{
  void *ptr;
  size_t nbytes;
} kept_block;

/* A device's kept blocks, newest last; made at its first keep.  */
typedef struct kept_list
{
  size_t count;
  size_t bytes;
  kept_block blocks[KEEP_BLOCKS];
} kept_list;

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static kept_list *kept[GM_MAX_DEVICES];

static bool
device_ok (int device)
{
  return device >= 0 && device < GM_MAX_DEVICES;
}

/* A kept block of exactly NBYTES of DEVICE's, taken off its list, or
   NULL.  With CACHE_LOCK.  */
static void *
take (int device, size_t nbytes)
{
  kept_list *list = kept[device];

  if (list == NULL)
    return NULL;
  for (size_t i = list->count; i-- > 0;)
    if (list->blocks[i].nbytes == nbytes)
      {
        void *ptr = list->blocks[i].ptr;
        list->blocks[i] = list->blocks[--list->count];
        list->bytes -= nbytes;
        return ptr;
      }
  return NULL;
}

gm_status
gm_managed_cache_get (int device, size_t nbytes, gm_stream *stream,
                      void **ptr)
{
  if (stream == NULL && device_ok (device) && nbytes > 0)
    {
      pthread_mutex_lock (&cache_lock);
      *ptr = take (device, nbytes);
      pthread_mutex_unlock (&cache_lock);
      if (*ptr != NULL)
        return GM_OK;
    }
  return gm_backend_current->managed_malloc (device, nbytes, stream, ptr);
}

gm_status
gm_managed_cache_put (int device, void *ptr, size_t nbytes, gm_stream *stream,
                      bool reusable)
{
  bool keep = false;

  if (reusable && stream == NULL && ptr != NULL && device_ok (device)
      && nbytes > 0 && nbytes <= KEEP_LARGEST)
    {
      /* The default stream's next work waits for the non-blocking
         streams' work so far, as the backend's free would have it.  */
      if (gm_backend_current->join_streams != NULL)
        {
          gm_status status = gm_backend_current->join_streams (device);
          if (status != GM_OK)
            return status;
        }
      pthread_mutex_lock (&cache_lock);
      if (kept[device] == NULL)
        kept[device] = calloc (1, sizeof *kept[device]);
      kept_list *list = kept[device];
      if (list != NULL && list->count < KEEP_BLOCKS
          && list->bytes + nbytes <= KEEP_BYTES)
        {
          list->blocks[list->count++] = (kept_block) {ptr, nbytes};
          list->bytes += nbytes;
          keep = true;
        }
      pthread_mutex_unlock (&cache_lock);
    }
  if (keep)
    return GM_OK;
  return gm_backend_current->managed_free (device, ptr, nbytes, stream);
}

/* Gives DEVICE's kept blocks back to the backend; the first error, the
   others' blocks given back still.  */
static gm_status
release_device (int device)
{
  gm_status status = GM_OK;
  kept_list *list;

  pthread_mutex_lock (&cache_lock);
  list = kept[device];
  kept[device] = NULL;
  pthread_mutex_unlock (&cache_lock);
  if (list == NULL)
    return GM_OK;
  for (size_t i = 0; i < list->count; i++)
    {
      gm_status freed = gm_backend_current->managed_free (
        device, list->blocks[i].ptr, list->blocks[i].nbytes, NULL);
      if (status == GM_OK)
        status = freed;
    }
  free (list);
  return status;
}

gm_status
gm_managed_cache_release (int device)
{
  gm_status status = GM_OK;

  if (device >= 0)
    return device_ok (device) ? release_device (device) : GM_OK;
  for (int d = 0; d < GM_MAX_DEVICES; d++)
    {
      gm_status freed = release_device (d);
      if (status == GM_OK)
        status = freed;
    }
  return status;
}

size_t
gm_managed_cache_bytes (int device)
{
  size_t bytes;

  if (!device_ok (device))
    return 0;
  pthread_mutex_lock (&cache_lock);
  bytes = kept[device] != NULL ? kept[device]->bytes : 0;
  pthread_mutex_unlock (&cache_lock);
  return bytes;
}
