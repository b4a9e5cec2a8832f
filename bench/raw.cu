/* raw.cu -- the benchmark suite's figures in plain CUDA C: the practical
   limit that gpumem (bench_gpumem.py) and CuPy (bench_cupy.py) are set
   against by bench/run.sh and bench/report.py (bench/NOTES.md).

     raw [--quick] [--out FILE] [--log2n N] [--sweep-max BYTES] [FIGURE]...

   FIGURE is one of launch alloc copy16 copy256 sweep d2d algo_bw
   workload seed_rate, or all (the default).  Every result is one JSON
   object a line on standard output (or FILE), with the same fields as
   the Python implementations write (bench/benchlib.py):

     {"impl": "raw", "figure": "launch", "case": "async", "timer": "wall",
      "median_s": ..., "q1_s": ..., "q3_s": ..., "min_s": ..., "n": ...,
      "bytes": ..., "traffic": ..., "note": "..."}

   Progress goes to standard error.  Each figure is measured the same way:
   warm-ups first, many repetitions, the median; host wall-clock
   (CLOCK_MONOTONIC) for what a program experiences on the host (launch
   and synchronize, small copies, synchronous large copies), CUDA events
   for device time (device-to-device copy, the algo kernel); fresh
   non-zero data; bandwidth figures rotate among buffers that together
   exceed the 60 MB L2.

   The workload's kernels are the project's own launchers
   (kernels/algo_seed.cu, kernels/algo.cu, kernels/saxpy.cu), compiled
   into this program: nvcc -std=c++17 -O3 ARCH -I kernels -o raw
   bench/raw.cu kernels/algo_seed.cu kernels/algo.cu kernels/saxpy.cu.
   Any CUDA error ends the program with status 1, naming the call.  */

#include "kernels.h"

#include <cuda_runtime.h>

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define KIB ((size_t) 1 << 10)
#define MIB ((size_t) 1 << 20)
#define GIB ((size_t) 1 << 30)

/* Buffers a bandwidth figure rotates among, at most.  */
#define MAX_SLOTS 64
/* Iterations of the workload between resets of the update: its
   stitching doubles the values every iteration (float32 overflows
   after about 128); the reset is outside the timed region.  */
#define RESET_EVERY 64
/* Adaptive repetitions: about this many seconds per point.  */
#define POINT_SECONDS 0.25

#define CHECK(CALL)                                                     \
  do                                                                    \
    {                                                                   \
      cudaError_t check_err = (CALL);                                   \
      if (check_err != cudaSuccess)                                     \
        die ("%s failed at %s:%d: %s (%s)", #CALL, __FILE__, __LINE__,  \
             cudaGetErrorName (check_err),                              \
             cudaGetErrorString (check_err));                           \
    }                                                                   \
  while (0)

/* After a kernel launch: a launch error is reported at once.  */
#define CHECK_LAUNCH() CHECK (cudaGetLastError ())

static FILE *out;
static bool quick;

static void __attribute__ ((noreturn, format (printf, 1, 2)))
die (const char *fmt, ...)
{
  va_list ap;

  fprintf (stderr, "raw: ");
  va_start (ap, fmt);
  vfprintf (stderr, fmt, ap);
  va_end (ap);
  fputc ('\n', stderr);
  exit (1);
}

static void __attribute__ ((format (printf, 1, 2)))
progress (const char *fmt, ...)
{
  va_list ap;

  fprintf (stderr, "raw: ");
  va_start (ap, fmt);
  vfprintf (stderr, fmt, ap);
  va_end (ap);
  fputc ('\n', stderr);
}

static void *
xmalloc (size_t n)
{
  void *p = malloc (n);
  if (p == NULL)
    die ("out of host memory (%zu bytes)", n);
  return p;
}

static double
now_s (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (double) ts.tv_sec + (double) ts.tv_nsec * 1e-9;
}

/* Fresh non-zero data: xorshift64 floats in [0.5, 1.5).  */
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t
rng_next (void)
{
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}

static float
rng_float (void)
{
  return 0.5f + (float) (rng_next () >> 40) * (1.0f / 16777216.0f);
}

/* Results.  */

