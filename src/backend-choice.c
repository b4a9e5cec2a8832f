/* backend-choice.c -- choosing the backend at start: the one file that
   names both backends' tables, above src/cuda and src/host and below
   the layers that start gpumem (src/app, src/python).  */

#include "config.h"

#include <stdio.h>

#include "gm.h"
#include "nvtx.h"

/* The notice of the last fallback to the host backend; empty when the
   backend was chosen without one.  */
static char fallback_notice[GM_ERROR_MESSAGE_MAX + 64];
/* Why the backend in use was chosen (gm_backend_reason).  */
static const char *choice_reason = "";

const char *
gm_backend_notice (void)
{
  return fallback_notice[0] != '\0' ? fallback_notice : NULL;
}

const char *
gm_backend_reason (void)
{
  return fallback_notice[0] != '\0' ? fallback_notice : choice_reason;
}

void
gm_backend_cuda_versions (int *driver, int *runtime)
{
#ifdef GM_HAVE_CUDA
  gm_backend_cuda.versions (driver, runtime);
#else
  *driver = 0;
  *runtime = 0;
#endif
}

static gm_status
use (const gm_backend *backend)
{
  gm_status status = backend->init ();

  if (status == GM_OK)
    gm_backend_current = backend;
  return status;
}

gm_status
gm_backend_init (gm_backend_choice choice, bool quiet)
{
  fallback_notice[0] = '\0';
  choice_reason = choice == GM_BACKEND_AUTO
                  ? "auto (the default): a CUDA device answered"
                  : "asked for (--backend or GPUMEM_BACKEND)";
  /* Read whichever backend runs, so that a bad value is an error on
     both and a script runs unchanged on both.  */
  if (gm_nvtx_init () != GM_OK)
    return GM_ERR_VALUE;
  if (choice == GM_BACKEND_HOST)
    return use (&gm_backend_host);
#ifdef GM_HAVE_CUDA
  char reason[GM_ERROR_MESSAGE_MAX];
  gm_status status = use (&gm_backend_cuda);

  if (status == GM_OK)
    return GM_OK;
  snprintf (reason, sizeof reason, "%s", gm_last_error ()->message);
  /* A bad setting (GM_ERR_VALUE) is an error whichever backend was
     asked for: falling back would hide it.  */
  if (choice == GM_BACKEND_CUDA || status == GM_ERR_VALUE)
    return gm_error_set (GM_ERR_UNAVAILABLE, 0, NULL,
                         "the CUDA backend is unavailable: %s", reason);
  snprintf (fallback_notice, sizeof fallback_notice,
            "no CUDA device (%s); using the host backend", reason);
#else
  if (choice == GM_BACKEND_CUDA)
    return gm_error_set (GM_ERR_UNAVAILABLE, 0, NULL,
                         "the CUDA backend is unavailable: this gpumem was "
                         "built without CUDA (configure --with-cuda)");
  snprintf (fallback_notice, sizeof fallback_notice,
            "built without CUDA; using the host backend");
#endif
  if (!quiet)
    fprintf (stderr, "gpumem: %s\n", fallback_notice);
  return use (&gm_backend_host);
}
