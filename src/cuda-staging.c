/* cuda-staging.c -- fast copies between pageable host memory and a device.

   The DMA engines read and write only page-locked memory; cudaMemcpy
   from ordinary (pageable) memory goes through the driver's own small
   staging buffers, one thread, no overlap: 6.6 GB/s host to device and
   11.3 GB/s back on the H200 machine, against 55 GB/s from page-locked
   memory.  Here a persistent pool of host threads copies each chunk of
   the user's memory into one of a ring of page-locked buffers while the
   DMA engine moves the chunk before it, so that both run at once.

   Used by backend-cuda.c for synchronous copies of at least
   GM_STAGING_MIN bytes whose host side is pageable.  Both kinds of copy
   here run on the device's legacy default stream, as cudaMemcpy does:
   so they start after all work queued before them on any of gpumem's
   streams (blocking streams, which the legacy stream waits for; see
   Ordering in backend-cuda.c), and they return only once complete.  Small synchronous
   copies to the host (at most GM_SMALL_MAX bytes, such as the workload's
   4 floats) go through one page-locked bounce buffer instead: the DMA
   engine's own path is shorter than the driver's pageable one
   (bench/NOTES.md).  The thread count
   and chunk size default to the values measured best on the H200
   machine (bench/NOTES.md) and adapt to the cores present;
   GPUMEM_COPY_THREADS (0: never stage), GPUMEM_COPY_CHUNK and
   GPUMEM_COPY_MIN (bytes) override them, read once (read_settings).  */

#define _POSIX_C_SOURCE 200809L
#include "config.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "cuda-staging.h"

#define RING 4
/* Measured on the H200 machine's 16 cores (bench/NOTES.md): 16 threads
   and 16 MiB chunks moved 256 MiB at 43 GB/s to the device and 49 GB/s
   back; 8 threads with 8 MiB chunks, 27 and 28.  */
#define DEFAULT_THREADS 16
#define DEFAULT_CHUNK ((size_t) 16 << 20)
/* Below this a chunk is copied by the calling thread alone: waking the
   pool costs more than it saves.  */
#define PARALLEL_MIN ((size_t) 1 << 20)

/* The pool of copying threads.  The caller is thread 0; workers 1 ..
   nthreads - 1 each copy their share of the current job.  */
static struct
{
  pthread_mutex_t lock;
  pthread_cond_t wake;
  pthread_cond_t idle;
  pthread_t *threads;
  int nthreads;
  unsigned long generation;
  int pending;
  bool quit;
  char *dst;
  const char *src;
  size_t len;
  size_t share;
} pool = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER,
          PTHREAD_COND_INITIALIZER, NULL, 0, 0, 0, false, NULL, NULL, 0, 0};

static size_t chunk_size;

/* Per device: the ring of page-locked chunks, and the events that say
   when the DMA engine is done with each.  The chunks move on the legacy
   default stream: a stream of the ring's own would not wait for the
   work of the program's streams (blocking streams are ordered only
   against the legacy stream, not against each other).  */
typedef struct ring
{
  bool ready;
  void *slot[RING];
  cudaEvent_t filled[RING];
} ring;

static ring *rings;
static int ring_count;

static void
copy_share (int index, char *dst, const char *src, size_t len, size_t share)
{
  size_t start = (size_t) index * share;

  if (start < len)
    memcpy (dst + start, src + start, len - start < share ? len - start
                                                          : share);
}

static void *
worker (void *arg)
{
  int index = (int) (intptr_t) arg;
  unsigned long seen = 0;

  pthread_mutex_lock (&pool.lock);
  for (;;)
    {
      while (pool.generation == seen && !pool.quit)
        pthread_cond_wait (&pool.wake, &pool.lock);
      if (pool.quit)
        break;
      seen = pool.generation;
      char *dst = pool.dst;
      const char *src = pool.src;
      size_t len = pool.len, share = pool.share;
      pthread_mutex_unlock (&pool.lock);
      copy_share (index, dst, src, len, share);
      pthread_mutex_lock (&pool.lock);
      if (--pool.pending == 0)
        pthread_cond_signal (&pool.idle);
    }
  pthread_mutex_unlock (&pool.lock);
  return NULL;
}

