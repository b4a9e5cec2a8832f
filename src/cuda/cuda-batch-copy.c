/* cuda-batch-copy.c -- uploads from pageable host memory as one
   cudaMemcpyBatchAsync (CUDA 12.8 and later): the alternative to the
   staging ring that GPUMEM_COPY_BATCH chooses (cuda-staging.c), kept
   beside it to be measured against it (bench/NOTES.md, "The
   pageable-copy engine").  */

#include "config.h"

#include <string.h>

#include <cuda_runtime_api.h>

#include "cuda-staging.h"

#if CUDART_VERSION >= 12080

/* The most copies one batch holds.  */
#define BATCH_MOST 64

cudaError_t
gm_batch_upload (void *dst, const void *src, size_t nbytes, size_t chunk,
                 int device, cudaStream_t *stream, cudaEvent_t *mark)
{
  void *dsts[BATCH_MOST];
  const void *srcs[BATCH_MOST];
  size_t sizes[BATCH_MOST], first = 0, n;
  struct cudaMemcpyAttributes attr;
  cudaError_t err = cudaSuccess, waited;

  if (chunk < (nbytes + BATCH_MOST - 1) / BATCH_MOST)
    chunk = (nbytes + BATCH_MOST - 1) / BATCH_MOST;
  n = (nbytes + chunk - 1) / chunk;
  for (size_t i = 0; i < n; i++)
    {
      size_t off = i * chunk;
      dsts[i] = (char *) dst + off;
      srcs[i] = (const char *) src + off;
      sizes[i] = nbytes - off < chunk ? nbytes - off : chunk;
    }
  memset (&attr, 0, sizeof attr);
  attr.srcAccessOrder = cudaMemcpySrcAccessOrderAny;
  attr.srcLocHint.type = cudaMemLocationTypeHost;
  attr.dstLocHint.type = cudaMemLocationTypeDevice;
  attr.dstLocHint.id = device;
  if (*stream == NULL)
    err = cudaStreamCreateWithFlags (stream, cudaStreamNonBlocking);
  if (err == cudaSuccess && *mark == NULL)
    err = cudaEventCreateWithFlags (mark, cudaEventDisableTiming);
  if (err != cudaSuccess)
    return err;
  err = cudaEventRecord (*mark, cudaStreamLegacy);
  if (err == cudaSuccess)
    err = cudaStreamWaitEvent (*stream, *mark, 0);
#if CUDART_VERSION >= 13000
  if (err == cudaSuccess)
    err = cudaMemcpyBatchAsync (dsts, srcs, sizes, n, &attr, &first, 1,
                                *stream);
#else
  size_t failed;
  if (err == cudaSuccess)
    err = cudaMemcpyBatchAsync (dsts, (void **) srcs, sizes, n, &attr,
                                &first, 1, &failed, *stream);
#endif
  /* Whatever was queued lands before the caller may reuse its memory.  */
  waited = cudaStreamSynchronize (*stream);
  return err != cudaSuccess ? err : waited;
}

#endif /* CUDART_VERSION >= 12080 */
