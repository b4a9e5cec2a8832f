/* cuda-staging.c -- fast copies between pageable host memory and a device.

   The DMA engines read and write only page-locked memory; cudaMemcpy
   from ordinary (pageable) memory goes through the driver's own small
   staging buffers, one thread, no overlap, at a fraction of what the
   DMA engines move from page-locked memory.  Here a persistent pool of host threads copies each chunk of
   the user's memory into one of a ring of page-locked buffers while the
   DMA engine moves the chunk before it, so that both run at once.

   Used by cuda-backend.c for synchronous copies of at least
   GM_STAGING_MIN bytes whose host side is pageable.  Both kinds of copy
   here run on the device's legacy default stream, as cudaMemcpy does:
   so they start after all work queued before them on any of gpumem's
   streams (blocking streams, which the legacy stream waits for; see
   Ordering in cuda-backend.c), and they return only once complete.
   Small synchronous copies (at most GM_SMALL_MAX bytes, such as the
   workload's 4 floats, either way) go through one page-locked bounce
   buffer instead: the DMA engine's own path is shorter than the
   driver's pageable one.  The thread count and the largest chunk
   default to the values that measured best and adapt to the cores
   present and to each copy's size;
   GPUMEM_COPY_THREADS (0: never stage), GPUMEM_COPY_CHUNK and
   GPUMEM_COPY_MIN override them, read at the backend's start
   (gm_staging_init).

   Each constant below states the rule it keeps; the measurements that
   chose it, and the probes that made them, are in bench/NOTES.md ("The
   pageable-copy engine" and "Why cuda-staging.c's constants are what
   they are").  */

#define _POSIX_C_SOURCE 200809L
#include "config.h"

#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime_api.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HAVE_STREAMING_512 1
#endif

#include "cuda-staging.h"
#include "cuda-status.h"
#include "gm.h"
#include "pinned-ranges.h"

#define RING 4
/* One copying thread a core (of 16) and chunks of 16 MiB: fewer
   threads or smaller chunks leave the link idle on large copies.  */
#define DEFAULT_THREADS 16
#define DEFAULT_CHUNK ((size_t) 16 << 20)
/* A copy is cut into about CHUNKS_WANTED chunks, so that the host's
   copy of one overlaps the DMA engine's move of the one before, and the
   pipeline fills after one eighth of the copy: chunks of at least
   CHUNK_MIN, at most the ring's buffer.  */
#define CHUNKS_WANTED 8
#define CHUNK_MIN ((size_t) 256 << 10)
/* Chunks to the device are at least this long: each costs the caller a
   cudaMemcpyAsync and an event record, which must stay small against
   the time the threads take to fill the chunk, or the DMA engine waits
   on the caller.  To the host the DMA engine runs ahead of the threads
   and small chunks cost nothing.  */
#define CHUNK_MIN_TO_DEVICE ((size_t) 1 << 20)
/* Chunks to the device of at least this length are filled through the
   caches, shorter ones (a large copy's last chunk among them) with
   non-temporal stores (copy_streaming).  */
#define CACHED_FILL_MIN ((size_t) 16 << 20)
/* Each thread copies at least this much of a chunk: small enough that
   a chunk of CHUNK_MIN keeps every thread busy, large enough that a
   piece is worth waking a thread for.  */
#define SHARE_MIN ((size_t) 32 << 10)
/* A worker that finished its piece spins this long for the next one
   before it sleeps: the pieces of one copy come back to back, and
   waking a sleeping thread costs microseconds a thread.  */
#define SPIN_NS 1000000L

