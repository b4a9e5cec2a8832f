/* gm-memory.h -- the memory books (memory.c): statistics per owner, limits,
   the memory history (mem-history.c holds it) and its reports
   (mem-report.c).  */

#ifndef GM_MEMORY_H
#define GM_MEMORY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "gm-backend.h"
#include "gm-status.h"

/* The most devices the books keep figures for.  */
#define GM_MAX_DEVICES 1024

/* Memory accounting (memory.c): every device allocation goes through
   here, so statistics and limits hold for both backends.  */

/* Who asked for a block: gpumem's own arrays, a library allocating
   from gpumem's pool, or another process whose block this process
   opened (an import: memory it maps, not memory it allocated).  The
   limit holds for their sum.  */
typedef enum gm_mem_owner
{
  GM_MEM_OWNER_GPUMEM,
  GM_MEM_OWNER_TORCH,
  GM_MEM_OWNER_CUPY,
  GM_MEM_OWNER_NUMBA,
  GM_MEM_OWNER_IMPORTED,
  GM_MEM_NOWNERS
} gm_mem_owner;

/* "gpumem", "torch", "cupy", "numba", "imported", indexed by
   gm_mem_owner.  */
extern const char *const gm_mem_owner_names[GM_MEM_NOWNERS];

/* One owner's books on one device.  */
typedef struct gm_mem_owner_stats
{
  size_t allocated_bytes;
  size_t peak_allocated_bytes;
  size_t allocations;
  size_t total_allocations;
} gm_mem_owner_stats;

/* One device's books: the first five fields are the sums over owners
   (the peak is the sum's own peak, not the sum of the owners' peaks).  */
typedef struct gm_mem_stats
{
  size_t allocated_bytes;
  size_t peak_allocated_bytes;
  size_t reserved_bytes;
  size_t allocations;
  size_t total_allocations;
  size_t limit;              /* SIZE_MAX: none */
  /* Of ALLOCATED_BYTES, this process's blocks that other processes may
     open (made shareable, or shared since): the share server's.  */
  size_t shared_bytes;
  size_t shared_blocks;
  gm_mem_owner_stats owners[GM_MEM_NOWNERS];
  /* Of ALLOCATED_BYTES, blocks whose array let go (free () or its end)
     that native code still holds (block-record.h): they go when it lets
     go too.  */
  size_t native_held_bytes;
  size_t native_held_blocks;
  /* Of ALLOCATED_BYTES and ALLOCATIONS, the managed memory whose home
     is the device (gm_mem_alloc_managed), wherever its pages lie.  */
  size_t managed_bytes;
  size_t peak_managed_bytes;
  size_t managed_allocations;
  /* Managed memory freed and kept for the next request of its size
     (managed-cache.c): not in ALLOCATED_BYTES, given back by
     gm_mem_empty_cache.  */
  size_t managed_cached_bytes;
} gm_mem_stats;

/* Allocates NBYTES on DEVICE ordered on STREAM for OWNER; *PTR is NULL
   for 0 bytes.  When the device refuses, the idle memory (the managed
   blocks kept for reuse, the pools' cache) is given back and the
   request tried once more.  GM_ERR_NOMEM, naming the
   request, the free and idle bytes, each owner's totals and (with the
   history on) the five largest live blocks, when the limit or the
   device refuses.  */
gm_status gm_mem_alloc_as (gm_mem_owner owner, int device, size_t nbytes,
                           gm_stream *stream, void **ptr);
/* Frees what gm_mem_alloc_as returned to OWNER.  */
gm_status gm_mem_free_as (gm_mem_owner owner, int device, void *ptr,
                          size_t nbytes, gm_stream *stream);
/* How gm_mem_alloc_with gets memory, and gm_mem_free_with gives it
   back, where the backend's pool is not the one asked: CTX is the
   caller's.  */
typedef gm_status (*gm_mem_get_fn) (void *ctx, int device, size_t nbytes,
                                    gm_stream *stream, void **ptr);
typedef gm_status (*gm_mem_put_fn) (void *ctx, int device, void *ptr,
                                    size_t nbytes, gm_stream *stream);
/* gm_mem_alloc_as with GET (CTX) instead of the backend's malloc: the
   same limit, books, retry and history, for memory the share server
   makes or maps.  */
gm_status gm_mem_alloc_with (gm_mem_owner owner, int device, size_t nbytes,
                             gm_stream *stream, gm_mem_get_fn get,
                             void *ctx, void **ptr);
/* gm_mem_free_as with PUT (CTX) instead of the backend's free.  */
gm_status gm_mem_free_with (gm_mem_owner owner, int device, void *ptr,
                            size_t nbytes, gm_stream *stream,
                            gm_mem_put_fn put, void *ctx);
/* Counts NBYTES of DEVICE's booked memory as shared (SHARED), or as no
   longer shared; never fails.  */
void gm_mem_note_shared (int device, size_t nbytes, bool shared);
/* Counts NBYTES of DEVICE's booked memory as held by native code alone
   (HELD), or no longer; never fails.  */
