/* share-settings.c -- the settings of sharing, read once, that the
   producer's server, its books and the consumer all follow: whom this
   process shares with (GPUMEM_SHARE_ALLOW) and how long it waits for a
   peer (GPUMEM_SHARE_TIMEOUT).  Plain C.  */

#define _GNU_SOURCE
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "share.h"

/* GPUMEM_SHARE_ALLOW, read once: the users this process shares with,
   either way, besides its own and root.  */
static pthread_once_t settings_once = PTHREAD_ONCE_INIT;
static uint32_t allowed[GM_IPC_MAX_ALLOW];
static size_t nallowed;
static char allow_error[256];
static long timeout_ms;
static char timeout_error[GM_ERROR_MESSAGE_MAX];

/* Reads the user NAME (a number or a user name) into *UID.  */
static bool
parse_user (const char *name, uint32_t *uid)
{
  struct passwd entry, *found = NULL;
  char buf[1024], *end;
  unsigned long value;

  if (isdigit ((unsigned char) name[0]))
    {
      errno = 0;
      value = strtoul (name, &end, 10);
      if (*end != '\0' || errno != 0 || value > UINT32_MAX - 1)
        return false;
      *uid = (uint32_t) value;
      return true;
    }
  if (getpwnam_r (name, &entry, buf, sizeof buf, &found) != 0
      || found == NULL)
    return false;
  *uid = (uint32_t) found->pw_uid;
  return true;
}

/* The one parser of GPUMEM_SHARE_ALLOW (a comma-separated list of user
   names and uids, at most GM_IPC_MAX_ALLOW) and GPUMEM_SHARE_TIMEOUT
   (seconds as gm_env_seconds reads them, 1 to 3600, default 10).  What
   is wrong with either is kept in words, for every call that needs it
   to fail alike.  */
static void
read_settings (void)
{
  const char *value = getenv ("GPUMEM_SHARE_ALLOW");
  char list[1024], *item, *save = NULL;

  if (gm_env_seconds ("GPUMEM_SHARE_TIMEOUT", 10000, 1, 3600, &timeout_ms)
      != GM_OK)
    snprintf (timeout_error, sizeof timeout_error, "%s",
              gm_last_error ()->message);
  if (value == NULL || value[0] == '\0')
    return;
  if (strlen (value) >= sizeof list)
    {
      snprintf (allow_error, sizeof allow_error, "GPUMEM_SHARE_ALLOW is "
                "too long");
      return;
    }
  strcpy (list, value);
  for (item = strtok_r (list, ",", &save); item != NULL;
       item = strtok_r (NULL, ",", &save))
    {
      uint32_t uid;
      if (nallowed == GM_IPC_MAX_ALLOW)
        {
          snprintf (allow_error, sizeof allow_error, "GPUMEM_SHARE_ALLOW "
                    "names more than %d users", GM_IPC_MAX_ALLOW);
          return;
        }
      if (!parse_user (item, &uid))
        {
          snprintf (allow_error, sizeof allow_error, "GPUMEM_SHARE_ALLOW: "
                    "'%.60s' is neither a user of this system nor a uid "
                    "(a comma-separated list of them is expected)", item);
          return;
        }
      allowed[nallowed++] = uid;
    }
}

gm_status
gm_ipc_trusted (uint32_t uid, bool *trusted)
{
  pthread_once (&settings_once, read_settings);
  *trusted = false;
  if (allow_error[0] != '\0')
    return gm_error_set (GM_ERR_FAILED, 0, NULL, "%s", allow_error);
  if (uid == (uint32_t) geteuid () || uid == 0)
    *trusted = true;
  for (size_t i = 0; i < nallowed; i++)
    if (allowed[i] == uid)
      *trusted = true;
  return GM_OK;
}

gm_status
gm_ipc_timeout_ms (int *ms)
{
  pthread_once (&settings_once, read_settings);
  if (timeout_error[0] != '\0')
    return gm_error_set (GM_ERR_FAILED, 0, NULL, "%s", timeout_error);
  *ms = (int) timeout_ms;
  return GM_OK;
}
