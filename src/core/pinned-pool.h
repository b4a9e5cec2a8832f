/* pinned-pool.h -- the caching pool of page-locked host memory
   (pinned-pool.c): pinned_empty's buffers and the engines' staging
   (the concurrent queue's bounce buffers, a graph's arenas) come from
   it, its books (reserved, allocated, peak, limit) are its own, and
   empty_cache gives what it keeps back.  Plain C over the backend's
   host_alloc and host_free; thread-safe.  */

#ifndef GM_PINNED_POOL_H
#define GM_PINNED_POOL_H

#include <stddef.h>

#include "gm.h"

/* The pool's books.  RESERVED_BYTES: page-locked memory the pool holds
   (in use and cached); ALLOCATED_BYTES: of it, in use (a request counts
   as the size class it was served from, gm_pinned_size).  */
typedef struct gm_pinned_stats
{
  size_t reserved_bytes;
  size_t allocated_bytes;
  size_t peak_allocated_bytes;
  size_t allocations;          /* live */
  size_t total_allocations;
  size_t cache_hits;           /* of TOTAL_ALLOCATIONS, served cached */
  size_t limit;                /* of RESERVED_BYTES; SIZE_MAX: none */
} gm_pinned_stats;

/* The bytes the pool takes for a request of NBYTES: a power of two of
   4 KiB to 1 MiB, a multiple of 1 MiB above; 0 for a size past any
   class.  */
size_t gm_pinned_size (size_t nbytes);

/* At least NBYTES of page-locked memory in *PTR: a cached block of the
   same size class, else a new one (the cache given back once first
   when the backend or the limit refuses).  GM_ERR_HOST_NOMEM when the
   limit or the host refuses, naming the request, the pool's figures
   and the limit.  */
gm_status gm_pinned_alloc (size_t nbytes, void **ptr);
/* Gives PTR (from gm_pinned_alloc) back to the pool's cache; nothing
   for NULL.  */
void gm_pinned_free (void *ptr);
/* Frees every cached block (empty_cache; the backend's end).  */
void gm_pinned_release_cached (void);
void gm_pinned_stats_get (gm_pinned_stats *stats);
/* Sets the limit of RESERVED_BYTES (SIZE_MAX: none); cached blocks are
   given back while the pool holds more.  */
void gm_pinned_set_limit (size_t limit);

#endif /* GM_PINNED_POOL_H */