/* The pool of copying threads: the caller (thread 0) and workers 1 ..
   nthreads - 1.  The caller writes a piece into worker W's slot, clears
   the slot's CLAIMED flag and raises its GO count (pieces_start).
   Whoever sets CLAIMED first copies the piece and counts PENDING down:
   the worker, once it sees the new GO, or the caller, which takes every
   piece still unclaimed once it is done with its own part
   (pieces_wait), so that a worker the system has not yet woken or has
   descheduled holds the copy up by at most one piece.  A worker spins
   on GO for SPIN_NS, then sleeps on its semaphore, saying so in
   SLEEPING; the caller posts the semaphore only to a sleeper.  Both
   sides store one flag, then load the other's (sequentially consistent
   atomics): either the caller sees the worker asleep, or the worker sees
   the new GO before it sleeps.  A worker that sees GO late finds its
   piece claimed, or, where a newer piece is already in its slot, takes
   that one: the caller clears CLAIMED only after it wrote the piece,
   and every piece before it was claimed.  */
typedef struct worker_slot
{
  _Atomic unsigned long go;
  atomic_bool claimed;     /* the piece in the slot is taken, or none */
  atomic_bool sleeping;
  sem_t wake;
  pthread_t thread;
  char *dst;
  const char *src;
  size_t len;
  bool streaming;          /* copy_streaming, else memcpy */
} worker_slot;

static struct
{
  worker_slot *slots;
  int nthreads;            /* the caller's thread included */
  int handed;              /* slots 1 .. HANDED hold this copy's pieces */
  atomic_int pending;
  atomic_bool quit;
} pool;

/* Per device: the ring of page-locked memory (RING buffers of the
   largest chunk), and the events that say when the DMA engine is done
   with each of the RING chunks in flight.  The chunks move on the
   legacy default stream: a stream of the ring's own would not wait for
   the work of the program's streams (blocking streams are ordered only
   against the legacy stream, not against each other).

   Chunks smaller than a buffer do not reuse the same RING places: they
   take the ring's places in turn, from CURSOR on, across copies, so a
   place comes round again only after the whole ring (64 MiB) has been
   written: the DMA engine writes into memory whose lines the CPU's
   last-level cache still holds at half speed or less.  */
typedef struct ring
{
  bool ready;
  void *slot[RING];
  cudaEvent_t filled[RING];
  size_t cursor;           /* bytes into the ring of the next place */
  cudaStream_t batch;      /* GPUMEM_COPY_BATCH's uploads; made at first */
  cudaEvent_t queued;      /* use, as the legacy stream's mark */
} ring;

static ring *rings;
static int ring_count;

static long
now_ns (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000000000L + ts.tv_nsec;
}

/* Copies LEN bytes from SRC to DST with stores that bypass the CPU's
   caches (x86-64's non-temporal stores), then fences them; elsewhere,
   and for the unaligned head and the tail, memcpy.  The pieces of a
   staged copy move so, both ways, but for the chunks of CACHED_FILL_MIN
   and more (below):

   - Into a ring place.  Filled through the caches, a place's lines stay
     dirty in the caches of the threads that wrote them, and the DMA
     engine then reads it at about half speed.
   - Out of a ring place into the user's memory.  Ordinary stores first
     read each line of the destination that is not in the caches; these
     do not.  The copied bytes are in memory, not in the caches, when
     the copy returns.

   From CACHED_FILL_MIN (the largest chunk, in copies of 128 MiB and
   more) the ring places are filled through the caches instead.  Each
   worker then writes over a MiB a chunk, and the lines are mostly in
   the shared last-level cache rather than in the writers' private ones
   when the DMA engine reads them; the ring, 64 MiB, is not written to
   memory at all.  Smaller chunks lose by it.

   Where the CPU has AVX-512, start_pool picks copy_streaming_512
   instead: one store a 64-byte line, not four.  */
static void
copy_streaming_128 (char *dst, const char *src, size_t len)
{
  size_t done = 0;

#if defined(__SSE2__)
  size_t head = (16 - ((uintptr_t) dst & 15)) & 15;

  if (head > len)
    head = len;
  memcpy (dst, src, head);
  done = head;
  for (; done + 64 <= len; done += 64)
    {
      __m128i a = _mm_loadu_si128 ((const __m128i *) (src + done));
      __m128i b = _mm_loadu_si128 ((const __m128i *) (src + done + 16));
      __m128i c = _mm_loadu_si128 ((const __m128i *) (src + done + 32));
      __m128i d = _mm_loadu_si128 ((const __m128i *) (src + done + 48));
      _mm_stream_si128 ((__m128i *) (dst + done), a);
      _mm_stream_si128 ((__m128i *) (dst + done + 16), b);
      _mm_stream_si128 ((__m128i *) (dst + done + 32), c);
      _mm_stream_si128 ((__m128i *) (dst + done + 48), d);
    }
  /* Non-temporal stores are weakly ordered: visible to the DMA engine
     and to the caller before the caller, told the piece is done, queues
     the DMA or returns.  */
  _mm_sfence ();
#endif
  memcpy (dst + done, src + done, len - done);
}

