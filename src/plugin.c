/* plugin.c -- kernels from outside gpumem's tree (plugin.h): reading a
   plugin table, from a library (dlopen) or from the embedding program,
   into gm_kernel entries like the built-in ones.  */

/* realpath, strdup, PATH_MAX.  */
#define _XOPEN_SOURCE 700
#include "config.h"

#include <ctype.h>
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gm.h"
#include "kernel-signature.h"
#include "plugin.h"

/* At most this many kernels a table: more is a corrupt count.  */
#define MAX_TABLE_KERNELS 4096

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

/* GM_OK when NAME can be a Python function of gpumem.kernels.  */
static gm_status
check_name (const char *origin, int index, const char *name)
{
  size_t len;

  if (name == NULL || *name == '\0')
    return gm_error_set (GM_ERR_FAILED, 0, NULL, "%s: kernel %d of the table "
                         "has no name", origin, index);
  len = strlen (name);
  if (len > 64 || name[0] == '_' || isdigit ((unsigned char) name[0]))
    goto bad;
  for (size_t i = 0; i < len; i++)
    if (!isalnum ((unsigned char) name[i]) && name[i] != '_')
      goto bad;
  if (strcmp (name, "list") == 0)
    return gm_error_set (GM_ERR_FAILED, 0, NULL, "%s: kernel 'list': the name "
                         "is taken by gpumem.kernels.list ()", origin);
  return GM_OK;
bad:
  return gm_error_set (GM_ERR_FAILED, 0, NULL, "%s: kernel '%.80s': a kernel "
                       "name is 1 to 64 letters, digits and '_', not "
                       "starting with a digit or '_'", origin, name);
}

/* Reads TABLE into a new plugin named ORIGIN (not yet in the list).  */
static gm_status
read_table (const gm_plugin_info *table, const char *origin,
            gm_plugin **out)
{
  gm_plugin *plugin = NULL;
  gm_status status = GM_OK;

  *out = NULL;
  if (table == NULL)
    return gm_error_set (GM_ERR_FAILED, 0, NULL, "%s: gm_plugin_table () "
                         "returned no table", origin);
  if (table->abi != GM_PLUGIN_ABI)
    return gm_error_set (GM_ERR_FAILED, 0, NULL, "%s: the kernel table has "
                         "ABI version %u, but this gpumem reads version %d: "
                         "rebuild the plugin against this gpumem's "
                         "gpumem/kernel.h", origin, (unsigned) table->abi,
                         GM_PLUGIN_ABI);
  if (table->count > MAX_TABLE_KERNELS
      || (table->count > 0 && table->kernels == NULL))
    return gm_error_set (GM_ERR_FAILED, 0, NULL, "%s: the kernel table is "
                         "corrupt (%u kernels)", origin,
                         (unsigned) table->count);

  plugin = calloc (1, sizeof *plugin);
  if (plugin == NULL
      || (plugin->path = strdup (origin)) == NULL
      || (table->count > 0
          && ((plugin->kernels = calloc (table->count,
                                         sizeof *plugin->kernels)) == NULL
              || (plugin->storage = calloc (table->count,
                                            sizeof *plugin->storage))
                 == NULL)))
    {
      status = gm_error_set (GM_ERR_HOST_NOMEM, 0, NULL,
                             "out of host memory");
      goto done;
    }

  for (uint32_t k = 0; k < table->count; k++)
    {
      const gm_plugin_kernel *entry = table->kernels[k];
      gm_kernel *kernel = &plugin->kernels[k];
      const gm_kernel *other;
      const char *other_origin;
      char *storage;

      if (entry == NULL)
        {
          status = gm_error_set (GM_ERR_FAILED, 0, NULL, "%s: kernel %u of "
                                 "the table is NULL", origin, (unsigned) k);
          goto done;
        }
      status = check_name (origin, (int) k, entry->name);
      if (status != GM_OK)
        goto done;
      kernel->name = entry->name;
      status = gm_kernel_signature_parse (kernel, entry->signature, &storage);
      if (status != GM_OK)
        {
          char reason[GM_ERROR_MESSAGE_MAX];
          snprintf (reason, sizeof reason, "%s", gm_last_error ()->message);
          /* The library's fault, not the caller's: refused.  */
          if (status == GM_ERR_VALUE || status == GM_ERR_TYPE)
            status = GM_ERR_FAILED;
          status = gm_error_set (status, 0, NULL, "%s: %s", origin, reason);
          goto done;
        }
      if (entry->launch == NULL && entry->reference == NULL)
        {
          free (storage);
          status = gm_error_set (GM_ERR_FAILED, 0, NULL, "%s: kernel '%s' has "
                                 "neither a CUDA launcher nor a C reference",
                                 origin, entry->name);
          goto done;
        }
      other = find_anywhere (entry->name, &other_origin);
      for (uint32_t j = 0; other == NULL && j < k; j++)
        if (strcmp (plugin->kernels[j].name, entry->name) == 0)
          {
            other = &plugin->kernels[j];
            other_origin = origin;
          }
      if (other != NULL)
        {
          free (storage);
          status = gm_error_set (GM_ERR_FAILED, 0, NULL, "%s: kernel '%s' "
                                 "clashes with the kernel of that name in "
                                 "%s", origin, entry->name, other_origin);
          goto done;
        }
      plugin->storage[k] = storage;
      kernel->doc = entry->doc ? entry->doc : "";
      kernel->run_host = entry->reference;
      kernel->launch_cuda = entry->launch;
      kernel->origin = plugin->path;
      plugin->count = (int) k + 1;
    }

done:
  if (status != GM_OK)
    {
      if (plugin != NULL)
        {
          for (int k = 0; k < plugin->count; k++)
            free (plugin->storage[k]);
          free (plugin->storage);
          free (plugin->kernels);
          free (plugin->path);
          free (plugin);
        }
      return status;
    }
  *out = plugin;
  return GM_OK;
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
  status = read_table (table_fn (), real, out);
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
  gm_status status = read_table (table, origin ? origin : "(program)", out);

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
