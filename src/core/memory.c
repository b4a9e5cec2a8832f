/* memory.c -- the books of device memory: statistics per owner,
   limits, and the memory history's recording.

   Every device allocation of both backends goes through gm_mem_alloc_as
   and gm_mem_free_as, so memory_stats, set_memory_limit, --stats and
   the history hold for either.  The pool itself is the backend's (CUDA's stream-ordered
   allocator, or the host's malloc).  The books have a lock of their
   own (books_lock): C code that holds no GIL (a DLPack consumer letting
   go, the MPI layer, the embedding API) may allocate and free too.  The
   backend is called outside it.  */

#define _POSIX_C_SOURCE 200809L
#include "config.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gm.h"
#include "managed-cache.h"
#include "mem-history.h"

static gm_mem_stats books[GM_MAX_DEVICES];
static bool books_ready[GM_MAX_DEVICES];
static pthread_mutex_t books_lock = PTHREAD_MUTEX_INITIALIZER;

/* The history: HISTORY under books_lock; HISTORY_ENABLED mirrors
   whether it is set, read without the lock so that the path without a
   history is one predictable branch.  */
static gm_hist *history;
static atomic_bool history_enabled;
static atomic_bool history_stacks;
static _Atomic (const gm_mem_stack_hooks *) stack_hooks;

/* Frees OLD, a history no longer reachable, outside books_lock.  */
static void
release_history (gm_hist *old)
{
  const gm_mem_stack_hooks *hooks
    = atomic_load_explicit (&stack_hooks, memory_order_acquire);

  gm_hist_free (old, hooks ? hooks->release : NULL);
}

/* DEVICE's books.  With books_lock held.  */
static gm_mem_stats *
book (int device)
{
  if (!books_ready[device])
    {
      books[device].limit = SIZE_MAX;
      books_ready[device] = true;
    }
  return &books[device];
}

static gm_status
check_device (int device)
{
  int count = gm_backend_current->device_count ();

  if (device < 0 || device >= count || device >= GM_MAX_DEVICES)
    return gm_error_set (GM_ERR_VALUE, 0, NULL,
                         "device %d does not exist (valid: 0 to %d)",
                         device, count - 1);
  return GM_OK;
}

const char *const gm_mem_owner_names[GM_MEM_NOWNERS] = {
  "gpumem", "torch", "cupy", "numba", "imported"
};

const char *const gm_mem_action_names[GM_MEM_NACTIONS] = {
  "alloc", "free", "spill", "return"
};

static gm_status
check_owner (gm_mem_owner owner)
{
  if ((unsigned) owner >= GM_MEM_NOWNERS)
    return gm_error_set (GM_ERR_VALUE, 0, NULL, "memory owner %d does not "
                         "exist", (int) owner);
  return GM_OK;
}

/* The caller's stack into FRAMES when the history records stacks; the
   number of frames.  Outside books_lock: the hooks may look at the
   interpreter.  */
static size_t
capture_stack (gm_mem_frame *frames)
{
  const gm_mem_stack_hooks *hooks
    = atomic_load_explicit (&stack_hooks, memory_order_acquire);

  if (hooks == NULL
      || !atomic_load_explicit (&history_stacks, memory_order_relaxed))
    return 0;
  return (size_t) hooks->capture (frames);
}

/* Records an event of ACTION for the block at ADDRESS in the history,
   and lists or forgets the block.  With books_lock held; STATS is
   DEVICE's books after the event.  */
