/* block-record.h -- the record of one block of memory that gpumem hands
   out: who holds it and how it is exposed (block-record.c).

   An array's memory lives until the last of its holders lets go: the
   array that made it (until free () or its end), each call running
   without the GIL on it, each native holder (a C++ gpumem::array, a C
   API hold, a DLPack consumer).  The record counts them; the last
   release gives the memory back.  Callers serialize their use of one
   record (the Python layer: with the GIL), so the counts are plain
   integers that a C++ caster may change inline (gm_hold,
   gpumem/extension.h, is the head of this record).  */

#ifndef GM_BLOCK_RECORD_H
#define GM_BLOCK_RECORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "gm-backend.h"
#include "gm-status.h"

/* How a block is exposed to code gpumem cannot see (gm_block.exposure):
   the bits tell what may still read its address.  */
#define GM_BLOCK_EXPOSED_POINTER 1u   /* its address was handed out with no
                                         lifetime (the CUDA Array
                                         Interface): for good */
#define GM_BLOCK_SHARED 2u            /* other processes may open it */

typedef struct gm_block gm_block;

/* What the last release does with a block whose memory is not the
   books' to free (memory of another library, or a shared block): CTX
   is the record's.  Called with the caller's serialization held.  */
typedef void (*gm_block_gone_fn) (void *ctx);

struct gm_block
{
  /* The head a C++ caster reads inline (gm_hold): every hold, and of
     them those of native code.  */
  uint32_t holds;
  uint32_t native;
  uint32_t exposure;           /* GM_BLOCK_* bits */
  bool owner_gone;             /* the array that made it let go */
  bool native_counted;         /* in the books' native_held_bytes */
  bool managed;                /* gm_mem_alloc_managed's */
  bool advised;                /* managed memory given advice: not kept
                                  for reuse when it goes */
  int device;
  void *ptr;
  size_t nbytes;
  /* NULL: PTR came from gm_mem_alloc, and the last release gives it
     back there; else the last release calls GONE (CTX).  */
  gm_block_gone_fn gone;
  void *ctx;
  /* The spill engine's (spill.c): the device's list of blocks it may
     move, least recently used first; where the bytes are while spilled
     (HOST, and PTR NULL), or, on the device again, HOST the clean copy
     that stays valid until the first use that may write (so that the
     next spill needs no copy); the user the engine tells when it moves
     them (USER, for gm_spill_set_moved_hook).  */
  gm_block *prev, *next;
  bool listed;
  bool spilled;
  void *host;
  bool host_pinned;
  /* Recorded after the copy of a return queued on a stream: until it
     completes, HOST is still being read and may not be let go of.  NULL
     when no such copy is pending.  */
  gm_event *host_busy;
  bool came_back;              /* returned from host memory before */
  void *user;
};

/* Allocates NBYTES on DEVICE ordered on STREAM (gm_mem_alloc) with its
   record in *BLOCK, held once (by its maker); managed memory
   (gm_mem_alloc_managed) with GM_BLOCK_MANAGED in FLAGS.  Where the
   device or the limit refuses and spilling is on, GM_BLOCK_MAY_SPILL
   lets idle arrays move to host memory first (spill.h): the caller
   holds no other array's address.  GM_ERR_NOMEM as gm_mem_alloc, GM_ERR_HOST_NOMEM for the
   record.  */
#define GM_BLOCK_MAY_SPILL 1u   /* gm_block_alloc: idle arrays may move */
#define GM_BLOCK_MANAGED 2u     /* gm_block_alloc: managed memory */
gm_status gm_block_alloc (int device, size_t nbytes, gm_stream *stream,
                          unsigned flags, gm_block **block);
/* A record for NBYTES at PTR on DEVICE that gpumem did not allocate,
   held once; its last release calls GONE (CTX).  NULL where the record
   cannot be allocated.  */
gm_block *gm_block_wrap (int device, void *ptr, size_t nbytes,
                         gm_block_gone_fn gone, void *ctx);
/* Makes the last release of BLOCK call GONE (CTX) instead of giving
   its memory back to the books: its memory now belongs to another
   record (a shared block's).  */
void gm_block_hand_over (gm_block *block, gm_block_gone_fn gone, void *ctx);
/* One more hold on BLOCK; NATIVE: by code gpumem cannot see.  */
void gm_block_hold (gm_block *block, bool native);
/* Ends a hold gm_block_hold (or the maker) took; the last one gives
   the memory back (a failure is the thread's error: GM_ERR_* as
   gm_mem_free) and frees the record.  */
gm_status gm_block_release (gm_block *block, bool native);
/* What the last release does, for a caller that counted BLOCK's holds
   down to 0 itself (a C++ caster, inline): gives the memory back and
   frees the record.  */
gm_status gm_block_gone (gm_block *block);
/* Ends the maker's hold: the array that made BLOCK lets go (free ()
   or its end).  Memory still held then is counted as held by native
   code only (gm_mem_stats.native_held_bytes) until it goes.  */
gm_status gm_block_owner_release (gm_block *block);
/* Marks BLOCK exposed as BITS say (GM_BLOCK_*), or no longer shared
   (gm_block_unexpose); never fails.  */
void gm_block_expose (gm_block *block, uint32_t bits);
void gm_block_unexpose (gm_block *block, uint32_t bits);
/* Marks BLOCK's managed memory as given advice (read-mostly, a preferred
   location, who accesses it): when it goes, it goes back to the backend
   rather than serving another array with that advice.  */
void gm_block_note_advised (gm_block *block);

#endif /* GM_BLOCK_RECORD_H */
