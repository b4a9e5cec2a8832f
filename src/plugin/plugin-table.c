/* plugin-table.c -- the checks of a kernel table (plugin.h): a table
   in memory, from a plugin library or the embedding program, read into
   gm_kernel entries like the built-in ones, or refused.  No dlopen, no
   state: tests/fuzz/fuzz-plugin-table.c calls it with tables made from
   its input.  */

/* strdup.  */
#define _XOPEN_SOURCE 700
#include "config.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gm.h"
#include "kernel-signature.h"
#include "plugin.h"

/* At most this many kernels a table: more is a corrupt count.  */
#define MAX_TABLE_KERNELS 4096

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

gm_status
gm_plugin_table_read (const gm_plugin_info *table, const char *origin,
                      gm_plugin_find_fn find_anywhere, gm_plugin **out)
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