static void
history_note (gm_mem_action action, gm_mem_owner owner, int device,
              uintptr_t address, size_t nbytes, gm_stream *stream,
              const gm_mem_frame *frames, size_t nframes, size_t reserved,
              const gm_mem_stats *stats)
{
  const gm_mem_stack_hooks *hooks
    = atomic_load_explicit (&stack_hooks, memory_order_relaxed);
  struct timespec now;
  gm_mem_event event;

  if (history == NULL)
    return;
  clock_gettime (CLOCK_MONOTONIC, &now);
  event.time_ns = (uint64_t) now.tv_sec * 1000000000u
                  + (uint64_t) now.tv_nsec;
  event.address = address;
  event.size = nbytes;
  event.stream = (uintptr_t) stream;
  event.allocated_bytes = stats->allocated_bytes;
  event.reserved_bytes = reserved;
  event.device = device;
  event.stack = nframes == 0 ? -1
                : gm_hist_intern (history, frames, nframes,
                                  hooks ? hooks->retain : NULL);
  event.action = (uint8_t) action;
  event.owner = (uint8_t) owner;
  gm_hist_record (history, &event);
  if (action == GM_MEM_ACTION_ALLOC || action == GM_MEM_ACTION_RETURN)
    {
      gm_mem_block block = {
        .time_ns = event.time_ns, .address = address, .size = nbytes,
        .stream = event.stream, .device = device, .stack = event.stack,
        .owner = (uint8_t) owner
      };
      gm_hist_block_add (history, &block);
    }
  else
    gm_hist_block_remove (history, address);
}

/* Records the out-of-memory error of NBYTES asked by OWNER on DEVICE and
   returns GM_ERR_NOMEM.  BY_LIMIT: the set limit refused (else the
   device did, its error the thread's last).  The message names the
   request, the device's free bytes, what the pool keeps idle, each
   owner's bytes in use and, with the history on, the five largest live
   blocks with the line that made each.  Takes books_lock itself.  */
static gm_status
out_of_memory (gm_mem_owner owner, int device, size_t nbytes, bool by_limit)
{
  enum { NLARGEST = 5 };
  const gm_mem_stack_hooks *hooks
    = atomic_load_explicit (&stack_hooks, memory_order_acquire);
  int cuda_code = by_limit ? 0 : gm_last_error ()->cuda_code;
  char cuda_name[sizeof gm_last_error ()->cuda_name] = "";
  gm_mem_block largest[NLARGEST];
  gm_mem_frame frames[NLARGEST][GM_MEM_STACK_DEPTH];
  size_t nframes[NLARGEST], nlargest = 0;
  size_t free_bytes = 0, total = 0, reserved = 0;
  bool history_on;
  gm_mem_stats stats;
  char message[GM_ERROR_MESSAGE_MAX], text[4][32];
  size_t used = 0;

  if (!by_limit)
    snprintf (cuda_name, sizeof cuda_name, "%s", gm_last_error ()->cuda_name);
  pthread_mutex_lock (&books_lock);
  stats = *book (device);
  history_on = history != NULL;
  if (history_on)
    {
      nlargest = gm_hist_largest (history, device, largest, NLARGEST);
      for (size_t i = 0; i < nlargest; i++)
        nframes[i] = gm_hist_stack (history, largest[i].stack, frames[i]);
    }
  pthread_mutex_unlock (&books_lock);
  gm_backend_current->mem_info (device, &free_bytes, &total);
  gm_backend_current->reserved (device, &reserved);

#define APPEND(...)                                                        \
  do                                                                       \
    {                                                                      \
      if (used < sizeof message)                                           \
        {                                                                  \
          int n_ = snprintf (message + used, sizeof message - used,        \
                             __VA_ARGS__);                                 \
          used += n_ > 0 ? (size_t) n_ : 0;                                \
        }                                                                  \
    }                                                                      \
  while (0)

  gm_format_bytes (nbytes, text[0], sizeof text[0]);
  APPEND ("out of memory: %zu bytes (%s) requested on device %d by %s",
          nbytes, text[0], device, gm_mem_owner_names[owner]);
  gm_format_bytes (stats.allocated_bytes, text[0], sizeof text[0]);
  if (by_limit)
    {
      gm_format_bytes (stats.limit, text[1], sizeof text[1]);
      APPEND (", which has %zu bytes (%s) in use of its limit of %zu bytes "
              "(%s)", stats.allocated_bytes, text[0], stats.limit, text[1]);
    }
  else
    APPEND (", which has %zu bytes (%s) in use by gpumem's pool, %s",
            stats.allocated_bytes, text[0],
            stats.limit == SIZE_MAX ? "no limit set" : "under the set limit");
  gm_format_bytes (free_bytes, text[1], sizeof text[1]);
  gm_format_bytes (reserved > stats.allocated_bytes
                   ? reserved - stats.allocated_bytes : 0,
                   text[2], sizeof text[2]);
  if (stats.native_held_bytes > 0)
    {
      gm_format_bytes (stats.native_held_bytes, text[1], sizeof text[1]);
      APPEND (" (%s of it in %zu blocks freed by their arrays and still held "
              "by native code)", text[1], stats.native_held_blocks);
    }
  if (stats.shared_bytes > 0)
    {
      gm_format_bytes (stats.shared_bytes, text[3], sizeof text[3]);
      APPEND (" (%s of it in %zu blocks shared with other processes)",
              text[3], stats.shared_blocks);
    }
  APPEND ("; the device has %zu bytes (%s) free of %zu; the pool keeps %s "
          "idle (reserved, not allocated); in use by owner:", free_bytes,
          text[1], total, text[2]);
  for (int o = 0; o < GM_MEM_NOWNERS; o++)
    {
      gm_format_bytes (stats.owners[o].allocated_bytes, text[0],
                       sizeof text[0]);
      APPEND ("%s %s %s in %zu blocks", o ? "," : "", gm_mem_owner_names[o],
              text[0], stats.owners[o].allocations);
    }
  if (!history_on)
    APPEND ("; gpumem.memory_history() records where blocks are made");
  else if (nlargest > 0)
    {
      APPEND ("; largest live blocks:");
      for (size_t i = 0; i < nlargest; i++)
        {
          char where[256] = "";
          gm_format_bytes (largest[i].size, text[0], sizeof text[0]);
          if (nframes[i] == 0 || hooks == NULL
              || !hooks->describe (&frames[i][0], where, sizeof where))
            snprintf (where, sizeof where, "an unrecorded place");
          APPEND ("%s %s (%s) at %s", i ? "," : "", text[0],
                  gm_mem_owner_names[largest[i].owner], where);
        }
    }
#undef APPEND
  return gm_error_set (GM_ERR_NOMEM, cuda_code, cuda_name, "%s", message);
}

