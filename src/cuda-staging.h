/* cuda-staging.h -- fast copies between pageable host memory and a
   device, through a ring of page-locked buffers (cuda-staging.c).
   Part of the CUDA backend; nothing else includes it.  */

#ifndef GM_CUDA_STAGING_H
#define GM_CUDA_STAGING_H

#include <stdbool.h>
#include <stddef.h>

#include <cuda_runtime_api.h>

/* Copies smaller than this go to cudaMemcpy directly: at 8 MiB plain
   cudaMemcpy was as fast, at 16 MiB staging was faster (bench/NOTES.md).  */
#define GM_STAGING_MIN ((size_t) 16 << 20)

/* Whether a synchronous copy of NBYTES to or from HOST should be staged:
   large enough, HOST pageable, and staging not turned off
   (GPUMEM_COPY_THREADS=0).  */
bool gm_staging_wanted (const void *host, size_t nbytes);

/* Whether HOST is pageable memory: neither page-locked
   (cudaMallocHost, registered) nor memory CUDA maps otherwise.  Only
   pageable memory gains from staging or a bounce buffer; page-locked
   memory is copied by the DMA engine directly.  */
bool gm_staging_pageable (const void *host);

/* Copies NBYTES from SRC to DST, one of them pageable host memory and
   the other memory of DEVICE (current on the calling thread), TO_DEVICE
   saying which way, on DEVICE's legacy default stream (so after all
   work queued before it on gpumem's streams); returns when the copy is
   complete, and on failure only once none of its chunks still moves.
   DEVICE_COUNT sizes the per-device rings on first use.  A
   cudaError_t.  */
cudaError_t gm_staging_copy (void *dst, const void *src, size_t nbytes,
                             int device, int device_count, bool to_device);

/* Synchronous copies of at most this many bytes go through a
   page-locked bounce buffer (gm_staging_small_copy).  */
#define GM_SMALL_MAX ((size_t) 64 << 10)

/* Copies NBYTES (at most GM_SMALL_MAX) from memory SRC of DEVICE
   (current) to host memory DST, through DEVICE's page-locked bounce
   buffer, ordered on the legacy default stream as cudaMemcpy is;
   complete on return.  (Small copies to the device gain nothing from
   it: backend-cuda.c says why.)  A cudaError_t.  */
cudaError_t gm_staging_small_copy (void *dst, const void *src, size_t nbytes,
                                   int device, int device_count);

/* Stops the copying threads and, if CUDA_USABLE, frees the rings.  */
void gm_staging_shutdown (bool cuda_usable);

#endif /* GM_CUDA_STAGING_H */
