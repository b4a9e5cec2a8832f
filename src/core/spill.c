/* spill.c -- the spill engine (spill.h): per device, the list of blocks
   it may move, least recently used first; moving a block's bytes to
   host memory and back (a spill, a return, an exchange, a write-behind)
   and the room made for them.  Its settings and what it reports are
   spill-settings.c's.  Callers serialize their use (the Python layer:
   the GIL); the figures are read under the books' serialization too.  */

#define _POSIX_C_SOURCE 200809L
#include "config.h"

#include <stdlib.h>
#include <time.h>

#include "gm.h"
#include "spill.h"
#include "pinned-pool.h"
#include "spill-state.h"

/* Each device's stream for the downloads of write-behind
   (gm_spill_write_behind) and of exchanges, made at its first use.
   NULL-stream calls do not join it (so that a write-back runs beside
   the calls that follow); its copies are ordered by events instead:
   after the work queued before them, and before the host bytes go
   (host_settle) or the block's memory does (gm_spill_block).  */
static gm_stream *out_streams[GM_MAX_DEVICES];
/* Each device's stream for the uploads of an exchange made for a call
   without a stream (which waits for them), made and ordered as the
   write-behind's.  */
static gm_stream *in_streams[GM_MAX_DEVICES];
static size_t host_bytes;       /* spilled and clean copies, every device */
static gm_spill_moved_fn moved_hook;
size_t gm_spill_blocks_out;

