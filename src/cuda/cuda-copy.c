/* cuda-copy.c -- the CUDA backend's copies and memsets: within a
   device, between devices (over their link where mapped), and between
   host memory and a device, pageable memory through cuda-staging.c.
   Ordering, in cuda-backend.c, is the rule every copy without a stream
   keeps.  */

#define _POSIX_C_SOURCE 200809L
#include "config.h"

#include <stdbool.h>

#include <cuda_runtime_api.h>

#include "cuda-internal.h"
#include "cuda-status.h"
#include "cuda-staging.h"

/* Whether small copies to the host take the bounce buffer:
   GPUMEM_SMALL_COPIES (a boolean, read by gm_cuda_copy_init; false
   sends them straight to cudaMemcpy, for comparing the two paths).  */
static bool small_copies = true;

gm_status
gm_cuda_copy_init (void)
{
  return gm_env_bool ("GPUMEM_SMALL_COPIES", true, &small_copies);
}

/* Makes the legacy default stream of DEVICE wait, without blocking
   the host, for the work queued so far on OTHER's legacy default stream,
   and so for all work on OTHER's blocking streams; DEVICE is current on
   return.  */
static gm_status
follow_device (int device, int other)
{
  gm_status status = gm_cuda_use_device (other);
  cudaEvent_t event = NULL;

  if (status != GM_OK)
    return status;
  GM_CUDA_CHECK (cudaEventCreateWithFlags (&event, cudaEventDisableTiming));
  GM_CUDA_CHECK (cudaEventRecord (event, cudaStreamLegacy));
  status = gm_cuda_use_device (device);
  if (status != GM_OK)
    goto done;
  GM_CUDA_CHECK (cudaStreamWaitEvent (cudaStreamLegacy, event, 0));
done:
  /* The wait already enqueued holds what it needs.  */
  if (event != NULL && cudaEventDestroy (event) != cudaSuccess)
    cudaGetLastError ();
  return status;
}

gm_status
gm_cuda_copy (void *dst, int dst_device, const void *src, int src_device,
           size_t nbytes, gm_stream *stream)
{
  gm_status status = GM_OK;
  int device = dst_device >= 0 ? dst_device : src_device;
  cudaStream_t handle = gm_cuda_handle_of (stream);

  GM_CUDA_CHECK_ALIVE ();
  if (nbytes == 0)
    goto done;
  status = gm_cuda_join (dst_device, stream);
  if (status == GM_OK && src_device != dst_device)
    status = gm_cuda_join (src_device, stream);
  if (status != GM_OK)
    goto done;
  if (stream != NULL)
    device = stream->device;
  if (device >= 0)
    {
      status = gm_cuda_use_device (device);
      if (status != GM_OK)
        goto done;
    }
  if (dst_device >= 0 && src_device >= 0 && dst_device != src_device)
    {
      /* Across devices: over the link where the two are mapped to
         each other, else the driver stages the copy through host
         memory.  */
      status = gm_cuda_map_peers ();
      if (status != GM_OK)
        goto done;
      if (stream == NULL)
        status = follow_device (device, device == dst_device ? src_device
                                                             : dst_device);
      else
        status = gm_cuda_use_device (device);
      if (status != GM_OK)
        goto done;
      GM_CUDA_CHECK (cudaMemcpyPeerAsync (dst, dst_device, src, src_device,
                                          nbytes, handle));
      if (stream == NULL)
        GM_CUDA_CHECK (cudaStreamSynchronize (handle));
      goto done;
    }
  if (stream != NULL)
    {
      GM_CUDA_CHECK (cudaMemcpyAsync (dst, src, nbytes, cudaMemcpyDefault,
                                      handle));
      goto done;
    }
  if ((dst_device < 0) != (src_device < 0)
      && gm_staging_pageable (dst_device < 0 ? dst : src))
    {
      /* Pageable host memory: small copies through the bounce buffer,
         large ones through the staging ring, the sizes between to
         cudaMemcpy, which from pageable memory returns before the
         bytes land in the device (see Ordering, cuda-backend.c): a
         synchronize follows it.  The thresholds are measured
         (bench/NOTES.md, "The engine remade for mid sizes").  */
      bool to_device = dst_device >= 0;

      if (nbytes <= GM_SMALL_MAX && small_copies)
        status = gm_staging_small_copy (dst, src, nbytes, device,
                                        gm_cuda_device_count (),
                                        to_device);
      else if (gm_staging_wanted (nbytes))
        status = gm_staging_copy (dst, src, nbytes, device,
                                  gm_cuda_device_count (), to_device);
      else
        {
          GM_CUDA_CHECK (cudaMemcpy (dst, src, nbytes, cudaMemcpyDefault));
          if (to_device)
            GM_CUDA_CHECK (cudaStreamSynchronize (cudaStreamLegacy));
        }
      goto done;
    }
  if (dst_device < 0 && src_device < 0)
    {
      GM_CUDA_CHECK (cudaMemcpy (dst, src, nbytes, cudaMemcpyDefault));
      goto done;
    }
  /* Page-locked host memory, or a copy within one device: queued on the
     legacy stream and waited for, which costs less than cudaMemcpy (5.6
     us against 6.9 for 16 bytes from page-locked memory, and cudaMemcpy
     into device memory needs a synchronize after it too;
     bench/NOTES.md).  */
  GM_CUDA_CHECK (cudaMemcpyAsync (dst, src, nbytes, cudaMemcpyDefault,
                                  cudaStreamLegacy));
  GM_CUDA_CHECK (cudaStreamSynchronize (cudaStreamLegacy));
done:
  return status;
}