void gm_mem_note_native_held (int device, size_t nbytes, bool held);
/* The spill engine's free of a block whose bytes went to host memory
   (gm_mem_free, no stream), and its allocation of the block's return
   (gm_mem_alloc, ordered on STREAM): what the history records as a
   spill and a return (GM_MEM_ACTION_SPILL, GM_MEM_ACTION_RETURN).  */
gm_status gm_mem_spill_free (int device, void *ptr, size_t nbytes);
gm_status gm_mem_return_alloc (int device, size_t nbytes, gm_stream *stream,
                               void **ptr);
/* The spill engine's exchange: the NBYTES at PTR of DEVICE pass from
   a block that spills to one that returns, without going back to the
   backend; the history records the spill and the return at PTR (the
   return ordered on STREAM).  The books' totals stay; never fails.
   One hold of the books' lock, not gm_mem_spill_free then
   gm_mem_return_alloc, so that no other thread's allocation can take
   the memory's room under the limit between the two.  */
void gm_mem_spill_exchange (int device, void *ptr, size_t nbytes,
                            gm_stream *stream);
/* gm_mem_alloc_as and gm_mem_free_as for gpumem's own arrays.  */
gm_status gm_mem_alloc (int device, size_t nbytes, gm_stream *stream,
                        void **ptr);
gm_status gm_mem_free (int device, void *ptr, size_t nbytes,
                       gm_stream *stream);
/* gm_mem_alloc and gm_mem_free for managed memory whose home is DEVICE
   (the backend's managed_malloc and managed_free): booked on DEVICE,
   under its limit, in its history, and counted in its MANAGED_BYTES as
   well.  The limit counts these bytes although their pages may lie on
   the host: it bounds what gpumem booked on the device, not where the
   driver put it.  A freed block is kept for the next request of its
   size in the default stream's order (managed-cache.c) where REUSABLE
   (no advice was given on it) and the free has no STREAM.  */
gm_status gm_mem_alloc_managed (int device, size_t nbytes, gm_stream *stream,
                                void **ptr);
gm_status gm_mem_free_managed (int device, void *ptr, size_t nbytes,
                               gm_stream *stream, bool reusable);
gm_status gm_mem_stats_get (int device, gm_mem_stats *stats);
gm_status gm_mem_set_limit (int device, size_t limit);
/* Gives DEVICE's idle memory back: the kept managed blocks, then the
   backend's pools' cached memory.  */
gm_status gm_mem_empty_cache (int device);
/* Prints the per-device table of --stats to standard error.  */
void gm_mem_print_stats (void);

/* The memory history (memory.c keeps it, mem-history.c holds it): every
   allocation and free while it is on, and the blocks still live.  Off,
   it costs each allocation and free one predictable branch.  */

/* The deepest call stack recorded with a block.  */
#define GM_MEM_STACK_DEPTH 8

/* One frame of a recorded call stack, opaque to the core: the stack
   hooks' code object and instruction offset, turned into file, line and
   function only when asked.  */
typedef struct gm_mem_frame
{
  const void *code;
  int32_t offset;
} gm_mem_frame;

/* How the layer above records call stacks; the core calls these, never
   the other way, and names no Python.  */
typedef struct gm_mem_stack_hooks
{
  /* Writes the caller's stack, innermost frame first, into FRAMES (room
     for GM_MEM_STACK_DEPTH); returns how many, 0 where it cannot (the
     calling thread holds no GIL).  Called outside the books' lock.  */
  int (*capture) (gm_mem_frame *frames);
  /* Keeps the N FRAMES of a stack the history keeps for the first time
     alive; called by the thread whose capture returned them, under the
     books' lock.  */
  void (*retain) (const gm_mem_frame *frames, size_t n);
  /* Lets go of what retain kept; called outside the books' lock by the
     thread that stops the history.  */
  void (*release) (const gm_mem_frame *frames, size_t n);
  /* Writes FRAME as "FILE:LINE in FUNCTION" into BUF of SIZE; false
     where it cannot (no GIL).  Called outside the books' lock.  */
  bool (*describe) (const gm_mem_frame *frame, char *buf, size_t size);
} gm_mem_stack_hooks;

/* Installs HOOKS (NULL: none; stacks are then not recorded).  */
void gm_mem_set_stack_hooks (const gm_mem_stack_hooks *hooks);

typedef enum gm_mem_action
{
  GM_MEM_ACTION_ALLOC,
  GM_MEM_ACTION_FREE,
  GM_MEM_ACTION_SPILL,       /* the bytes went to host memory (spill.h) */
  GM_MEM_ACTION_RETURN,      /* a spilled block back on its device */
  GM_MEM_NACTIONS
} gm_mem_action;

/* "alloc", "free", "spill", "return", indexed by gm_mem_action.  */
extern const char *const gm_mem_action_names[GM_MEM_NACTIONS];

