/* memory.c -- the books of device memory: statistics and limits.

   Every device allocation of both backends goes through gm_mem_alloc and
   gm_mem_free, so memory_stats, set_memory_limit and --stats hold for
   either.  The pool itself is the backend's (CUDA's stream-ordered
   allocator, or the host's malloc).  The books have a lock of their
   own (books_lock): C code that holds no GIL (a DLPack consumer letting
   go, the MPI layer, the embedding API) may allocate and free too.  The
   backend is called outside it.  */

#include "config.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "gm.h"

#define GM_MAX_DEVICES 1024

static gm_mem_stats books[GM_MAX_DEVICES];
static bool books_ready[GM_MAX_DEVICES];
static pthread_mutex_t books_lock = PTHREAD_MUTEX_INITIALIZER;

/* DEVICE's books.  With books_lock held.  */
static gm_mem_stats *
book (int device)
{
  if (!books_ready[device])
    {
      books[device].limit = SIZE_MAX;
      books_ready[device] = true;
    }
  return &books[device];
}

static gm_status
check_device (int device)
{
  int count = gm_backend_current->device_count ();

  if (device < 0 || device >= count || device >= GM_MAX_DEVICES)
    return gm_error_set (GM_ERR_VALUE, 0, NULL,
                         "device %d does not exist (valid: 0 to %d)",
                         device, count - 1);
  return GM_OK;
}

gm_status
gm_mem_alloc (int device, size_t nbytes, gm_stream *stream, void **ptr)
{
  gm_status status = check_device (device);
  gm_mem_stats *stats;

  *ptr = NULL;
  if (status != GM_OK)
    return status;
  /* Zero bytes take no memory and stay out of the books, so that an
     empty array, which never calls gm_mem_free, leaves no count behind.  */
  if (nbytes == 0)
    return GM_OK;
  pthread_mutex_lock (&books_lock);
  stats = book (device);
  if (nbytes > stats->limit || stats->allocated_bytes > stats->limit - nbytes)
    {
      size_t in_use = stats->allocated_bytes, limit_bytes = stats->limit;
      char want[32], used[32], limit[32];
      pthread_mutex_unlock (&books_lock);
      gm_format_bytes (nbytes, want, sizeof want);
      gm_format_bytes (in_use, used, sizeof used);
      gm_format_bytes (limit_bytes, limit, sizeof limit);
      return gm_error_set (GM_ERR_NOMEM, 0, NULL,
                           "out of memory: %zu bytes (%s) requested on "
                           "device %d, which has %zu bytes (%s) in use of "
                           "its limit of %zu bytes (%s)",
                           nbytes, want, device, in_use, used, limit_bytes,
                           limit);
    }
  /* Booked before the backend is asked, so that two threads cannot
     both pass the limit with the room for one.  */
  stats->allocated_bytes += nbytes;
  pthread_mutex_unlock (&books_lock);
  status = gm_backend_current->malloc (device, nbytes, stream, ptr);
  pthread_mutex_lock (&books_lock);
  if (status != GM_OK)
    {
      size_t in_use, limit_bytes;
      stats->allocated_bytes -= nbytes;
      in_use = stats->allocated_bytes;
      limit_bytes = stats->limit;
      pthread_mutex_unlock (&books_lock);
      if (status == GM_ERR_NOMEM)
        {
          char want[32], used[32];
          size_t free_bytes = 0, total = 0;
          gm_format_bytes (nbytes, want, sizeof want);
          gm_format_bytes (in_use, used, sizeof used);
          gm_backend_current->mem_info (device, &free_bytes, &total);
          return gm_error_set (GM_ERR_NOMEM, gm_last_error ()->cuda_code,
                               gm_last_error ()->cuda_name,
                               "out of memory: %zu bytes (%s) requested on "
                               "device %d, which has %zu bytes (%s) in use "
                               "by gpumem, %zu bytes free of %zu, %s",
                               nbytes, want, device, in_use, used,
                               free_bytes, total,
                               limit_bytes == SIZE_MAX
                               ? "no limit set" : "under the set limit");
        }
      return status;
    }
  if (stats->allocated_bytes > stats->peak_allocated_bytes)
    stats->peak_allocated_bytes = stats->allocated_bytes;
  stats->allocations++;
  stats->total_allocations++;
  pthread_mutex_unlock (&books_lock);
  return GM_OK;
}

gm_status
gm_mem_free (int device, void *ptr, size_t nbytes, gm_stream *stream)
{
  gm_mem_stats *stats;
  gm_status status = GM_OK;

  if (ptr == NULL && nbytes == 0)
    return GM_OK;
  if (ptr != NULL)
    status = gm_backend_current->free (device, ptr, stream);
  pthread_mutex_lock (&books_lock);
  stats = book (device);
  stats->allocated_bytes -= nbytes;
  stats->allocations--;
  pthread_mutex_unlock (&books_lock);
  return status;
}

gm_status
gm_mem_stats_get (int device, gm_mem_stats *out)
{
  gm_status status = check_device (device);

  if (status != GM_OK)
    return status;
  pthread_mutex_lock (&books_lock);
  *out = *book (device);
  pthread_mutex_unlock (&books_lock);
  return gm_backend_current->reserved (device, &out->reserved_bytes);
}

gm_status
gm_mem_set_limit (int device, size_t limit)
{
  gm_status status = check_device (device);

  if (status != GM_OK)
    return status;
  pthread_mutex_lock (&books_lock);
  book (device)->limit = limit;
  pthread_mutex_unlock (&books_lock);
  return GM_OK;
}

gm_status
gm_mem_empty_cache (int device)
{
  gm_status status = check_device (device);
  size_t reserved;

  if (status != GM_OK)
    return status;
  return gm_backend_current->release_cached (device, &reserved);
}

void
gm_mem_print_stats (void)
{
  int count;

  if (gm_backend_current == NULL)
    return;
  count = gm_backend_current->device_count ();
  fprintf (stderr, "gpumem memory statistics (%s backend):\n",
           gm_backend_current->name);
  fprintf (stderr, "%-6s %14s %14s %14s %10s %10s\n", "device", "allocated",
           "peak", "reserved", "live", "total");
  for (int d = 0; d < count && d < GM_MAX_DEVICES; d++)
    {
      gm_mem_stats stats;
      char now[32], peak[32], reserved[32];

      pthread_mutex_lock (&books_lock);
      stats = *book (d);
      pthread_mutex_unlock (&books_lock);

      stats.reserved_bytes = 0;
      gm_backend_current->reserved (d, &stats.reserved_bytes);
      gm_format_bytes (stats.allocated_bytes, now, sizeof now);
      gm_format_bytes (stats.peak_allocated_bytes, peak, sizeof peak);
      gm_format_bytes (stats.reserved_bytes, reserved, sizeof reserved);
      fprintf (stderr, "%-6d %14s %14s %14s %10zu %10zu\n", d, now, peak,
               reserved, stats.allocations, stats.total_allocations);
    }
}