/* The backend's pool as a gm_mem_get_fn and a gm_mem_put_fn.  */
static gm_status
backend_get (void *ctx, int device, size_t nbytes, gm_stream *stream,
             void **ptr)
{
  (void) ctx;
  return gm_backend_current->malloc (device, nbytes, stream, ptr);
}

static gm_status
backend_put (void *ctx, int device, void *ptr, size_t nbytes,
             gm_stream *stream)
{
  (void) ctx;
  return gm_backend_current->free (device, ptr, nbytes, stream);
}

/* Gives DEVICE's idle memory back: the managed blocks kept for reuse,
   then the backend's pools' cached memory.  */
static gm_status
release_idle (int device)
{
  size_t reserved;
  gm_status status = gm_managed_cache_release (device);

  if (status != GM_OK)
    return status;
  return gm_backend_current->release_cached (device, &reserved);
}

/* gm_mem_alloc_with, recorded in the history as ACTION (an allocation,
   or a spilled block's return).  */
static gm_status
alloc_with (gm_mem_action action, gm_mem_owner owner, int device,
            size_t nbytes, gm_stream *stream, gm_mem_get_fn get, void *ctx,
            void **ptr)
{
  gm_status status = check_device (device);
  gm_mem_frame frames[GM_MEM_STACK_DEPTH];
  size_t nframes = 0, reserved = 0;
  bool history_on;
  gm_mem_stats *stats;
  gm_mem_owner_stats *mine;

  *ptr = NULL;
  if (status == GM_OK)
    status = check_owner (owner);
  if (status != GM_OK)
    return status;
  /* Zero bytes take no memory and stay out of the books, so that an
     empty array, which never calls gm_mem_free, leaves no count behind.  */
  if (nbytes == 0)
    return GM_OK;
  history_on = atomic_load_explicit (&history_enabled, memory_order_relaxed);
  if (__builtin_expect (history_on, 0))
    nframes = capture_stack (frames);
  pthread_mutex_lock (&books_lock);
  stats = book (device);
  if (nbytes > stats->limit || stats->allocated_bytes > stats->limit - nbytes)
    {
      pthread_mutex_unlock (&books_lock);
      return out_of_memory (owner, device, nbytes, true);
    }
  /* Booked before the backend is asked, so that two threads cannot
     both pass the limit with the room for one.  */
  stats->allocated_bytes += nbytes;
  pthread_mutex_unlock (&books_lock);
  status = get (ctx, device, nbytes, stream, ptr);
  /* What is kept idle may be what the device lacks.  */
  if (status == GM_ERR_NOMEM && release_idle (device) == GM_OK)
    status = get (ctx, device, nbytes, stream, ptr);
  if (__builtin_expect (history_on, 0) && status == GM_OK)
    gm_backend_current->reserved (device, &reserved);
  pthread_mutex_lock (&books_lock);
  if (status != GM_OK)
    {
      stats->allocated_bytes -= nbytes;
      pthread_mutex_unlock (&books_lock);
      return status == GM_ERR_NOMEM
             ? out_of_memory (owner, device, nbytes, false) : status;
    }
  if (stats->allocated_bytes > stats->peak_allocated_bytes)
    stats->peak_allocated_bytes = stats->allocated_bytes;
  stats->allocations++;
  stats->total_allocations++;
  mine = &stats->owners[owner];
  mine->allocated_bytes += nbytes;
  if (mine->allocated_bytes > mine->peak_allocated_bytes)
    mine->peak_allocated_bytes = mine->allocated_bytes;
  mine->allocations++;
  mine->total_allocations++;
  if (__builtin_expect (history_on, 0))
    history_note (action, owner, device, (uintptr_t) *ptr,
                  nbytes, stream, frames, nframes, reserved, stats);
  pthread_mutex_unlock (&books_lock);
  return GM_OK;
}

