/* block-record.c -- the record of one block of memory: its holders and
   its exposure (block-record.h).  The last holder's release gives the
   memory back; a block whose maker let go while native code still
   holds it is counted in the books (gm_mem_note_native_held), so that
   such memory, and a leak there, shows in memory_stats ().  */

#include "config.h"

#include <stdio.h>
#include <stdlib.h>

#include "gm.h"
#include "block-record.h"
#include "spill.h"

gm_status
gm_block_alloc (int device, size_t nbytes, gm_stream *stream, unsigned flags,
                gm_block **block)
{
  bool may_spill = (flags & GM_BLOCK_MAY_SPILL) != 0;
  bool managed = (flags & GM_BLOCK_MANAGED) != 0;
  gm_block *made = calloc (1, sizeof *made);
  gm_status status;
  size_t freed;

  *block = NULL;
  if (made == NULL)
    return gm_error_set (GM_ERR_HOST_NOMEM, 0, NULL, "cannot allocate "
                         "the record of a block of %zu bytes", nbytes);
  if (managed)
    {
      status = gm_mem_alloc_managed (device, nbytes, stream, &made->ptr);
      may_spill = false;
    }
  else
    status = gm_mem_alloc (device, nbytes, stream, &made->ptr);
  /* Out of memory with spilling on: idle arrays move to host memory,
     and the allocation is tried again while any could.  */
  while (status == GM_ERR_NOMEM && may_spill && gm_spill_enabled (device)
         && gm_spill_make_room (device, nbytes, NULL, 0, &freed) == GM_OK
         && freed > 0)
    status = gm_mem_alloc (device, nbytes, stream, &made->ptr);
  if (status == GM_ERR_NOMEM && may_spill && gm_spill_enabled (device))
    {
      char why[512], message[GM_ERROR_MESSAGE_MAX];
      gm_spill_explain (device, why, sizeof why);
      snprintf (message, sizeof message, "%s", gm_last_error ()->message);
      gm_error_set (GM_ERR_NOMEM, 0, NULL, "%s; spilling moved what it "
                    "could, and these stay on the device: %s", message,
                    why[0] ? why : "none (no array of gpumem's to move)");
    }
  if (status != GM_OK)
    {
      free (made);
      return status;
    }
  made->holds = 1;
  made->device = device;
  made->nbytes = nbytes;
  made->managed = managed;
  *block = made;
  return GM_OK;
}

gm_block *
gm_block_wrap (int device, void *ptr, size_t nbytes, gm_block_gone_fn gone,
               void *ctx)
{
  gm_block *made = calloc (1, sizeof *made);

  if (made == NULL)
    return NULL;
  made->holds = 1;
  made->device = device;
  made->ptr = ptr;
  made->nbytes = nbytes;
  made->gone = gone;
  made->ctx = ctx;
  return made;
}

void
gm_block_hand_over (gm_block *block, gm_block_gone_fn gone, void *ctx)
{
  gm_spill_untrack (block);
  block->gone = gone;
  block->ctx = ctx;
}

void
gm_block_hold (gm_block *block, bool native)
{
  block->holds++;
  if (native)
    block->native++;
}

gm_status
gm_block_release (gm_block *block, bool native)
{
  if (native)
    block->native--;
  if (--block->holds > 0)
    return GM_OK;
  return gm_block_gone (block);
}

gm_status
gm_block_gone (gm_block *block)
{
  gm_status status = GM_OK;
  bool resident = !block->spilled;

  gm_spill_untrack (block);
  if (block->owner_gone && block->native_counted)
    gm_mem_note_native_held (block->device, block->nbytes, false);
  if (block->gone != NULL)
    block->gone (block->ctx);
  else if (resident && (block->ptr != NULL || block->nbytes != 0))
    status = block->managed
             ? gm_mem_free_managed (block->device, block->ptr, block->nbytes,
                                    NULL, !block->advised)
             : gm_mem_free (block->device, block->ptr, block->nbytes, NULL);
  free (block);
  return status;
}

gm_status
gm_block_owner_release (gm_block *block)
{
  block->owner_gone = true;
  if (!block->spilled)
    gm_spill_untrack (block);
  if (block->holds > 1 && block->gone == NULL)
    {
      block->native_counted = true;
      gm_mem_note_native_held (block->device, block->nbytes, true);
    }
  return gm_block_release (block, false);
}

void
gm_block_expose (gm_block *block, uint32_t bits)
{
  block->exposure |= bits;
}

void
gm_block_unexpose (gm_block *block, uint32_t bits)
{
  block->exposure &= ~bits;
}

void
gm_block_note_advised (gm_block *block)
{
  block->advised = true;
}
