/* mem-history.h -- the memory history's store (mem-history.c): a ring
   of the last events, a table of the live blocks keyed by address, and
   the call stacks seen, each kept once.  Plain data structures with no
   lock: memory.c serializes every call under its books' lock.  */

#ifndef GM_MEM_HISTORY_H
#define GM_MEM_HISTORY_H

#include "gm.h"

typedef struct gm_hist gm_hist;

/* A new, empty store keeping the last MAX_ENTRIES (at least 1) events,
   in *HIST.  GM_ERR_HOST_NOMEM where it cannot be allocated.  */
gm_status gm_hist_new (size_t max_entries, gm_hist **hist);
/* Frees HIST; first hands each stack it kept to RELEASE (may be NULL).  */
void gm_hist_free (gm_hist *hist,
                   void (*release) (const gm_mem_frame *frames, size_t n));

/* The index of the stack of N (1 to GM_MEM_STACK_DEPTH) FRAMES, kept
   once: a stack seen for the first time is copied and handed to RETAIN
   (may be NULL).  -1 where the store cannot grow.  */
int32_t gm_hist_intern (gm_hist *hist, const gm_mem_frame *frames, size_t n,
                        void (*retain) (const gm_mem_frame *frames,
                                        size_t n));

/* Appends EVENT, overwriting the oldest when the ring is full.  */
void gm_hist_record (gm_hist *hist, const gm_mem_event *event);

/* Lists BLOCK as live; false where the table cannot grow (the block is
   then missing from snapshots, nothing else).  */
bool gm_hist_block_add (gm_hist *hist, const gm_mem_block *block);
/* Forgets the live block at ADDRESS; nothing where none is listed.  */
void gm_hist_block_remove (gm_hist *hist, uintptr_t address);

/* Copies up to N of DEVICE's largest live blocks into OUT, largest
   first; returns how many.  */
size_t gm_hist_largest (const gm_hist *hist, int device, gm_mem_block *out,
                        size_t n);
/* Copies stack STACK's frames into FRAMES (room for
   GM_MEM_STACK_DEPTH); returns how many (0 for -1).  */
size_t gm_hist_stack (const gm_hist *hist, int32_t stack,
                      gm_mem_frame *frames);

/* Copies everything HIST holds into *COPY (see gm.h).  */
gm_status gm_hist_copy (const gm_hist *hist, gm_mem_history_copy *copy);

#endif
