/* pinned-ranges.c -- the list of page-locked blocks gpumem allocated
   (pinned-ranges.h): blocks sorted by start address, found by binary
   search under one mutex.  A program holds few such blocks (its
   pinned_empty arrays), and the list changes only when one is made or
   freed; a lookup costs some tens of nanoseconds, the lock's
   uncontended acquire and release among them.  */

#include "config.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "pinned-ranges.h"

typedef struct range
{
  uintptr_t start, end;    /* [start, end) */
} range;

static struct
{
  pthread_mutex_t lock;
  range *blocks;
  size_t count, capacity;
} list = {PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0};

/* The index of the first block whose start is above ADDRESS (so the one
   before it, if any, is the last that starts at or below ADDRESS).
   Called with the lock held.  */
static size_t
first_above (uintptr_t address)
{
  size_t low = 0, high = list.count;

  while (low < high)
    {
      size_t mid = low + (high - low) / 2;
      if (list.blocks[mid].start <= address)
        low = mid + 1;
      else
        high = mid;
    }
  return low;
}

bool
gm_pinned_ranges_add (const void *start, size_t nbytes)
{
  uintptr_t at = (uintptr_t) start;
  bool added = false;
  size_t i;

  if (start == NULL || nbytes == 0 || at + nbytes < at)
    return false;
  pthread_mutex_lock (&list.lock);
  if (list.count == list.capacity)
    {
      size_t capacity = list.capacity ? 2 * list.capacity : 16;
      range *grown = realloc (list.blocks, capacity * sizeof *grown);
      if (grown == NULL)
        goto done;
      list.blocks = grown;
      list.capacity = capacity;
    }
  i = first_above (at);
  for (size_t j = list.count; j > i; j--)
    list.blocks[j] = list.blocks[j - 1];
  list.blocks[i].start = at;
  list.blocks[i].end = at + nbytes;
  list.count++;
  added = true;
done:
  pthread_mutex_unlock (&list.lock);
  return added;
}

void
gm_pinned_ranges_remove (const void *start)
{
  uintptr_t at = (uintptr_t) start;
  size_t i;

  pthread_mutex_lock (&list.lock);
  i = first_above (at);
  if (i > 0 && list.blocks[i - 1].start == at)
    {
      for (size_t j = i - 1; j + 1 < list.count; j++)
        list.blocks[j] = list.blocks[j + 1];
      list.count--;
    }
  pthread_mutex_unlock (&list.lock);
}

bool
gm_pinned_ranges_holds (const void *ptr)
{
  uintptr_t at = (uintptr_t) ptr;
  bool holds;
  size_t i;

  pthread_mutex_lock (&list.lock);
  i = first_above (at);
  holds = i > 0 && at < list.blocks[i - 1].end;
  pthread_mutex_unlock (&list.lock);
  return holds;
}

void
gm_pinned_ranges_clear (void)
{
  pthread_mutex_lock (&list.lock);
  free (list.blocks);
  list.blocks = NULL;
  list.count = list.capacity = 0;
  pthread_mutex_unlock (&list.lock);
}
