/* child-env.c -- what the program's child processes inherit.

   Inside the program, sys.executable is the Python interpreter that it
   embeds (GPUMEM_PYTHON, else configure's), not the program: a child
   started by multiprocessing's spawn or forkserver methods, or by
   subprocess.run([sys.executable, ...]), is a real python taking
   python's whole command line, as Python's users expect.  Such a child
   imports gpumem as the extension module, which the program makes
   findable: its folder goes first on PYTHONPATH, and the backend the
   program chose goes into GPUMEM_BACKEND (so that a child neither
   probes CUDA again nor prints the fallback notice twice).

   The module's folder, in this order: where 'make install' put it
   relative to the installed program (GM_PYEXECDIR_FROM_BINDIR, so that
   DESTDIR staging and a moved prefix still work), else the build
   tree's src/.libs (the program run uninstalled, and the tests).  */

/* realpath, readlink, setenv.  */
#define _XOPEN_SOURCE 700
#include "config.h"

#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "child-env.h"
#include "gm-paths.h"

/* True when DIR holds the extension module.  */
static bool
has_module (const char *dir)
{
  char path[PATH_MAX];

  if (snprintf (path, sizeof path, "%s/%s", dir, GM_MODULE_FILE)
      >= (int) sizeof path)
    return false;
  return access (path, R_OK) == 0;
}

/* Writes the folder of the extension module into DIR; false if none.  */
static bool
find_module_dir (char dir[PATH_MAX])
{
  char exe[PATH_MAX], candidate[PATH_MAX + 64];
  ssize_t n = readlink ("/proc/self/exe", exe, sizeof exe - 1);
  char *slash;

  if (n > 0)
    {
      exe[n] = '\0';
      slash = strrchr (exe, '/');
      if (slash != NULL)
        {
          *slash = '\0';
          snprintf (candidate, sizeof candidate, "%s/%s", exe,
                    GM_PYEXECDIR_FROM_BINDIR);
          if (has_module (candidate) && realpath (candidate, dir) != NULL)
            return true;
        }
    }
  if (has_module (GM_BUILD_MODULE_DIR))
    {
      snprintf (dir, PATH_MAX, "%s", GM_BUILD_MODULE_DIR);
      return true;
    }
  return false;
}

const char *
gm_child_env_setup (const char *backend_name)
{
  static char dir[PATH_MAX];
  const char *old;
  char *value;
  size_t size;

  setenv ("GPUMEM_BACKEND", backend_name, 1);
  if (!find_module_dir (dir))
    return NULL;
  old = getenv ("PYTHONPATH");
  size = strlen (dir) + (old ? strlen (old) : 0) + 2;
  value = malloc (size);
  if (value == NULL)
    return NULL;
  if (old != NULL && *old != '\0')
    snprintf (value, size, "%s:%s", dir, old);
  else
    snprintf (value, size, "%s", dir);
  setenv ("PYTHONPATH", value, 1);
  free (value);
  return dir;
}
