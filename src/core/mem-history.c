/* mem-history.c -- the memory history's store (mem-history.h): a ring
   of events, the live blocks in an open-addressing table keyed by
   address (linear probing, deletion by backward shift, so no
   tombstones), and the call stacks interned in a second such table, so
   that an event costs a stack index, not its frames.  No lock here:
   memory.c calls under its books' lock.  */

#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "mem-history.h"

struct gm_hist
{
  gm_mem_event *ring;
  size_t max_entries, head, count, dropped;

  gm_mem_block *live;        /* address 0: an empty slot */
  size_t live_mask, nlive;

  gm_mem_frame *frames;
  size_t nframes, frames_room;
  size_t *stack_start;       /* nstacks + 1 entries */
  size_t nstacks, stacks_room;
  int32_t *stack_slots;      /* -1: an empty slot */
  size_t stack_mask;
};

#define LIVE_FIRST_SLOTS 1024
#define STACK_FIRST_SLOTS 256

static size_t
hash_address (uintptr_t address)
{
  uint64_t x = (uint64_t) address;

  x ^= x >> 33;
  x *= UINT64_C (0xff51afd7ed558ccd);
  x ^= x >> 33;
  return (size_t) x;
}

static size_t
hash_frames (const gm_mem_frame *frames, size_t n)
{
  uint64_t h = UINT64_C (1469598103934665603);

  for (size_t i = 0; i < n; i++)
    {
      h = (h ^ (uint64_t) (uintptr_t) frames[i].code)
          * UINT64_C (1099511628211);
      h = (h ^ (uint64_t) (uint32_t) frames[i].offset)
          * UINT64_C (1099511628211);
    }
  return hash_address ((uintptr_t) (h ^ n));
}

gm_status
gm_hist_new (size_t max_entries, gm_hist **out)
{
  gm_hist *hist;

  *out = NULL;
  if (max_entries > GM_MEM_HISTORY_MAX_ENTRIES)
    return gm_error_set (GM_ERR_VALUE, 0, NULL, "a memory history of %zu "
                         "entries: at most %zu", max_entries,
                         GM_MEM_HISTORY_MAX_ENTRIES);
  hist = calloc (1, sizeof *hist);
  if (hist == NULL)
    goto nomem;
  hist->max_entries = max_entries < 1 ? 1 : max_entries;
  hist->ring = malloc (hist->max_entries * sizeof *hist->ring);
  hist->live = calloc (LIVE_FIRST_SLOTS, sizeof *hist->live);
  hist->live_mask = LIVE_FIRST_SLOTS - 1;
  hist->stack_slots = malloc (STACK_FIRST_SLOTS * sizeof (int32_t));
  hist->stack_mask = STACK_FIRST_SLOTS - 1;
  hist->stack_start = calloc (1, sizeof (size_t));
  hist->stacks_room = 0;
  if (hist->ring == NULL || hist->live == NULL || hist->stack_slots == NULL
      || hist->stack_start == NULL)
    goto nomem;
  memset (hist->stack_slots, 0xff, STACK_FIRST_SLOTS * sizeof (int32_t));
  *out = hist;
  return GM_OK;
nomem:
  gm_hist_free (hist, NULL);
  return gm_error_set (GM_ERR_HOST_NOMEM, 0, NULL, "no host memory for a "
                       "memory history of %zu entries", max_entries);
}

void
gm_hist_free (gm_hist *hist,
              void (*release) (const gm_mem_frame *frames, size_t n))
{
  if (hist == NULL)
    return;
  if (release != NULL)
    for (size_t s = 0; s < hist->nstacks; s++)
      release (hist->frames + hist->stack_start[s],
               hist->stack_start[s + 1] - hist->stack_start[s]);
  free (hist->ring);
  free (hist->live);
  free (hist->frames);
  free (hist->stack_start);
  free (hist->stack_slots);
  free (hist);
}

static bool
same_stack (const gm_hist *hist, int32_t stack, const gm_mem_frame *frames,
            size_t n)
{
  size_t start = hist->stack_start[stack];

  return hist->stack_start[stack + 1] - start == n
         && memcmp (hist->frames + start, frames, n * sizeof *frames) == 0;
}

