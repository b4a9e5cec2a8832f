/* comm-nccl-load.c -- NCCL found and opened at run time
   (comm-nccl-load.h).  The binary wheel carries no NCCL: the extra
   gpumem[nccl] installs NVIDIA's nvidia-nccl-cu13 wheel, whose
   nvidia/nccl/lib/libnccl.so.2 the Python layer finds; a system's NCCL
   or a path in GPUMEM_NCCL serves too.  Opened once, at the first
   collective that would run on NCCL (or the first question about it),
   so that a process that never needs NCCL never maps it.  */

#define _GNU_SOURCE
#include "config.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm-nccl-load.h"
#include "config-facts.h"

/* The wheel's library, relative to the folder of gpumem's own file (the
   site-packages folder of a pip-installed module).  */
#define WHEEL_RELATIVE "nvidia/nccl/lib/libnccl.so.2"

static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;
static bool tried;
static void *library;
static const char *found_how;
static char wheel_library[4096];
/* The error of the one try, repeated to every caller.  */
static char failure[GM_ERROR_MESSAGE_MAX];

void
gm_nccl_set_wheel_library (const char *path)
{
  pthread_mutex_lock (&load_lock);
  snprintf (wheel_library, sizeof wheel_library, "%s", path);
  pthread_mutex_unlock (&load_lock);
}

/* One try of each place in turn; under load_lock.  */
static void
try_places (void)
{
  struct place
  {
    char path[4096];
    const char *how;
  } places[4];
  int n = 0;
  const char *env = getenv ("GPUMEM_NCCL");
  char list[1024] = "";

  if (env != NULL && *env != '\0')
    {
      snprintf (places[n].path, sizeof places[n].path, "%s", env);
      places[n++].how = "GPUMEM_NCCL";
    }
  else
    {
      if (wheel_library[0] != '\0')
        {
          snprintf (places[n].path, sizeof places[n].path, "%s",
                    wheel_library);
          places[n++].how = "the nvidia-nccl-cu13 wheel";
        }
      else if (gm_env_beside_self (WHEEL_RELATIVE, places[n].path,
                                   sizeof places[n].path))
        places[n++].how = "the nvidia-nccl-cu13 wheel";
#ifdef GM_NCCL_LIBRARY
      snprintf (places[n].path, sizeof places[n].path, "%s",
                GM_NCCL_LIBRARY);
      places[n++].how = "configure's";
#endif
      snprintf (places[n].path, sizeof places[n].path, "libnccl.so.2");
      places[n++].how = "the library path";
    }
  for (int i = 0; i < n && library == NULL; i++)
    {
      library = dlopen (places[i].path, RTLD_NOW | RTLD_LOCAL);
      if (library != NULL)
        found_how = places[i].how;
      else
        snprintf (list + strlen (list), sizeof list - strlen (list),
                  "%s%.200s", i ? ", " : "", places[i].path);
    }
  if (library != NULL && dlsym (library, "ncclGetVersion") == NULL)
    {
      dlclose (library);
      library = NULL;
      snprintf (failure, sizeof failure, "the library found as NCCL (%s) "
                "lacks ncclGetVersion: pip install 'gpumem[nccl]' "
                "(NVIDIA's nvidia-nccl-cu13 wheel), or name NCCL's "
                "libnccl.so.2 in GPUMEM_NCCL", found_how);
      found_how = NULL;
      return;
    }
  if (library == NULL)
    snprintf (failure, sizeof failure, "NCCL is not available (tried %s): "
              "pip install 'gpumem[nccl]' (NVIDIA's nvidia-nccl-cu13 "
              "wheel), install the system's NCCL (libnccl2), or name the "
              "library in GPUMEM_NCCL", list);
}

gm_status
gm_nccl_open (void **handle)
{
  pthread_mutex_lock (&load_lock);
  if (!tried)
    {
      try_places ();
      tried = true;
    }
  *handle = library;
  pthread_mutex_unlock (&load_lock);
  if (*handle == NULL)
    return gm_error_set (GM_ERR_UNAVAILABLE, 0, NULL, "%s", failure);
  return GM_OK;
}

bool
gm_nccl_opened (char *buf, size_t size, const char **how)
{
  void *symbol;
  bool known;

  pthread_mutex_lock (&load_lock);
  symbol = library != NULL ? dlsym (library, "ncclGetVersion") : NULL;
  *how = found_how;
  pthread_mutex_unlock (&load_lock);
  known = symbol != NULL && gm_loaded_from (symbol, buf, size);
  if (!known && size > 0)
    buf[0] = '\0';
  return symbol != NULL;
}