gm_status
gm_mem_alloc_with (gm_mem_owner owner, int device, size_t nbytes,
                   gm_stream *stream, gm_mem_get_fn get, void *ctx,
                   void **ptr)
{
  return alloc_with (GM_MEM_ACTION_ALLOC, owner, device, nbytes, stream, get,
                     ctx, ptr);
}

/* gm_mem_free_with, recorded in the history as ACTION (a free, or a
   block's spill).  */
static gm_status
free_with (gm_mem_action action, gm_mem_owner owner, int device, void *ptr,
           size_t nbytes, gm_stream *stream, gm_mem_put_fn put, void *ctx)
{
  gm_mem_frame frames[GM_MEM_STACK_DEPTH];
  size_t nframes = 0, reserved = 0;
  gm_mem_stats *stats;
  bool history_on;

  if (ptr == NULL && nbytes == 0)
    return GM_OK;
  if ((unsigned) owner >= GM_MEM_NOWNERS)
    return check_owner (owner);
  history_on = atomic_load_explicit (&history_enabled, memory_order_relaxed);
  if (__builtin_expect (history_on, 0))
    {
      nframes = capture_stack (frames);
      gm_backend_current->reserved (device, &reserved);
    }
  /* Booked before the backend frees, so that the history cannot hear of
     the address's next allocation (another thread's) before this free.  */
  pthread_mutex_lock (&books_lock);
  stats = book (device);
  stats->allocated_bytes -= nbytes;
  stats->allocations--;
  stats->owners[owner].allocated_bytes -= nbytes;
  stats->owners[owner].allocations--;
  if (__builtin_expect (history_on, 0))
    history_note (action, owner, device, (uintptr_t) ptr,
                  nbytes, stream, frames, nframes, reserved, stats);
  pthread_mutex_unlock (&books_lock);
  if (ptr == NULL)
    return GM_OK;
  return put (ctx, device, ptr, nbytes, stream);
}

