/* host-memory.h -- the host backend's device memory (host-memory.c),
   for its table (host-backend.c) and its sharing (host-share.c).  */

#ifndef GM_HOST_MEMORY_H
#define GM_HOST_MEMORY_H

#include <pthread.h>
#include <stddef.h>

#include "gm.h"

#define GM_HOST_MAX_DEVICES 64

/* Held while a copy, memset or kernel runs (callers may release the GIL
   around those), and taken by free: memory freed from another thread
   waits for the work using it to end, as cudaFreeAsync on the default
   stream waits for the work queued before it.  */
extern pthread_mutex_t gm_host_work_lock;

/* The backend table's malloc, free, reserved and release_cached.  */
gm_status gm_host_malloc (int device, size_t nbytes, gm_stream *stream,
                          void **ptr);
gm_status gm_host_free (int device, void *ptr, size_t nbytes,
                        gm_stream *stream);
gm_status gm_host_reserved (int device, size_t *bytes);
gm_status gm_host_release_cached (int device, size_t *reserved_after);

/* Puts shared memory (a memfd, whose descriptor is *FD) under the
   NBYTES at PTR, a block of gm_host_malloc, keeping its contents and
   its address: from then on every process that maps *FD sees the block,
   and gm_host_free unmaps it as before.  GM_ERR_UNAVAILABLE without
   memfd, GM_ERR_NOMEM.  */
gm_status gm_host_share_in_place (void *ptr, size_t nbytes, int *fd);

/* The backend table's managed memory (host-managed.c): blocks of
   gm_host_malloc; prefetch, discard and advice do nothing.  */
gm_status gm_host_managed_malloc (int device, size_t nbytes,
                                  gm_stream *stream, void **ptr);
gm_status gm_host_managed_free (int device, void *ptr, size_t nbytes,
                                gm_stream *stream);
gm_status gm_host_managed_prefetch (int device, void *const *ptrs,
                                    const size_t *sizes, size_t n,
                                    int location, gm_stream *stream);
gm_status gm_host_managed_discard (int device, void *const *ptrs,
                                   const size_t *sizes, size_t n,
                                   gm_stream *stream);
gm_status gm_host_managed_advise (void *ptr, size_t nbytes, gm_advice advice,
                                  int location);

#endif /* GM_HOST_MEMORY_H */
