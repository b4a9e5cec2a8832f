/* env.c -- settings read from the environment: one parser for each kind
   of value, so that every variable of a kind accepts the same spellings
   and refuses the rest alike.  */

#define _POSIX_C_SOURCE 200809L
#include "config.h"

#include <stdlib.h>
#include <strings.h>

#include "gm.h"

gm_status
gm_env_bool (const char *name, bool fallback, bool *value)
{
  static const char *const yes[] = {"1", "yes", "true", "on"};
  static const char *const no[] = {"0", "no", "false", "off"};
  const char *text = getenv (name);

  *value = fallback;
  if (text == NULL || *text == '\0')
    return GM_OK;
  for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++)
    if (strcasecmp (text, yes[i]) == 0)
      {
        *value = true;
        return GM_OK;
      }
  for (size_t i = 0; i < sizeof no / sizeof no[0]; i++)
    if (strcasecmp (text, no[i]) == 0)
      {
        *value = false;
        return GM_OK;
      }
  return gm_error_set (GM_ERR_VALUE, 0, NULL,
                       "%s='%s' is neither true (1, yes, true, on) nor false "
                       "(0, no, false, off)", name, text);
}