gm_status
gm_mem_free_with (gm_mem_owner owner, int device, void *ptr, size_t nbytes,
                  gm_stream *stream, gm_mem_put_fn put, void *ctx)
{
  return free_with (GM_MEM_ACTION_FREE, owner, device, ptr, nbytes, stream,
                    put, ctx);
}

gm_status
gm_mem_alloc_as (gm_mem_owner owner, int device, size_t nbytes,
                 gm_stream *stream, void **ptr)
{
  return gm_mem_alloc_with (owner, device, nbytes, stream, backend_get,
                            NULL, ptr);
}

gm_status
gm_mem_free_as (gm_mem_owner owner, int device, void *ptr, size_t nbytes,
                gm_stream *stream)
{
  return gm_mem_free_with (owner, device, ptr, nbytes, stream, backend_put,
                           NULL);
}

gm_status
gm_mem_spill_free (int device, void *ptr, size_t nbytes)
{
  return free_with (GM_MEM_ACTION_SPILL, GM_MEM_OWNER_GPUMEM, device, ptr,
                    nbytes, NULL, backend_put, NULL);
}

gm_status
gm_mem_return_alloc (int device, size_t nbytes, gm_stream *stream,
                     void **ptr)
{
  return alloc_with (GM_MEM_ACTION_RETURN, GM_MEM_OWNER_GPUMEM, device,
                     nbytes, stream, backend_get, NULL, ptr);
}

void
gm_mem_spill_exchange (int device, void *ptr, size_t nbytes,
                       gm_stream *stream)
{
  gm_mem_frame frames[GM_MEM_STACK_DEPTH];
  size_t nframes = 0, reserved = 0;
  gm_mem_stats *stats;
  bool history_on;

  if (device < 0 || device >= GM_MAX_DEVICES)
    return;
  history_on = atomic_load_explicit (&history_enabled, memory_order_relaxed);
  if (__builtin_expect (history_on, 0))
    {
      nframes = capture_stack (frames);
      gm_backend_current->reserved (device, &reserved);
    }
  pthread_mutex_lock (&books_lock);
  stats = book (device);
  stats->total_allocations++;
  stats->owners[GM_MEM_OWNER_GPUMEM].total_allocations++;
  if (__builtin_expect (history_on, 0))
    {
      history_note (GM_MEM_ACTION_SPILL, GM_MEM_OWNER_GPUMEM, device,
                    (uintptr_t) ptr, nbytes, NULL, frames, nframes,
                    reserved, stats);
      history_note (GM_MEM_ACTION_RETURN, GM_MEM_OWNER_GPUMEM, device,
                    (uintptr_t) ptr, nbytes, stream, frames, nframes,
                    reserved, stats);
    }
  pthread_mutex_unlock (&books_lock);
}

void
gm_mem_note_shared (int device, size_t nbytes, bool shared)
{
  gm_mem_stats *stats;

  if (device < 0 || device >= GM_MAX_DEVICES)
    return;
  pthread_mutex_lock (&books_lock);
  stats = book (device);
  if (shared)
    {
      stats->shared_bytes += nbytes;
      stats->shared_blocks++;
    }
  else
    {
      stats->shared_bytes -= nbytes;
      stats->shared_blocks--;
    }
  pthread_mutex_unlock (&books_lock);
}

void
gm_mem_note_native_held (int device, size_t nbytes, bool held)
{
  gm_mem_stats *stats;

  if (device < 0 || device >= GM_MAX_DEVICES)
    return;
  pthread_mutex_lock (&books_lock);
  stats = book (device);
  if (held)
    {
      stats->native_held_bytes += nbytes;
      stats->native_held_blocks++;
    }
  else
    {
      stats->native_held_bytes -= nbytes;
      stats->native_held_blocks--;
    }
  pthread_mutex_unlock (&books_lock);
}

