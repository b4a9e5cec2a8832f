/* nccl_raw.c -- the raw NCCL baseline of bench/nccl.sh: in-place
   allreduce (sum) of float32 from 4 B to 1 GiB, as nccl-tests measures
   it, written straight against NCCL and the CUDA runtime.

   Built plain, one process drives N GPUs (ncclCommInitAll, one group
   call a step).  Built with -DGM_BENCH_MPI and run by mpirun, each rank
   drives one GPU (its node-local rank's), the communicator made from an
   ncclUniqueId broadcast over MPI; rank 0 writes the records.

     nccl_raw [--gpus N] [--max-bytes B] [--quick] --out FILE

   One JSON record a line and size and timing mode:
     {"impl": "raw", "form": "devices"|"ranks", "n": N, "bytes": B,
      "mode": "async"|"sync", "time_us": T, "algbw_GBs": A,
      "busbw_GBs": A * 2 (N - 1) / N}
   async: ITERS allreduces queued back to back, then one wait (as
   nccl-tests times); sync: each one waited for (the latency of a call
   that is complete when it returns), for sizes up to 1 MiB.  Iterations
   adapt so each size takes about 0.2 s.  Exit 77 with fewer than 2
   GPUs (or ranks).  */

#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <nccl.h>
#pragma GCC diagnostic pop
#ifdef GM_BENCH_MPI
#include <mpi.h>
#endif

#define MAX_GPUS 16

#define CUDA_OK(CALL)                                                   \
  do                                                                    \
    {                                                                   \
      cudaError_t err_ = (CALL);                                        \
      if (err_ != cudaSuccess)                                          \
        {                                                               \
          fprintf (stderr, "nccl_raw: %s: %s\n", #CALL,                 \
                   cudaGetErrorString (err_));                          \
          exit (1);                                                     \
        }                                                               \
    }                                                                   \
  while (0)

#define NCCL_OK(CALL)                                                   \
  do                                                                    \
    {                                                                   \
      ncclResult_t res_ = (CALL);                                       \
      if (res_ != ncclSuccess)                                          \
        {                                                               \
          fprintf (stderr, "nccl_raw: %s: %s\n", #CALL,                 \
                   ncclGetErrorString (res_));                          \
          exit (1);                                                     \
        }                                                               \
    }                                                                   \
  while (0)

static int ndev;                   /* GPUs this process drives */
static int nranks = 1, rank;       /* the MPI job (1, 0 without) */
static int devices[MAX_GPUS];
static ncclComm_t comms[MAX_GPUS];
static cudaStream_t streams[MAX_GPUS];
static float *buffers[MAX_GPUS];

static double
now_s (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (double) ts.tv_sec + (double) ts.tv_nsec * 1e-9;
}

static void
barrier (void)
{
#ifdef GM_BENCH_MPI
  MPI_Barrier (MPI_COMM_WORLD);
#endif
}

/* One allreduce of COUNT floats on every GPU this process drives.  */
static void
allreduce (size_t count)
{
  NCCL_OK (ncclGroupStart ());
  for (int i = 0; i < ndev; i++)
    NCCL_OK (ncclAllReduce (buffers[i], buffers[i], count, ncclFloat32,
                            ncclSum, comms[i], streams[i]));
  NCCL_OK (ncclGroupEnd ());
}

static void
wait_all (void)
{
  for (int i = 0; i < ndev; i++)
    CUDA_OK (cudaStreamSynchronize (streams[i]));
}

/* Seconds an allreduce of COUNT floats takes: ITERS back to back and one
   wait (SYNC false), or each waited for.  */
static double
timed (size_t count, int iters, int sync)
{
  double start, elapsed;

  barrier ();
  start = now_s ();
  for (int k = 0; k < iters; k++)
    {
      allreduce (count);
      if (sync)
        wait_all ();
    }
  wait_all ();
  elapsed = now_s () - start;
#ifdef GM_BENCH_MPI
  /* The slowest rank's time is the collective's.  */
  MPI_Allreduce (MPI_IN_PLACE, &elapsed, 1, MPI_DOUBLE, MPI_MAX,
                 MPI_COMM_WORLD);
#endif
  return elapsed / iters;
}

