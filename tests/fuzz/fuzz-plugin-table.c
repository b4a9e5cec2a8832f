/* fuzz-plugin-table.c -- libFuzzer target: the checks of a kernel table
   (gm_plugin_table_read in src/plugin/plugin-table.c), as a plugin library or
   an embedding program hands it over.

   Input: a header line, then one line per kernel.  The header's bytes:
   the ABI version (0: GM_PLUGIN_ABI, else that byte), the number of
   entries (the lines that follow, at most 64), and how the count is
   told (0x01: NULL kernels with entries; 0x02: a count past any sane
   table, 4097 + the entries).  Each kernel line is a flag byte (0x01:
   a NULL entry, 0x02: a launcher, 0x04: a reference, 0x08: no doc)
   then NAME '\t' SIGNATURE.  The name "taken" is a kernel loaded
   before.  A table that is read must be what gpumem relies on: as many
   kernels as entries, each named as a Python function can be (1 to 64
   letters, digits and '_', no leading digit or '_', not "list"), names
   distinct and none taken, a launcher or a reference, parameters as
   fuzz-signature.c checks them.  One that is refused must say so
   naming the table.  Anything else aborts.  */

#define _POSIX_C_SOURCE 200809L
#include "config.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "gm.h"
#include "plugin.h"

/* kernel.c reads the registry: here, one fake kernel.  */
const gm_kernel gm_kernel_table[] = {
  {"fake", "", 0, {{NULL, 0, 0, NULL}}, NULL, NULL, NULL, NULL}
};
const int gm_kernel_count = 1;

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

#define MAX_ENTRIES 64
static const char ORIGIN[] = "fuzzed-table";

static int
launch (const gm_arg *args, const gm_launch_cfg *cfg, void *stream)
{
  (void) args, (void) cfg, (void) stream;
  return 0;
}

static void
reference (const gm_arg *args)
{
  (void) args;
}

static const gm_kernel taken_kernel = {.name = "taken"};

static const gm_kernel *
find_taken (const char *name, const char **origin)
{
  *origin = "an earlier plugin";
  return strcmp (name, "taken") == 0 ? &taken_kernel : NULL;
}

/* Aborts unless NAME is one gpumem.kernels can hold.  */
static void
check_name (const char *name)
{
  size_t len = strlen (name);

  if (len == 0 || len > 64 || name[0] == '_'
      || isdigit ((unsigned char) name[0]) || strcmp (name, "list") == 0
      || strcmp (name, "taken") == 0)
    abort ();
  for (size_t i = 0; i < len; i++)
    if (!isalnum ((unsigned char) name[i]) && name[i] != '_')
      abort ();
}

static void
check_kernel (const gm_kernel *kernel, const gm_plugin_kernel *entry)
{
  if (kernel->name != entry->name || kernel->run_host != entry->reference
      || kernel->launch_cuda != entry->launch
      || (entry->launch == NULL && entry->reference == NULL)
      || kernel->doc == NULL
      || kernel->nparams < 0 || kernel->nparams > GM_MAX_KERNEL_PARAMS)
    abort ();
  check_name (kernel->name);
  for (int i = 0; i < kernel->nparams; i++)
    {
      const gm_kernel_param *param = &kernel->params[i];
      int64_t value;

      if ((unsigned) param->dtype >= GM_NDTYPES)
        abort ();
      for (int j = 0; j < i; j++)
        if (strcmp (kernel->params[j].name, param->name) == 0)
          abort ();
      if (param->kind == GM_PARAM_SCALAR ? param->length != NULL
          : param->length == NULL
            || gm_kernel_eval_length (kernel, param->length, NULL, &value)
               != GM_OK)
        abort ();
    }
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  gm_plugin_kernel entries[MAX_ENTRIES];
  const gm_plugin_kernel *pointers[MAX_ENTRIES];
  gm_plugin_info table;
  gm_plugin *plugin = NULL;
  char *text, *line, *next;
  int n = 0, wanted;
  gm_status status;

  if (size < 3)
    return 0;
  table.abi = data[0] == 0 ? GM_PLUGIN_ABI : data[0];
  wanted = data[1] % (MAX_ENTRIES + 1);
  text = malloc (size - 3 + 1);
  if (text == NULL)
    return 0;
  memcpy (text, data + 3, size - 3);
  text[size - 3] = '\0';
  for (line = text; line != NULL && n < wanted; line = next)
    {
      char *tab;
      next = strchr (line, '\n');
      if (next != NULL)
        *next++ = '\0';
      if (*line == '\0')
        continue;
      tab = strchr (line + 1, '\t');
      if (tab != NULL)
        *tab = '\0';
      entries[n].name = line + 1;
      entries[n].signature = tab ? tab + 1 : "";
      entries[n].doc = (line[0] & 0x08) ? NULL : "fuzzed";
      entries[n].launch = (line[0] & 0x02) ? launch : NULL;
      entries[n].reference = (line[0] & 0x04) ? reference : NULL;
      pointers[n] = (line[0] & 0x01) ? NULL : &entries[n];
      n++;
    }
  table.count = (uint32_t) n;
  table.kernels = pointers;
  if ((data[2] & 0x01) && n > 0)
    table.kernels = NULL;
  if (data[2] & 0x02)
    table.count = 4097 + (uint32_t) n;

  status = gm_plugin_table_read (&table, ORIGIN, find_taken, &plugin);
  if (status != GM_OK)
    {
      if (plugin != NULL
          || strncmp (gm_last_error ()->message, ORIGIN, sizeof ORIGIN - 1)
             != 0)
        abort ();
      free (text);
      return 0;
    }
  if (table.abi != GM_PLUGIN_ABI || table.kernels != pointers
      || table.count != (uint32_t) n || plugin == NULL
      || plugin->count != n || strcmp (plugin->path, ORIGIN) != 0
      || plugin->next != NULL)
    abort ();
  for (int k = 0; k < n; k++)
    {
      if (pointers[k] == NULL)
        abort ();
      check_kernel (&plugin->kernels[k], pointers[k]);
      if (strcmp (plugin->kernels[k].origin, ORIGIN) != 0)
        abort ();
      for (int j = 0; j < k; j++)
        if (strcmp (plugin->kernels[j].name, plugin->kernels[k].name) == 0)
          abort ();
      free (plugin->storage[k]);
    }
  free (plugin->storage);
  free (plugin->kernels);
  free (plugin->path);
  free (plugin);
  free (text);
  return 0;
}