gm_status
gm_mem_alloc (int device, size_t nbytes, gm_stream *stream, void **ptr)
{
  return gm_mem_alloc_as (GM_MEM_OWNER_GPUMEM, device, nbytes, stream, ptr);
}

gm_status
gm_mem_free (int device, void *ptr, size_t nbytes, gm_stream *stream)
{
  return gm_mem_free_as (GM_MEM_OWNER_GPUMEM, device, ptr, nbytes, stream);
}

void
gm_mem_set_stack_hooks (const gm_mem_stack_hooks *hooks)
{
  atomic_store_explicit (&stack_hooks, hooks, memory_order_release);
}

gm_status
gm_mem_history_start (size_t max_entries, bool stacks)
{
  gm_hist *fresh, *old;
  gm_status status = gm_hist_new (max_entries, &fresh);

  if (status != GM_OK)
    return status;
  pthread_mutex_lock (&books_lock);
  old = history;
  history = fresh;
  atomic_store_explicit (&history_stacks, stacks, memory_order_relaxed);
  atomic_store_explicit (&history_enabled, true, memory_order_relaxed);
  pthread_mutex_unlock (&books_lock);
  release_history (old);
  return GM_OK;
}

void
gm_mem_history_stop (void)
{
  gm_hist *old;

  pthread_mutex_lock (&books_lock);
  old = history;
  history = NULL;
  atomic_store_explicit (&history_enabled, false, memory_order_relaxed);
  pthread_mutex_unlock (&books_lock);
  release_history (old);
}

const gm_mem_stack_hooks *
gm_mem_stack_hooks_get (void)
{
  return atomic_load_explicit (&stack_hooks, memory_order_acquire);
}

gm_status
gm_mem_history_from_env (void)
{
  static bool read;
  size_t entries;
  gm_status status;

  if (read)
    return GM_OK;
  read = true;
  status = gm_env_switch_size ("GPUMEM_MEMORY_HISTORY",
                               GM_MEM_HISTORY_DEFAULT_ENTRIES, 2,
                               GM_MEM_HISTORY_MAX_ENTRIES, &entries);
  if (status != GM_OK || entries == 0 || gm_mem_history_on ())
    return status;
  return gm_mem_history_start (entries, true);
}

bool
gm_mem_history_on (void)
{
  return atomic_load_explicit (&history_enabled, memory_order_relaxed);
}

gm_status
gm_mem_history_get (gm_mem_history_copy *copy)
{
  gm_status status = GM_OK;

  memset (copy, 0, sizeof *copy);
  pthread_mutex_lock (&books_lock);
  if (history != NULL)
    {
      status = gm_hist_copy (history, copy);
      copy->stacks_on = atomic_load_explicit (&history_stacks,
                                              memory_order_relaxed);
    }
  pthread_mutex_unlock (&books_lock);
  return status;
}

gm_status
gm_mem_stats_get (int device, gm_mem_stats *out)
{
  gm_status status = check_device (device);

  if (status != GM_OK)
    return status;
  pthread_mutex_lock (&books_lock);
  *out = *book (device);
  pthread_mutex_unlock (&books_lock);
  out->managed_cached_bytes = gm_managed_cache_bytes (device);
  return gm_backend_current->reserved (device, &out->reserved_bytes);
}

gm_status
gm_mem_set_limit (int device, size_t limit)
{
  gm_status status = check_device (device);

  if (status != GM_OK)
    return status;
  pthread_mutex_lock (&books_lock);
  book (device)->limit = limit;
  pthread_mutex_unlock (&books_lock);
  return GM_OK;
}

gm_status
gm_mem_empty_cache (int device)
{
  gm_status status = check_device (device);

  return status != GM_OK ? status : release_idle (device);
}