static int
compare_double (const void *a, const void *b)
{
  double x = *(const double *) a, y = *(const double *) b;
  return (x > y) - (x < y);
}

/* The P-quantile of sorted S[0:N], linearly interpolated (as
   benchlib.quantile computes it).  */
static double
quantile (const double *s, int n, double p)
{
  double pos = (n - 1) * p;
  int lo = (int) floor (pos);
  int hi = lo + 1 < n ? lo + 1 : lo;
  return s[lo] + (s[hi] - s[lo]) * (pos - lo);
}

/* Writes one result line: the statistics of the N SAMPLES (seconds;
   sorted in place).  BYTES is the size of one transfer, TRAFFIC the
   bytes a bandwidth counts (0: not a bandwidth figure).  */
static void
emit (const char *figure, const char *kase, const char *timer, double *samples,
      int n, size_t bytes, size_t traffic, const char *note)
{
  qsort (samples, (size_t) n, sizeof *samples, compare_double);
  fprintf (out, "{\"impl\": \"raw\", \"figure\": \"%s\", \"case\": \"%s\", "
           "\"timer\": \"%s\", \"median_s\": %.9g, \"q1_s\": %.9g, "
           "\"q3_s\": %.9g, \"min_s\": %.9g, \"n\": %d, \"bytes\": %zu, "
           "\"traffic\": %zu, \"note\": \"%s\"}\n",
           figure, kase, timer, quantile (samples, n, 0.5),
           quantile (samples, n, 0.25), quantile (samples, n, 0.75),
           samples[0], n, bytes, traffic, note ? note : "");
  fflush (out);
  if (traffic > 0)
    progress ("%-10s %-24s %10.3f us  %8.2f GB/s", figure, kase,
              quantile (samples, n, 0.5) * 1e6,
              (double) traffic / quantile (samples, n, 0.5) / 1e9);
  else
    progress ("%-10s %-24s %10.3f us", figure, kase,
              quantile (samples, n, 0.5) * 1e6);
}

static int
adaptive_reps (double one, int lo, int hi)
{
  double want = one > 0 ? POINT_SECONDS / one : hi;
  if (want < lo)
    return lo;
  if (want > hi)
    return hi;
  return (int) want;
}

/* Shared state.  */

typedef struct bench
{
  struct cudaDeviceProp props;
  gm_launch_cfg cfg;            /* launcher's choice, as gpumem passes it */
  cudaStream_t stream;          /* a created (blocking) stream */
  cudaEvent_t start, end;
  int log2n;                    /* images per partition: 2^log2n */
  size_t sweep_max;
  /* Made on first use.  */
  size_t arena_bytes;
  char *pageable;               /* malloc'd, arena_bytes */
  char *pinned;                 /* cudaMallocHost, arena_bytes */
  char *device;                 /* cudaMalloc, arena_bytes */
  double block_sum;             /* sum of the first partition's data */
  float *parts[4];              /* partition i = 2^i x block */
  float *copy_dst;
} bench;

static __global__ void
empty_kernel (int64_t n, float a, const float *x, float *y)
{
}

/* X[i] *= 2 for i < N: exact, so partition i holds 2^i times the
   block and its mean is known exactly in terms of the block's.  */
static __global__ void
double_kernel (float *x, int64_t n)
{
  for (int64_t i = blockIdx.x * (int64_t) blockDim.x + threadIdx.x; i < n;
       i += (int64_t) gridDim.x * blockDim.x)
    x[i] *= 2.0f;
}

static double
event_ms (bench *b)
{
  float ms;
  CHECK (cudaEventSynchronize (b->end));
  CHECK (cudaEventElapsedTime (&ms, b->start, b->end));
  return ms * 1e-3;
}

/* Host and device arenas for the copy figures: twice the largest copy,
   filled with fresh data (the first half random, the second a copy).  */