/* Doubles the stack table's slots; false where it cannot.  */
static bool
grow_stack_slots (gm_hist *hist)
{
  size_t slots = (hist->stack_mask + 1) * 2;
  int32_t *table = malloc (slots * sizeof *table);

  if (table == NULL)
    return false;
  memset (table, 0xff, slots * sizeof *table);
  for (size_t s = 0; s < hist->nstacks; s++)
    {
      size_t start = hist->stack_start[s];
      size_t i = hash_frames (hist->frames + start,
                              hist->stack_start[s + 1] - start)
                 & (slots - 1);
      while (table[i] >= 0)
        i = (i + 1) & (slots - 1);
      table[i] = (int32_t) s;
    }
  free (hist->stack_slots);
  hist->stack_slots = table;
  hist->stack_mask = slots - 1;
  return true;
}

int32_t
gm_hist_intern (gm_hist *hist, const gm_mem_frame *frames, size_t n,
                void (*retain) (const gm_mem_frame *frames, size_t n))
{
  size_t i = hash_frames (frames, n) & hist->stack_mask;

  for (; hist->stack_slots[i] >= 0; i = (i + 1) & hist->stack_mask)
    if (same_stack (hist, hist->stack_slots[i], frames, n))
      return hist->stack_slots[i];
  if (hist->nstacks >= INT32_MAX - 1)
    return -1;
  if (hist->nframes + n > hist->frames_room)
    {
      size_t room = hist->frames_room ? hist->frames_room * 2 : 1024;
      gm_mem_frame *grown = realloc (hist->frames, room * sizeof *grown);
      if (grown == NULL)
        return -1;
      hist->frames = grown;
      hist->frames_room = room;
    }
  if (hist->nstacks + 2 > hist->stacks_room)
    {
      size_t room = hist->stacks_room ? hist->stacks_room * 2 : 256;
      size_t *grown = realloc (hist->stack_start, room * sizeof *grown);
      if (grown == NULL)
        return -1;
      hist->stack_start = grown;
      hist->stacks_room = room;
    }
  if (n > 0)
    memcpy (hist->frames + hist->nframes, frames, n * sizeof *frames);
  hist->nframes += n;
  hist->stack_start[hist->nstacks + 1] = hist->nframes;
  hist->stack_slots[i] = (int32_t) hist->nstacks;
  if (retain != NULL)
    retain (frames, n);
  hist->nstacks++;
  /* Half full at most, so that a probe ends soon.  */
  if (hist->nstacks * 2 > hist->stack_mask + 1)
    grow_stack_slots (hist);
  return (int32_t) (hist->nstacks - 1);
}

void
gm_hist_record (gm_hist *hist, const gm_mem_event *event)
{
  size_t slot = hist->head + hist->count;

  if (slot >= hist->max_entries)
    slot -= hist->max_entries;
  hist->ring[slot] = *event;
  if (hist->count < hist->max_entries)
    hist->count++;
  else
    {
      hist->head = hist->head + 1 == hist->max_entries ? 0 : hist->head + 1;
      hist->dropped++;
    }
}

/* Puts BLOCK into TABLE of MASK + 1 slots, which has room.  */
static void
live_put (gm_mem_block *table, size_t mask, const gm_mem_block *block)
{
  size_t i = hash_address (block->address) & mask;

  while (table[i].address != 0 && table[i].address != block->address)
    i = (i + 1) & mask;
  table[i] = *block;
}

bool
gm_hist_block_add (gm_hist *hist, const gm_mem_block *block)
{
  if ((hist->nlive + 1) * 2 > hist->live_mask + 1)
    {
      size_t slots = (hist->live_mask + 1) * 2;
      gm_mem_block *table = calloc (slots, sizeof *table);
      if (table == NULL)
        return false;
      for (size_t i = 0; i <= hist->live_mask; i++)
        if (hist->live[i].address != 0)
          live_put (table, slots - 1, &hist->live[i]);
      free (hist->live);
      hist->live = table;
      hist->live_mask = slots - 1;
    }
  size_t i = hash_address (block->address) & hist->live_mask;
  while (hist->live[i].address != 0
         && hist->live[i].address != block->address)
    i = (i + 1) & hist->live_mask;
  if (hist->live[i].address == 0)
    hist->nlive++;
  hist->live[i] = *block;
  return true;
}

