/* spill.h -- the spill engine (spill.c): when a device's memory runs
   out, arrays that nothing outside gpumem can reach move to host memory,
   least recently used first, and come back on their next use.

   It works on the books' block records (block-record.h) and keeps
   their rule: a block moves only while its maker alone holds it (no
   call running on it, no native holder, no DLPack consumer), nothing
   was told its address for good (the CUDA Array Interface), it is not
   shared, and the caller does not name it as in use (KEEP).  Callers
   serialize their use of the records (the Python layer: the GIL).  */

#ifndef GM_SPILL_H
#define GM_SPILL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "block-record.h"
#include "gm-status.h"

/* One device's spill figures.  */
typedef struct gm_spill_stats
{
  bool enabled;
  size_t host_limit;             /* SIZE_MAX: none */
  size_t spilled_bytes;          /* now in host memory */
  size_t spilled_blocks;
  uint64_t spills, spill_bytes, spill_ns;      /* since the start */
  uint64_t returns, return_bytes, return_ns;
  size_t clean_bytes;            /* host copies of blocks back on the
                                    device, still equal to them */
  size_t clean_blocks;
  uint64_t clean_spills;         /* spills that needed no copy */
  uint64_t exchanges;            /* returns into a spilling block's memory,
                                    the two copies at once */
} gm_spill_stats;

/* The number of blocks spilled now, over every device: a call reads it
   to skip looking for spilled arguments.  */
extern size_t gm_spill_blocks_out;
/* Whether spilling was ever turned on: until it is, a use does not
   reorder the lists (gm_spill_touch).  */
extern bool gm_spill_ever_on;

/* Turns spilling on or off for DEVICE (-1: every device), host memory
   for spilled blocks limited to HOST_LIMIT bytes in all (SIZE_MAX:
   none).  Turning it off leaves spilled blocks where they are, to come
   back on use.  GM_ERR_VALUE for a bad device.  */
gm_status gm_spill_set (int device, bool enabled, size_t host_limit);
/* Whether spilling is on for DEVICE.  */
bool gm_spill_enabled (int device);
/* Reads GPUMEM_SPILL once (a switch: on for every device).  GM_ERR_VALUE
   for a bad value.  */
gm_status gm_spill_from_env (void);
gm_status gm_spill_stats_get (int device, gm_spill_stats *stats);

/* Lists BLOCK (just allocated) among DEVICE's movable blocks, as the
   most recently used; the engine tells USER's hook when it moves it.  */
void gm_spill_track (gm_block *block, void *user);
/* Takes BLOCK off its list (its maker let go, or its memory went to
   another record).  */
void gm_spill_untrack (gm_block *block);
/* Marks BLOCK the most recently used.  */
static inline void gm_spill_touch (gm_block *block);
/* Tells the engine that a use may write BLOCK: the clean host copy it
   kept since the block came back (if any) is dropped, and the next
   spill copies.  Every use that may write calls it before the block's
   address is handed on; uses that only read (a kernel's const
   parameters, a copy's source) do not.  */
static inline void gm_spill_written (gm_block *block);

/* What the engine calls when it moves a block's bytes to host memory:
   USER is gm_spill_track's.  One hook for the process (the Python
   layer's).  */
typedef void (*gm_spill_moved_fn) (void *user);
void gm_spill_set_moved_hook (gm_spill_moved_fn hook);

/* Prints, under --stats' table, a line for each device whose arrays
   spilled: the moves each way, their bytes and seconds, the returns
   that were exchanges, and what is spilled now; nothing where none
   ever did.  */
void gm_spill_print_stats (FILE *out);

/* Moves blocks of DEVICE that may move to host memory until NBYTES
   have gone or none is left, for a new array: blocks that alone cover
   what is still needed before any smaller one; of each, first those
   with a clean copy (no copy needed), most recently used first (a loop
   over more than fits needs the block it used last the latest), then
   the others, least recently used first.  The room made for the return
   of a block that came back before (gm_spill_return) takes the others
   most recently used first too: that is a loop over more than fits
   coming round again.  The NKEEP blocks KEEP never move.  *FREED, the
   bytes moved.  GM_OK, or the error of a copy; the caller retries its
   allocation after.  */
gm_status gm_spill_make_room (int device, size_t nbytes, gm_block *const *keep,
                              int nkeep, size_t *freed);
/* Moves BLOCK to host memory now, if it may move (else GM_ERR_FAILED
   saying why): a copy, or none where the block's clean copy is still
   valid (gm_spill_written).  */
gm_status gm_spill_block (gm_block *block);
/* Brings spilled BLOCK back to its device (a new address in
   BLOCK->ptr), moving others out of the way when EVICT and spilling is
   on, never those of KEEP; the host bytes stay as its clean copy.
   Where the device has no room and a block of the same size may move,
   the return takes that block's memory in place (an exchange): its
   bytes go to host memory piece by piece while BLOCK's come up behind
   each piece, the bus's two directions at once.
   STREAM NULL: complete on return.  Else the allocation and the copy
   are queued on STREAM, and the host bytes are kept until the copy is
   done (a use that may write, or the block's end, waits for it).
   GM_ERR_NOMEM where no room can be made.  */
gm_status gm_spill_return (gm_block *block, gm_stream *stream, bool evict,
                           gm_block *const *keep, int nkeep);
/* Starts copying to host memory the blocks of DEVICE that the room for
   the returns of KEEP's spilled blocks that came back before (a loop
   over more than fits) would take, beyond the memory those returns
   take in place (gm_spill_return's exchange): most recently used
   first, those that alone cover what is left first, among those that
   may move, have no clean copy and are not of KEEP; on a stream of the
   engine's, after all work queued on DEVICE so far.  Once done each is
   a clean copy (until a use may write), and the block's spill needs no
   copy.  For a call that brings the NKEEP blocks KEEP back ahead of use
   (prefetch on a stream).  GM_OK also where none may, or the host limit
   leaves no room.  */
gm_status gm_spill_write_behind (int device, gm_block *const *keep,
                                 int nkeep);
/* Destroys the engine's streams (the backend's end).  */
void gm_spill_release_streams (void);
/* Writes into BUF of SIZE why the blocks of DEVICE that stay could not
   move, counted by reason ("3 blocks (12 MiB) held by native code,
   ..."); empty when every block moved or none is listed.  */
void gm_spill_explain (int device, char *buf, size_t size);
/* Why BLOCK may not move now, in words, or NULL when it may.  */
const char *gm_spill_why_not (const gm_block *block);

/* The list a block sits on, and its clean copy; the engine's.  */
void gm_spill_touch_slow (gm_block *block);
void gm_spill_drop_clean (gm_block *block);
static inline void
gm_spill_touch (gm_block *block)
{
  if (gm_spill_ever_on && block->listed && block->next != NULL)
    gm_spill_touch_slow (block);
}

static inline void
gm_spill_written (gm_block *block)
{
  if (block->host != NULL && !block->spilled)
    gm_spill_drop_clean (block);
}

#endif /* GM_SPILL_H */