static void
need_arenas (bench *b)
{
  if (b->pageable != NULL)
    return;
  b->arena_bytes = 2 * b->sweep_max;
  if (b->arena_bytes < 2 * 256 * MIB && !quick)
    b->arena_bytes = 2 * 256 * MIB;
  size_t half = b->arena_bytes / 2;
  progress ("arenas: 3 x %zu MiB (pageable, pinned, device)",
            b->arena_bytes / MIB);
  b->pageable = (char *) xmalloc (b->arena_bytes);
  float *f = (float *) b->pageable;
  for (size_t i = 0; i < half / sizeof (float); i++)
    f[i] = rng_float ();
  memcpy (b->pageable + half, b->pageable, half);
  CHECK (cudaMallocHost (&b->pinned, b->arena_bytes));
  memcpy (b->pinned, b->pageable, b->arena_bytes);
  CHECK (cudaMalloc (&b->device, b->arena_bytes));
  CHECK (cudaMemcpy (b->device, b->pinned, b->arena_bytes,
                     cudaMemcpyHostToDevice));
}

/* The 4 partitions of the large workload, 2^log2n floats each, partition
   i = 2^i x a random block; and the destination of the d2d copy.  */
static void
need_partitions (bench *b)
{
  if (b->parts[0] != NULL)
    return;
  size_t n = (size_t) 1 << b->log2n;
  float *block = (float *) xmalloc (n * sizeof (float));
  double sum = 0;

  progress ("partitions: 4 x %zu MiB", n * sizeof (float) / MIB);
  for (size_t i = 0; i < n; i++)
    {
      block[i] = rng_float ();
      sum += block[i];
    }
  b->block_sum = sum;
  for (int p = 0; p < 4; p++)
    {
      CHECK (cudaMalloc (&b->parts[p], n * sizeof (float)));
      CHECK (cudaMemcpy (b->parts[p], block, n * sizeof (float),
                         cudaMemcpyHostToDevice));
      for (int k = 0; k < p; k++)
        {
          double_kernel<<<4 * b->props.multiProcessorCount, 256>>> (
            b->parts[p], (int64_t) n);
          CHECK_LAUNCH ();
        }
    }
  CHECK (cudaMalloc (&b->copy_dst, n * sizeof (float)));
  CHECK (cudaDeviceSynchronize ());
  free (block);
}

/* Empty-kernel launch: asynchronous (BATCH launches back to back on a
   stream, then one synchronize; per launch) and with a synchronize after
   each.  The kernel has saxpy's parameters and the launch shape saxpy's
   launcher picks for n = 0 (1 x 256), which is what gpumem's cheapest
   call, kernels.saxpy (0, 0.0, x, x), launches; the saxpy0 cases call
   that very launcher.  */
static void
fig_launch (bench *b)
{
  int batch = quick ? 100 : 1000, reps = quick ? 5 : 30;
  int sync_reps = quick ? 200 : 5000;
  double *t = (double *) xmalloc (sizeof (double) * sync_reps);
  float *x;

  CHECK (cudaMalloc (&x, sizeof (float)));
  CHECK (cudaMemset (x, 0, sizeof (float)));
  for (int variant = 0; variant < 2; variant++)
    {
      bool saxpy = variant == 1;
      const char *async_case = saxpy ? "async_saxpy0" : "async";
      const char *sync_case = saxpy ? "sync_saxpy0" : "sync";

#define LAUNCH(STREAM)                                                   \
      do                                                                 \
        {                                                                \
          if (saxpy)                                                     \
            CHECK (gm_kernel_saxpy (0, 0.0f, x, x, &b->cfg, (STREAM)));  \
          else                                                           \
            {                                                            \
              empty_kernel<<<1, 256, 0, (STREAM)>>> (0, 0.0f, x, x);     \
              CHECK_LAUNCH ();                                           \
            }                                                            \
        }                                                                \
      while (0)

      for (int i = 0; i < 2 * batch; i++)
        LAUNCH (b->stream);
      CHECK (cudaStreamSynchronize (b->stream));
      for (int r = 0; r < reps; r++)
        {
          double t0 = now_s ();
          for (int i = 0; i < batch; i++)
            LAUNCH (b->stream);
          CHECK (cudaStreamSynchronize (b->stream));
          t[r] = (now_s () - t0) / batch;
        }
      emit ("launch", async_case, "wall", t, reps, 0, 0,
            saxpy ? "gm_kernel_saxpy(n=0) launcher, 1x256"
                  : "empty kernel <<<1,256>>>, saxpy's parameters");

      for (int i = 0; i < 100; i++)
        {
          LAUNCH (0);
          CHECK (cudaStreamSynchronize (0));
        }
      for (int r = 0; r < sync_reps; r++)
        {
          double t0 = now_s ();
          LAUNCH (0);
          CHECK (cudaStreamSynchronize (0));
          t[r] = now_s () - t0;
        }
      emit ("launch", sync_case, "wall", t, sync_reps, 0, 0,
            "launch on the legacy default stream + cudaStreamSynchronize");
#undef LAUNCH
    }
  CHECK (cudaFree (x));
  free (t);
}

