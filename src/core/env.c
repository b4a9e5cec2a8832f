/* env.c -- settings read from the environment: one parser for each kind
   of value, so that every variable of a kind accepts the same spellings
   and refuses the rest alike; and the files found beside gpumem's own
   code, where a wheel puts them.  */

#define _GNU_SOURCE
#include "config.h"

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

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

gm_status
gm_size_parse (const char *text, const char *what, size_t min, size_t max,
               size_t *value)
{
  static const struct
  {
    const char *suffix;
    unsigned shift;
  } units[] = {{"", 0}, {"k", 10}, {"kib", 10}, {"m", 20}, {"mib", 20},
               {"g", 30}, {"gib", 30}};
  const char *p;
  uint64_t n = 0;
  bool overflow = false;

  for (p = text; *p >= '0' && *p <= '9'; p++)
    overflow |= __builtin_mul_overflow (n, 10, &n)
                || __builtin_add_overflow (n, (uint64_t) (*p - '0'), &n);
  if (p == text)
    goto bad;
  for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
    if (strcasecmp (p, units[i].suffix) == 0)
      {
        overflow |= n > (UINT64_MAX >> units[i].shift);
        n <<= units[i].shift;
        if (overflow || n < min || n > max)
          return gm_error_set (GM_ERR_VALUE, 0, NULL, "%s='%s' is out of "
                               "range: give %zu to %zu", what, text, min,
                               max);
        *value = (size_t) n;
        return GM_OK;
      }
bad:
  return gm_error_set (GM_ERR_VALUE, 0, NULL, "%s='%s' is not a size: give "
                       "digits, alone or followed by K, M or G (KiB, MiB, "
                       "GiB), from %zu to %zu", what, text, min, max);
}

gm_status
gm_env_size (const char *name, size_t fallback, size_t min, size_t max,
             size_t *value)
{
  const char *text = getenv (name);
  gm_status status;

  *value = fallback;
  if (text == NULL || *text == '\0')
    return GM_OK;
  status = gm_size_parse (text, name, min, max, value);
  if (status != GM_OK)
    *value = fallback;
  return status;
}

gm_status
gm_env_count (const char *name, size_t fallback, size_t min, size_t max,
              size_t *value)
{
  const char *text = getenv (name), *p;
  uint64_t n = 0;
  bool overflow = false;

  *value = fallback;
  if (text == NULL || *text == '\0')
    return GM_OK;
  for (p = text; *p >= '0' && *p <= '9'; p++)
    overflow |= __builtin_mul_overflow (n, 10, &n)
                || __builtin_add_overflow (n, (uint64_t) (*p - '0'), &n);
  if (p == text || *p != '\0')
    return gm_error_set (GM_ERR_VALUE, 0, NULL, "%s='%s' is not a count: "
                         "give digits only, from %zu to %zu", name, text,
                         min, max);
  if (overflow || n < min || n > max)
    return gm_error_set (GM_ERR_VALUE, 0, NULL, "%s='%s' is out of range: "
                         "give %zu to %zu", name, text, min, max);
  *value = (size_t) n;
  return GM_OK;
}

gm_status
gm_env_seconds (const char *name, long fallback_ms, long min_s, long max_s,
                long *ms)
{
  const char *text = getenv (name), *p;
  uint64_t whole = 0, thousandths = 0, scale = 100;
  bool overflow = false, fraction_rest = false;

  *ms = fallback_ms;
  if (text == NULL || *text == '\0')
    return GM_OK;
  for (p = text; *p >= '0' && *p <= '9'; p++)
    overflow |= __builtin_mul_overflow (whole, 10, &whole)
                || __builtin_add_overflow (whole, (uint64_t) (*p - '0'),
                                           &whole);
  if (p == text)
    goto bad;
  if (*p == '.')
    {
      const char *digits = ++p;
      for (; *p >= '0' && *p <= '9'; p++)
        {
          thousandths += (uint64_t) (*p - '0') * scale;
          fraction_rest |= scale == 0 && *p != '0';
          scale /= 10;
        }
      if (p == digits)
        goto bad;
    }
  if (*p != '\0')
    goto bad;
  if (overflow || whole > (uint64_t) max_s
      || (whole == (uint64_t) max_s && (thousandths > 0 || fraction_rest))
      || whole < (uint64_t) min_s)
    return gm_error_set (GM_ERR_VALUE, 0, NULL, "%s='%s' is out of range: "
                         "give %ld to %ld seconds", name, text, min_s, max_s);
  *ms = (long) (whole * 1000 + thousandths);
  if (*ms == 0 && (thousandths > 0 || fraction_rest))
    *ms = 1;
  return GM_OK;
bad:
  return gm_error_set (GM_ERR_VALUE, 0, NULL, "%s='%s' is not a number of "
                       "seconds: give digits, a decimal point allowed "
                       "(10, 0.5), from %ld to %ld", name, text, min_s,
                       max_s);
}

gm_status
gm_env_switch_size (const char *name, size_t on_value, size_t min, size_t max,
                    size_t *value)
{
  bool on;

  *value = 0;
  if (gm_env_bool (name, false, &on) == GM_OK)
    {
      *value = on ? on_value : 0;
      return GM_OK;
    }
  if (gm_env_size (name, 0, min, max, value) == GM_OK)
    return GM_OK;
  return gm_error_set (GM_ERR_VALUE, 0, NULL, "%s='%s' is neither a switch "
                       "(1, yes, true, on; 0, no, false, off) nor a count "
                       "from %zu to %zu", name, getenv (name), min, max);
}

bool
gm_env_beside_self (const char *relative, char *buf, size_t size)
{
  Dl_info info;
  const char *slash, *self;
  char exe[4096];
  ssize_t n;
  int length;

  if (size > 0)
    buf[0] = '\0';
  if (dladdr ((void *) gm_env_beside_self, &info) == 0
      || info.dli_fname == NULL)
    return false;
  self = info.dli_fname;
  /* The program itself is named as it was started ("./src/gpumem"),
     which a chdir () since makes wrong: the kernel's name for it is
     absolute.  */
  if (self[0] != '/'
      && (n = readlink ("/proc/self/exe", exe, sizeof exe - 1)) > 0)
    {
      exe[n] = '\0';
      self = exe;
    }
  if ((slash = strrchr (self, '/')) == NULL)
    return false;
  length = snprintf (buf, size, "%.*s/%s", (int) (slash - self), self,
                     relative);
  if (length < 0 || (size_t) length >= size || access (buf, F_OK) != 0)
    {
      if (size > 0)
        buf[0] = '\0';
      return false;
    }
  return true;
}
