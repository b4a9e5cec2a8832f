/* comm-watchdog.h -- a thread that ends the job when a collective waits
   longer than GPUMEM_COMM_TIMEOUT, so that a rank that stopped, died or
   called another collective cannot leave the others waiting for ever.
   No MPI here: the job layer gives the function that ends the job.  */

#ifndef GM_COMM_WATCHDOG_H
#define GM_COMM_WATCHDOG_H

#include "gm.h"

/* Called on the watchdog's thread with a message naming the collective
   that waited too long; ends the job and does not return.  */
typedef void (*gm_watchdog_expire_fn) (const char *message);

/* Starts the watchdog thread, which looks every 50 ms whether the armed
   collective has waited more than TIMEOUT_MS (0: never start).  GM_OK,
   or GM_ERR_UNAVAILABLE when no thread can be made.  */
gm_status gm_comm_watchdog_start (long timeout_ms,
                                  gm_watchdog_expire_fn expire);

/* Arms the watchdog for the collective NAME ("allreduce") from now, and
   disarms it.  Cheap (two atomic stores): called around every
   collective.  */
void gm_comm_watchdog_arm (const char *name);
void gm_comm_watchdog_disarm (void);

#endif /* GM_COMM_WATCHDOG_H */
