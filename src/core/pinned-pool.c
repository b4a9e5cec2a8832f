/* pinned-pool.c -- the caching pool of page-locked host memory.

   cudaMallocHost takes tens of microseconds and cudaFreeHost waits for
   the device, so a block given back is kept, by its size class, for
   the next request of that class.  Classes: powers of two from 4 KiB
   to 1 MiB, multiples of 1 MiB above (at most 1 MiB of a large block
   unused).  The live blocks are found by address in a hash table of
   chained nodes; the cached ones are a list, searched for the exact
   class (the cache holds what a program's buffers were, few sizes).
   The backend is called outside the lock.  */

#define _POSIX_C_SOURCE 200809L
#include "config.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "pinned-pool.h"

#define SMALLEST ((size_t) 4 << 10)
#define LARGE ((size_t) 1 << 20)
#define NBUCKETS 1024

typedef struct pinned_block
{
  void *ptr;
  size_t size;
  struct pinned_block *next;
} pinned_block;

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static pinned_block *live[NBUCKETS];
static pinned_block *cached;
static gm_pinned_stats books = {.limit = SIZE_MAX};

size_t
gm_pinned_size (size_t nbytes)
{
  size_t size = SMALLEST;

  if (nbytes > SIZE_MAX - LARGE)
    return 0;
  if (nbytes > LARGE)
    return (nbytes + LARGE - 1) / LARGE * LARGE;
  while (size < nbytes)
    size *= 2;
  return size;
}

static size_t
bucket_of (const void *ptr)
{
  uintptr_t key = (uintptr_t) ptr >> 12;
  return (size_t) ((key * 0x9E3779B97F4A7C15u) >> 54) % NBUCKETS;
}

/* Unlinks and returns the cached blocks while the pool holds more than
   KEEP bytes, as a list to free outside the lock.  With POOL_LOCK.  */
static pinned_block *
take_cached (size_t keep)
{
  pinned_block *freed = NULL;

  while (cached != NULL && books.reserved_bytes > keep)
    {
      pinned_block *block = cached;
      cached = block->next;
      books.reserved_bytes -= block->size;
      block->next = freed;
      freed = block;
    }
  return freed;
}

static void
free_list (pinned_block *list)
{
  while (list != NULL)
    {
      pinned_block *next = list->next;
      gm_backend_current->host_free (list->ptr);
      free (list);
      list = next;
    }
}

/* Books BLOCK as in use.  With POOL_LOCK.  */
static void
note_live (pinned_block *block)
{
  size_t b = bucket_of (block->ptr);

  block->next = live[b];
  live[b] = block;
  books.allocated_bytes += block->size;
  if (books.allocated_bytes > books.peak_allocated_bytes)
    books.peak_allocated_bytes = books.allocated_bytes;
  books.allocations++;
  books.total_allocations++;
}

static gm_status
refuse (size_t nbytes, size_t size, const gm_pinned_stats *now)
{
  char text[3][32];

  gm_format_bytes (size, text[0], sizeof text[0]);
  gm_format_bytes (now->reserved_bytes, text[1], sizeof text[1]);
  gm_format_bytes (now->limit, text[2], sizeof text[2]);
  return gm_error_set (GM_ERR_HOST_NOMEM, 0, NULL, "out of pinned memory: "
                       "%zu bytes requested (%s taken), the pinned pool "
                       "holds %s of its limit of %s "
                       "(gpumem.set_pinned_memory_limit)", nbytes, text[0],
                       text[1], text[2]);
}

gm_status
gm_pinned_alloc (size_t nbytes, void **ptr)
{
  size_t size = gm_pinned_size (nbytes);
  pinned_block **link, *block = NULL, *freed;
  gm_pinned_stats now;
  gm_status status;

  *ptr = NULL;
  if (size == 0)
    return gm_error_set (GM_ERR_HOST_NOMEM, 0, NULL, "%zu bytes of pinned "
                         "memory is too large", nbytes);
  pthread_mutex_lock (&pool_lock);
  for (link = &cached; *link != NULL; link = &(*link)->next)
    if ((*link)->size == size)
      {
        block = *link;
        *link = block->next;
        books.cache_hits++;
        note_live (block);
        pthread_mutex_unlock (&pool_lock);
        *ptr = block->ptr;
        return GM_OK;
      }
  /* Room under the limit, the cache given back as needed; booked before
     the backend is asked, so that two threads cannot both pass.  */
  freed = books.limit >= size ? take_cached (books.limit - size)
                              : take_cached (0);
  if (size > books.limit || books.reserved_bytes > books.limit - size)
    {
      now = books;
      pthread_mutex_unlock (&pool_lock);
      free_list (freed);
      return refuse (nbytes, size, &now);
    }
  books.reserved_bytes += size;
  pthread_mutex_unlock (&pool_lock);
  free_list (freed);
  block = malloc (sizeof *block);
  if (block == NULL)
    status = gm_error_set (GM_ERR_HOST_NOMEM, 0, NULL, "out of host memory");
  else
    {
      status = gm_backend_current->host_alloc (size, &block->ptr);
      if (status != GM_OK)
        {
          /* The cache may be what the host lacks.  */
          gm_pinned_release_cached ();
          status = gm_backend_current->host_alloc (size, &block->ptr);
        }
    }
  pthread_mutex_lock (&pool_lock);
  if (status != GM_OK)
    {
      books.reserved_bytes -= size;
      pthread_mutex_unlock (&pool_lock);
      free (block);
      return status;
    }
  block->size = size;
  note_live (block);
  pthread_mutex_unlock (&pool_lock);
  *ptr = block->ptr;
  return GM_OK;
}

void
gm_pinned_free (void *ptr)
{
  pinned_block **link, *block = NULL;

  if (ptr == NULL)
    return;
  pthread_mutex_lock (&pool_lock);
  for (link = &live[bucket_of (ptr)]; *link != NULL; link = &(*link)->next)
    if ((*link)->ptr == ptr)
      {
        block = *link;
        *link = block->next;
        books.allocated_bytes -= block->size;
        books.allocations--;
        block->next = cached;
        cached = block;
        break;
      }
  pthread_mutex_unlock (&pool_lock);
  /* Not the pool's: the backend's own (never, by the callers' rule; an
     error would be lost in a free, so it is given back as it came).  */
  if (block == NULL)
    gm_backend_current->host_free (ptr);
}

void
gm_pinned_release_cached (void)
{
  pinned_block *freed;

  pthread_mutex_lock (&pool_lock);
  freed = take_cached (0);
  pthread_mutex_unlock (&pool_lock);
  free_list (freed);
}

void
gm_pinned_stats_get (gm_pinned_stats *stats)
{
  pthread_mutex_lock (&pool_lock);
  *stats = books;
  pthread_mutex_unlock (&pool_lock);
}

void
gm_pinned_set_limit (size_t limit)
{
  pinned_block *freed;

  pthread_mutex_lock (&pool_lock);
  books.limit = limit;
  freed = take_cached (limit);
  pthread_mutex_unlock (&pool_lock);
  free_list (freed);
}
