/* raw.cu -- the benchmark suite's figures in plain CUDA C: the practical
   limit that gpumem (bench_gpumem.py) and CuPy (bench_cupy.py) are set
   against by bench/run.sh and bench/report.py (bench/NOTES.md).

     raw [--quick] [--out FILE] [--log2n N] [--sweep-max BYTES]
         [--spill-bytes BYTES] [--spill-ratio R] [FIGURE]...

   FIGURE is one of launch alloc copy16 copy256 sweep d2d algo_bw
   algo_sweep loop_sweep workload graph seed_rate multigpu spill_loop, or
   all (the default; multigpu only where 2 or more devices answer).
   --spill-bytes and --spill-ratio size spill_loop as bench/spill.py's
   loops (fig_spill_loop).  Every result is one JSON
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
#define POINT_SECONDS 0.12

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
  int devices;                  /* devices that answer */
  /* Made on first use.  */
  size_t arena_bytes;
  char *pageable;               /* malloc'd, arena_bytes */
  char *pinned;                 /* cudaMallocHost, arena_bytes */
  char *device;                 /* cudaMalloc, arena_bytes */
  double block_sum;             /* sum of the first partition's data */
  float *parts[4];              /* partition i = 2^i x block */
  float *copy_dst;
  double *reduce_partials;      /* the raw reduction's block sums */
  size_t spill_bytes;           /* spill_loop's partition, bytes */
  double spill_ratio;           /* spill_loop's ratio; 0: 1.5 and 2.5 */
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
   the device, as the workload makes them; and the copy to the device
   followed by a synchronize (h2d_landed): cudaMemcpy from pageable
   memory returns once the bytes are staged, before they land, while
   gpumem's copy is complete on return.  */
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
  for (int dir = 0; dir < 3; dir++)
    {
      bool h2d = dir != 1;
      for (int r = -100; r < reps; r++)
        {
          double t0 = now_s ();
          if (h2d)
            CHECK (cudaMemcpy (dev, host, 16, cudaMemcpyHostToDevice));
          else
            CHECK (cudaMemcpy (back, dev, 16, cudaMemcpyDeviceToHost));
          if (dir == 2)
            CHECK (cudaStreamSynchronize (cudaStreamLegacy));
          if (r >= 0)
            t[r] = now_s () - t0;
        }
      emit ("copy16", dir == 2 ? "h2d_landed" : h2d ? "h2d" : "d2h", "wall",
            t, reps, 16, 16, dir == 2 ? "cudaMemcpy + cudaStreamSynchronize "
            "(the bytes on the device on return), pageable host memory"
            : "cudaMemcpy, pageable host memory");
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

/* One device-to-device copy of SIZE bytes from slot SLOT of the device
   arena's first half to the same slot of its second half, on the
   bench's stream, timed by events.  */
static double
d2d_once (bench *b, size_t size, int slot, int slots)
{
  size_t half = b->arena_bytes / 2;
  size_t stride = half / (size_t) slots;
  char *src = b->device + (size_t) slot * stride;

  CHECK (cudaEventRecord (b->start, b->stream));
  CHECK (cudaMemcpyAsync (src + half, src, size, cudaMemcpyDeviceToDevice,
                          b->stream));
  CHECK (cudaEventRecord (b->end, b->stream));
  return event_ms (b);
}

static const char *const copy_cases[5] = {
  "pinned_h2d", "pinned_d2h", "pageable_h2d", "pageable_d2h", "d2d"
};

/* The copy figures for one SIZE: each of the four host cases (and the
   device-to-device copy when D2D), two warm-ups, then REPS repetitions
   (0: as many as fit in POINT_SECONDS, 5 to 200), rotating among up to
   MAX_SLOTS places in the arenas.  */
static void
copy_point (bench *b, const char *figure, size_t size, int reps, bool d2d)
{
  int slots = (int) (b->arena_bytes / size);
  int half_slots = (int) (b->arena_bytes / 2 / size);
  double *t = (double *) xmalloc (sizeof (double) * 200);

  if (slots > MAX_SLOTS)
    slots = MAX_SLOTS;
  if (half_slots > MAX_SLOTS)
    half_slots = MAX_SLOTS;
  for (int c = 0; c < (d2d ? 5 : 4); c++)
    {
      bool pinned = c < 2, h2d = c % 2 == 0;
      int n = reps;
      if (c == 4)
        {
          d2d_once (b, size, 0, half_slots);
          double one = d2d_once (b, size, 1 % half_slots, half_slots);
          if (n == 0)
            n = adaptive_reps (one, 5, 200);
          for (int r = 0; r < n; r++)
            t[r] = d2d_once (b, size, r % half_slots, half_slots);
          emit (figure, copy_cases[c], "event", t, n, size, 2 * size,
                "cudaMemcpyAsync D2D, events; read + write");
          continue;
        }
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
  copy_point (b, "copy256", size, quick ? 5 : 30, false);
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
  for (size_t size = KIB; size <= b->sweep_max; size *= 2)
    copy_point (b, "sweep", size, quick ? 3 : 0, true);
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

/* The workload's stitching: update[i] = p[i][0] + p[i][1] + p[i][2] -
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

/* The workload's iteration as one CUDA graph: the update's copy to the
   device from page-locked memory, then 4 independent branches (one per
   partition: its kernel, its partial update's copy into page-locked
   memory), captured once by forking a stream into 4 and joining them.
   Per iteration: the update into the page-locked buffer, one
   cudaGraphLaunch, one cudaStreamSynchronize, the partial updates out
   of theirs, the stitching.  gpumem.graph's replay does the same
   (bench_gpumem.py's "graph" figure).  */
static void
workload_graph (bench *b, bool algo, float *const images[4], int64_t n,
                const char *kase, int iters, const char *note,
                const float *last)
{
  const float initial[4] = {0.125f, 0.25f, 0.375f, 0.5f};
  float update[4], partial[4][4], *d_update, *d_partial[4];
  float *h_update, *h_partial;
  double *t = (double *) xmalloc (sizeof (double) * iters);
  double *t_replay = (double *) xmalloc (sizeof (double) * iters);
  int warm = iters / 10 > 10 ? iters / 10 : 10;
  cudaStream_t origin, branch[4];
  cudaEvent_t fork, join[4];
  cudaGraph_t graph;
  cudaGraphExec_t exec;

  CHECK (cudaMalloc (&d_update, 16));
  for (int i = 0; i < 4; i++)
    CHECK (cudaMalloc (&d_partial[i], 16));
  CHECK (cudaMallocHost (&h_update, 16));
  CHECK (cudaMallocHost (&h_partial, 64));
  CHECK (cudaStreamCreateWithFlags (&origin, cudaStreamNonBlocking));
  CHECK (cudaEventCreateWithFlags (&fork, cudaEventDisableTiming));
  for (int i = 0; i < 4; i++)
    {
      CHECK (cudaStreamCreateWithFlags (&branch[i], cudaStreamNonBlocking));
      CHECK (cudaEventCreateWithFlags (&join[i], cudaEventDisableTiming));
    }
  CHECK (cudaStreamBeginCapture (origin, cudaStreamCaptureModeThreadLocal));
  CHECK (cudaMemcpyAsync (d_update, h_update, 16, cudaMemcpyHostToDevice,
                          origin));
  CHECK (cudaEventRecord (fork, origin));
  for (int i = 0; i < 4; i++)
    {
      CHECK (cudaStreamWaitEvent (branch[i], fork, 0));
      if (algo)
        CHECK (gm_kernel_algo (images[i], d_update, d_partial[i], n, &b->cfg,
                               branch[i]));
      else
        CHECK (gm_kernel_algo_seed (images[i], d_update, d_partial[i], n,
                                    &b->cfg, branch[i]));
      CHECK (cudaMemcpyAsync (h_partial + 4 * i, d_partial[i], 16,
                              cudaMemcpyDeviceToHost, branch[i]));
      CHECK (cudaEventRecord (join[i], branch[i]));
      CHECK (cudaStreamWaitEvent (origin, join[i], 0));
    }
  CHECK (cudaStreamEndCapture (origin, &graph));
  CHECK (cudaGraphInstantiateWithFlags (&exec, graph, 0));

  /* REPLAY is the graph's part of an iteration: its host copies, the
     launch and the wait.  */
#define REPLAY()                                                          \
  do                                                                      \
    {                                                                     \
      memcpy (h_update, update, 16);                                      \
      CHECK (cudaGraphLaunch (exec, origin));                             \
      CHECK (cudaStreamSynchronize (origin));                             \
      memcpy (partial, h_partial, 64);                                    \
    }                                                                     \
  while (0)
#define ITERATION()                                                       \
  do                                                                      \
    {                                                                     \
      REPLAY ();                                                          \
      stitching (update, partial);                                        \
    }                                                                     \
  while (0)

  /* Each iteration timed twice, as bench_gpumem.py's graph_loop does:
     the replay alone (graph_replay) and with the stitching (graph).  */
  for (int r = -warm; r < iters; r++)
    {
      if ((r + warm) % RESET_EVERY == 0)
        memcpy (update, initial, sizeof update);
      double t0 = now_s ();
      REPLAY ();
      double t1 = now_s ();
      stitching (update, partial);
      if (r >= 0)
        {
          t_replay[r] = t1 - t0;
          t[r] = now_s () - t0;
        }
    }
  emit ("graph", kase, "wall", t, iters, 0, 0, note);
  emit ("graph_replay", kase, "wall", t_replay, iters, 0, 0,
        "the replay alone: host copies, cudaGraphLaunch, "
        "cudaStreamSynchronize");

  /* Check 3 iterations against the same computation on the host.  */
  float want[4];
  memcpy (update, initial, sizeof update);
  memcpy (want, initial, sizeof want);
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
      die ("graph %s: update[%d] = %.9g, expected %.9g", kase, k,
           update[k], want[k]);
#undef ITERATION
#undef REPLAY
  CHECK (cudaGraphExecDestroy (exec));
  CHECK (cudaGraphDestroy (graph));
  for (int i = 0; i < 4; i++)
    {
      CHECK (cudaStreamDestroy (branch[i]));
      CHECK (cudaEventDestroy (join[i]));
      CHECK (cudaFree (d_partial[i]));
    }
  CHECK (cudaEventDestroy (fork));
  CHECK (cudaStreamDestroy (origin));
  CHECK (cudaFreeHost (h_update));
  CHECK (cudaFreeHost (h_partial));
  CHECK (cudaFree (d_update));
  free (t);
  free (t_replay);
}

/* The workload's loop as one CUDA graph an iteration (workload_graph):
   4 x 10 with algo_seed and 4 x 2^log2n with algo, as fig_workload.  */
static void
fig_graph (bench *b)
{
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
  workload_graph (b, false, small, 10, "seed_4x10", quick ? 200 : 3000,
                  "one cudaGraphLaunch an iteration, 4 branches", last);
  for (int i = 0; i < 4; i++)
    CHECK (cudaFree (small[i]));
  need_partitions (b);
  workload_graph (b, true, b->parts, (int64_t) 1 << b->log2n, "algo_4x2^28",
                  quick ? 20 : 200,
                  "one cudaGraphLaunch an iteration, 4 branches", NULL);
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

/* The raw reduction: what a CUDA C programmer writes for the mean
   without gpumem's launcher, the limit for algo (issue's "raw C"): a
   grid-stride float4 loop, 4 loads in flight per thread, summed in
   double, a block sum by warp shuffles into PARTIALS[block]; then a
   second launch of one warp that adds the block sums and writes the 4
   outputs.  IMAGES must be 16-byte aligned (the figures pass the start
   of a cudaMalloc'd partition).  */
#define REDUCE_BLOCK 256
#define REDUCE_MAX_BLOCKS 4096

static __device__ double
reduce_warp (double v)
{
  for (int offset = 16; offset > 0; offset /= 2)
    v += __shfl_down_sync (0xffffffffu, v, offset);
  return v;
}

static __global__ void __launch_bounds__ (REDUCE_BLOCK)
reduce_kernel (const float *images, int64_t n, double *partials)
{
  __shared__ double warps[REDUCE_BLOCK / 32];
  const float4 *body = (const float4 *) images;
  int64_t vectors = n / 4;
  int64_t stride = (int64_t) gridDim.x * blockDim.x;
  int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;
  double sum = 0.0;

  if (i < n % 4)
    sum += images[4 * vectors + i];
  for (; i + 3 * stride < vectors; i += 4 * stride)
    {
      float4 a = __ldg (body + i), c = __ldg (body + i + stride);
      float4 d = __ldg (body + i + 2 * stride), e = __ldg (body + i + 3 * stride);
      sum += ((double) a.x + a.y) + ((double) a.z + a.w);
      sum += ((double) c.x + c.y) + ((double) c.z + c.w);
      sum += ((double) d.x + d.y) + ((double) d.z + d.w);
      sum += ((double) e.x + e.y) + ((double) e.z + e.w);
    }
  for (; i < vectors; i += stride)
    {
      float4 a = __ldg (body + i);
      sum += ((double) a.x + a.y) + ((double) a.z + a.w);
    }
  sum = reduce_warp (sum);
  if (threadIdx.x % 32 == 0)
    warps[threadIdx.x / 32] = sum;
  __syncthreads ();
  if (threadIdx.x < 32)
    {
      sum = threadIdx.x < REDUCE_BLOCK / 32 ? warps[threadIdx.x] : 0.0;
      sum = reduce_warp (sum);
      if (threadIdx.x == 0)
        partials[blockIdx.x] = sum;
    }
}

static __global__ void
reduce_finish (const double *partials, int blocks, int64_t n,
               const float *update, float *partial_update)
{
  double sum = 0.0;
  for (int b = threadIdx.x; b < blocks; b += 32)
    sum += partials[b];
  sum = reduce_warp (sum);
  if (threadIdx.x == 0)
    {
      double mean = n > 0 ? sum / (double) n : 0.0;
      for (int k = 0; k < 4; k++)
        partial_update[k] = (float) (mean + (double) update[k]);
    }
}

/* Enqueues the raw reduction of IMAGES[0:N] on STREAM (two launches).  */
static void
raw_reduce (bench *b, const float *images, int64_t n, const float *update,
            float *partial_update, cudaStream_t stream)
{
  int64_t vectors = n / 4;
  int64_t blocks = (vectors + 4 * REDUCE_BLOCK - 1) / (4 * REDUCE_BLOCK);
  int64_t most = 4 * (int64_t) b->props.multiProcessorCount;

  if (blocks > most)
    blocks = most;
  if (blocks < 1)
    blocks = 1;
  if (b->reduce_partials == NULL)
    CHECK (cudaMalloc (&b->reduce_partials,
                       REDUCE_MAX_BLOCKS * sizeof (double)));
  reduce_kernel<<<(unsigned int) blocks, REDUCE_BLOCK, 0, stream>>> (
    images, n, b->reduce_partials);
  CHECK_LAUNCH ();
  reduce_finish<<<1, 32, 0, stream>>> (b->reduce_partials, (int) blocks, n,
                                       update, partial_update);
  CHECK_LAUNCH ();
}

/* The place of slot J among the 4 partitions for N floats: up to 64
   places (16 in each partition, spread evenly), partition J % 4.  */
static const float *
algo_slot (bench *b, int64_t n, int j)
{
  int64_t whole = (int64_t) 1 << b->log2n;
  int64_t per = whole / n < 16 ? whole / n : 16;
  int64_t k = (j / 4) % per;
  return b->parts[j % 4] + k * (whole / per / 4 * 4);
}

/* algo alone at every size, event-timed: gpumem's launcher
   (gm_kernel_algo), the raw reduction, and the device-to-device copy of
   the same floats, 2^10 .. 2^log2n floats in powers of 2, rotating among
   up to 64 places over the 4 partitions.  Then the launch shapes of the
   kernel at each size (grid x block given), to choose the launcher's
   shape from.  */
static void
fig_algo_sweep (bench *b)
{
  int reps = quick ? 5 : 30;
  double t[64];
  float *update, *partial, *partial2, host_update[4], got[4], want[4];

  need_partitions (b);
  for (int k = 0; k < 4; k++)
    host_update[k] = rng_float ();
  CHECK (cudaMalloc (&update, 16));
  CHECK (cudaMalloc (&partial, 16));
  CHECK (cudaMalloc (&partial2, 16));
  CHECK (cudaMemcpy (update, host_update, 16, cudaMemcpyHostToDevice));
  for (int log2 = 10; log2 <= b->log2n; log2++)
    {
      int64_t n = (int64_t) 1 << log2;
      size_t bytes = (size_t) n * sizeof (float);
      for (int c = 0; c < 3; c++)
        {
          for (int r = -3; r < reps; r++)
            {
              const float *src = algo_slot (b, n, r + 3);
              CHECK (cudaEventRecord (b->start, b->stream));
              if (c == 0)
                CHECK (gm_kernel_algo (src, update, partial, n, &b->cfg,
                                       b->stream));
              else if (c == 1)
                raw_reduce (b, src, n, update, partial2, b->stream);
              else
                CHECK (cudaMemcpyAsync (b->copy_dst, src, bytes,
                                        cudaMemcpyDeviceToDevice, b->stream));
              CHECK (cudaEventRecord (b->end, b->stream));
              double s = event_ms (b);
              if (r >= 0)
                t[r] = s;
            }
          static const char *const cases[3] = {"algo", "reduce", "d2d"};
          char kase[32];
          snprintf (kase, sizeof kase, "%s_%lld", cases[c], (long long) n);
          emit ("algo_sweep", kase, "event", t, reps, bytes,
                c == 2 ? 2 * bytes : bytes,
                c == 0 ? "gm_kernel_algo, launcher's shape; bytes read"
                : c == 1 ? "raw grid-stride float4 reduction + 1-warp finish"
                : "cudaMemcpyAsync D2D; read + write");
        }
      /* Both kernels read the same last input: they agree.  */
      CHECK (cudaMemcpy (got, partial, 16, cudaMemcpyDeviceToHost));
      CHECK (cudaMemcpy (want, partial2, 16, cudaMemcpyDeviceToHost));
      for (int k = 0; k < 4; k++)
        if (!close_to (got[k], want[k], 1e-5))
          die ("algo_sweep %lld: algo %.9g, raw reduction %.9g",
               (long long) n, got[k], want[k]);
    }

  /* Launch shapes: one block of 1024, and T threads in G blocks for T
     in 256, 512, 1024 and G in 1, 2, 4, 8 per SM (fewer where the
     floats run out first: at least 32 floats a thread).  */
  int sm = b->props.multiProcessorCount;
  for (int log2 = 12; log2 <= b->log2n; log2 += 2)
    {
      int64_t n = (int64_t) 1 << log2;
      for (int shape = 0; shape < 13; shape++)
        {
          unsigned int threads = shape == 0 ? 1024 : 256u << ((shape - 1) / 4);
          int64_t blocks = shape == 0 ? 1 : (int64_t) sm << ((shape - 1) % 4);
          int64_t needed = (n + 32 * (int64_t) threads - 1)
                           / (32 * (int64_t) threads);
          if (shape > 0 && blocks > needed)
            {
              /* The capped shape is the same for all larger G: time it
                 once, at the first G that hits the cap.  */
              if ((shape - 1) % 4 > 0
                  && ((int64_t) sm << ((shape - 2) % 4)) >= needed)
                continue;
              blocks = needed;
            }
          gm_launch_cfg cfg = b->cfg;
          cfg.grid[0] = (unsigned int) blocks;
          cfg.grid[1] = cfg.grid[2] = 1;
          cfg.block[0] = threads;
          cfg.block[1] = cfg.block[2] = 1;
          int shape_reps = quick ? 3 : 15;
          for (int r = -2; r < shape_reps; r++)
            {
              CHECK (cudaEventRecord (b->start, b->stream));
              CHECK (gm_kernel_algo (algo_slot (b, n, r + 2), update,
                                     partial, n, &cfg, b->stream));
              CHECK (cudaEventRecord (b->end, b->stream));
              double s = event_ms (b);
              if (r >= 0)
                t[r] = s;
            }
          char kase[64];
          snprintf (kase, sizeof kase, "shape_%lld_%lldx%u", (long long) n,
                    (long long) blocks, threads);
          emit ("algo_shape", kase, "event", t, shape_reps,
                (size_t) n * 4, (size_t) n * 4,
                "gm_kernel_algo with grid x block given; bytes read");
        }
    }
  CHECK (cudaFree (update));
  CHECK (cudaFree (partial));
  CHECK (cudaFree (partial2));
}

/* The image counts of the loop sweep: 40, 400, ... decades apart, and
   4 x 2^log2n (2^30 on the full run); capped at 4 x 2^log2n.  */
static int
loop_counts (bench *b, int64_t *counts)
{
  int64_t most = (int64_t) 4 << b->log2n;
  int k = 0;
  for (int64_t m = 40; m < most; m *= 10)
    counts[k++] = m;
  counts[k++] = most;
  return k;
}

/* The stitching workload over M images (np.array_split into 4: the first
   M % 4 partitions one image longer), each partition the start of one
   of the 4 partitions, all on device 0, serial waits: per partition the
   kernel on the default stream and a synchronous copy of its 4 floats
   to pageable host memory; the stitching; the update back.  KERNEL 0 is
   the raw reduction, 1 gpumem's launcher (gm_kernel_algo).  Iterations:
   about POINT_SECONDS worth, 20 to 2000.  */
static void
fig_loop_sweep (bench *b)
{
  int64_t counts[16];
  int ncounts;
  float update[4], partial[4][4], *d_update, *d_partial[4];
  double *t = (double *) xmalloc (sizeof (double) * 2000);

  need_partitions (b);
  ncounts = loop_counts (b, counts);
  CHECK (cudaMalloc (&d_update, 16));
  for (int i = 0; i < 4; i++)
    CHECK (cudaMalloc (&d_partial[i], 16));
  for (int c = 0; c < ncounts; c++)
    for (int kernel = 0; kernel < 2; kernel++)
      {
        int64_t m = counts[c], n[4];
        for (int i = 0; i < 4; i++)
          n[i] = m / 4 + (i < m % 4);

#define LOOP_ITERATION()                                                  \
        do                                                                \
          {                                                               \
            for (int i = 0; i < 4; i++)                                   \
              {                                                           \
                if (kernel == 0)                                          \
                  raw_reduce (b, b->parts[i], n[i], d_update,             \
                              d_partial[i], 0);                           \
                else                                                      \
                  CHECK (gm_kernel_algo (b->parts[i], d_update,           \
                                         d_partial[i], n[i], &b->cfg, 0));\
                CHECK (cudaMemcpy (partial[i], d_partial[i], 16,          \
                                   cudaMemcpyDeviceToHost));              \
              }                                                           \
            stitching (update, partial);                                  \
            CHECK (cudaMemcpy (d_update, update, 16,                      \
                               cudaMemcpyHostToDevice));                  \
          }                                                               \
        while (0)

        int iters = 0;
        double t0 = now_s ();
        for (int r = 0; r < 2000; r++)
          {
            if (r % RESET_EVERY == 0)
              {
                for (int k = 0; k < 4; k++)
                  update[k] = 0.125f * (k + 1);
                CHECK (cudaMemcpy (d_update, update, 16,
                                   cudaMemcpyHostToDevice));
              }
            double t1 = now_s ();
            LOOP_ITERATION ();
            if (r >= 10)
              t[iters++] = now_s () - t1;
            if (iters >= 20 && now_s () - t0 > POINT_SECONDS)
              break;
          }
#undef LOOP_ITERATION
        char kase[48];
        snprintf (kase, sizeof kase, "%s_%lld", kernel == 0 ? "raw" : "algo",
                  (long long) m);
        emit ("loop_sweep", kase, "wall", t, iters, (size_t) m * 4, 0,
              kernel == 0 ? "raw reduction, cudaMemcpy both ways, serial"
                          : "gm_kernel_algo, cudaMemcpy both ways, serial");
      }
  CHECK (cudaFree (d_update));
  for (int i = 0; i < 4; i++)
    CHECK (cudaFree (d_partial[i]));
  free (t);
}

/* Two or more devices: peer copies of 256 MiB between every ordered
   pair of devices (up to 16) with peer access enabled where it can be
   (cudaMemcpyPeerAsync on the source device's stream and a wait for it,
   host clock, as gpumem's synchronous copy), the limit for gpumem's
   peer copies; and
   the stitching workload, 4 x 2^log2n with gpumem's launcher and 4 x 10
   (40 images, the script's default) with it too, partitions on devices
   i % D for D = 1, 2 and the count of devices, serial (the kernel and
   a synchronous copy per partition, as on one device) and concurrent
   (one stream per device, the kernels and copies into pinned memory
   queued on all devices, then one wait per device per iteration, the
   update sent back asynchronously).  */
static void
fig_multigpu (bench *b)
{
  int ndev = b->devices;
  int npeer = ndev > 16 ? 16 : ndev;
  size_t peer_bytes = quick ? MIB : 256 * MIB;
  double t[64];
  int reps = quick ? 5 : 20;

  if (ndev < 2)
    {
      progress ("multigpu: %d device, skipped", ndev);
      return;
    }
  need_partitions (b);

  /* Peer copies: one buffer a device.  */
  void *buf[16];
  cudaStream_t peer_stream[16];
  for (int d = 0; d < npeer; d++)
    {
      CHECK (cudaSetDevice (d));
      for (int e = 0; e < npeer; e++)
        {
          if (e == d)
            continue;
          int can = 0;
          CHECK (cudaDeviceCanAccessPeer (&can, d, e));
          if (can)
            {
              cudaError_t err = cudaDeviceEnablePeerAccess (e, 0);
              if (err != cudaSuccess
                  && err != cudaErrorPeerAccessAlreadyEnabled)
                CHECK (err);
              (void) cudaGetLastError ();
            }
          else
            progress ("multigpu: device %d cannot access device %d", d, e);
        }
      CHECK (cudaMalloc (&buf[d], peer_bytes));
      CHECK (cudaMemset (buf[d], d + 1, peer_bytes));
      CHECK (cudaStreamCreateWithFlags (&peer_stream[d],
                                        cudaStreamNonBlocking));
    }
  for (int from = 0; from < npeer; from++)
    for (int to = 0; to < npeer; to++)
      {
        if (to == from)
          continue;
        CHECK (cudaSetDevice (from));
        for (int r = -3; r < reps; r++)
          {
            double t0 = now_s ();
            CHECK (cudaMemcpyPeerAsync (buf[to], to, buf[from], from,
                                        peer_bytes, peer_stream[from]));
            CHECK (cudaStreamSynchronize (peer_stream[from]));
            if (r >= 0)
              t[r] = now_s () - t0;
          }
        char kase[16];
        snprintf (kase, sizeof kase, "peer_%d_%d", from, to);
        emit ("multigpu", kase, "wall", t, reps, peer_bytes, peer_bytes,
              "cudaMemcpyPeerAsync 256 MiB + synchronize, peer access "
              "enabled (a synchronous copy, as gpumem's)");
      }
  for (int d = 0; d < npeer; d++)
    {
      CHECK (cudaSetDevice (d));
      CHECK (cudaFree (buf[d]));
      CHECK (cudaStreamDestroy (peer_stream[d]));
    }

  /* The loops.  Every device gets its own copy of the partitions it
     runs (from device 0's), an update and the partial updates.  */
  int64_t whole = (int64_t) 1 << b->log2n;
  float *parts[16][4] = {{NULL}};
  float *d_update[16], *d_partial[16][4], *pinned_partial, *pinned_update;
  cudaStream_t streams[16];
  int nsets = ndev > 2 ? 3 : 2;
  int sets[3] = {1, 2, ndev > 16 ? 16 : ndev};
  int used = sets[nsets - 1];

  CHECK (cudaSetDevice (0));
  CHECK (cudaMallocHost (&pinned_partial, 16 * sizeof (float)));
  CHECK (cudaMallocHost (&pinned_update, 4 * sizeof (float)));
  for (int d = 0; d < used; d++)
    {
      CHECK (cudaSetDevice (d));
      CHECK (cudaStreamCreateWithFlags (&streams[d], cudaStreamNonBlocking));
      CHECK (cudaMalloc (&d_update[d], 16));
      for (int i = 0; i < 4; i++)
        CHECK (cudaMalloc (&d_partial[d][i], 16));
      for (int i = 0; i < 4; i++)
        {
          bool runs = false;
          for (int s = 0; s < nsets; s++)
            runs = runs || i % sets[s] == d;
          if (d == 0)
            parts[d][i] = b->parts[i];
          else if (runs)
            {
              CHECK (cudaMalloc (&parts[d][i], (size_t) whole * 4));
              CHECK (cudaMemcpyPeer (parts[d][i], d, b->parts[i], 0,
                                     (size_t) whole * 4));
            }
        }
    }
  CHECK (cudaSetDevice (0));

  for (int size = 0; size < 2; size++)
    for (int s = 0; s < nsets; s++)
      for (int concurrent = 0; concurrent < 2; concurrent++)
        {
          int nd = sets[s];
          int64_t n = size == 0 ? 10 : whole;
          int iters_max = size == 0 ? 2000 : (quick ? 20 : 150);
          double *times = (double *) xmalloc (sizeof (double) * iters_max);
          float update[4], partial[4][4];
          int iters = 0;
          double t0 = now_s ();

          for (int r = 0; r < iters_max + 10; r++)
            {
              if (r % RESET_EVERY == 0)
                for (int d = 0; d < nd; d++)
                  {
                    for (int k = 0; k < 4; k++)
                      update[k] = 0.125f * (k + 1);
                    CHECK (cudaSetDevice (d));
                    /* After the last iteration's update, still queued
                       on the device's stream when concurrent.  */
                    CHECK (cudaStreamSynchronize (streams[d]));
                    CHECK (cudaMemcpy (d_update[d], update, 16,
                                       cudaMemcpyHostToDevice));
                  }
              double t1 = now_s ();
              if (!concurrent)
                {
                  for (int i = 0; i < 4; i++)
                    {
                      int d = i % nd;
                      CHECK (cudaSetDevice (d));
                      CHECK (gm_kernel_algo (parts[d][i], d_update[d],
                                             d_partial[d][i], n, &b->cfg, 0));
                      CHECK (cudaMemcpy (partial[i], d_partial[d][i], 16,
                                         cudaMemcpyDeviceToHost));
                    }
                  stitching (update, partial);
                  for (int d = 0; d < nd; d++)
                    {
                      CHECK (cudaSetDevice (d));
                      CHECK (cudaMemcpy (d_update[d], update, 16,
                                         cudaMemcpyHostToDevice));
                    }
                }
              else
                {
                  for (int i = 0; i < 4; i++)
                    {
                      int d = i % nd;
                      CHECK (cudaSetDevice (d));
                      CHECK (gm_kernel_algo (parts[d][i], d_update[d],
                                             d_partial[d][i], n, &b->cfg,
                                             streams[d]));
                      CHECK (cudaMemcpyAsync (pinned_partial + 4 * i,
                                              d_partial[d][i], 16,
                                              cudaMemcpyDeviceToHost,
                                              streams[d]));
                    }
                  for (int d = 0; d < nd; d++)
                    CHECK (cudaStreamSynchronize (streams[d]));
                  memcpy (partial, pinned_partial, sizeof partial);
                  stitching (update, partial);
                  memcpy (pinned_update, update, sizeof update);
                  for (int d = 0; d < nd; d++)
                    {
                      CHECK (cudaSetDevice (d));
                      CHECK (cudaMemcpyAsync (d_update[d], pinned_update, 16,
                                              cudaMemcpyHostToDevice,
                                              streams[d]));
                    }
                  /* The pinned update is written again only after the
                     next iteration's waits, which follow these copies
                     on every stream.  */
                }
              if (r >= 10)
                times[iters++] = now_s () - t1;
              if (iters >= 20 && now_s () - t0 > 2 * POINT_SECONDS)
                break;
            }
          for (int d = 0; d < nd; d++)
            {
              CHECK (cudaSetDevice (d));
              CHECK (cudaDeviceSynchronize ());
            }
          CHECK (cudaSetDevice (0));
          char kase[64];
          snprintf (kase, sizeof kase, "loop_%s_%dgpu_%s",
                    size == 0 ? "4x10" : "4x2^28", nd,
                    concurrent ? "concurrent" : "serial");
          emit ("multigpu", kase, "wall", times, iters, 0, 0,
                concurrent ? "gm_kernel_algo, one stream per device, "
                             "one wait per device per iteration"
                           : "gm_kernel_algo, default streams, serial "
                             "cudaMemcpy");
          free (times);
        }

  for (int d = 0; d < used; d++)
    {
      CHECK (cudaSetDevice (d));
      CHECK (cudaDeviceSynchronize ());
      CHECK (cudaStreamDestroy (streams[d]));
      CHECK (cudaFree (d_update[d]));
      for (int i = 0; i < 4; i++)
        {
          CHECK (cudaFree (d_partial[d][i]));
          if (d > 0 && parts[d][i] != NULL)
            CHECK (cudaFree (parts[d][i]));
        }
    }
  CHECK (cudaSetDevice (0));
  CHECK (cudaFreeHost (pinned_partial));
  CHECK (cudaFreeHost (pinned_update));
}

/* The stitching loop over 4 partitions of N float32 images that do not
   all fit (bench/spill.py's loops, whose device memory is a limit of
   1/RATIO of the images' bytes), as raw CUDA C does it within the same
   memory: the images in page-locked host memory; of the CAP partitions
   that fit under that limit (gpumem's count), NBUF are buffers and the
   rest hold the first partitions resident; the others are streamed
   through the buffers: with two, the upload of the next on one stream
   while the kernel runs on the current on another; a buffer is reused
   once its kernel (DIRTY: its download, on a third stream) is done.
   DIRTY first negates every image in place (the kernel
   gpumem.kernels.saxpy is, a = -2, x = y) and writes the streamed ones
   back.  The partial updates go to page-locked memory on the kernels'
   stream, one wait an iteration, each checked against the host's mean.
   Per iteration wall clock, the first left out, into T (ITERS).  */
static void
spill_loop_case (bench *b, float *const host[4], const double mean[4],
                 int64_t n, int cap, int nbuf, bool dirty, int iters,
                 double *t)
{
  size_t bytes = (size_t) n * sizeof (float);
  int fit = cap - nbuf;
  int streamed;
  float *resident[4] = {NULL}, *buffer[2], *d_update, *d_partial, *partial;
  cudaStream_t compute, upload, download;
  cudaEvent_t loaded[2], used[2], freed[2];
  float sign = 1.0f;

  streamed = 4 - fit;
  for (int p = 0; p < fit; p++)
    {
      CHECK (cudaMalloc (&resident[p], bytes));
      CHECK (cudaMemcpy (resident[p], host[p], bytes,
                         cudaMemcpyHostToDevice));
    }
  for (int s = 0; s < nbuf; s++)
    {
      CHECK (cudaMalloc (&buffer[s], bytes));
      CHECK (cudaEventCreateWithFlags (&loaded[s], cudaEventDisableTiming));
      CHECK (cudaEventCreateWithFlags (&used[s], cudaEventDisableTiming));
      CHECK (cudaEventCreateWithFlags (&freed[s], cudaEventDisableTiming));
    }
  CHECK (cudaStreamCreateWithFlags (&compute, cudaStreamNonBlocking));
  CHECK (cudaStreamCreateWithFlags (&upload, cudaStreamNonBlocking));
  CHECK (cudaStreamCreateWithFlags (&download, cudaStreamNonBlocking));
  CHECK (cudaMalloc (&d_update, 16));
  CHECK (cudaMemset (d_update, 0, 16));
  CHECK (cudaMalloc (&d_partial, 4 * 16));
  CHECK (cudaMallocHost (&partial, 4 * 16));

#define SPILL_UPLOAD(J)                                                   \
  do                                                                      \
    {                                                                     \
      CHECK (cudaMemcpyAsync (buffer[(J) % nbuf], host[fit + (J)], bytes, \
                              cudaMemcpyHostToDevice, upload));           \
      CHECK (cudaEventRecord (loaded[(J) % nbuf], upload));               \
    }                                                                     \
  while (0)

  for (int r = -1; r < iters; r++)
    {
      double t0 = now_s ();
      if (dirty)
        sign = -sign;
      for (int j = 0; j < streamed && j < nbuf; j++)
        SPILL_UPLOAD (j);
      for (int p = 0; p < 4; p++)
        {
          int j = p - fit;
          float *image = j < 0 ? resident[p] : buffer[j % nbuf];
          if (j >= 0)
            CHECK (cudaStreamWaitEvent (compute, loaded[j % nbuf], 0));
          if (dirty)
            CHECK (gm_kernel_saxpy (n, -2.0f, image, image, &b->cfg,
                                    compute));
          CHECK (gm_kernel_algo (image, d_update, d_partial + 4 * p, n,
                                 &b->cfg, compute));
          CHECK (cudaMemcpyAsync (partial + 4 * p, d_partial + 4 * p, 16,
                                  cudaMemcpyDeviceToHost, compute));
          if (j < 0)
            continue;
          if (dirty)
            {
              CHECK (cudaEventRecord (used[j % nbuf], compute));
              CHECK (cudaStreamWaitEvent (download, used[j % nbuf], 0));
              CHECK (cudaMemcpyAsync (host[p], image, bytes,
                                      cudaMemcpyDeviceToHost, download));
              CHECK (cudaEventRecord (freed[j % nbuf], download));
            }
          else
            CHECK (cudaEventRecord (freed[j % nbuf], compute));
          if (j + nbuf < streamed)
            {
              CHECK (cudaStreamWaitEvent (upload, freed[j % nbuf], 0));
              SPILL_UPLOAD (j + nbuf);
            }
        }
      CHECK (cudaStreamSynchronize (compute));
      CHECK (cudaStreamSynchronize (download));
      if (r >= 0)
        t[r] = now_s () - t0;
      for (int p = 0; p < 4; p++)
        for (int k = 0; k < 4; k++)
          if (!close_to (partial[4 * p + k], (float) (sign * mean[p]), 1e-4))
            die ("spill_loop: partition %d, partial_update[%d] = %.9g, "
                 "expected %.9g", p, k, partial[4 * p + k], sign * mean[p]);
    }
#undef SPILL_UPLOAD

  /* The streamed images back as they were, for the next case.  */
  if (dirty && sign < 0)
    for (int p = fit; p < 4; p++)
      for (int64_t i = 0; i < n; i++)
        host[p][i] = -host[p][i];
  CHECK (cudaFreeHost (partial));
  CHECK (cudaFree (d_partial));
  CHECK (cudaFree (d_update));
  CHECK (cudaStreamDestroy (compute));
  CHECK (cudaStreamDestroy (upload));
  CHECK (cudaStreamDestroy (download));
  for (int s = 0; s < nbuf; s++)
    {
      CHECK (cudaFree (buffer[s]));
      CHECK (cudaEventDestroy (loaded[s]));
      CHECK (cudaEventDestroy (used[s]));
      CHECK (cudaEventDestroy (freed[s]));
    }
  for (int p = 0; p < fit; p++)
    CHECK (cudaFree (resident[p]));
}

/* The median of the N times T.  */
static double
median_of (const double *t, int n)
{
  double *sorted = (double *) xmalloc (sizeof (double) * n), m;

  memcpy (sorted, t, sizeof (double) * n);
  qsort (sorted, n, sizeof (double), compare_double);
  m = n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
  free (sorted);
  return m;
}

/* One spill_loop record at RATIO: raw C's best within the memory
   gpumem has there, the faster of two buffers (the upload overlapped
   with the kernel, one partition fewer resident) and one (one more
   resident, each upload after its buffer's kernel), where each fits.  */
static void
spill_loop_best (bench *b, float *const host[4], const double mean[4],
                 int64_t n, double ratio, bool dirty, int iters)
{
  size_t bytes = (size_t) n * sizeof (float);
  int cap = (int) ((size_t) (4.0 * (double) bytes / ratio) / bytes);
  double *t = (double *) xmalloc (sizeof (double) * (iters + 1));
  double *best = (double *) xmalloc (sizeof (double) * (iters + 1));
  int best_nbuf = 0;
  char kase[32], note[240];

  if (cap > 4)
    cap = 4;
  if (cap < 1)
    die ("spill_loop: ratio %g leaves no room for one partition", ratio);
  for (int nbuf = 1; nbuf <= 2 && nbuf <= cap; nbuf++)
    {
      spill_loop_case (b, host, mean, n, cap, nbuf, dirty, iters, t);
      if (best_nbuf == 0 || median_of (t, iters) < median_of (best, iters))
        {
          memcpy (best, t, sizeof (double) * iters);
          best_nbuf = nbuf;
        }
    }
  snprintf (kase, sizeof kase, "%s_%gx", dirty ? "dirty" : "clean", ratio);
  snprintf (note, sizeof note, "4 partitions, room for %d: %d resident, %d "
            "through %d buffer%s (the faster of one and two); "
            "gm_kernel_algo%s; traffic: the streamed bytes%s",
            cap, cap - best_nbuf, 4 - (cap - best_nbuf), best_nbuf,
            best_nbuf == 1 ? "" : "s",
            dirty ? " after gm_kernel_saxpy(a=-2, x=y)" : "",
            dirty ? " both ways" : " up");
  emit ("spill_loop", kase, "wall", best, iters, bytes,
        (size_t) (4 - (cap - best_nbuf)) * bytes * (dirty ? 2 : 1), note);
  free (t);
  free (best);
}

/* bench/spill.py's loops in raw CUDA C (spill_loop_case): partitions of
   --spill-bytes (default 2 GiB, 4 MiB with --quick), clean at
   --spill-ratio or else at 1.5 and 2.5, dirty at --spill-ratio or
   else 1.5; 6 iterations (3 with --quick) after one.  */
static void
fig_spill_loop (bench *b)
{
  int64_t n = (int64_t) (b->spill_bytes / sizeof (float));
  size_t bytes = (size_t) n * sizeof (float);
  float *host[4];
  double mean[4];
  int iters = quick ? 3 : 6;

  progress ("spill_loop: 4 x %zu MiB in page-locked memory", bytes / MIB);
  for (int p = 0; p < 4; p++)
    {
      double sum = 0;
      CHECK (cudaMallocHost (&host[p], bytes));
      for (int64_t i = 0; i < n; i++)
        {
          host[p][i] = rng_float ();
          sum += host[p][i];
        }
      mean[p] = sum / (double) n;
    }
  if (b->spill_ratio > 0)
    {
      spill_loop_best (b, host, mean, n, b->spill_ratio, false, iters);
      spill_loop_best (b, host, mean, n, b->spill_ratio, true, iters);
    }
  else
    {
      spill_loop_best (b, host, mean, n, 1.5, false, iters);
      spill_loop_best (b, host, mean, n, 2.5, false, iters);
      spill_loop_best (b, host, mean, n, 1.5, true, iters);
    }
  for (int p = 0; p < 4; p++)
    CHECK (cudaFreeHost (host[p]));
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
  {"algo_sweep", fig_algo_sweep},
  {"loop_sweep", fig_loop_sweep},
  {"workload", fig_workload},
  {"graph", fig_graph},
  {"seed_rate", fig_seed_rate},
  {"multigpu", fig_multigpu},
  {"spill_loop", fig_spill_loop},
};
#define NFIGURES ((int) (sizeof figures / sizeof figures[0]))

static void
usage (FILE *f)
{
  fprintf (f, "usage: raw [--quick] [--out FILE] [--log2n N] "
              "[--sweep-max BYTES] [--spill-bytes BYTES] "
              "[--spill-ratio R] [FIGURE]...\nfigures:");
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
      else if (strcmp (a, "--spill-bytes") == 0 && i + 1 < argc)
        b.spill_bytes = strtoull (argv[++i], NULL, 0);
      else if (strcmp (a, "--spill-ratio") == 0 && i + 1 < argc)
        b.spill_ratio = atof (argv[++i]);
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
  if (b.spill_bytes == 0)
    b.spill_bytes = quick ? 4 * MIB : 2 * GIB;
  if (b.spill_bytes < 4 * KIB)
    die ("--spill-bytes must be at least 4096");
  if (b.spill_ratio != 0 && !(b.spill_ratio >= 1.0 && b.spill_ratio <= 64.0))
    die ("--spill-ratio must be 1 .. 64");
  if (out_path != NULL && (out = fopen (out_path, "w")) == NULL)
    die ("cannot write %s", out_path);

  CHECK (cudaGetDeviceCount (&b.devices));
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
           "\"cuda_runtime\": %d, \"quick\": %s, \"log2n\": %d, "
           "\"devices\": %d}\n",
           b.props.name, b.props.multiProcessorCount, b.props.l2CacheSize,
           driver, runtime, quick ? "true" : "false", b.log2n, b.devices);
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