static uint64_t
now_ns (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

void
gm_spill_set_moved_hook (gm_spill_moved_fn hook)
{
  moved_hook = hook;
}

static void
unlink_block (gm_block *block)
{
  gm_spill_device *d = &gm_spill_devices[block->device];

  if (block->prev != NULL)
    block->prev->next = block->next;
  else
    d->head = block->next;
  if (block->next != NULL)
    block->next->prev = block->prev;
  else
    d->tail = block->prev;
  block->prev = block->next = NULL;
}

static void
append_block (gm_block *block)
{
  gm_spill_device *d = &gm_spill_devices[block->device];

  block->prev = d->tail;
  block->next = NULL;
  if (d->tail != NULL)
    d->tail->next = block;
  else
    d->head = block;
  d->tail = block;
}

void
gm_spill_track (gm_block *block, void *user)
{
  if (!gm_spill_device_ok (block->device) || block->listed)
    return;
  block->user = user;
  block->listed = true;
  append_block (block);
}

/* Waits until no copy queued on a stream (a return's, a write-behind's)
   still reads or writes BLOCK's host bytes.  A failed wait (the
   device's error) lets go of the event too: no copy of that device
   completes after it.  */
static void
host_settle (gm_block *block)
{
  if (block->host_busy == NULL)
    return;
  while (gm_backend_current->event_wait (block->host_busy, 50000)
         == GM_ERR_NOT_READY)
    ;
  gm_backend_current->event_destroy (block->host_busy);
  block->host_busy = NULL;
}

/* Whether no copy pending on a stream still reads or writes BLOCK's
   host bytes (the event it was waited on is let go of then).  */
static bool
host_ready (gm_block *block)
{
  bool done = false;

  if (block->host_busy == NULL)
    return true;
  if (gm_backend_current->event_query (block->host_busy, &done) != GM_OK
      || done)
    host_settle (block);
  return block->host_busy == NULL;
}

/* Gives back host memory of host_alloc's.  */
static void
host_free (void *host, bool pinned)
{
  if (pinned)
    gm_pinned_free (host);
  else
    free (host);
}

/* Lets go of BLOCK's host bytes: those of a spilled block, or the
   clean copy of one back on the device; their counts with them.  */
static void
drop_host (gm_block *block)
{
  gm_spill_device *d = &gm_spill_devices[block->device];

  host_settle (block);
  host_free (block->host, block->host_pinned);
  block->host = NULL;
  host_bytes -= block->nbytes;
  if (block->spilled)
    {
      d->stats.spilled_bytes -= block->nbytes;
      d->stats.spilled_blocks--;
      gm_spill_blocks_out--;
    }
  else
    {
      d->stats.clean_bytes -= block->nbytes;
      d->stats.clean_blocks--;
    }
}

void
gm_spill_drop_clean (gm_block *block)
{
  if (block->host != NULL && !block->spilled)
    drop_host (block);
}

/* Drops clean copies, least recently used first, until NBYTES more fit
   under the host limit or none is left.  */
static void
drop_clean_for (size_t nbytes)
{
  for (int dev = 0; dev < GM_MAX_DEVICES; dev++)
    for (gm_block *b = gm_spill_devices[dev].head;
         b != NULL && host_bytes + nbytes > gm_spill_host_limit; b = b->next)
      gm_spill_drop_clean (b);
}

void
gm_spill_untrack (gm_block *block)
{
  if (!block->listed)
    return;
  unlink_block (block);
  block->listed = false;
  if (block->host != NULL)
    drop_host (block);
  block->spilled = false;
}

void
gm_spill_touch_slow (gm_block *block)
{
  unlink_block (block);
  append_block (block);
}

static bool
kept (const gm_block *block, gm_block *const *keep, int nkeep)
{
  for (int i = 0; i < nkeep; i++)
    if (keep[i] == block)
      return true;
  return false;
}

/* Queues on STREAM, after all work queued on BLOCK's device so far, the
   copy of BLOCK's device bytes to HOST, and records in BLOCK->host_busy
   an event that says when it is done.  */
static gm_status
copy_out_queued (gm_block *block, void *host, gm_stream *stream)
{
  const gm_backend *be = gm_backend_current;
  gm_event *event = NULL;
  gm_status status = be->event_create (block->device, GM_EVENT_BLOCKING,
                                       &event);

  /* Recorded without a stream, the event follows every stream's work
     (the join); STREAM waits for it.  */
  if (status == GM_OK)
    status = be->event_record (event, NULL);
  if (status == GM_OK)
    status = be->stream_wait_event (block->device, stream, event);
  if (status == GM_OK)
    status = be->copy (host, -1, block->ptr, block->device, block->nbytes,
                       stream);
  if (status == GM_OK)
    status = be->event_record (event, stream);
  if (status != GM_OK)
    {
      /* Whatever was queued is waited for before HOST goes.  */
      if (event != NULL)
        while (be->wait (block->device, stream, 50000) == GM_ERR_NOT_READY)
          ;
      if (event != NULL)
        be->event_destroy (event);
      return status;
    }
  block->host_busy = event;
  return GM_OK;
}

/* Host memory for BLOCK's bytes in *HOST: the pinned pool's (a copy at
   the bus's bandwidth, no page-locking per spill), pageable past its
   limit (*PINNED false); GM_ERR_NOMEM past the host limit.  */
static gm_status
host_alloc (const gm_block *block, void **host, bool *pinned)
{
  if (gm_spill_host_limit != SIZE_MAX && host_bytes + block->nbytes > gm_spill_host_limit)
    drop_clean_for (block->nbytes);
  if (gm_spill_host_limit != SIZE_MAX && host_bytes + block->nbytes > gm_spill_host_limit)
    return gm_error_set (GM_ERR_NOMEM, 0, NULL, "cannot spill a block of "
                         "%zu bytes: the host limit of %zu bytes for "
                         "spilled memory is reached (%zu in use)",
                         block->nbytes, gm_spill_host_limit, host_bytes);
  *pinned = gm_pinned_alloc (block->nbytes, host) == GM_OK;
  if (*pinned)
    return GM_OK;
  *host = malloc (block->nbytes);
  if (*host == NULL)
    return gm_error_set (GM_ERR_HOST_NOMEM, 0, NULL, "cannot spill a "
                         "block of %zu bytes: no host memory",
                         block->nbytes);
  return GM_OK;
}

/* Copies resident BLOCK's bytes to host memory (host_alloc's), which
   becomes its clean copy.  STREAM NULL: complete on return, after all
   work queued before it; else queued on STREAM after that work
   (copy_out_queued).  */
static gm_status
copy_out (gm_block *block, gm_stream *stream)
{
  gm_spill_device *d = &gm_spill_devices[block->device];
  void *host = NULL;
  bool pinned = false;
  gm_status status = host_alloc (block, &host, &pinned);

  if (status != GM_OK)
    return status;
  status = stream == NULL
           ? gm_backend_current->copy (host, -1, block->ptr, block->device,
                                       block->nbytes, NULL)
           : copy_out_queued (block, host, stream);
  if (status != GM_OK)
    {
      host_free (host, pinned);
      return status;
    }
  block->host = host;
  block->host_pinned = pinned;
  host_bytes += block->nbytes;
  d->stats.clean_bytes += block->nbytes;
  d->stats.clean_blocks++;
  d->stats.spill_bytes += block->nbytes;
  return GM_OK;
}

/* Whether B may give its memory to the return of BLOCK.  */
static bool
partner_may (const gm_block *b, const gm_block *block, gm_block *const *keep,
             int nkeep, gm_block *const *skip, int nskip)
{
  return b->nbytes == block->nbytes && !kept (b, keep, nkeep)
         && !kept (b, skip, nskip) && gm_spill_why_not (b) == NULL;
}

/* The block whose device memory the return of BLOCK may take in place
   (exchange): of BLOCK's size, one that may move, neither of KEEP nor
   of the NSKIP blocks SKIP.  For the return of a block that came back
   before (a loop over more than fits) the most recently used, clean or
   not: in such a loop it is the one needed last (Belady's choice), and
   an exchange downloads a written one beside the upload.  Else in the
   room's order (make_room): clean with no copy pending, clean, then
   written ones least recently used first.  */
static gm_block *
exchange_partner (const gm_block *block, gm_block *const *keep, int nkeep,
                  gm_block *const *skip, int nskip)
{
  const gm_spill_device *d = &gm_spill_devices[block->device];
  gm_block *b;

  if (block->came_back)
    {
      for (b = d->tail; b != NULL; b = b->prev)
        if (partner_may (b, block, keep, nkeep, skip, nskip))
          return b;
      return NULL;
    }
  for (int pass = 0; pass < 3; pass++)
    for (b = pass < 2 ? d->tail : d->head; b != NULL;
         b = pass < 2 ? b->prev : b->next)
      if (partner_may (b, block, keep, nkeep, skip, nskip)
          && (b->host != NULL) == (pass < 2)
          && (pass != 0 || host_ready (b)))
        return b;
  return NULL;
}

/* STREAMS[DEVICE], made if need be.  */
static gm_status
engine_stream (int device, gm_stream **streams)
{
  if (streams[device] != NULL)
    return GM_OK;
  return gm_backend_current->stream_create
           (device, GM_STREAM_NON_BLOCKING | GM_STREAM_UNJOINED,
            &streams[device]);
}

/* Whether BLOCK, of DEVICE, is spilled and came back before: its
   return is a loop's over more than fits.  */
static bool
cycled (const gm_block *block, int device)
{
  return block->device == device && block->spilled && block->came_back;
}

gm_status
gm_spill_write_behind (int device, gm_block *const *keep, int nkeep)
{
  gm_status status = GM_OK;
  gm_block **claimed;
  size_t nbytes = 0, covered = 0;
  int nclaimed = 0, ncycled = 0;

  if (!gm_spill_enabled (device))
    return GM_OK;
  for (int i = 0; i < nkeep; i++)
    ncycled += cycled (keep[i], device);
  if (ncycled == 0)
    return GM_OK;
  claimed = malloc (sizeof *claimed * (size_t) ncycled);
  if (claimed == NULL)
    return gm_error_set (GM_ERR_HOST_NOMEM, 0, NULL, "no host memory");
  /* The room the returns of blocks that came back before need beyond
     the memory that they take in place (exchange).  */
  for (int i = 0; i < nkeep; i++)
    {
      gm_block *partner;
      if (!cycled (keep[i], device))
        continue;
      partner = exchange_partner (keep[i], keep, nkeep, claimed, nclaimed);
      if (partner != NULL)
        claimed[nclaimed++] = partner;
      else
        nbytes += keep[i]->nbytes;
    }
  free (claimed);
  /* The blocks the room for NBYTES would take, as gm_spill_make_room
     for a loop takes them: most recently used first, those that cover
     what is left alone in a first walk.  */
  for (int walk = 0; walk < 2 && covered < nbytes; walk++)
    for (gm_block *block = gm_spill_devices[device].tail;
         block != NULL && covered < nbytes; block = block->prev)
      {
        if (block->host != NULL || kept (block, keep, nkeep)
            || gm_spill_why_not (block) != NULL
            || (walk == 0 && block->nbytes < nbytes - covered))
          continue;
        status = engine_stream (device, out_streams);
        if (status == GM_OK)
          status = copy_out (block, out_streams[device]);
        /* A full host limit leaves the block dirty: its spill copies
           then.  */
        if (status == GM_ERR_NOMEM)
          return GM_OK;
        if (status != GM_OK)
          return status;
        covered += block->nbytes;
      }
  return GM_OK;
}

void
gm_spill_release_streams (void)
{
  for (int d = 0; d < GM_MAX_DEVICES; d++)
    for (gm_stream **streams = out_streams; streams != NULL;
         streams = streams == out_streams ? in_streams : NULL)
      if (streams[d] != NULL)
        {
          gm_backend_current->stream_destroy (streams[d]);
          streams[d] = NULL;
        }
}

/* Books clean BLOCK, whose device memory went (or passed to another
   block), as spilled: its host copy is its bytes now.  */
static void
note_spilled (gm_block *block, uint64_t start)
{
  gm_spill_device *d = &gm_spill_devices[block->device];

  block->ptr = NULL;
  block->spilled = true;
  d->stats.clean_bytes -= block->nbytes;
  d->stats.clean_blocks--;
  d->stats.spilled_bytes += block->nbytes;
  d->stats.spilled_blocks++;
  gm_spill_blocks_out++;
  d->stats.spills++;
  d->stats.spill_ns += now_ns () - start;
  if (moved_hook != NULL)
    moved_hook (block->user);
}

gm_status
gm_spill_block (gm_block *block)
{
  gm_spill_device *d;
  const char *why = gm_spill_why_not (block);
  uint64_t start = now_ns ();
  gm_status status;

  if (why != NULL)
    return gm_error_set (GM_ERR_FAILED, 0, NULL, "cannot spill a block of "
                         "%zu bytes: %s", block->nbytes, why);
  d = &gm_spill_devices[block->device];
  /* A dirty block is made clean first; then its host copy is the bytes,
     and only the device block goes (ordered after the work queued
     before, as any free).  */
  if (block->host == NULL)
    status = copy_out (block, NULL);
  else
    {
      /* The engine's stream is not joined: the free waits for a
         write-behind copy still reading the block.  */
      status = host_ready (block) ? GM_OK
               : gm_backend_current->stream_wait_event (block->device, NULL,
                                                        block->host_busy);
      d->stats.clean_spills++;
    }
  if (status == GM_OK)
    status = gm_mem_spill_free (block->device, block->ptr, block->nbytes);
  if (status != GM_OK)
    return status;
  note_spilled (block, start);
  return GM_OK;
}

/* Moves BLOCK for gm_spill_make_room, if it may move and KEEP does not
   name it, adding its bytes to *FREED.  false where nothing more can
   move (the host limit) or on an error (*STATUS).  */
static bool
move_for_room (gm_block *block, gm_block *const *keep, int nkeep,
               size_t *freed, gm_status *status)
{
  if (kept (block, keep, nkeep) || gm_spill_why_not (block) != NULL)
    return true;
  *status = gm_spill_block (block);
  if (*status == GM_ERR_NOMEM)
    {
      *status = GM_OK;
      return false;
    }
  if (*status != GM_OK)
    return false;
  *freed += block->nbytes;
  return true;
}

/* gm_spill_make_room, the dirty blocks least recently used first, or
   (CYCLE) most recently used first, as the clean ones: for the return
   of a block that came back before, the sign of a loop over more than
   fits, where the block used last is needed last (least recently used
   would move the one needed next, each time).  */
static gm_status
make_room (int device, size_t nbytes, gm_block *const *keep, int nkeep,
           bool cycle, size_t *freed)
{
  gm_status status = GM_OK;
  gm_block *block, *next;

  *freed = 0;
  if (!gm_spill_enabled (device))
    return GM_OK;
  /* Walk 0 takes only blocks that cover what is still needed alone (so
     that small arrays in use every call, a kernel's parameters, do not
     move for nothing), walk 1 any.  In each, first the clean blocks,
     most recently used first: they move without a copy, and a block
     that came back and is only read is most often one of a loop over
     more than fits; of them, those whose write-behind copy still runs
     last (the memory of a block that goes is reused by what comes
     back, after that copy).  Then the dirty ones in their order.  */
  for (int walk = 0; walk < 2; walk++)
    {
      for (int ready = 1; ready >= 0; ready--)
        for (block = gm_spill_devices[device].tail; block != NULL && *freed < nbytes;
             block = next)
          {
            next = block->prev;
            if (block->host != NULL
                && (walk == 1 || block->nbytes >= nbytes - *freed)
                && (!ready || host_ready (block))
                && !move_for_room (block, keep, nkeep, freed, &status))
              return status;
          }
      for (block = cycle ? gm_spill_devices[device].tail : gm_spill_devices[device].head;
           block != NULL && *freed < nbytes; block = next)
        {
          next = cycle ? block->prev : block->next;
          if ((walk == 1 || block->nbytes >= nbytes - *freed)
              && !move_for_room (block, keep, nkeep, freed, &status))
            return status;
        }
    }
  return GM_OK;
}

gm_status
gm_spill_make_room (int device, size_t nbytes, gm_block *const *keep,
                    int nkeep, size_t *freed)
{
  return make_room (device, nbytes, keep, nkeep, false, freed);
}

/* Marks the host bytes of BLOCK read by the copy just queued on
   STREAM until it completes (host_settle waits for it); a copy queued
   earlier on another stream is waited for first.  */
static gm_status
host_busy_until_done (gm_block *block, gm_stream *stream)
{
  gm_status status;

  host_settle (block);
  status = gm_backend_current->event_create (block->device,
                                             GM_EVENT_BLOCKING,
                                             &block->host_busy);
  if (status == GM_OK)
    status = gm_backend_current->event_record (block->host_busy, stream);
  if (status != GM_OK && block->host_busy != NULL)
    {
      gm_backend_current->event_destroy (block->host_busy);
      block->host_busy = NULL;
    }
  return status;
}

/* Books spilled BLOCK as back on its device at PTR; the host bytes
   stay, as the clean copy, until a use may write.  */
static void
note_returned (gm_block *block, void *ptr, uint64_t start)
{
  gm_spill_device *d = &gm_spill_devices[block->device];

  block->ptr = ptr;
  block->spilled = false;
  block->came_back = true;
  d->stats.spilled_bytes -= block->nbytes;
  d->stats.spilled_blocks--;
  gm_spill_blocks_out--;
  d->stats.clean_bytes += block->nbytes;
  d->stats.clean_blocks++;
  d->stats.returns++;
  d->stats.return_bytes += block->nbytes;
  d->stats.return_ns += now_ns () - start;
  gm_spill_touch_slow (block);
}

/* The pieces an exchange copies in turn: at least EXCHANGE_PIECE bytes,
   at most EXCHANGE_PIECES of them.  */
#define EXCHANGE_PIECE ((size_t) 16 << 20)
enum { EXCHANGE_PIECES = 64 };

/* The bytes of the piece at AT of NBYTES cut in pieces of PIECE.  */
static size_t
piece_len (size_t nbytes, size_t piece, size_t at)
{
  return nbytes - at < piece ? nbytes - at : piece;
}

/* Lets go of the NEVENTS of EVENTS (their copies may still run).  */
static void
events_destroy (gm_event **events, int nevents)
{
  for (int i = 0; i < nevents; i++)
    if (events[i] != NULL)
      gm_backend_current->event_destroy (events[i]);
}

/* Waits for the copies queued on STREAM (a failure's end).  */
static void
drain (int device, gm_stream *stream)
{
  while (gm_backend_current->wait (device, stream, 50000)
         == GM_ERR_NOT_READY)
    ;
}

/* Brings spilled BLOCK back into the device memory of PARTNER, which
   spills, with no allocation: piece by piece, PARTNER's bytes go to
   host memory on the engine's stream (when it has no clean copy) while
   BLOCK's come up behind each piece on STREAM (NULL: the engine's, and
   complete on return), so that the two directions of the bus run at
   once, where a spill and a return one after the other use one at a
   time.  After all work queued on the device before.  */
static gm_status
exchange (gm_block *block, gm_block *partner, gm_stream *stream,
          uint64_t start)
{
  const gm_backend *be = gm_backend_current;
  int device = block->device;
  size_t nbytes = block->nbytes;
  bool copy = partner->host == NULL, pinned = false;
  /* A clean partner's memory takes the upload whole.  */
  size_t piece = !copy ? nbytes
                 : (nbytes + EXCHANGE_PIECES - 1) / EXCHANGE_PIECES;
  gm_event *before = NULL, *pieces[EXCHANGE_PIECES] = {NULL};
  gm_stream *in = stream;
  void *host = NULL;
  char *down, *up;
  int npieces;
  gm_status status;

  if (piece < EXCHANGE_PIECE)
    piece = EXCHANGE_PIECE;
  npieces = (int) ((nbytes + piece - 1) / piece);
  status = engine_stream (device, out_streams);
  if (status == GM_OK && in == NULL)
    status = engine_stream (device, in_streams);
  if (status == GM_OK && in == NULL)
    in = in_streams[device];
  if (status == GM_OK && copy)
    status = host_alloc (partner, &host, &pinned);
  /* Recorded without a stream, the event follows every stream's work
     (the join); both sides wait for it.  */
  if (status == GM_OK)
    status = be->event_create (device, GM_EVENT_BLOCKING, &before);
  if (status == GM_OK)
    status = be->event_record (before, NULL);
  if (status == GM_OK && copy)
    status = be->stream_wait_event (device, out_streams[device], before);
  down = partner->ptr;
  for (int i = 0; status == GM_OK && copy && i < npieces; i++)
    {
      size_t at = (size_t) i * piece;
      status = be->copy ((char *) host + at, -1, down + at, device,
                         piece_len (nbytes, piece, at), out_streams[device]);
      if (status == GM_OK)
        status = be->event_create (device, GM_EVENT_BLOCKING, &pieces[i]);
      if (status == GM_OK)
        status = be->event_record (pieces[i], out_streams[device]);
    }
  if (status == GM_OK)
    status = be->stream_wait_event (device, in, before);
  /* A clean copy still being written (the write-behind) reads the
     memory that the upload overwrites.  */
  if (status == GM_OK && !copy && !host_ready (partner))
    status = be->stream_wait_event (device, in, partner->host_busy);
  if (status != GM_OK)
    {
      /* Nothing was written over PARTNER's bytes: all stays.  */
      drain (device, out_streams[device]);
      events_destroy (pieces, EXCHANGE_PIECES);
      events_destroy (&before, 1);
      if (host != NULL)
        host_free (host, pinned);
      return status;
    }
  events_destroy (&before, 1);
  if (copy)
    {
      /* PARTNER's host copy is all queued: it is its bytes from now on,
         whatever comes of the uploads.  */
      partner->host = host;
      partner->host_pinned = pinned;
      partner->host_busy = pieces[npieces - 1];
      pieces[npieces - 1] = NULL;
      host_bytes += nbytes;
      gm_spill_devices[device].stats.clean_bytes += nbytes;
      gm_spill_devices[device].stats.clean_blocks++;
      gm_spill_devices[device].stats.spill_bytes += nbytes;
    }
  else
    gm_spill_devices[device].stats.clean_spills++;
  host_settle (block);
  up = block->host;
  for (int i = 0; status == GM_OK && i < npieces; i++)
    {
      size_t at = (size_t) i * piece;
      gm_event *after = i == npieces - 1 ? partner->host_busy : pieces[i];
      if (copy)
        status = be->stream_wait_event (device, in, after);
      if (status == GM_OK)
        status = be->copy (down + at, device, up + at, -1,
                           piece_len (nbytes, piece, at), in);
    }
  events_destroy (pieces, EXCHANGE_PIECES);
  if (status == GM_OK && stream != NULL)
    status = host_busy_until_done (block, in);
  if (status != GM_OK || stream == NULL)
    drain (device, in);
  note_spilled (partner, start);
  if (status != GM_OK)
    {
      /* BLOCK stays spilled; the memory its upload began to fill goes,
         once PARTNER's download (not joined by the free) is done.  */
      drain (device, out_streams[device]);
      gm_mem_spill_free (device, down, nbytes);
      return status;
    }
  gm_mem_spill_exchange (device, down, nbytes, stream);
  gm_spill_devices[device].stats.exchanges++;
  note_returned (block, down, start);
  return GM_OK;
}

gm_status
gm_spill_return (gm_block *block, gm_stream *stream, bool evict,
                 gm_block *const *keep, int nkeep)
{
  uint64_t start = now_ns ();
  gm_status status;
  void *ptr = NULL;

  if (!block->spilled)
    return GM_OK;
  for (;;)
    {
      size_t freed;
      gm_block *partner;
      status = gm_mem_return_alloc (block->device, block->nbytes, stream,
                                    &ptr);
      if (status != GM_ERR_NOMEM || !evict)
        break;
      partner = gm_spill_enabled (block->device)
                ? exchange_partner (block, keep, nkeep, NULL, 0) : NULL;
      if (partner != NULL)
        {
          status = exchange (block, partner, stream, start);
          /* The host limit leaves no room for a written partner's bytes
             (nothing moved): clean blocks may still make the room.  */
          if (status != GM_ERR_NOMEM)
            return status;
        }
      status = make_room (block->device, block->nbytes, keep, nkeep,
                          block->came_back, &freed);
      if (status != GM_OK)
        return status;
      if (freed == 0)
        return gm_error_set (GM_ERR_NOMEM, 0, NULL, "cannot bring a "
                             "spilled block of %zu bytes back to device "
                             "%d: no room, and nothing more can move",
                             block->nbytes, block->device);
    }
  if (status != GM_OK)
    return status;
  /* A write-behind copy still filling the host bytes is waited for (a
     copy from pageable memory reads them on the host).  */
  host_settle (block);
  status = gm_backend_current->copy (ptr, block->device, block->host, -1,
                                     block->nbytes, stream);
  if (status == GM_OK && stream != NULL
      && host_busy_until_done (block, stream) != GM_OK)
    /* No event to tell when the copy is done: it is waited for now.  */
    while ((status = gm_backend_current->wait (block->device, stream, 50000))
           == GM_ERR_NOT_READY)
      ;
  if (status != GM_OK)
    {
      gm_mem_free (block->device, ptr, block->nbytes, stream);
      return status;
    }
  note_returned (block, ptr, start);
  return GM_OK;
}
