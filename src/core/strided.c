/* strided.c -- copies between strided layouts, composed from the
   backend's copy and copy2d.

   A layout is a start address and, per dimension, a stride in bytes
   (negative for a reversed axis).  Dimensions of length 1 are dropped
   and neighbours that are contiguous in both layouts merged; what is
   left becomes rows of copy2d (the innermost one or two dimensions) and
   an outer loop over the remaining dimensions, one backend call per
   iteration.  Plain C: no Python, no CUDA headers.  */

#include "config.h"
#include "gm.h"

#include <stdint.h>

/* cudaMemcpy2D refuses pitches past its maximum (2^31 - 1 on current
   devices); larger ones make their dimension a loop dimension.  */
#define PITCH_MAX INT32_MAX

gm_status
gm_strided_plan (int ndim, const int64_t *shape, size_t itemsize,
                 const int64_t *dst_strides, const int64_t *src_strides,
                 gm_copy_plan *plan)
{
  int n = 0;

  if (ndim < 0 || ndim > GM_MAX_NDIM || itemsize == 0)
    return gm_error_set (GM_ERR_VALUE, 0, NULL, "strided copy of %d "
                         "dimensions of %zu-byte items", ndim, itemsize);
  plan->empty = false;
  for (int i = 0; i < ndim; i++)
    {
      if (shape[i] == 0)
        plan->empty = true;
      if (shape[i] <= 1)
        continue;
      /* Merge into the previous dimension when both layouts step over
         this whole dimension to reach the previous one's next index.  */
      if (n > 0 && plan->dst[n - 1] == dst_strides[i] * shape[i]
          && plan->src[n - 1] == src_strides[i] * shape[i])
        {
          plan->dims[n - 1] *= shape[i];
          plan->dst[n - 1] = dst_strides[i];
          plan->src[n - 1] = src_strides[i];
          continue;
        }
      plan->dims[n] = shape[i];
      plan->dst[n] = dst_strides[i];
      plan->src[n] = src_strides[i];
      n++;
    }
  plan->width = itemsize;
  plan->height = 1;
  plan->dpitch = plan->spitch = 0;
  plan->nloop = n;
  /* Innermost dimension contiguous in both: whole rows.  */
  if (n > 0 && plan->dst[n - 1] == (int64_t) itemsize
      && plan->src[n - 1] == (int64_t) itemsize)
    {
      plan->width = (size_t) plan->dims[n - 1] * itemsize;
      plan->nloop = --n;
    }
  /* The next dimension inward becomes copy2d's rows, when its pitches
     are positive, no smaller than a row and not too large.  */
  if (n > 0 && plan->dst[n - 1] >= (int64_t) plan->width
      && plan->src[n - 1] >= (int64_t) plan->width
      && plan->dst[n - 1] <= PITCH_MAX && plan->src[n - 1] <= PITCH_MAX)
    {
      plan->height = plan->dims[n - 1];
      plan->dpitch = plan->dst[n - 1];
      plan->spitch = plan->src[n - 1];
      plan->nloop = n - 1;
    }
  plan->calls = 1;
  for (int i = 0; i < plan->nloop; i++)
    plan->calls = plan->calls > INT64_MAX / plan->dims[i]
                    ? INT64_MAX : plan->calls * plan->dims[i];
  if (plan->empty)
    plan->calls = 0;
  return GM_OK;
}

gm_status
gm_strided_copy (const gm_copy_plan *plan, char *dst, int dst_device,
                 const char *src, int src_device, gm_stream *stream)
{
  const gm_backend *backend = gm_backend_current;
  int64_t index[GM_MAX_NDIM] = {0};
  gm_status status = GM_OK;

  if (plan->empty)
    return GM_OK;
  if (dst_device >= 0 && src_device >= 0 && dst_device != src_device)
    return gm_error_set (GM_ERR_VALUE, 0, NULL, "a strided copy between "
                         "devices %d and %d must be staged", src_device,
                         dst_device);
  for (;;)
    {
      int64_t dst_off = 0, src_off = 0;
      int i;

      for (i = 0; i < plan->nloop; i++)
        {
          dst_off += index[i] * plan->dst[i];
          src_off += index[i] * plan->src[i];
        }
      if (plan->height == 1)
        status = backend->copy (dst + dst_off, dst_device, src + src_off,
                                src_device, plan->width, stream);
      else
        status = backend->copy2d (dst + dst_off, (size_t) plan->dpitch,
                                  dst_device, src + src_off,
                                  (size_t) plan->spitch, src_device,
                                  plan->width, (size_t) plan->height, stream);
      if (status != GM_OK)
        return status;
      /* The next index of the outer loop, last dimension fastest.  */
      for (i = plan->nloop - 1; i >= 0; i--)
        {
          if (++index[i] < plan->dims[i])
            break;
          index[i] = 0;
        }
      if (i < 0)
        return GM_OK;
    }
}