#if HAVE_STREAMING_512
__attribute__ ((target ("avx512f"))) static void
copy_streaming_512 (char *dst, const char *src, size_t len)
{
  size_t head = (64 - ((uintptr_t) dst & 63)) & 63, done;

  if (head > len)
    head = len;
  memcpy (dst, src, head);
  for (done = head; done + 256 <= len; done += 256)
    {
      __m512i a = _mm512_loadu_si512 ((const void *) (src + done));
      __m512i b = _mm512_loadu_si512 ((const void *) (src + done + 64));
      __m512i c = _mm512_loadu_si512 ((const void *) (src + done + 128));
      __m512i d = _mm512_loadu_si512 ((const void *) (src + done + 192));
      _mm512_stream_si512 ((void *) (dst + done), a);
      _mm512_stream_si512 ((void *) (dst + done + 64), b);
      _mm512_stream_si512 ((void *) (dst + done + 128), c);
      _mm512_stream_si512 ((void *) (dst + done + 192), d);
    }
  for (; done + 64 <= len; done += 64)
    _mm512_stream_si512 ((void *) (dst + done),
                         _mm512_loadu_si512 ((const void *) (src + done)));
  _mm_sfence ();           /* as in copy_streaming_128 */
  memcpy (dst + done, src + done, len - done);
}
#endif

/* copy_streaming_128 or, chosen by start_pool, copy_streaming_512.  */
static void (*copy_streaming) (char *dst, const char *src, size_t len)
  = copy_streaming_128;

/* Copies LEN bytes from SRC to DST with copy_streaming where STREAMING,
   else with memcpy (through the caches).  */
static void
copy_piece (char *dst, const char *src, size_t len, bool streaming)
{
  if (streaming)
    copy_streaming (dst, src, len);
  else
    memcpy (dst, src, len);
}

/* Copies the piece in SLOT and counts it done, unless another thread
   claimed it first.  */
static void
take_piece (worker_slot *slot)
{
  bool unclaimed = false;

  if (atomic_compare_exchange_strong (&slot->claimed, &unclaimed, true))
    {
      copy_piece (slot->dst, slot->src, slot->len, slot->streaming);
      atomic_fetch_sub (&pool.pending, 1);
    }
}

static void *
worker (void *arg)
{
  worker_slot *slot = &pool.slots[(int) (intptr_t) arg];
  unsigned long seen = 0;

  for (;;)
    {
      long start = now_ns ();
      unsigned long go;
      unsigned spins = 0;

      while ((go = atomic_load (&slot->go)) == seen
             && !atomic_load (&pool.quit))
        {
          if (++spins % 64 != 0 || now_ns () - start < SPIN_NS)
            continue;
          atomic_store (&slot->sleeping, true);
          if (atomic_load (&slot->go) == seen && !atomic_load (&pool.quit))
            while (sem_wait (&slot->wake) != 0)
              continue;       /* EINTR */
          atomic_store (&slot->sleeping, false);
          start = now_ns ();
        }
      if (atomic_load (&pool.quit))
        break;
      seen = go;
      take_piece (slot);
    }
  return NULL;
}

