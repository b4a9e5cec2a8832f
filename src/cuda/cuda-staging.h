/* cuda-staging.h -- fast copies between pageable host memory and a
   device, through a ring of page-locked buffers (cuda-staging.c).
   Part of the CUDA backend; nothing else includes it.  */

#ifndef GM_CUDA_STAGING_H
#define GM_CUDA_STAGING_H

#include <stdbool.h>
#include <stddef.h>

#include <cuda_runtime_api.h>

#include "gm.h"

/* Copies between pageable memory and a device from this size on are
   staged (GPUMEM_COPY_MIN overrides it): the smallest size at which a
   staged copy beats one cudaMemcpy both ways on the H200 machines
   (128 KiB: 1.1x-1.3x to the device, 1.2x-1.6x to the host; 64 KiB:
   no gain).  The measurements: bench/NOTES.md, "The pageable-copy
   engine".  */
#define GM_STAGING_MIN ((size_t) 128 << 10)

/* Whether a synchronous copy of NBYTES between pageable host memory and
   a device should be staged: large enough, and staging not turned off
   (GPUMEM_COPY_THREADS=0).  */
bool gm_staging_wanted (size_t nbytes);

/* Whether HOST is pageable memory: neither page-locked
   (cudaMallocHost, registered) nor memory CUDA maps otherwise.  Only
   pageable memory gains from staging or a bounce buffer; page-locked
   memory is copied by the DMA engine directly.  The blocks gpumem
   page-locked itself (pinned-ranges.h) are answered without asking
   CUDA.  */
bool gm_staging_pageable (const void *host);

/* Copies NBYTES from SRC to DST, one of them pageable host memory and
   the other memory of DEVICE (current on the calling thread), TO_DEVICE
   saying which way, on DEVICE's legacy default stream (so after all
   work queued before it on gpumem's streams); returns when the copy is
   complete, and on failure only once none of its chunks still moves.
   DEVICE_COUNT sizes the per-device rings on first use.  GM_OK, or
   the status gm_cuda_status makes of the first CUDA error.  */
gm_status gm_staging_copy (void *dst, const void *src, size_t nbytes,
                             int device, int device_count, bool to_device);

/* Synchronous copies of at most this many bytes between pageable
   memory and a device go through a page-locked bounce buffer
   (gm_staging_small_copy).  */
#define GM_SMALL_MAX ((size_t) 64 << 10)

/* Copies NBYTES (at most GM_SMALL_MAX) between pageable host memory and
   memory of DEVICE (current), TO_DEVICE saying which way, through
   DEVICE's page-locked bounce buffer, on the legacy default stream as
   cudaMemcpy would; complete on return (the DMA engine's own path is
   shorter than the driver's pageable one, and cudaMemcpy into a device
   returns before the bytes land).  GM_OK, or the status gm_cuda_status
   makes of the first CUDA error.  */
gm_status gm_staging_small_copy (void *dst, const void *src, size_t nbytes,
                                 int device, int device_count,
                                 bool to_device);

#if CUDART_VERSION >= 12080
/* Copies NBYTES from pageable SRC to DST on DEVICE (current) as one
   cudaMemcpyBatchAsync of chunks of CHUNK bytes (fewer, larger ones
   where that would make more than 64), the source read in any order and
   perhaps after the call returns (the attribute for memory CUDA did not
   allocate), on *STREAM (the batch API refuses the legacy stream; made
   at first use, non-blocking), which first waits for *MARK recorded on
   the legacy stream (made at first use): so the copy starts after the
   work queued before on gpumem's streams, as the ring's do.  Complete
   on return, also after an error.  cudaSuccess or the first error
   (cuda-batch-copy.c).  */
cudaError_t gm_batch_upload (void *dst, const void *src, size_t nbytes,
                             size_t chunk, int device, cudaStream_t *stream,
                             cudaEvent_t *mark);
#endif

/* Reads GPUMEM_COPY_THREADS, GPUMEM_COPY_CHUNK, GPUMEM_COPY_MIN and
   GPUMEM_COPY_BATCH (gm_env_size): GM_OK, or GM_ERR_VALUE with the
   error set for a value that is not a size in range, or a
   GPUMEM_COPY_BATCH that this build's CUDA cannot honour.  Called by
   the backend's init, before any copy.  */
gm_status gm_staging_init (void);

/* Stops the copying threads and, if CUDA_USABLE, frees the rings.  */
void gm_staging_shutdown (bool cuda_usable);

#endif /* GM_CUDA_STAGING_H */
