/* gm-env.h -- settings read from the environment (env.c): one parser for
   each kind of value; the files beside gpumem's own code.  */

#ifndef GM_ENV_H
#define GM_ENV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "gm-status.h"

/* Reads the environment variable NAME as a boolean setting into *VALUE
   (env.c, the one parser of every such setting): 1, yes, true or on
   (in any case) are true, 0, no, false or off false; unset or empty
   gives FALLBACK.  Any other value: GM_ERR_VALUE naming the variable,
   its value and the spellings accepted (*VALUE is FALLBACK then).  */
gm_status gm_env_bool (const char *name, bool fallback, bool *value);

/* Reads the environment variable NAME as a size setting into *VALUE
   (env.c, the one parser of every such setting): a whole number of
   decimal digits, alone (bytes, or a count) or followed by one suffix
   K, M or G, or KiB, MiB or GiB (times 1024, 1024^2, 1024^3), in any
   case: "65536", "64K", "64KiB", "16m".  Nothing else: no sign, space,
   point, hex, or kB/MB (ambiguous between 1000 and 1024).  Unset or
   empty gives FALLBACK.  A value outside MIN..MAX, or any other
   spelling: GM_ERR_VALUE naming the variable, its value, the spellings
   accepted and the range (*VALUE is FALLBACK then).  */
gm_status gm_env_size (const char *name, size_t fallback, size_t min,
                       size_t max, size_t *value);
/* Reads the environment variable NAME as a count setting into *VALUE
   (env.c, the one parser of every such setting): decimal digits only
   ("4", "16"); no sign, space, suffix or hex.  Unset or empty gives
   FALLBACK.  A value outside MIN..MAX, or any other spelling:
   GM_ERR_VALUE naming the variable, its value, the spelling accepted
   and the range (*VALUE is FALLBACK then).  */
gm_status gm_env_count (const char *name, size_t fallback, size_t min,
                        size_t max, size_t *value);

/* Reads the environment variable NAME as a duration setting, given in
   seconds, into *MS in milliseconds (env.c, the one parser of every
   such setting): decimal digits, with a decimal point and more digits
   if wanted ("10", "0.5", "2.25"); nothing else: no sign, space,
   exponent, hex or unit.  Unset or empty gives FALLBACK_MS.  A value
   outside MIN_S..MAX_S seconds, or any other spelling: GM_ERR_VALUE
   naming the variable, its value, the spelling accepted and the range
   (*MS is FALLBACK_MS then).  A value above 0 that rounds to 0 ms is
   1 ms.  */
gm_status gm_env_seconds (const char *name, long fallback_ms, long min_s,
                          long max_s, long *ms);

/* The same spellings and range check for a size TEXT from elsewhere (a
   Python argument): *VALUE set on GM_OK only; WHAT names TEXT in the
   error as NAME does above.  */
gm_status gm_size_parse (const char *text, const char *what, size_t min,
                         size_t max, size_t *value);
/* Reads NAME, a switch or a count: a true spelling of gm_env_bool gives
   ON_VALUE, a false one or none 0, a size as gm_env_size reads it (MIN
   to MAX) itself.  GM_ERR_VALUE, naming the variable, for anything
   else.  */
gm_status gm_env_switch_size (const char *name, size_t on_value, size_t min,
                              size_t max, size_t *value);

/* Where gpumem's code was installed, for the files a wheel carries
   beside it: the path RELATIVE names from the folder of the shared
   object that holds this function (the extension module, libgpumem or
   the program), into BUF of SIZE bytes.  True when a file is there;
   false (BUF then empty) when none is, the path does not fit, or the
   object cannot be named.  */
bool gm_env_beside_self (const char *relative, char *buf, size_t size);

#endif /* GM_ENV_H */