void
gm_mem_print_stats (void)
{
  int count;

  if (gm_backend_current == NULL)
    return;
  count = gm_backend_current->device_count ();
  fprintf (stderr, "gpumem memory statistics (%s backend):\n",
           gm_backend_current->name);
  fprintf (stderr, "%-6s %14s %14s %14s %10s %10s\n", "device", "allocated",
           "peak", "reserved", "live", "total");
  for (int d = 0; d < count && d < GM_MAX_DEVICES; d++)
    {
      gm_mem_stats stats;
      char now[32], peak[32], reserved[32];

      pthread_mutex_lock (&books_lock);
      stats = *book (d);
      pthread_mutex_unlock (&books_lock);

      stats.reserved_bytes = 0;
      gm_backend_current->reserved (d, &stats.reserved_bytes);
      gm_format_bytes (stats.allocated_bytes, now, sizeof now);
      gm_format_bytes (stats.peak_allocated_bytes, peak, sizeof peak);
      gm_format_bytes (stats.reserved_bytes, reserved, sizeof reserved);
      fprintf (stderr, "%-6d %14s %14s %14s %10zu %10zu\n", d, now, peak,
               reserved, stats.allocations, stats.total_allocations);
    }
}

void
gm_format_bytes (size_t nbytes, char *buf, size_t size)
{
  static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double value = (double) nbytes;
  int unit = 0;

  while (value >= 1024.0 && unit < 5)
    {
      value /= 1024.0;
      unit++;
    }
  if (unit == 0)
    snprintf (buf, size, "%zu B", nbytes);
  else
    snprintf (buf, size, "%.1f %s", value, units[unit]);
}

/* The backend's managed memory, through the cache of freed blocks
   (managed-cache.c), as a gm_mem_get_fn and gm_mem_put_fns: one for a
   block that may be kept for reuse, one for a block that may not.  */
static gm_status
managed_get (void *ctx, int device, size_t nbytes, gm_stream *stream,
             void **ptr)
{
  (void) ctx;
  return gm_managed_cache_get (device, nbytes, stream, ptr);
}

static gm_status
managed_put_reusable (void *ctx, int device, void *ptr, size_t nbytes,
                      gm_stream *stream)
{
  (void) ctx;
  return gm_managed_cache_put (device, ptr, nbytes, stream, true);
}

static gm_status
managed_put (void *ctx, int device, void *ptr, size_t nbytes,
             gm_stream *stream)
{
  (void) ctx;
  return gm_managed_cache_put (device, ptr, nbytes, stream, false);
}

gm_status
gm_mem_alloc_managed (int device, size_t nbytes, gm_stream *stream,
                      void **ptr)
{
  gm_status status = gm_mem_alloc_with (GM_MEM_OWNER_GPUMEM, device, nbytes,
                                        stream, managed_get, NULL, ptr);
  gm_mem_stats *stats;

  if (status != GM_OK || nbytes == 0)
    return status;
  pthread_mutex_lock (&books_lock);
  stats = book (device);
  stats->managed_bytes += nbytes;
  if (stats->managed_bytes > stats->peak_managed_bytes)
    stats->peak_managed_bytes = stats->managed_bytes;
  stats->managed_allocations++;
  pthread_mutex_unlock (&books_lock);
  return GM_OK;
}

gm_status
gm_mem_free_managed (int device, void *ptr, size_t nbytes, gm_stream *stream,
                     bool reusable)
{
  if (ptr == NULL && nbytes == 0)
    return GM_OK;
  if (device >= 0 && device < GM_MAX_DEVICES)
    {
      gm_mem_stats *stats;

      pthread_mutex_lock (&books_lock);
      stats = book (device);
      stats->managed_bytes -= nbytes;
      stats->managed_allocations--;
      pthread_mutex_unlock (&books_lock);
    }
  return gm_mem_free_with (GM_MEM_OWNER_GPUMEM, device, ptr, nbytes, stream,
                           reusable ? managed_put_reusable : managed_put,
                           NULL);
}
