/* smallcopy_split.c -- the CUDA recipes of one small synchronous copy,
   timed from C inside a gpumem process on gpumem's own buffers
   (bench/probes/smallcopy_split.py builds and loads it): raw C's
   cudaMemcpy + cudaDeviceSynchronize with the direction named (make
   bench's sweep, bench/raw.cu), gpumem's
   recipe for page-locked memory (cudaMemcpyAsync on the legacy stream
   + cudaStreamSynchronize), gpumem's recipe for 16 pageable bytes (the
   pointer query, a bounce buffer, the same queued copy and wait) and
   the pieces of each.  The script times gpumem.copy on the same
   buffers beside them: the difference is gpumem's own path above its
   CUDA calls.  */

#define _POSIX_C_SOURCE 200809L
#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum recipe
{
  RAW_MEMCPY_DEVSYNC,       /* cudaMemcpy + cudaDeviceSynchronize */
  RAW_MEMCPY,               /* cudaMemcpy alone */
  GM_PINNED,                /* cudaMemcpyAsync legacy + cudaStreamSynchronize */
  GM_PINNED_QUERIED,        /* the pointer query first (memory gpumem
                               did not page-lock itself) */
  ASYNC_SPIN,               /* cudaMemcpyAsync legacy, cudaStreamQuery spin */
  ASYNC_OWN_STREAM,         /* a non-blocking stream + cudaStreamSynchronize */
  GM_SMALL_PAGEABLE,        /* query, bounce memcpy, queued copy, wait */
  RAW_MEMCPY_STREAMSYNC,    /* cudaMemcpy + cudaStreamSynchronize legacy:
                               make bench's h2d_landed */
  QUERY_ALONE,              /* cudaPointerGetAttributes of the host side */
  GM_PINNED_KIND,           /* GM_PINNED with the direction named, as raw
                               C names it, not cudaMemcpyDefault */
  RECIPES
};

static cudaStream_t own_stream;
static void *bounce;

static double
now_us (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* 0, or the CUDA error of making the probe's stream and bounce buffer.  */
int
sc_init (size_t bounce_bytes)
{
  cudaError_t err = cudaFree (0);

  if (err == cudaSuccess)
    err = cudaStreamCreateWithFlags (&own_stream, cudaStreamNonBlocking);
  if (err == cudaSuccess)
    err = cudaMallocHost (&bounce, bounce_bytes);
  return (int) err;
}

int
sc_recipes (void)
{
  return RECIPES;
}

static void
query (const void *host)
{
  struct cudaPointerAttributes attr;

  if (cudaPointerGetAttributes (&attr, host) != cudaSuccess)
    cudaGetLastError ();
}

static cudaError_t
once (int recipe, void *dst, const void *src, size_t n, int to_device)
{
  const void *host = to_device ? src : dst;
  enum cudaMemcpyKind kind = to_device ? cudaMemcpyHostToDevice
                                       : cudaMemcpyDeviceToHost;
  cudaError_t err = cudaSuccess;

  switch (recipe)
    {
    case RAW_MEMCPY_DEVSYNC:
      err = cudaMemcpy (dst, src, n, kind);
      if (err == cudaSuccess)
        err = cudaDeviceSynchronize ();
      break;
    case RAW_MEMCPY:
      err = cudaMemcpy (dst, src, n, kind);
      break;
    case GM_PINNED_QUERIED:
      query (host);
      /* Fall through.  */
    case GM_PINNED:
      err = cudaMemcpyAsync (dst, src, n, cudaMemcpyDefault,
                             cudaStreamLegacy);
      if (err == cudaSuccess)
        err = cudaStreamSynchronize (cudaStreamLegacy);
      break;
    case ASYNC_SPIN:
      err = cudaMemcpyAsync (dst, src, n, cudaMemcpyDefault,
                             cudaStreamLegacy);
      if (err == cudaSuccess)
        while ((err = cudaStreamQuery (cudaStreamLegacy))
               == cudaErrorNotReady)
          ;
      break;
    case ASYNC_OWN_STREAM:
      err = cudaMemcpyAsync (dst, src, n, cudaMemcpyDefault, own_stream);
      if (err == cudaSuccess)
        err = cudaStreamSynchronize (own_stream);
      break;
    case GM_SMALL_PAGEABLE:
      query (host);
      if (to_device)
        {
          memcpy (bounce, src, n);
          err = cudaMemcpyAsync (dst, bounce, n, cudaMemcpyHostToDevice,
                                 cudaStreamLegacy);
        }
      else
        err = cudaMemcpyAsync (bounce, src, n, cudaMemcpyDeviceToHost,
                               cudaStreamLegacy);
      if (err == cudaSuccess)
        err = cudaStreamSynchronize (cudaStreamLegacy);
      if (err == cudaSuccess && !to_device)
        memcpy (dst, bounce, n);
      break;
    case RAW_MEMCPY_STREAMSYNC:
      err = cudaMemcpy (dst, src, n, kind);
      if (err == cudaSuccess)
        err = cudaStreamSynchronize (cudaStreamLegacy);
      break;
    case QUERY_ALONE:
      query (host);
      break;
    case GM_PINNED_KIND:
      err = cudaMemcpyAsync (dst, src, n, kind, cudaStreamLegacy);
      if (err == cudaSuccess)
        err = cudaStreamSynchronize (cudaStreamLegacy);
      break;
    default:
      err = cudaErrorInvalidValue;
    }
  return err;
}

static int
cmp (const void *a, const void *b)
{
  double x = *(const double *) a, y = *(const double *) b;

  return (x > y) - (x < y);
}

/* The median of REPS timings (microseconds) of RECIPE copying N bytes
   from SRC to DST (TO_DEVICE: SRC is the host side), after 100, into
   *MEDIAN; 0 or the CUDA error.  */
int
sc_time (int recipe, void *dst, const void *src, size_t n, int to_device,
         int reps, double *median)
{
  double *t = malloc (sizeof *t * (size_t) (reps > 0 ? reps : 1));
  cudaError_t err = cudaSuccess;

  if (t == NULL || reps <= 0)
    {
      free (t);
      return (int) cudaErrorInvalidValue;
    }
  for (int i = 0; i < 100 && err == cudaSuccess; i++)
    err = once (recipe, dst, src, n, to_device);
  for (int i = 0; i < reps && err == cudaSuccess; i++)
    {
      double t0 = now_us ();

      err = once (recipe, dst, src, n, to_device);
      t[i] = now_us () - t0;
    }
  if (err == cudaSuccess)
    {
      qsort (t, (size_t) reps, sizeof *t, cmp);
      *median = t[reps / 2];
    }
  free (t);
  return (int) err;
}
