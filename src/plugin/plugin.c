/* plugin.c -- kernels from outside gpumem's tree (plugin.h): reading a
   plugin table, from a library (dlopen) or from the embedding program,
   into gm_kernel entries like the built-in ones.  */

/* dlinfo and RTLD_DI_LINKMAP (with realpath, strdup, PATH_MAX).  */
#define _GNU_SOURCE
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gm.h"
#include "kernel-signature.h"
#include "plugin.h"


static gm_plugin *plugins;        /* every plugin read, newest first */

/* The kernel called NAME among the built-in ones and those of every
   plugin read so far, or NULL; *ORIGIN says whose it is.  */
static const gm_kernel *
find_anywhere (const char *name, const char **origin)
{
  for (int k = 0; k < gm_kernel_count; k++)
    if (strcmp (gm_kernel_table[k].name, name) == 0)
      {
        *origin = "gpumem's built-in kernels";
        return &gm_kernel_table[k];
      }
  for (const gm_plugin *p = plugins; p != NULL; p = p->next)
    for (int k = 0; k < p->count; k++)
      if (strcmp (p->kernels[k].name, name) == 0)
        {
          *origin = p->path;
          return &p->kernels[k];
        }
  return NULL;
}

static gm_plugin *
find_loaded (const char *real)
{
  for (gm_plugin *p = plugins; p != NULL; p = p->next)
    if (strcmp (p->path, real) == 0)
      return p;
  return NULL;
}

/* The library of HANDLE, which dlopen found for the bare name PATH, as
   a real path into REAL (PATH_MAX bytes).  GM_ERR_FAILED where the
   dynamic linker does not say.  */
static gm_status
loaded_path (void *handle, const char *path, char *real)
{
  struct link_map *map = NULL;

  if (dlinfo (handle, RTLD_DI_LINKMAP, &map) != 0 || map == NULL
      || map->l_name == NULL || map->l_name[0] != '/'
      || realpath (map->l_name, real) == NULL)
    return gm_error_set (GM_ERR_FAILED, 0, NULL, "%s: cannot load the "
                         "kernel plugin: the dynamic linker does not say "
                         "which file it loaded", path);
  return GM_OK;
}

gm_status
gm_plugin_load (const char *path, gm_plugin **out)
{
  char real[PATH_MAX];
  gm_plugin_table_fn table_fn;
  gm_plugin *loaded;
  void *handle;
  gm_status status;
  /* A name without a slash is the dynamic linker's to find, in its own
     folders (LD_LIBRARY_PATH, the cache, the system's), as dlopen takes
     it: never the current folder, which another user may have written
     in.  A path is resolved, so that one file is loaded once.  */
  bool bare = strchr (path, '/') == NULL;

  *out = NULL;
  if (!bare)
    {
      if (realpath (path, real) == NULL)
        return gm_error_set (GM_ERR_FAILED, 0, NULL, "%s: cannot load a "
                             "kernel plugin: %s", path, errno == ENOENT
                             ? "no such file" : strerror (errno));
      loaded = find_loaded (real);
      if (loaded != NULL)
        {
          *out = loaded;
          return GM_OK;
        }
    }
  /* RTLD_NOW: a launcher whose definition does not match its table
     line leaves an undefined symbol, refused here rather than at the
     first call.  */
  dlerror ();
  handle = dlopen (bare ? path : real, RTLD_NOW | RTLD_LOCAL);
  if (handle == NULL)
    {
      const char *why = dlerror ();
      if (bare)
        return gm_error_set (GM_ERR_FAILED, 0, NULL, "%s: cannot load the "
                             "kernel plugin: %s (a name without a '/' is "
                             "looked for where the dynamic linker looks, "
                             "not in the current folder: for a file there, "
                             "write ./%s)", path,
                             why ? why : "unknown error", path);
      return gm_error_set (GM_ERR_FAILED, 0, NULL, "%s: cannot load the "
                           "kernel plugin: %s", path,
                           why ? why : "unknown error");
    }
  if (bare)
    {
      status = loaded_path (handle, path, real);
      loaded = status == GM_OK ? find_loaded (real) : NULL;
      /* A library loaded already: dlopen only counted one more use.  */
      if (status != GM_OK || loaded != NULL)
        {
          dlclose (handle);
          *out = loaded;
          return status;
        }
    }
  *(void **) &table_fn = dlsym (handle, GM_PLUGIN_TABLE_SYMBOL);
  if (table_fn == NULL)
    {
      dlclose (handle);
      return gm_error_set (GM_ERR_FAILED, 0, NULL, "%s: not a gpumem kernel "
                           "plugin: it exports no %s () (see "
                           "gpumem-kernels(7))", path, GM_PLUGIN_TABLE_SYMBOL);
    }
  status = gm_plugin_table_read (table_fn (), real, find_anywhere, out);
  if (status != GM_OK)
    {
      dlclose (handle);
      return status;
    }
  (*out)->next = plugins;
  plugins = *out;
  return GM_OK;
}

gm_status
gm_plugin_register (const gm_plugin_info *table, const char *origin,
                    gm_plugin **out)
{
  gm_status status = gm_plugin_table_read (table, origin ? origin : "(program)",
                                    find_anywhere, out);

  if (status != GM_OK)
    return status;
  (*out)->next = plugins;
  plugins = *out;
  return GM_OK;
}

void
gm_plugin_preload (gm_plugin *plugin)
{
  plugin->preloaded = true;
}

gm_status
gm_plugin_preload_list (const char *paths)
{
  const char *start = paths;

  while (start != NULL && *start != '\0')
    {
      const char *end = strchr (start, ':');
      size_t len = end ? (size_t) (end - start) : strlen (start);
      char path[PATH_MAX];
      gm_plugin *plugin;
      gm_status status;

      if (len >= sizeof path)
        return gm_error_set (GM_ERR_VALUE, 0, NULL, "GPUMEM_KERNELS: a path "
                             "of %zu bytes is too long", len);
      if (len > 0)
        {
          memcpy (path, start, len);
          path[len] = '\0';
          status = gm_plugin_load (path, &plugin);
          if (status != GM_OK)
            return status;
          gm_plugin_preload (plugin);
        }
      start = end ? end + 1 : NULL;
    }
  return GM_OK;
}

int
gm_kernels_count (void)
{
  int count = gm_kernel_count;

  for (const gm_plugin *p = plugins; p != NULL; p = p->next)
    if (p->preloaded)
      count += p->count;
  return count;
}

/* One walk of the plugin list, O(plugins).  The preloaded kernels come
   oldest plugin first, and the list is newest first: walking it, the
   kernels of each preloaded plugin end where the newer ones' begin.  */
const gm_kernel *
gm_kernels_get (int index)
{
  int end = gm_kernels_count ();

  if (index < 0 || index >= end)
    return NULL;
  if (index < gm_kernel_count)
    return &gm_kernel_table[index];
  for (const gm_plugin *p = plugins; p != NULL; p = p->next)
    if (p->preloaded)
      {
        int start = end - p->count;
        if (index >= start)
          return &p->kernels[index - start];
        end = start;
      }
  return NULL;
}