/* The settings, read by gm_staging_init, each in this one place with
   its bounds: GPUMEM_COPY_THREADS (0 to 256; 0 turns staging off;
   unset: DEFAULT_THREADS, or fewer where the machine has fewer cores),
   GPUMEM_COPY_CHUNK (64 KiB to 1 GiB: every chunk this size; unset:
   chunks sized for each copy, at most DEFAULT_CHUNK) and GPUMEM_COPY_MIN
   (the smallest copy staged, for measuring the threshold), and
   GPUMEM_COPY_BATCH (0, the default: never; else the smallest staged
   upload that goes through cudaMemcpyBatchAsync instead of the ring,
   gm_batch_upload; needs CUDA 12.8).  */
static struct
{
  size_t threads;
  size_t chunk;            /* the largest chunk: the ring's buffer size */
  bool chunk_fixed;
  size_t min_bytes;
  size_t batch_min;
} settings;

gm_status
gm_staging_init (void)
{
  long cores = sysconf (_SC_NPROCESSORS_ONLN);
  size_t fallback = DEFAULT_THREADS;

  if (cores > 0 && (size_t) cores < fallback)
    fallback = (size_t) cores;
  if (gm_env_count ("GPUMEM_COPY_THREADS", fallback, 0, 256,
                     &settings.threads) != GM_OK
      || gm_env_size ("GPUMEM_COPY_CHUNK", 0, 64 << 10, (size_t) 1 << 30,
                      &settings.chunk) != GM_OK
      || gm_env_size ("GPUMEM_COPY_MIN", GM_STAGING_MIN, 0, SIZE_MAX,
                      &settings.min_bytes) != GM_OK
      || gm_env_size ("GPUMEM_COPY_BATCH", 0, 0, SIZE_MAX,
                      &settings.batch_min) != GM_OK)
    return GM_ERR_VALUE;
#if CUDART_VERSION < 12080
  if (settings.batch_min > 0)
    return gm_error_set (GM_ERR_VALUE, 0, NULL, "GPUMEM_COPY_BATCH needs "
                         "cudaMemcpyBatchAsync, CUDA 12.8 or later; this "
                         "build has CUDA %d", CUDART_VERSION);
#endif
  settings.chunk_fixed = settings.chunk != 0;
  if (!settings.chunk_fixed)
    settings.chunk = DEFAULT_CHUNK;
  return GM_OK;
}

/* Starts the pool once, with settings.threads threads (at least 1: the
   caller's own).  */
static void
start_pool (void)
{
  size_t want;

  if (pool.nthreads > 0)
    return;
#if HAVE_STREAMING_512
  if (__builtin_cpu_supports ("avx512f"))
    copy_streaming = copy_streaming_512;
#endif
  want = settings.threads > 0 ? settings.threads : 1;
  pool.slots = calloc (want, sizeof *pool.slots);
  pool.nthreads = 1;
  if (pool.slots == NULL)
    return;
  for (size_t i = 1; i < want; i++)
    {
      worker_slot *slot = &pool.slots[i];
      atomic_store (&slot->claimed, true);
      if (sem_init (&slot->wake, 0, 0) != 0)
        break;
      if (pthread_create (&slot->thread, NULL, worker, (void *) (intptr_t) i)
          != 0)
        {
          sem_destroy (&slot->wake);
          break;
        }
      pool.nthreads++;
    }
}

/* The chunk a copy of NBYTES moves in, to the device (TO_DEVICE) or to
   the host.  */
static size_t
chunk_for (size_t nbytes, bool to_device)
{
  size_t chunk, least = to_device ? CHUNK_MIN_TO_DEVICE : CHUNK_MIN;

  if (settings.chunk_fixed)
    return settings.chunk;
  chunk = (nbytes / CHUNKS_WANTED + 4095) & ~(size_t) 4095;
  if (chunk < least)
    chunk = least;
  return chunk < settings.chunk ? chunk : settings.chunk;
}

/* Splits the copy of LEN bytes from SRC to DST (into a ring place or
   out of one) into as many pieces as pieces of SHARE_MIN bytes make
   sense, one a thread; hands the workers theirs and returns at once,
   with the size of the first piece where the caller takes it
   (WITH_CALLER), else 0; pieces_wait waits for the workers.  Without
   workers the caller copies it all here.  The pieces move with
   copy_streaming where STREAMING, else with memcpy.

   To the device the caller takes no piece: it queues the DMA of the
   chunk before while the workers fill this one, so that the DMA engine
   never waits for the queueing.  To the host the caller empties a piece
   and then queues: queueing first would leave the DMA engine a chunk
   less ahead.  */