void
gm_hist_block_remove (gm_hist *hist, uintptr_t address)
{
  size_t mask = hist->live_mask, i = hash_address (address) & mask;

  while (hist->live[i].address != address)
    {
      if (hist->live[i].address == 0)
        return;
      i = (i + 1) & mask;
    }
  /* Backward shift: move up each later block of the run whose home slot
     does not lie between the hole and it.  */
  for (size_t j = (i + 1) & mask; hist->live[j].address != 0;
       j = (j + 1) & mask)
    {
      size_t home = hash_address (hist->live[j].address) & mask;
      if (((j - home) & mask) >= ((j - i) & mask))
        {
          hist->live[i] = hist->live[j];
          i = j;
        }
    }
  hist->live[i].address = 0;
  hist->nlive--;
}

size_t
gm_hist_largest (const gm_hist *hist, int device, gm_mem_block *out,
                 size_t n)
{
  size_t found = 0;

  for (size_t i = 0; i <= hist->live_mask; i++)
    {
      const gm_mem_block *block = &hist->live[i];
      size_t at;
      if (block->address == 0 || block->device != device)
        continue;
      /* Insertion into the short sorted list OUT.  */
      for (at = found; at > 0 && out[at - 1].size < block->size; at--)
        if (at < n)
          out[at] = out[at - 1];
      if (at < n)
        {
          out[at] = *block;
          if (found < n)
            found++;
        }
    }
  return found;
}

size_t
gm_hist_stack (const gm_hist *hist, int32_t stack, gm_mem_frame *frames)
{
  size_t start, n;

  if (stack < 0 || (size_t) stack >= hist->nstacks)
    return 0;
  start = hist->stack_start[stack];
  n = hist->stack_start[stack + 1] - start;
  if (n > 0)
    memcpy (frames, hist->frames + start, n * sizeof *frames);
  return n;
}

gm_status
gm_hist_copy (const gm_hist *hist, gm_mem_history_copy *copy)
{
  memset (copy, 0, sizeof *copy);
  copy->blocks = malloc ((hist->nlive ? hist->nlive : 1)
                         * sizeof *copy->blocks);
  copy->events = malloc ((hist->count ? hist->count : 1)
                         * sizeof *copy->events);
  copy->frames = malloc ((hist->nframes ? hist->nframes : 1)
                         * sizeof *copy->frames);
  copy->stack_start = malloc ((hist->nstacks + 1)
                              * sizeof *copy->stack_start);
  if (copy->blocks == NULL || copy->events == NULL || copy->frames == NULL
      || copy->stack_start == NULL)
    {
      gm_mem_history_copy_free (copy);
      return gm_error_set (GM_ERR_HOST_NOMEM, 0, NULL, "no host memory for "
                           "a copy of the memory history");
    }
  for (size_t i = 0; i <= hist->live_mask; i++)
    if (hist->live[i].address != 0)
      copy->blocks[copy->nblocks++] = hist->live[i];
  {
    size_t first = hist->max_entries - hist->head;
    if (first > hist->count)
      first = hist->count;
    /* (memcpy may not be given NULL, even for no bytes: an empty
       history has no frames array yet.)  */
    if (first > 0)
      memcpy (copy->events, hist->ring + hist->head,
              first * sizeof *copy->events);
    if (hist->count > first)
      memcpy (copy->events + first, hist->ring,
              (hist->count - first) * sizeof *copy->events);
  }
  copy->nevents = hist->count;
  copy->dropped = hist->dropped;
  copy->max_entries = hist->max_entries;
  if (hist->nframes > 0)
    memcpy (copy->frames, hist->frames,
            hist->nframes * sizeof *copy->frames);
  memcpy (copy->stack_start, hist->stack_start,
          (hist->nstacks + 1) * sizeof *copy->stack_start);
  copy->nstacks = hist->nstacks;
  return GM_OK;
}

void
gm_mem_history_copy_free (gm_mem_history_copy *copy)
{
  free (copy->blocks);
  free (copy->events);
  free (copy->frames);
  free (copy->stack_start);
  memset (copy, 0, sizeof *copy);
}
