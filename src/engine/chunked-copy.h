/* chunked-copy.h -- a large copy in chunks (chunked-copy.c), so that
   its caller can act between them (answer an interrupt, check that the
   memory may still be used) and let other threads run during each.
   Plain C beneath the Python layer, whose every copy runs through it
   (src/python/py-copy-engine.c).  */

#ifndef GM_CHUNKED_COPY_H
#define GM_CHUNKED_COPY_H

#include "gm.h"

#include <stdbool.h>
#include <stddef.h>

/* A copy without a stream moves in chunks of this size: small enough
   that the caller's step between them runs often, large enough that
   each keeps the copy's pipeline full.  */
#define GM_COPY_CHUNK ((size_t) 256 << 20)

/* What the caller does around the chunks; any member may be NULL.  */
typedef struct gm_copy_step
{
  void *ctx;
  /* Before each chunk but the first, DONE bytes copied: GM_OK goes on,
     any other status stops the copy with it.  */
  gm_status (*between) (void *ctx, size_t done);
  /* Right before and right after the copy of each chunk of N bytes
     (where the caller may let go of its lock and take it back).  */
  void (*leave) (void *ctx, size_t n);
  void (*enter) (void *ctx);
} gm_copy_step;

/* Whether [DST, DST + NBYTES) and [SRC, SRC + NBYTES) overlap.  Device
   addresses are unified with host ones: ranges that overlap are the
   same memory, whatever the devices.  */
bool gm_copy_overlaps (const void *dst, const void *src, size_t nbytes);

/* Copies NBYTES from SRC (of SRC_DEVICE, -1: host memory) to DST (of
   DST_DEVICE) with the backend's copy: on STREAM in one piece (queued
   copies take no time to queue), without one in chunks of
   GM_COPY_CHUNK with STEP (may be NULL) around them.  The first failing
   status, with the bytes before the failed chunk copied.  */
gm_status gm_copy_chunked (void *dst, int dst_device, const void *src,
                           int src_device, size_t nbytes, gm_stream *stream,
                           const gm_copy_step *step);

#endif /* GM_CHUNKED_COPY_H */
