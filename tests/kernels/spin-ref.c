/* spin-ref.c -- the CPU reference of spin.cu.  */

/* nanosleep is POSIX, not C11.  */
#define _POSIX_C_SOURCE 200809L

#include "test-kernels.h"

#include <errno.h>
#include <time.h>

/* Sleep MILLISECONDS milliseconds (not at all when MILLISECONDS <= 0),
   then set OUT[0] = 1.  A signal does not cut the sleep short: the
   rest is slept after its handler returns, so that the wait is as long
   as asked whatever signals arrive; a caller that must react to Ctrl-C
   sooner has to run this in another thread.  Cannot fail.  */
void
gm_ref_spin (int64_t milliseconds, int32_t *out)
{
  if (milliseconds > 0)
    {
      struct timespec rest;

      rest.tv_sec = (time_t) (milliseconds / 1000);
      rest.tv_nsec = (long) (milliseconds % 1000) * 1000000L;
      while (nanosleep (&rest, &rest) != 0 && errno == EINTR)
        continue;
    }
  out[0] = 1;
}