/* One allocation or free, spill or return.  */
typedef struct gm_mem_event
{
  uint64_t time_ns;          /* CLOCK_MONOTONIC */
  uintptr_t address;
  size_t size;
  uintptr_t stream;          /* the gm_stream's address, 0 for none */
  size_t allocated_bytes;    /* the device's sum over owners, after it */
  size_t reserved_bytes;     /* the device's pool, after it */
  int32_t device;
  int32_t stack;             /* index in gm_mem_history_copy's stacks, -1 */
  uint8_t action;            /* gm_mem_action */
  uint8_t owner;             /* gm_mem_owner */
} gm_mem_event;

/* A block allocated while the history was on and not freed since.  */
typedef struct gm_mem_block
{
  uint64_t time_ns;
  uintptr_t address;
  size_t size;
  uintptr_t stream;
  int32_t device;
  int32_t stack;
  uint8_t owner;
} gm_mem_block;

/* What gm_mem_history_get copies out: plain arrays the caller frees with
   gm_mem_history_copy_free.  Stack I is FRAMES[STACK_START[I]] to
   FRAMES[STACK_START[I + 1] - 1].  */
typedef struct gm_mem_history_copy
{
  gm_mem_block *blocks;
  size_t nblocks;
  gm_mem_event *events;      /* oldest first */
  size_t nevents;
  size_t dropped;            /* events the ring overwrote */
  size_t max_entries;
  bool stacks_on;
  gm_mem_frame *frames;
  size_t *stack_start;       /* NSTACKS + 1 entries */
  size_t nstacks;
} gm_mem_history_copy;

/* Starts the history afresh (forgetting any), keeping the last
   MAX_ENTRIES (at least 1) events, with call stacks when STACKS and
   stack hooks are installed.  GM_ERR_VALUE for more than
   GM_MEM_HISTORY_MAX_ENTRIES, GM_ERR_HOST_NOMEM where its ring cannot
   be allocated; the history is then as it was.  */
gm_status gm_mem_history_start (size_t max_entries, bool stacks);
/* Stops the history and forgets what it kept.  */
void gm_mem_history_stop (void);
/* Whether the history is on.  */
bool gm_mem_history_on (void);
/* Copies the history and live blocks into *COPY.  GM_ERR_HOST_NOMEM
   where the copy cannot be allocated (*COPY is then empty).  */
gm_status gm_mem_history_get (gm_mem_history_copy *copy);
void gm_mem_history_copy_free (gm_mem_history_copy *copy);
/* The installed stack hooks, or NULL.  */
const gm_mem_stack_hooks *gm_mem_stack_hooks_get (void);
/* The history's size when GPUMEM_MEMORY_HISTORY or --memory-report
   turn it on without a count.  */
#define GM_MEM_HISTORY_DEFAULT_ENTRIES 100000
/* The most entries a history keeps, however it is started (the
   environment, memory_history, the C API): its ring is allocated whole,
   so the count is bounded before it multiplies.  */
#define GM_MEM_HISTORY_MAX_ENTRIES ((size_t) 1 << 30)
/* Starts the history as GPUMEM_MEMORY_HISTORY says (a switch, or the
   number of entries; env.c's gm_env_switch_size), with call stacks; read
   once, at the first call.  GM_ERR_VALUE for a bad value.  */
gm_status gm_mem_history_from_env (void);

/* Opens PATH to write an output file of gpumem's (a report, a
   snapshot), made with mode 0666 less the umask when there is none.  A
   symbolic link is not followed, what is not a regular file (a FIFO, a
   device, a socket) is refused without waiting in open(), and a
   regular file is written into only when it is the user's own and has
   no other hard link, so that a name planted in a shared folder can
   neither make a run overwrite another file nor hold it; a regular
   file is emptied once those checks pass.  The descriptor, or -1 with
   errno set and *WHY saying why in words (a static string: strerror's,
   or one that names the fix).  */
int gm_output_create (const char *path, const char **why);

/* The memory report (mem-report.c).  Writes the HTML page of the
   history and books to PATH, opened as gm_output_create does
   (GM_ERR_FAILED, naming PATH and why, where it cannot); the stack
   hooks' describe must be able to run.  */
gm_status gm_mem_report_write (const char *path);
/* Writes the page to OUT, which stays open (its errors are OUT's).  */
gm_status gm_mem_report_to (FILE *out);
/* Prints the blocks the history saw allocated and still live, largest
   first, with where each was made (control characters escaped), to OUT;
   nothing with the history off or no such block.  */
void gm_mem_print_leaks (FILE *out);
/* What the layer above does as its interpreter ends: write the HTML
   report to HTML_PATH (NULL: none), print the leaks (LEAKS).  Set by
   the program's options before the interpreter starts.  */
void gm_mem_report_at_exit (const char *html_path, bool leaks);
const char *gm_mem_exit_report_path (void);
bool gm_mem_exit_leaks (void);

/* Formats NBYTES as "1.5 GiB" into BUF.  */
void gm_format_bytes (size_t nbytes, char *buf, size_t size);

#endif /* GM_MEMORY_H */
