/* config-facts.h -- what gpumem was built with, and where a loaded
   library came from: the plain-C facts beneath gpumem --config and
   gpumem.show_config() (the Python layer gathers the rest from the
   backend, src/plugin and src/comm, and formats them once).  */

#ifndef GM_CONFIG_FACTS_H
#define GM_CONFIG_FACTS_H

#include <stdbool.h>
#include <stddef.h>

/* What configure was asked and found: strings of the build, never
   NULL ("" where configure said nothing).  */
typedef struct gm_build_facts
{
  const char *version;          /* "0.1.0" */
  const char *configure_args;   /* "'--with-mpi=no' ..." */
  const char *cuda;             /* configure's summary lines: "yes, ..." */
  const char *nvrtc;
  const char *mpi;
  const char *nccl;
  bool has_cuda, has_mpi, has_nccl;   /* built in */
} gm_build_facts;

void gm_build_facts_get (gm_build_facts *facts);

/* The path of the shared object that holds the code or data at
   ADDRESS (dladdr), into BUF of SIZE bytes; false, with BUF empty,
   where the loader cannot tell.  */
bool gm_loaded_from (const void *address, char *buf, size_t size);

#endif /* GM_CONFIG_FACTS_H */