static size_t
env_size (const char *name, size_t fallback, size_t min, size_t max)
{
  const char *value = getenv (name);
  char *end;
  unsigned long long n;

  if (value == NULL || *value == '\0')
    return fallback;
  n = strtoull (value, &end, 10);
  if (*end != '\0' || n < min || n > max)
    return fallback;
  return (size_t) n;
}

/* The settings, read once, each in this one place with its bounds:
   GPUMEM_COPY_THREADS (0 to 256; 0 turns staging off; unset or out of
   bounds: DEFAULT_THREADS, or fewer where the machine has fewer cores),
   GPUMEM_COPY_CHUNK (64 KiB to 1 GiB) and GPUMEM_COPY_MIN (bytes, the
   smallest copy staged, for measuring the threshold).  */
static struct
{
  size_t threads;
  size_t chunk;
  size_t min_bytes;
} settings;
static pthread_once_t settings_once = PTHREAD_ONCE_INIT;

static void
read_settings (void)
{
  long cores = sysconf (_SC_NPROCESSORS_ONLN);
  size_t fallback = DEFAULT_THREADS;

  if (cores > 0 && (size_t) cores < fallback)
    fallback = (size_t) cores;
  settings.threads = env_size ("GPUMEM_COPY_THREADS", fallback, 0, 256);
  settings.chunk = env_size ("GPUMEM_COPY_CHUNK", DEFAULT_CHUNK, 64 << 10,
                             (size_t) 1 << 30);
  settings.min_bytes = env_size ("GPUMEM_COPY_MIN", GM_STAGING_MIN, 0,
                                 SIZE_MAX);
}

/* Starts the pool once, with settings.threads threads (at least 1: the
   caller's own).  */
static void
start_pool (void)
{
  size_t want;

  if (pool.nthreads > 0)
    return;
  pthread_once (&settings_once, read_settings);
  want = settings.threads > 0 ? settings.threads : 1;
  chunk_size = settings.chunk;
  pool.threads = calloc (want, sizeof *pool.threads);
  pool.nthreads = 1;
  if (pool.threads == NULL)
    return;
  for (size_t i = 1; i < want; i++)
    {
      if (pthread_create (&pool.threads[i], NULL, worker, (void *) (intptr_t) i)
          != 0)
        break;
      pool.nthreads++;
    }
}

/* Copies LEN bytes from SRC to DST with every thread of the pool.  */
static void
parallel_copy (char *dst, const char *src, size_t len)
{
  size_t share;

  if (pool.nthreads <= 1 || len < PARALLEL_MIN)
    {
      memcpy (dst, src, len);
      return;
    }
  /* Shares of whole pages, so no two threads touch one page; the last
     share takes what is left.  */
  share = ((len + (size_t) pool.nthreads - 1) / (size_t) pool.nthreads
           + 4095) & ~(size_t) 4095;
  pthread_mutex_lock (&pool.lock);
  pool.dst = dst;
  pool.src = src;
  pool.len = len;
  pool.share = share;
  pool.pending = pool.nthreads - 1;
  pool.generation++;
  pthread_cond_broadcast (&pool.wake);
  pthread_mutex_unlock (&pool.lock);
  copy_share (0, dst, src, len, share);
  pthread_mutex_lock (&pool.lock);
  while (pool.pending > 0)
    pthread_cond_wait (&pool.idle, &pool.lock);
  pthread_mutex_unlock (&pool.lock);
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
          err = cudaMallocHost (&r->slot[i], chunk_size);
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

  if (cudaPointerGetAttributes (&attr, host) != cudaSuccess)
    {
      cudaGetLastError ();
      return false;
    }
  return attr.type == cudaMemoryTypeUnregistered;
}

bool
gm_staging_wanted (const void *host, size_t nbytes)
{
  pthread_once (&settings_once, read_settings);
  if (nbytes < settings.min_bytes || settings.threads == 0)
    return false;
  return gm_staging_pageable (host);
}

