/* comm-watchdog.c -- ends the job when a collective waits too long
   (comm-watchdog.h).

   The job layer arms it around each collective with the time it started;
   the watchdog's thread wakes every 50 ms and, when the armed collective
   has waited longer than the timeout, hands a message to the job
   layer's expire function, which ends the whole job (MPI_Abort).  MPI
   calls block without a timeout of their own; this is how they get one,
   at the cost of two atomic stores a collective.  */

#define _POSIX_C_SOURCE 200809L
#include "config.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>

#include "gm.h"
#include "comm-watchdog.h"

#define WATCHDOG_PERIOD_MS 50

static long watchdog_timeout_ms;
static gm_watchdog_expire_fn watchdog_expire;
/* When the armed collective started (ms on CLOCK_MONOTONIC); 0 when
   none is armed.  */
static _Atomic long long armed_since;
static const char *_Atomic armed_name;

static long long
now_ms (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (long long) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void *
watch (void *unused)
{
  struct timespec period = {0, WATCHDOG_PERIOD_MS * 1000000L};

  (void) unused;
  for (;;)
    {
      long long since = atomic_load (&armed_since);
      if (since != 0 && now_ms () - since > watchdog_timeout_ms)
        {
          char message[256];
          const char *name = atomic_load (&armed_name);
          snprintf (message, sizeof message,
                    "gpumem.comm.%s waited more than %.3g s for the other "
                    "ranks (GPUMEM_COMM_TIMEOUT): one of them stopped, "
                    "died or called another collective",
                    name != NULL ? name : "?",
                    (double) watchdog_timeout_ms / 1e3);
          watchdog_expire (message);
        }
      nanosleep (&period, NULL);
    }
  return NULL;
}

gm_status
gm_comm_watchdog_start (long timeout_ms, gm_watchdog_expire_fn expire)
{
  pthread_t thread;
  pthread_attr_t attr;
  int failed;

  if (timeout_ms <= 0)
    return GM_OK;
  watchdog_timeout_ms = timeout_ms;
  watchdog_expire = expire;
  pthread_attr_init (&attr);
  pthread_attr_setdetachstate (&attr, PTHREAD_CREATE_DETACHED);
  failed = pthread_create (&thread, &attr, watch, NULL);
  pthread_attr_destroy (&attr);
  if (failed)
    return gm_error_set (GM_ERR_UNAVAILABLE, 0, NULL,
                         "cannot start the collectives' watchdog thread");
  return GM_OK;
}

void
gm_comm_watchdog_arm (const char *name)
{
  atomic_store (&armed_name, name);
  atomic_store (&armed_since, now_ms ());
}

void
gm_comm_watchdog_disarm (void)
{
  atomic_store (&armed_since, 0);
}