static size_t
pieces_start (char *dst, const char *src, size_t len, bool with_caller,
              bool streaming)
{
  size_t workers = (size_t) pool.nthreads - 1;
  size_t threads = workers + (with_caller ? 1 : 0);
  size_t used = len / SHARE_MIN, share, first;

  pool.handed = 0;
  if (workers == 0)
    {
      copy_piece (dst, src, len, streaming);
      return 0;
    }
  if (used > threads)
    used = threads;
  if (used == 0)
    used = 1;
  if (with_caller && used == 1)
    return len;
  /* Shares of whole pages, so no two threads touch one page; the last
     share takes what is left.  */
  share = ((len + used - 1) / used + 4095) & ~(size_t) 4095;
  used = (len + share - 1) / share;
  first = with_caller ? 1 : 0;
  pool.handed = (int) (used - first);
  atomic_store (&pool.pending, pool.handed);
  for (size_t w = first; w < used; w++)
    {
      worker_slot *slot = &pool.slots[w + 1 - first];
      size_t start = w * share;
      slot->dst = dst + start;
      slot->src = src + start;
      slot->len = len - start < share ? len - start : share;
      slot->streaming = streaming;
      atomic_store (&slot->claimed, false);
      atomic_fetch_add (&slot->go, 1);
      if (atomic_load (&slot->sleeping))
        sem_post (&slot->wake);
    }
  return with_caller ? share : 0;
}

/* Copies the pieces pieces_start handed out that no worker has claimed
   yet, then waits until every piece is copied (the workers' non-temporal
   stores fenced: see copy_streaming).  A plain load first: a claimed
   piece costs no locked instruction on a line the worker holds.  */
static void
pieces_wait (void)
{
  for (int w = 1; w <= pool.handed; w++)
    if (!atomic_load_explicit (&pool.slots[w].claimed, memory_order_relaxed))
      take_piece (&pool.slots[w]);
  while (atomic_load (&pool.pending) > 0)
    continue;
}

static cudaError_t
ring_for (int device, int device_count, ring **out)
{
  cudaError_t err = cudaSuccess;
  ring *r;

  if (rings == NULL)
    {
      rings = calloc ((size_t) device_count, sizeof *rings);
      if (rings == NULL)
        return cudaErrorMemoryAllocation;
      ring_count = device_count;
    }
  r = &rings[device];
  if (!r->ready)
    {
      for (int i = 0; i < RING && err == cudaSuccess; i++)
        {
          err = cudaMallocHost (&r->slot[i], settings.chunk);
          if (err == cudaSuccess)
            err = cudaEventCreateWithFlags (&r->filled[i],
                                            cudaEventDisableTiming);
        }
      if (err != cudaSuccess)
        return err;
      r->ready = true;
    }
  *out = r;
  return cudaSuccess;
}

bool
gm_staging_pageable (const void *host)
{
  struct cudaPointerAttributes attr;

  /* The blocks gpumem page-locked itself are known without asking.  */
  if (gm_pinned_ranges_holds (host))
    return false;
  if (cudaPointerGetAttributes (&attr, host) != cudaSuccess)
    {
      cudaGetLastError ();
      return false;
    }
  return attr.type == cudaMemoryTypeUnregistered;
}

bool
gm_staging_wanted (size_t nbytes)
{
  return nbytes >= settings.min_bytes && settings.threads > 0;
}

/* One staged copy at a time: Python threads may copy at once (the GIL
   is released during large copies), and they share the pool and rings.  */
static pthread_mutex_t engine_lock = PTHREAD_MUTEX_INITIALIZER;

/* Per device, the bounce buffer of small copies (GM_SMALL_MAX bytes),
   made on first use.  */
static void **bounces;
static int bounce_count;

