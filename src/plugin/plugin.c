/* plugin.c -- kernels from outside gpumem's tree (plugin.h): reading a
   plugin table, from a library (dlopen) or from the embedding program,
   into gm_kernel entries like the built-in ones.  */

/* realpath, strdup, PATH_MAX.  */
#define _XOPEN_SOURCE 700
#include "config.h"

#include <dlfcn.h>
#include <limits.h>
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

gm_status
gm_plugin_load (const char *path, gm_plugin **out)
{
  char real[PATH_MAX];
  gm_plugin_table_fn table_fn;
  void *handle;
  gm_status status;

  *out = NULL;
  if (realpath (path, real) == NULL)
    return gm_error_set (GM_ERR_FAILED, 0, NULL, "%s: cannot load a kernel "
                         "plugin: no such file", path);
  for (gm_plugin *p = plugins; p != NULL; p = p->next)
    if (strcmp (p->path, real) == 0)
      {
        *out = p;
        return GM_OK;
      }
  /* RTLD_NOW: a launcher whose definition does not match its table
     line leaves an undefined symbol, refused here rather than at the
     first call.  */
  dlerror ();
  handle = dlopen (real, RTLD_NOW | RTLD_LOCAL);
  if (handle == NULL)
    {
      const char *why = dlerror ();
      return gm_error_set (GM_ERR_FAILED, 0, NULL, "%s: cannot load the "
                           "kernel plugin: %s", path,
                           why ? why : "unknown error");
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