gm_status
gm_cuda_copy2d (void *dst, size_t dpitch, int dst_device, const void *src,
             size_t spitch, int src_device, size_t width, size_t height,
             gm_stream *stream)
{
  gm_status status = GM_OK;
  int device = stream != NULL ? stream->device
               : dst_device >= 0 ? dst_device : src_device;

  GM_CUDA_CHECK_ALIVE ();
  if (width == 0 || height == 0)
    goto done;
  status = gm_cuda_join (dst_device, stream);
  if (status == GM_OK && src_device != dst_device)
    status = gm_cuda_join (src_device, stream);
  if (status != GM_OK)
    goto done;
  if (device >= 0)
    {
      status = gm_cuda_use_device (device);
      if (status != GM_OK)
        goto done;
    }
  /* cudaMemcpy2D wants pitches of at least WIDTH; one row has none.  */
  if (height == 1)
    dpitch = spitch = width;
  if (stream == NULL)
    GM_CUDA_CHECK (cudaMemcpy2D (dst, dpitch, src, spitch, width, height,
                                 cudaMemcpyDefault));
  else
    GM_CUDA_CHECK (cudaMemcpy2DAsync (dst, dpitch, src, spitch, width, height,
                                      cudaMemcpyDefault,
                                      gm_cuda_handle_of (stream)));
  /* Into device memory cudaMemcpy2D may return before the bytes land,
     as cudaMemcpy may (see Ordering, cuda-backend.c).  */
  if (stream == NULL && dst_device >= 0)
    GM_CUDA_CHECK (cudaStreamSynchronize (cudaStreamLegacy));
done:
  return status;
}

gm_status
gm_cuda_memset (void *dst, int device, int value, size_t nbytes,
             gm_stream *stream)
{
  gm_status status = gm_cuda_use_device (device);

  if (status == GM_OK && nbytes > 0)
    status = gm_cuda_join (device, stream);
  if (status != GM_OK || nbytes == 0)
    return status;
  GM_CUDA_CHECK (cudaMemsetAsync (dst, value, nbytes,
                                  gm_cuda_handle_of (stream)));
  if (stream == NULL)
    GM_CUDA_CHECK (cudaStreamSynchronize (cudaStreamLegacy));
done:
  return status;
}