/* Alloc + free of 1 MiB: cudaMalloc/cudaFree, and cudaMallocAsync/
   cudaFreeAsync on the default stream from the device's default pool,
   whose release threshold is set to "never", as gpumem sets it.  */
static void
fig_alloc (bench *b)
{
  int reps = quick ? 50 : 2000, async_reps = quick ? 200 : 20000;
  double *t = (double *) xmalloc (sizeof (double) * async_reps);
  void *p;

  for (int i = 0; i < 50; i++)
    {
      CHECK (cudaMalloc (&p, MIB));
      CHECK (cudaFree (p));
    }
  for (int r = 0; r < reps; r++)
    {
      double t0 = now_s ();
      CHECK (cudaMalloc (&p, MIB));
      CHECK (cudaFree (p));
      t[r] = now_s () - t0;
    }
  emit ("alloc_free", "cudaMalloc", "wall", t, reps, MIB, 0,
        "cudaMalloc + cudaFree");

  for (int i = 0; i < 100; i++)
    {
      CHECK (cudaMallocAsync (&p, MIB, 0));
      CHECK (cudaFreeAsync (p, 0));
    }
  CHECK (cudaStreamSynchronize (0));
  for (int r = 0; r < async_reps; r++)
    {
      double t0 = now_s ();
      CHECK (cudaMallocAsync (&p, MIB, 0));
      CHECK (cudaFreeAsync (p, 0));
      t[r] = now_s () - t0;
    }
  CHECK (cudaStreamSynchronize (0));
  emit ("alloc_free", "cudaMallocAsync", "wall", t, async_reps, MIB, 0,
        "cudaMallocAsync + cudaFreeAsync, default pool, threshold max");
  free (t);
}

/* 16-byte synchronous copies between pageable (malloc) host memory and
   the device, as the workload makes them.  */
static void
fig_copy16 (bench *b)
{
  int reps = quick ? 200 : 10000;
  double *t = (double *) xmalloc (sizeof (double) * reps);
  float *host = (float *) xmalloc (16), *back = (float *) xmalloc (16);
  float *dev;

  for (int k = 0; k < 4; k++)
    host[k] = rng_float ();
  CHECK (cudaMalloc (&dev, 16));
  for (int dir = 0; dir < 2; dir++)
    {
      bool h2d = dir == 0;
      for (int r = -100; r < reps; r++)
        {
          double t0 = now_s ();
          if (h2d)
            CHECK (cudaMemcpy (dev, host, 16, cudaMemcpyHostToDevice));
          else
            CHECK (cudaMemcpy (back, dev, 16, cudaMemcpyDeviceToHost));
          if (r >= 0)
            t[r] = now_s () - t0;
        }
      emit ("copy16", h2d ? "h2d" : "d2h", "wall", t, reps, 16, 16,
            "cudaMemcpy, pageable host memory");
    }
  if (memcmp (host, back, 16) != 0)
    die ("copy16: the data came back changed");
  CHECK (cudaFree (dev));
  free (host);
  free (back);
  free (t);
}

/* One synchronous copy of SIZE bytes between the host arena (PINNED or
   pageable) and the device arena, in the direction H2D, at slot SLOT;
   followed by cudaDeviceSynchronize, so the copy is complete however the
   driver returned.  Returns its wall time.  */
