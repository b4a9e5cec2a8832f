/* backend.c -- the backend in use, its end, and the names of the
   backends (the choice at start is src/backend-choice.c).  */

#include "config.h"

#include <string.h>

#include "gm.h"

const gm_backend *gm_backend_current;

/* The names --backend and GPUMEM_BACKEND take.  */
bool
gm_backend_parse_name (const char *name, gm_backend_choice *choice)
{
  if (strcmp (name, "auto") == 0)
    *choice = GM_BACKEND_AUTO;
  else if (strcmp (name, "cuda") == 0)
    *choice = GM_BACKEND_CUDA;
  else if (strcmp (name, "host") == 0)
    *choice = GM_BACKEND_HOST;
  else
    return false;
  return true;
}

void
gm_backend_shutdown (void)
{
  if (gm_backend_current != NULL)
    gm_backend_current->shutdown ();
  gm_backend_current = NULL;
}
