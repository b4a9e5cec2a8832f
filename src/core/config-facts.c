/* config-facts.c -- what gpumem was built with (configure's defines in
   config.h), and where a loaded library came from (config-facts.h).  */

#define _GNU_SOURCE
#include "config.h"

#include <dlfcn.h>
#include <stdio.h>

#include "config-facts.h"

#ifndef GM_CONFIGURE_ARGS
#define GM_CONFIGURE_ARGS ""
#endif
#ifndef GM_BUILD_CUDA
#define GM_BUILD_CUDA ""
#endif
#ifndef GM_BUILD_NVRTC
#define GM_BUILD_NVRTC ""
#endif
#ifndef GM_BUILD_MPI
#define GM_BUILD_MPI ""
#endif
#ifndef GM_BUILD_NCCL
#define GM_BUILD_NCCL ""
#endif

void
gm_build_facts_get (gm_build_facts *facts)
{
  facts->version = PACKAGE_VERSION;
  facts->configure_args = GM_CONFIGURE_ARGS;
  facts->cuda = GM_BUILD_CUDA;
  facts->nvrtc = GM_BUILD_NVRTC;
  facts->mpi = GM_BUILD_MPI;
  facts->nccl = GM_BUILD_NCCL;
#ifdef GM_HAVE_CUDA
  facts->has_cuda = true;
#else
  facts->has_cuda = false;
#endif
#ifdef GM_HAVE_MPI
  facts->has_mpi = true;
#else
  facts->has_mpi = false;
#endif
#ifdef GM_HAVE_NCCL
  facts->has_nccl = true;
#else
  facts->has_nccl = false;
#endif
}

bool
gm_loaded_from (const void *address, char *buf, size_t size)
{
  Dl_info info;
  int length;

  if (size > 0)
    buf[0] = '\0';
  if (address == NULL || dladdr (address, &info) == 0
      || info.dli_fname == NULL)
    return false;
  length = snprintf (buf, size, "%s", info.dli_fname);
  if (length < 0 || (size_t) length >= size)
    {
      if (size > 0)
        buf[0] = '\0';
      return false;
    }
  return true;
}