static double
copy_once (bench *b, bool pinned, bool h2d, size_t size, int slot, int slots)
{
  size_t stride = b->arena_bytes / (size_t) slots;
  char *host = (pinned ? b->pinned : b->pageable) + (size_t) slot * stride;
  char *dev = b->device + (size_t) slot * stride;
  double t0 = now_s ();

  if (h2d)
    CHECK (cudaMemcpy (dev, host, size, cudaMemcpyHostToDevice));
  else
    CHECK (cudaMemcpy (host, dev, size, cudaMemcpyDeviceToHost));
  CHECK (cudaDeviceSynchronize ());
  return now_s () - t0;
}

static const char *const copy_cases[4] = {
  "pinned_h2d", "pinned_d2h", "pageable_h2d", "pageable_d2h"
};

/* The copy figures for one SIZE: each of the four cases, two warm-ups,
   then REPS repetitions (0: as many as fit in POINT_SECONDS, 5 to 200),
   rotating among up to MAX_SLOTS places in the arenas.  */
static void
copy_point (bench *b, const char *figure, size_t size, int reps)
{
  int slots = (int) (b->arena_bytes / size);
  double *t = (double *) xmalloc (sizeof (double) * 200);

  if (slots > MAX_SLOTS)
    slots = MAX_SLOTS;
  for (int c = 0; c < 4; c++)
    {
      bool pinned = c < 2, h2d = c % 2 == 0;
      int n = reps;
      copy_once (b, pinned, h2d, size, 0, slots);
      double one = copy_once (b, pinned, h2d, size, 1 % slots, slots);
      if (n == 0)
        n = adaptive_reps (one, 5, 200);
      for (int r = 0; r < n; r++)
        t[r] = copy_once (b, pinned, h2d, size, r % slots, slots);
      emit (figure, copy_cases[c], "wall", t, n, size, size,
            pinned ? "cudaMemcpy + cudaDeviceSynchronize, cudaMallocHost"
                   : "cudaMemcpy + cudaDeviceSynchronize, malloc");
    }
  free (t);
}

static void
fig_copy256 (bench *b)
{
  size_t size = quick ? MIB : 256 * MIB;

  need_arenas (b);
  copy_point (b, "copy256", size, quick ? 5 : 30);
  /* The bytes survive a round trip through the device.  */
  CHECK (cudaMemcpy (b->device, b->pinned, size, cudaMemcpyHostToDevice));
  char *back = (char *) xmalloc (size);
  CHECK (cudaMemcpy (back, b->device, size, cudaMemcpyDeviceToHost));
  if (memcmp (back, b->pinned, size) != 0)
    die ("copy256: the data came back changed");
  free (back);
}

static void
fig_sweep (bench *b)
{
  need_arenas (b);
  for (size_t size = 4 * KIB; size <= b->sweep_max; size *= 4)
    copy_point (b, "sweep", size, quick ? 3 : 0);
}

/* Device-to-device copy of one partition (2^log2n floats), rotating
   among the 4 partitions as sources; events; bytes read + written.  */
static void
fig_d2d (bench *b)
{
  size_t bytes = ((size_t) 1 << b->log2n) * sizeof (float);
  int reps = quick ? 5 : 20;
  double t[64];

  need_partitions (b);
  for (int r = -3; r < reps; r++)
    {
      CHECK (cudaEventRecord (b->start, b->stream));
      CHECK (cudaMemcpyAsync (b->copy_dst, b->parts[(r + 4) % 4], bytes,
                              cudaMemcpyDeviceToDevice, b->stream));
      CHECK (cudaEventRecord (b->end, b->stream));
      double s = event_ms (b);
      if (r >= 0)
        t[r] = s;
    }
  emit ("d2d", "1GiB", "event", t, reps, bytes, 2 * bytes,
        "cudaMemcpyAsync D2D, 4 sources rotated; read + write");
}

/* Expected algo result for partition P: mean (2^P x block) + UPDATE.  */
static float
algo_expected (bench *b, int p, float update)
{
  double n = (double) ((size_t) 1 << b->log2n);
  return (float) (ldexp (b->block_sum, p) / n + (double) update);
}

static bool
close_to (float got, float want, double rel)
{
  return fabs ((double) got - (double) want)
         <= rel * fmax (fabs ((double) want), 1.0);
}

/* The algo kernel's read bandwidth over one partition, events, the 4
   partitions rotated; checked against the host's mean.  */
