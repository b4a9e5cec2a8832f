/* block-record.c -- the record of one block of memory: its holders and
   its exposure (block-record.h).  The last holder's release gives the
   memory back; a block whose maker let go while native code still
   holds it is counted in the books (gm_mem_note_native_held), so that
   such memory, and a leak there, shows in memory_stats ().  */

#include "config.h"

#include <stdlib.h>

#include "gm.h"
#include "block-record.h"

gm_status
gm_block_alloc (int device, size_t nbytes, gm_stream *stream,
                gm_block **block)
{
  gm_block *made = calloc (1, sizeof *made);
  gm_status status;

  *block = NULL;
  if (made == NULL)
    return gm_error_set (GM_ERR_HOST_NOMEM, 0, NULL, "cannot allocate "
                         "the record of a block of %zu bytes", nbytes);
  status = gm_mem_alloc (device, nbytes, stream, &made->ptr);
  if (status != GM_OK)
    {
      free (made);
      return status;
    }
  made->holds = 1;
  made->device = device;
  made->nbytes = nbytes;
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

  if (block->owner_gone && block->native_counted)
    gm_mem_note_native_held (block->device, block->nbytes, false);
  if (block->gone != NULL)
    block->gone (block->ctx);
  else if (block->ptr != NULL || block->nbytes != 0)
    status = gm_mem_free (block->device, block->ptr, block->nbytes, NULL);
  free (block);
  return status;
}

gm_status
gm_block_owner_release (gm_block *block)
{
  block->owner_gone = true;
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
