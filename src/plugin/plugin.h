/* plugin.h -- kernels from outside gpumem's tree: plugin libraries and
   the tables an embedding program registers.

   Every such kernel is checked once, when its table is read: a name
   gpumem can call, a signature that parses, a launcher or a C reference,
   and a name no other kernel (built in or loaded) has.  Loaded kernels
   stay loaded until the process ends.  */

#ifndef GM_PLUGIN_H
#define GM_PLUGIN_H

#include "gm.h"

typedef struct gm_plugin
{
  char *path;               /* the library's real path, or the name given
                               to gm_plugin_register */
  int count;
  gm_kernel *kernels;       /* COUNT kernels, origin = PATH */
  char **storage;           /* per kernel, its parsed signature's block */
  bool preloaded;           /* part of gpumem.kernels */
  struct gm_plugin *next;
} gm_plugin;

/* The kernel called NAME among those already loaded, or NULL; *ORIGIN
   says whose it is.  */
typedef const gm_kernel *(*gm_plugin_find_fn) (const char *name,
                                               const char **origin);

/* Reads TABLE, a kernel table in memory, into a new plugin named ORIGIN
   (its NEXT NULL, in no list), with the checks of gm_plugin_load: a
   known ABI version, a sane count, no NULL entry, each kernel a name
   gpumem can call, a signature that parses, a launcher or a reference,
   and a name that FIND_ANYWHERE and the table's earlier kernels do not
   know.  GM_ERR_FAILED naming ORIGIN (and the kernel at fault),
   GM_ERR_HOST_NOMEM; nothing is kept then.  */
gm_status gm_plugin_table_read (const gm_plugin_info *table,
                                const char *origin,
                                gm_plugin_find_fn find_anywhere,
                                gm_plugin **out);

/* Loads the plugin library PATH (dlopen) and reads its table, once per
   file: loading a file again gives the same plugin.  A PATH without a
   '/' is found where dlopen looks (never in the current folder); any
   other is the file it names.  GM_ERR_FAILED naming
   PATH (and the kernel at fault) when the file does not load, exports no
   gm_plugin_table, its table has another ABI version, a kernel's name or
   signature is wrong, it has neither launcher nor reference, or its name
   clashes with another kernel's; nothing stays loaded then.
   GM_ERR_HOST_NOMEM when memory runs out.  */
gm_status gm_plugin_load (const char *path, gm_plugin **plugin);

/* Registers the kernels of TABLE under the name ORIGIN, with the checks
   of gm_plugin_load; TABLE and what it points to must outlive the
   process's use of the kernels.  */
gm_status gm_plugin_register (const gm_plugin_info *table, const char *origin,
                              gm_plugin **plugin);

/* Makes PLUGIN's kernels part of gpumem.kernels and gpumem -k.  Before
   the gpumem module is first imported.  */
void gm_plugin_preload (gm_plugin *plugin);

/* The kernels of gpumem.kernels: the built-in ones, then those of the
   preloaded plugins in the order they were loaded.  */
int gm_kernels_count (void);
const gm_kernel *gm_kernels_get (int index);

/* Loads each plugin named in PATHS, a colon-separated list (as
   GPUMEM_KERNELS), and preloads it; empty entries are skipped.  */
gm_status gm_plugin_preload_list (const char *paths);

#endif /* GM_PLUGIN_H */