static void
fig_algo_bw (bench *b)
{
  int64_t n = (int64_t) 1 << b->log2n;
  int reps = quick ? 5 : 20;
  double t[64];
  float *update, *partial, host_update[4], got[4];

  need_partitions (b);
  for (int k = 0; k < 4; k++)
    host_update[k] = rng_float ();
  CHECK (cudaMalloc (&update, 16));
  CHECK (cudaMalloc (&partial, 16));
  CHECK (cudaMemcpy (update, host_update, 16, cudaMemcpyHostToDevice));
  for (int r = -3; r < reps; r++)
    {
      CHECK (cudaEventRecord (b->start, b->stream));
      CHECK (gm_kernel_algo (b->parts[(r + 4) % 4], update, partial, n,
                             &b->cfg, b->stream));
      CHECK (cudaEventRecord (b->end, b->stream));
      double s = event_ms (b);
      if (r >= 0)
        t[r] = s;
    }
  emit ("algo_bw", "2^28", "event", t, reps, (size_t) n * 4,
        (size_t) n * 4, "gm_kernel_algo, 4 inputs rotated; bytes read");
  CHECK (cudaMemcpy (got, partial, 16, cudaMemcpyDeviceToHost));
  int last = (reps - 1 + 4) % 4;
  for (int k = 0; k < 4; k++)
    if (!close_to (got[k], algo_expected (b, last, host_update[k]), 1e-5))
      die ("algo_bw: partial_update[%d] = %.9g, expected %.9g", k, got[k],
           algo_expected (b, last, host_update[k]));
  CHECK (cudaFree (update));
  CHECK (cudaFree (partial));
}

/* The request's stitching: update[i] = p[i][0] + p[i][1] + p[i][2] -
   p[i][3], in float, in NumPy's order.  */
static void
stitching (float update[4], float partial[4][4])
{
  for (int i = 0; i < 4; i++)
    update[i] = partial[i][0] + partial[i][1] + partial[i][2] - partial[i][3];
}

/* The workload's loop: per iteration 4 kernel launches on the default
   stream (one per partition, all on device 0), 4 synchronous copies of 4
   floats to pageable host memory, the stitching on the host, and 1
   synchronous copy of the 4-float update back.  ALGO chooses the kernel;
   IMAGES[i] holds N images.  Each iteration is timed on its own.  */
static void
workload (bench *b, bool algo, float *const images[4], int64_t n,
          const char *kase, int iters, const char *note, const float *last)
{
  const float initial[4] = {0.125f, 0.25f, 0.375f, 0.5f};
  float update[4], partial[4][4], *d_update, *d_partial[4];
  double *t = (double *) xmalloc (sizeof (double) * iters);
  int warm = iters / 10 > 10 ? iters / 10 : 10;

  CHECK (cudaMalloc (&d_update, 16));
  for (int i = 0; i < 4; i++)
    CHECK (cudaMalloc (&d_partial[i], 16));

#define ITERATION()                                                       \
  do                                                                      \
    {                                                                     \
      for (int i = 0; i < 4; i++)                                         \
        {                                                                 \
          if (algo)                                                       \
            CHECK (gm_kernel_algo (images[i], d_update, d_partial[i], n,  \
                                   &b->cfg, 0));                          \
          else                                                            \
            CHECK (gm_kernel_algo_seed (images[i], d_update, d_partial[i],\
                                        n, &b->cfg, 0));                  \
          CHECK (cudaMemcpy (partial[i], d_partial[i], 16,                \
                             cudaMemcpyDeviceToHost));                    \
        }                                                                 \
      stitching (update, partial);                                        \
      CHECK (cudaMemcpy (d_update, update, 16, cudaMemcpyHostToDevice));  \
    }                                                                     \
  while (0)

  for (int r = -warm; r < iters; r++)
    {
      if ((r + warm) % RESET_EVERY == 0)
        {
          memcpy (update, initial, sizeof update);
          CHECK (cudaMemcpy (d_update, update, 16, cudaMemcpyHostToDevice));
        }
      double t0 = now_s ();
      ITERATION ();
      if (r >= 0)
        t[r] = now_s () - t0;
    }
  emit ("workload", kase, "wall", t, iters, 0, 0, note);

  /* Check 3 iterations against the same computation on the host.  */
  float want[4];
  memcpy (update, initial, sizeof update);
  memcpy (want, initial, sizeof want);
  CHECK (cudaMemcpy (d_update, update, 16, cudaMemcpyHostToDevice));
  for (int it = 0; it < 3; it++)
    {
      float p[4][4];
      ITERATION ();
      for (int i = 0; i < 4; i++)
        for (int k = 0; k < 4; k++)
          p[i][k] = algo ? algo_expected (b, i, want[k]) : last[i] + want[k];
      stitching (want, p);
    }
  for (int k = 0; k < 4; k++)
    if (!close_to (update[k], want[k], algo ? 1e-5 : 1e-6))
      die ("workload %s: update[%d] = %.9g, expected %.9g", kase, k,
           update[k], want[k]);
#undef ITERATION
  CHECK (cudaFree (d_update));
  for (int i = 0; i < 4; i++)
    CHECK (cudaFree (d_partial[i]));
  free (t);
}

