/* error.c -- the error record every layer uses: the calling thread's last
   failure, set by gm_error_set and read by gm_last_error (gm.h).  Plain
   C, no backend: the fuzz targets link it alone.  */

#include "config.h"

#include <stdarg.h>
#include <stdio.h>

#include "gm.h"

static _Thread_local gm_error last_error;

gm_status
gm_error_set (gm_status status, int cuda_code, const char *cuda_name,
              const char *fmt, ...)
{
  va_list ap;

  last_error.status = status;
  last_error.cuda_code = cuda_code;
  snprintf (last_error.cuda_name, sizeof last_error.cuda_name, "%s",
            cuda_name ? cuda_name : "");
  va_start (ap, fmt);
  vsnprintf (last_error.message, sizeof last_error.message, fmt, ap);
  va_end (ap);
  return status;
}

const gm_error *
gm_last_error (void)
{
  return &last_error;
}