gm_status
gm_staging_small_copy (void *dst, const void *src, size_t nbytes, int device,
                       int device_count, bool to_device)
{
  cudaError_t err = cudaSuccess;

  pthread_mutex_lock (&engine_lock);
  if (bounces == NULL)
    {
      bounces = calloc ((size_t) device_count, sizeof *bounces);
      bounce_count = device_count;
      if (bounces == NULL)
        err = cudaErrorMemoryAllocation;
    }
  if (err == cudaSuccess && bounces[device] == NULL)
    err = cudaMallocHost (&bounces[device], GM_SMALL_MAX);
  if (err == cudaSuccess && to_device)
    {
      memcpy (bounces[device], src, nbytes);
      err = cudaMemcpyAsync (dst, bounces[device], nbytes,
                             cudaMemcpyHostToDevice, cudaStreamLegacy);
    }
  else if (err == cudaSuccess)
    err = cudaMemcpyAsync (bounces[device], src, nbytes,
                           cudaMemcpyDeviceToHost, cudaStreamLegacy);
  if (err == cudaSuccess)
    err = cudaStreamSynchronize (cudaStreamLegacy);
  if (err == cudaSuccess && !to_device)
    memcpy (dst, bounces[device], nbytes);
  pthread_mutex_unlock (&engine_lock);
  if (err != cudaSuccess)
    return gm_cuda_status (err, "gm_staging_small_copy", __FILE__, __LINE__);
  return GM_OK;
}

/* The place in ring R for the next chunk of SIZE bytes (at most a
   buffer): at the cursor, or at the start of the next buffer where the
   rest of this one is too short.  Each place lies within one buffer and
   takes at most the next one, so RING places in a row never come round
   to the first: the chunks in flight never share bytes.  */
static char *
ring_place (ring *r, size_t size)
{
  size_t buffer = r->cursor / settings.chunk;
  size_t at = r->cursor % settings.chunk;

  if (at + size > settings.chunk)
    {
      buffer = (buffer + 1) % RING;
      at = 0;
    }
  r->cursor = (buffer * settings.chunk + at + size) % (RING * settings.chunk);
  return (char *) r->slot[buffer] + at;
}

static cudaError_t staged_copy (void *dst, const void *src, size_t nbytes,
                                int device, int device_count, bool to_device);

/* The bytes of chunk I of a copy of NBYTES in chunks of CHUNK.  */
static size_t
chunk_len (size_t nbytes, size_t chunk, size_t i)
{
  size_t off = i * chunk;

  return nbytes - off < chunk ? nbytes - off : chunk;
}

gm_status
gm_staging_copy (void *dst, const void *src, size_t nbytes, int device,
                 int device_count, bool to_device)
{
  cudaError_t err;

  pthread_mutex_lock (&engine_lock);
  err = staged_copy (dst, src, nbytes, device, device_count, to_device);
  /* A copy that failed half way may have chunks still moving between
     the ring and device memory: they must land before the ring is
     refilled by the next copy, and before the caller frees or reuses
     its memory.  The error is the one already in ERR.  */
  if (err != cudaSuccess && cudaStreamSynchronize (cudaStreamLegacy)
                              != cudaSuccess)
    cudaGetLastError ();
  pthread_mutex_unlock (&engine_lock);
  if (err != cudaSuccess)
    return gm_cuda_status (err, "gm_staging_copy", __FILE__, __LINE__);
  return GM_OK;
}