static void
fig_workload (bench *b)
{
  /* 4 x 10: images 0 .. 39 split in 4, with algo_seed.  */
  float *small[4], last[4];
  for (int i = 0; i < 4; i++)
    {
      float host[10];
      for (int j = 0; j < 10; j++)
        host[j] = (float) (10 * i + j);
      last[i] = host[9];
      CHECK (cudaMalloc (&small[i], sizeof host));
      CHECK (cudaMemcpy (small[i], host, sizeof host, cudaMemcpyHostToDevice));
    }
  workload (b, false, small, 10, "seed_4x10", quick ? 200 : 3000,
            "gm_kernel_algo_seed <<<1,1>>>", last);
  for (int i = 0; i < 4; i++)
    CHECK (cudaFree (small[i]));

  /* 4 x 2^log2n with algo (algo_seed would take minutes a call).  */
  need_partitions (b);
  workload (b, true, b->parts, (int64_t) 1 << b->log2n, "algo_4x2^28",
            quick ? 20 : 200, "gm_kernel_algo", NULL);
}

/* How long one algo_seed call takes per image, on 2^18 images (the
   whole of 2^28 would take minutes): the basis for timing the 4 x 2^28
   workload with algo instead.  */
static void
fig_seed_rate (bench *b)
{
  int64_t n = (int64_t) 1 << (b->log2n < 18 ? b->log2n : 18);
  float *update, *partial;
  double t[3];
  char note[128];

  need_partitions (b);
  CHECK (cudaMalloc (&update, 16));
  CHECK (cudaMalloc (&partial, 16));
  CHECK (cudaMemset (update, 0, 16));
  for (int r = -1; r < 3; r++)
    {
      CHECK (cudaEventRecord (b->start, b->stream));
      CHECK (gm_kernel_algo_seed (b->parts[0], update, partial, n, &b->cfg,
                                  b->stream));
      CHECK (cudaEventRecord (b->end, b->stream));
      double s = event_ms (b);
      if (r >= 0)
        t[r] = s;
    }
  snprintf (note, sizeof note, "one algo_seed call on %lld images",
            (long long) n);
  emit ("seed_rate", "2^18", "event", t, 3, (size_t) n * 4, 0, note);
  CHECK (cudaFree (update));
  CHECK (cudaFree (partial));
}

typedef struct figure
{
  const char *name;
  void (*run) (bench *);
} figure;

static const figure figures[] = {
  {"launch", fig_launch},
  {"alloc", fig_alloc},
  {"copy16", fig_copy16},
  {"copy256", fig_copy256},
  {"sweep", fig_sweep},
  {"d2d", fig_d2d},
  {"algo_bw", fig_algo_bw},
  {"workload", fig_workload},
  {"seed_rate", fig_seed_rate},
};
#define NFIGURES ((int) (sizeof figures / sizeof figures[0]))

static void
usage (FILE *f)
{
  fprintf (f, "usage: raw [--quick] [--out FILE] [--log2n N] "
              "[--sweep-max BYTES] [FIGURE]...\nfigures:");
  for (int i = 0; i < NFIGURES; i++)
    fprintf (f, " %s", figures[i].name);
  fprintf (f, " all (default)\n");
}

