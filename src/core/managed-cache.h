/* managed-cache.h -- freed blocks of managed memory kept for the next
   request of their size (managed-cache.c): gm_mem_alloc_managed and
   gm_mem_free_managed go through it, so that a program that makes and
   frees managed arrays of a few sizes asks the backend once a size.
   Plain C over the backend's managed_malloc and managed_free;
   thread-safe.  */

#ifndef GM_MANAGED_CACHE_H
#define GM_MANAGED_CACHE_H

#include <stdbool.h>
#include <stddef.h>

#include "gm.h"

/* NBYTES of managed memory whose home is DEVICE in *PTR: a kept block
   of exactly NBYTES where the request is in the legacy default
   stream's order (STREAM NULL), else the backend's.  */
gm_status gm_managed_cache_get (int device, size_t nbytes, gm_stream *stream,
                                void **ptr);
/* Ends PTR (NBYTES, from gm_managed_cache_get on DEVICE): kept where it
   may serve a later request as a new block would (REUSABLE: no advice
   was given on it; freed in the legacy stream's order, STREAM NULL; no
   larger than a kept block may be, and room left), else given back to
   the backend.  */
gm_status gm_managed_cache_put (int device, void *ptr, size_t nbytes,
                                gm_stream *stream, bool reusable);
/* Gives DEVICE's kept blocks back to the backend (every device's for
   -1): empty_cache and an allocation the device refused (memory.c's
   release_idle), the backend's end.  */
gm_status gm_managed_cache_release (int device);
/* The bytes DEVICE's kept blocks hold.  */
size_t gm_managed_cache_bytes (int device);

#endif /* GM_MANAGED_CACHE_H */