/* One staged copy at a time: Python threads may copy at once (the GIL
   is released during large copies), and they share the pool and rings.  */
static pthread_mutex_t engine_lock = PTHREAD_MUTEX_INITIALIZER;

/* Per device, the bounce buffer of small copies (GM_SMALL_MAX bytes),
   made on first use.  */
static void **bounces;
static int bounce_count;

cudaError_t
gm_staging_small_copy (void *dst, const void *src, size_t nbytes, int device,
                       int device_count)
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
  if (err == cudaSuccess)
    err = cudaMemcpyAsync (bounces[device], src, nbytes,
                           cudaMemcpyDeviceToHost, cudaStreamLegacy);
  if (err == cudaSuccess)
    err = cudaStreamSynchronize (cudaStreamLegacy);
  if (err == cudaSuccess)
    memcpy (dst, bounces[device], nbytes);
  pthread_mutex_unlock (&engine_lock);
  return err;
}

static cudaError_t staged_copy (void *dst, const void *src, size_t nbytes,
                                int device, int device_count, bool to_device);

cudaError_t
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
  return err;
}

static cudaError_t
staged_copy (void *dst, const void *src, size_t nbytes, int device,
             int device_count, bool to_device)
{
  cudaError_t err;
  size_t nchunks;
  ring *r;

  start_pool ();
  err = ring_for (device, device_count, &r);
  if (err != cudaSuccess)
    return err;
  nchunks = (nbytes + chunk_size - 1) / chunk_size;

  if (to_device)
    {
      /* Fill slot i while the DMA engine drains the slots before it.  */
      for (size_t i = 0; i < nchunks; i++)
        {
          size_t off = i * chunk_size;
          size_t len = nbytes - off < chunk_size ? nbytes - off : chunk_size;
          int s = (int) (i % RING);
          if (i >= RING && (err = cudaEventSynchronize (r->filled[s]))
                             != cudaSuccess)
            return err;
          parallel_copy (r->slot[s], (const char *) src + off, len);
          err = cudaMemcpyAsync ((char *) dst + off, r->slot[s], len,
                                 cudaMemcpyHostToDevice, cudaStreamLegacy);
          if (err == cudaSuccess)
            err = cudaEventRecord (r->filled[s], cudaStreamLegacy);
          if (err != cudaSuccess)
            return err;
        }
      return cudaStreamSynchronize (cudaStreamLegacy);
    }

  /* To the host: keep the DMA engine RING chunks ahead of the threads
     that empty the slots into the user's memory.  */
  for (size_t i = 0; i < nchunks + RING; i++)
    {
      if (i >= RING)
        {
          size_t j = i - RING;
          size_t off = j * chunk_size;
          size_t len = nbytes - off < chunk_size ? nbytes - off : chunk_size;
          int s = (int) (j % RING);
          if ((err = cudaEventSynchronize (r->filled[s])) != cudaSuccess)
            return err;
          parallel_copy ((char *) dst + off, r->slot[s], len);
        }
      if (i < nchunks)
        {
          size_t off = i * chunk_size;
          size_t len = nbytes - off < chunk_size ? nbytes - off : chunk_size;
          int s = (int) (i % RING);
          err = cudaMemcpyAsync (r->slot[s], (const char *) src + off, len,
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
  pthread_mutex_lock (&pool.lock);
  pool.quit = true;
  pthread_cond_broadcast (&pool.wake);
  pthread_mutex_unlock (&pool.lock);
  for (int i = 1; i < pool.nthreads; i++)
    pthread_join (pool.threads[i], NULL);
  free (pool.threads);
  pool.threads = NULL;
  pool.nthreads = 0;
  pool.quit = false;
  for (int d = 0; d < ring_count && cuda_usable; d++)
    if (rings[d].ready)
      {
        for (int i = 0; i < RING; i++)
          {
            cudaEventDestroy (rings[d].filled[i]);
            cudaFreeHost (rings[d].slot[i]);
          }
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