int
main (int argc, char **argv)
{
  bench b;
  bool want[NFIGURES] = {false};
  bool any = false;
  const char *out_path = NULL;
  int driver = 0, runtime = 0;

  memset (&b, 0, sizeof b);
  b.log2n = -1;
  b.sweep_max = 0;
  out = stdout;
  for (int i = 1; i < argc; i++)
    {
      const char *a = argv[i];
      if (strcmp (a, "--quick") == 0)
        quick = true;
      else if (strcmp (a, "--out") == 0 && i + 1 < argc)
        out_path = argv[++i];
      else if (strcmp (a, "--log2n") == 0 && i + 1 < argc)
        b.log2n = atoi (argv[++i]);
      else if (strcmp (a, "--sweep-max") == 0 && i + 1 < argc)
        b.sweep_max = strtoull (argv[++i], NULL, 0);
      else if (strcmp (a, "-h") == 0 || strcmp (a, "--help") == 0)
        {
          usage (stdout);
          return 0;
        }
      else if (strcmp (a, "all") == 0)
        {
          for (int f = 0; f < NFIGURES; f++)
            want[f] = true;
          any = true;
        }
      else
        {
          int f;
          for (f = 0; f < NFIGURES; f++)
            if (strcmp (a, figures[f].name) == 0)
              break;
          if (f == NFIGURES)
            {
              fprintf (stderr, "raw: unknown argument '%s'\n", a);
              usage (stderr);
              return 2;
            }
          want[f] = true;
          any = true;
        }
    }
  if (!any)
    for (int f = 0; f < NFIGURES; f++)
      want[f] = true;
  if (b.log2n < 0)
    b.log2n = quick ? 12 : 28;
  if (b.log2n < 2 || b.log2n > 31)
    die ("--log2n must be 2 .. 31");
  if (b.sweep_max == 0)
    b.sweep_max = quick ? MIB : GIB;
  if (b.sweep_max < 4 * KIB)
    die ("--sweep-max must be at least 4096");
  if (out_path != NULL && (out = fopen (out_path, "w")) == NULL)
    die ("cannot write %s", out_path);

  CHECK (cudaSetDevice (0));
  CHECK (cudaFree (0));
  CHECK (cudaGetDeviceProperties (&b.props, 0));
  CHECK (cudaDriverGetVersion (&driver));
  CHECK (cudaRuntimeGetVersion (&runtime));
  b.cfg.sm_count = b.props.multiProcessorCount;
  b.cfg.max_threads_per_block = b.props.maxThreadsPerBlock;
  {
    cudaMemPool_t pool;
    uint64_t threshold = UINT64_MAX;
    CHECK (cudaDeviceGetDefaultMemPool (&pool, 0));
    CHECK (cudaMemPoolSetAttribute (pool, cudaMemPoolAttrReleaseThreshold,
                                    &threshold));
  }
  CHECK (cudaStreamCreate (&b.stream));
  CHECK (cudaEventCreate (&b.start));
  CHECK (cudaEventCreate (&b.end));
  fprintf (out, "{\"impl\": \"raw\", \"figure\": \"meta\", \"device\": "
           "\"%s\", \"sm_count\": %d, \"l2_bytes\": %d, \"cuda_driver\": %d, "
           "\"cuda_runtime\": %d, \"quick\": %s, \"log2n\": %d}\n",
           b.props.name, b.props.multiProcessorCount, b.props.l2CacheSize,
           driver, runtime, quick ? "true" : "false", b.log2n);
  fflush (out);
  progress ("%s, %d SMs, CUDA runtime %d, driver %d", b.props.name,
            b.props.multiProcessorCount, runtime, driver);

  for (int f = 0; f < NFIGURES; f++)
    if (want[f])
      {
        double t0 = now_s ();
        figures[f].run (&b);
        progress ("%s: %.1f s", figures[f].name, now_s () - t0);
      }

  CHECK (cudaDeviceSynchronize ());
  if (out != stdout && fclose (out) != 0)
    die ("cannot write %s", out_path);
  return 0;
}
