/* pool-blocks.c -- the live blocks other libraries hold from gpumem's
   pool (pool-hooks.c), by address, so that share() finds the block of a
   tensor or a CuPy array from its pointer, and so that a block shared
   with other processes is handed to the share server when its library
   frees it instead of going back to the pool.  An open-addressing table
   keyed by the block's start (linear probing, deletion by shifting
   back): adding and removing cost a hash and a probe or two on every
   allocation and free; finding the block that contains a pointer scans
   the table, which only share() does.  Plain C, without the GIL.  */

#include "config.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "gm.h"
#include "pool-hooks.h"

typedef struct slot
{
  uintptr_t base;              /* 0: empty */
  size_t nbytes;
  int device;
  gm_mem_owner owner;
  gm_pool_drop_fn drop;        /* set once shared */
  void *ctx;
} slot;

static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static slot *table;
static size_t room, used;      /* ROOM a power of two, or 0 */

static size_t
slot_of (uintptr_t base, size_t mask)
{
  uint64_t h = (uint64_t) base * 0x9e3779b97f4a7c15u;
  return (size_t) (h >> 17) & mask;
}

/* Doubles the table (ROOM 0: makes it); under table_lock.  false when
   no host memory is left.  */
static bool
grow (void)
{
  size_t fresh_room = room ? 2 * room : 1024;
  slot *fresh = calloc (fresh_room, sizeof *fresh);

  if (fresh == NULL)
    return false;
  for (size_t i = 0; i < room; i++)
    if (table[i].base != 0)
      {
        size_t j = slot_of (table[i].base, fresh_room - 1);
        while (fresh[j].base != 0)
          j = (j + 1) & (fresh_room - 1);
        fresh[j] = table[i];
      }
  free (table);
  table = fresh;
  room = fresh_room;
  return true;
}

gm_status
gm_pool_blocks_add (void *ptr, size_t nbytes, gm_mem_owner owner,
                    int device)
{
  size_t i;

  if (ptr == NULL)
    return GM_OK;
  pthread_mutex_lock (&table_lock);
  if (2 * (used + 1) > room && !grow ())
    {
      pthread_mutex_unlock (&table_lock);
      return gm_error_set (GM_ERR_HOST_NOMEM, 0, NULL, "no host memory to "
                           "list a block of gpumem's pool");
    }
  i = slot_of ((uintptr_t) ptr, room - 1);
  while (table[i].base != 0)
    i = (i + 1) & (room - 1);
  table[i] = (slot) { (uintptr_t) ptr, nbytes, device, owner, NULL, NULL };
  used++;
  pthread_mutex_unlock (&table_lock);
  return GM_OK;
}

bool
gm_pool_blocks_remove (void *ptr, gm_pool_drop_fn *drop, void **ctx)
{
  uintptr_t base = (uintptr_t) ptr;
  size_t i, j;

  *drop = NULL;
  *ctx = NULL;
  pthread_mutex_lock (&table_lock);
  if (room == 0)
    goto absent;
  for (i = slot_of (base, room - 1); table[i].base != base;
       i = (i + 1) & (room - 1))
    if (table[i].base == 0)
      goto absent;
  *drop = table[i].drop;
  *ctx = table[i].ctx;
  /* Shift back the run after I, so that no probe stops early.  */
  for (j = (i + 1) & (room - 1); table[j].base != 0; j = (j + 1) & (room - 1))
    {
      size_t home = slot_of (table[j].base, room - 1);
      if (((j - home) & (room - 1)) >= ((j - i) & (room - 1)))
        {
          table[i] = table[j];
          i = j;
        }
    }
  table[i].base = 0;
  used--;
  pthread_mutex_unlock (&table_lock);
  return *drop != NULL;
absent:
  pthread_mutex_unlock (&table_lock);
  return false;
}

gm_status
gm_pool_blocks_share (const void *ptr, gm_pool_share_fn make,
                      gm_pool_drop_fn drop, gm_pool_block *found)
{
  uintptr_t at = (uintptr_t) ptr;
  gm_status status = GM_OK;
  slot *hit = NULL;

  pthread_mutex_lock (&table_lock);
  for (size_t i = 0; i < room && hit == NULL; i++)
    if (table[i].base != 0 && at >= table[i].base
        && at - table[i].base < table[i].nbytes)
      hit = &table[i];
  if (hit == NULL)
    {
      pthread_mutex_unlock (&table_lock);
      return gm_error_set (GM_ERR_VALUE, 0, NULL, "the memory at %p is not "
                           "a block another library holds from gpumem's "
                           "pool", ptr);
    }
  found->base = (void *) hit->base;
  found->nbytes = hit->nbytes;
  found->device = hit->device;
  found->owner = hit->owner;
  if (hit->drop == NULL)
    {
      status = make (found, &hit->ctx);
      if (status == GM_OK)
        hit->drop = drop;
    }
  found->ctx = hit->ctx;
  pthread_mutex_unlock (&table_lock);
  return status;
}