static cudaError_t
staged_copy (void *dst, const void *src, size_t nbytes, int device,
             int device_count, bool to_device)
{
  cudaError_t err;
  size_t nchunks, chunk;
  ring *r;
  char *place[RING];       /* where chunk i in flight sits: place[i % RING] */

  start_pool ();
  err = ring_for (device, device_count, &r);
  if (err != cudaSuccess)
    return err;
#if CUDART_VERSION >= 12080
  if (to_device && settings.batch_min > 0 && nbytes >= settings.batch_min)
    return gm_batch_upload (dst, src, nbytes, chunk_for (nbytes, true),
                            device, &r->batch, &r->queued);
#endif
  chunk = chunk_for (nbytes, to_device);
  nchunks = (nbytes + chunk - 1) / chunk;

  if (to_device)
    {
      /* The workers fill chunk i's place while the caller queues chunk
         i - 1's DMA and the DMA engine drains the chunks before it.
         The event of chunk i - RING says that every chunk before it has
         left the ring (one stream, in order), and with it whichever
         chunk last had chunk i's place.  */
      for (size_t i = 0; i <= nchunks; i++)
        {
          int s = (int) (i % RING);
          bool fill = i < nchunks;
          if (fill)
            {
              if (i >= RING && (err = cudaEventSynchronize (r->filled[s]))
                                 != cudaSuccess)
                return err;
              size_t len = chunk_len (nbytes, chunk, i);
              place[s] = ring_place (r, chunk);
              pieces_start (place[s], (const char *) src + i * chunk, len,
                            false, len < CACHED_FILL_MIN);
            }
          if (i > 0)
            {
              int p = (int) ((i - 1) % RING);
              err = cudaMemcpyAsync ((char *) dst + (i - 1) * chunk, place[p],
                                     chunk_len (nbytes, chunk, i - 1),
                                     cudaMemcpyHostToDevice,
                                     cudaStreamLegacy);
              if (err == cudaSuccess)
                err = cudaEventRecord (r->filled[p], cudaStreamLegacy);
            }
          if (fill)
            pieces_wait ();
          if (err != cudaSuccess)
            return err;
        }
      return cudaStreamSynchronize (cudaStreamLegacy);
    }

  /* To the host: keep the DMA engine RING chunks ahead of the threads
     that empty their places into the user's memory.  */
  for (size_t i = 0; i < nchunks + RING; i++)
    {
      if (i >= RING)
        {
          size_t j = i - RING;
          char *out = (char *) dst + j * chunk;
          int s = (int) (j % RING);
          size_t mine;
          if ((err = cudaEventSynchronize (r->filled[s])) != cudaSuccess)
            return err;
          mine = pieces_start (out, place[s], chunk_len (nbytes, chunk, j),
                               true, true);
          copy_streaming (out, place[s], mine);
          pieces_wait ();
        }
      if (i < nchunks)
        {
          int s = (int) (i % RING);
          place[s] = ring_place (r, chunk);
          err = cudaMemcpyAsync (place[s], (const char *) src + i * chunk,
                                 chunk_len (nbytes, chunk, i),
                                 cudaMemcpyDeviceToHost, cudaStreamLegacy);
          if (err == cudaSuccess)
            err = cudaEventRecord (r->filled[s], cudaStreamLegacy);
          if (err != cudaSuccess)
            return err;
        }
    }
  return cudaSuccess;
}

void
gm_staging_shutdown (bool cuda_usable)
{
  atomic_store (&pool.quit, true);
  for (int i = 1; i < pool.nthreads; i++)
    sem_post (&pool.slots[i].wake);
  for (int i = 1; i < pool.nthreads; i++)
    {
      pthread_join (pool.slots[i].thread, NULL);
      sem_destroy (&pool.slots[i].wake);
    }
  free (pool.slots);
  pool.slots = NULL;
  pool.nthreads = 0;
  atomic_store (&pool.quit, false);
  for (int d = 0; d < ring_count && cuda_usable; d++)
    if (rings[d].ready)
      {
        for (int i = 0; i < RING; i++)
          {
            cudaEventDestroy (rings[d].filled[i]);
            cudaFreeHost (rings[d].slot[i]);
          }
        if (rings[d].batch != NULL)
          cudaStreamDestroy (rings[d].batch);
        if (rings[d].queued != NULL)
          cudaEventDestroy (rings[d].queued);
      }
  free (rings);
  rings = NULL;
  ring_count = 0;
  for (int d = 0; d < bounce_count && cuda_usable; d++)
    if (bounces[d] != NULL)
      cudaFreeHost (bounces[d]);
  free (bounces);
  bounces = NULL;
  bounce_count = 0;
}