int
main (int argc, char **argv)
{
  size_t max_bytes = (size_t) 1 << 30;
  const char *out_path = NULL;
  int want = 0, quick = 0, count = 0, n;
  FILE *out = NULL;

#ifdef GM_BENCH_MPI
  MPI_Init (&argc, &argv);
  MPI_Comm_rank (MPI_COMM_WORLD, &rank);
  MPI_Comm_size (MPI_COMM_WORLD, &nranks);
#endif
  for (int i = 1; i < argc; i++)
    if (strcmp (argv[i], "--gpus") == 0 && i + 1 < argc)
      want = atoi (argv[++i]);
    else if (strcmp (argv[i], "--max-bytes") == 0 && i + 1 < argc)
      max_bytes = strtoull (argv[++i], NULL, 10);
    else if (strcmp (argv[i], "--out") == 0 && i + 1 < argc)
      out_path = argv[++i];
    else if (strcmp (argv[i], "--quick") == 0)
      quick = 1;
    else
      {
        fprintf (stderr, "usage: nccl_raw [--gpus N] [--max-bytes B] "
                 "[--quick] --out FILE\n");
        return 2;
      }
  if (cudaGetDeviceCount (&count) != cudaSuccess)
    count = 0;                 /* no driver or no device: skipped below */
#ifdef GM_BENCH_MPI
  (void) want;
  {
    MPI_Comm node;
    int local;
    ncclUniqueId id;
    MPI_Comm_split_type (MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank,
                         MPI_INFO_NULL, &node);
    MPI_Comm_rank (node, &local);
    MPI_Comm_free (&node);
    if (nranks < 2 || count < 1)
      {
        if (rank == 0)
          fprintf (stderr, "nccl_raw: needs 2 or more ranks with a GPU\n");
        MPI_Finalize ();
        return 77;
      }
    ndev = 1;
    devices[0] = local % count;
    if (rank == 0)
      NCCL_OK (ncclGetUniqueId (&id));
    MPI_Bcast (&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    CUDA_OK (cudaSetDevice (devices[0]));
    NCCL_OK (ncclCommInitRank (&comms[0], nranks, id, rank));
  }
#else
  ndev = want > 0 && want < count ? want : count;
  if (ndev > MAX_GPUS)
    ndev = MAX_GPUS;
  if (ndev < 2)
    {
      fprintf (stderr, "nccl_raw: needs 2 or more GPUs (%d here)\n", count);
      return 77;
    }
  for (int i = 0; i < ndev; i++)
    devices[i] = i;
  NCCL_OK (ncclCommInitAll (comms, ndev, devices));
#endif
  n = nranks * ndev;
  for (int i = 0; i < ndev; i++)
    {
      CUDA_OK (cudaSetDevice (devices[i]));
      CUDA_OK (cudaStreamCreateWithFlags (&streams[i],
                                          cudaStreamNonBlocking));
      CUDA_OK (cudaMalloc ((void **) &buffers[i], max_bytes));
      CUDA_OK (cudaMemset (buffers[i], 0, max_bytes));
    }
  if (rank == 0)
    {
      out = out_path != NULL ? fopen (out_path, "w") : stdout;
      if (out == NULL)
        {
          perror (out_path);
          return 1;
        }
    }
  for (size_t bytes = 4; bytes <= max_bytes; bytes *= quick ? 16 : 2)
    {
      size_t floats = bytes / 4;
      double estimate;
      int iters;

      allreduce (floats);              /* warm up */
      wait_all ();
      estimate = timed (floats, 3, 0);
      iters = estimate > 0 ? (int) (0.2 / estimate) : 1000;
      iters = iters < 3 ? 3 : iters > 2000 ? 2000 : iters;
      for (int sync = 0; sync <= (bytes <= ((size_t) 1 << 20)); sync++)
        {
          double t = timed (floats, iters, sync);
          double algbw = (double) bytes / t / 1e9;
          if (rank == 0)
            fprintf (out, "{\"impl\": \"raw\", \"form\": \"%s\", \"n\": %d, "
                     "\"bytes\": %zu, \"mode\": \"%s\", \"time_us\": %.3f, "
                     "\"algbw_GBs\": %.4f, \"busbw_GBs\": %.4f, "
                     "\"iters\": %d}\n", nranks > 1 ? "ranks" : "devices",
                     n, bytes, sync ? "sync" : "async", t * 1e6, algbw,
                     algbw * 2.0 * (n - 1) / n, iters);
        }
      if (rank == 0)
        fflush (out);
    }
  for (int i = 0; i < ndev; i++)
    {
      ncclCommDestroy (comms[i]);
      cudaFree (buffers[i]);
    }
  if (out != NULL && out != stdout)
    fclose (out);
#ifdef GM_BENCH_MPI
  MPI_Finalize ();
#endif
  return 0;
}
