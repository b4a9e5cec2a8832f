/* host-managed.c -- the host backend's managed memory.  Its devices'
   memory is host memory already, so a managed block is a block of
   host-memory.c like any other, and prefetching, discarding and advice
   have nothing to do: the Python layer has checked their arguments, as
   it does for the CUDA backend, before they get here.  */

#include "config.h"

#include "host-memory.h"

gm_status
gm_host_managed_malloc (int device, size_t nbytes, gm_stream *stream,
                        void **ptr)
{
  return gm_host_malloc (device, nbytes, stream, ptr);
}

gm_status
gm_host_managed_free (int device, void *ptr, size_t nbytes, gm_stream *stream)
{
  return gm_host_free (device, ptr, nbytes, stream);
}

gm_status
gm_host_managed_prefetch (int device, void *const *ptrs, const size_t *sizes,
                          size_t n, int location, gm_stream *stream)
{
  (void) device, (void) ptrs, (void) sizes, (void) n, (void) location;
  (void) stream;
  return GM_OK;
}

gm_status
gm_host_managed_discard (int device, void *const *ptrs, const size_t *sizes,
                         size_t n, gm_stream *stream)
{
  (void) device, (void) ptrs, (void) sizes, (void) n, (void) stream;
  return GM_OK;
}

gm_status
gm_host_managed_advise (void *ptr, size_t nbytes, gm_advice advice,
                        int location)
{
  (void) ptr, (void) nbytes, (void) advice, (void) location;
  return GM_OK;
}
