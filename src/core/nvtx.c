/* nvtx.c -- the NVTX switch and the ranges' entry points (nvtx.h), in
   plain C, so that every layer and every backend can call them; the
   NVTX calls themselves are the attached tool's (cuda-nvtx.c).  */

#include "config.h"

#include "nvtx.h"

atomic_bool gm_nvtx_switch;

static _Atomic (const gm_nvtx_tool *) attached;

gm_status
gm_nvtx_init (void)
{
  bool on;
  gm_status status = gm_env_bool ("GPUMEM_NVTX", false, &on);

  if (status == GM_OK)
    gm_nvtx_set (on);
  return status;
}

void
gm_nvtx_set (bool on)
{
  atomic_store_explicit (&gm_nvtx_switch, on, memory_order_relaxed);
}

void
gm_nvtx_attach (const gm_nvtx_tool *tool)
{
  atomic_store (&attached, tool);
}

void
gm_nvtx_push (gm_nvtx_kind kind, const char *what, int device,
              uint64_t bytes)
{
  const gm_nvtx_tool *tool = atomic_load (&attached);

  if (tool != NULL)
    tool->push (kind, what, device, bytes);
}

void
gm_nvtx_push_name (gm_nvtx_kind kind, const char *name)
{
  const gm_nvtx_tool *tool = atomic_load (&attached);

  if (tool != NULL)
    tool->push_name (kind, name);
}

void
gm_nvtx_pop (void)
{
  const gm_nvtx_tool *tool = atomic_load (&attached);

  if (tool != NULL)
    tool->pop ();
}
