/* chunked-copy.c -- a large copy in chunks (chunked-copy.h).  */

#include "config.h"

#include "chunked-copy.h"

#include <stdint.h>

bool
gm_copy_overlaps (const void *dst, const void *src, size_t nbytes)
{
  return nbytes > 0 && (uintptr_t) dst < (uintptr_t) src + nbytes
         && (uintptr_t) src < (uintptr_t) dst + nbytes;
}

gm_status
gm_copy_chunked (void *dst, int dst_device, const void *src, int src_device,
                 size_t nbytes, gm_stream *stream, const gm_copy_step *step)
{
  size_t chunk = stream != NULL ? nbytes : GM_COPY_CHUNK;
  size_t done = 0;

  do
    {
      size_t n = nbytes - done < chunk ? nbytes - done : chunk;
      gm_status status;

      if (done > 0 && step != NULL && step->between != NULL)
        {
          status = step->between (step->ctx, done);
          if (status != GM_OK)
            return status;
        }
      if (step != NULL && step->leave != NULL)
        step->leave (step->ctx, n);
      status = gm_backend_current->copy ((char *) dst + done, dst_device,
                                         (const char *) src + done,
                                         src_device, n, stream);
      if (step != NULL && step->enter != NULL)
        step->enter (step->ctx);
      if (status != GM_OK)
        return status;
      done += n;
    }
  while (done < nbytes);
  return GM_OK;
}
