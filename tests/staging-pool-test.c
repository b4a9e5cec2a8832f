/* staging-pool-test.c -- the CUDA backend's staging pool (the threads
   that copy each chunk of a staged copy, src/cuda/cuda-staging.c) driven on
   the CPU alone: no device is touched.

   The pool's functions are static, so this file includes
   cuda-staging.c and calls them as staged_copy does: pieces_start
   hands a chunk's pieces to the workers (the caller keeping the first
   or not), the caller copies its own, pieces_wait takes every piece no
   worker has claimed yet and waits for the rest.  Random lengths (one
   byte to 4 MiB) and alignments of source and destination, both kinds
   of hand-out, and pauses longer than the workers' spin so that they
   fall asleep between copies.  Every copy is checked byte for byte, and
   the bytes around it must stay untouched.  First, each of the copy
   functions the pool may pick (16-byte and, where the CPU has AVX-512,
   64-byte non-temporal stores) alone, at every length to 600 bytes and
   every alignment of either side to 64.

     staging-pool-test [ROUNDS [THREADS]]   default 3000 rounds, 16 and
                                            then 3 threads

   Exit 0 when every copy was exact.  */

#define _POSIX_C_SOURCE 200809L

#include "cuda-staging.c"

#include <stdio.h>

/* cuda-staging.c reads its settings through gm_env_size and gm_env_count
   (src/core/env.c, not linked here); the test sets them directly.  */
gm_status
gm_env_size (const char *name, size_t fallback, size_t min, size_t max,
             size_t *out)
{
  (void) name;
  (void) min;
  (void) max;
  *out = fallback;
  return GM_OK;
}

gm_status
gm_env_count (const char *name, size_t fallback, size_t min, size_t max,
              size_t *out)
{
  return gm_env_size (name, fallback, min, max, out);
}

#define MAX_LEN ((size_t) 4 << 20)
#define SLACK 64

static int
run (int rounds, size_t threads, unsigned seed)
{
  char *src = malloc (MAX_LEN + SLACK), *dst = malloc (MAX_LEN + SLACK);
  int failed = 0;

  if (src == NULL || dst == NULL)
    {
      fprintf (stderr, "staging-pool-test: out of memory\n");
      return 1;
    }
  settings.threads = threads;
  start_pool ();
  for (size_t i = 0; i < MAX_LEN + SLACK; i++)
    src[i] = (char) rand_r (&seed);
  for (int r = 0; r < rounds && !failed; r++)
    {
      /* Mostly copies of up to 300 KiB (a few pieces), every seventh
         of up to 4 MiB (one piece a thread).  */
      size_t len = 1 + (size_t) rand_r (&seed)
                         % (r % 7 == 0 ? MAX_LEN : (size_t) 300000);
      size_t from = (size_t) rand_r (&seed) % SLACK;
      size_t to = (size_t) rand_r (&seed) % SLACK;
      bool with_caller = rand_r (&seed) & 1;
      bool streaming = rand_r (&seed) & 1;
      size_t mine;

      memset (dst, 0, MAX_LEN + SLACK);
      mine = pieces_start (dst + to, src + from, len, with_caller, streaming);
      if (with_caller)
        copy_streaming (dst + to, src + from, mine);
      pieces_wait ();
      if (memcmp (dst + to, src + from, len) != 0)
        {
          fprintf (stderr, "round %d: %zu bytes (from +%zu to +%zu, "
                   "caller's piece %d, streaming %d) copied wrong\n", r, len,
                   from, to, (int) with_caller, (int) streaming);
          failed = 1;
        }
      for (size_t i = 0; i < MAX_LEN + SLACK && !failed; i++)
        if ((i < to || i >= to + len) && dst[i] != 0)
          {
            fprintf (stderr, "round %d: byte %zu outside the copy "
                     "written\n", r, i);
            failed = 1;
          }
      if (r % 500 == 499)
        {
          /* Longer than SPIN_NS: the workers go to sleep.  */
          struct timespec pause = {0, 3 * SPIN_NS};
          nanosleep (&pause, NULL);
        }
    }
  printf ("%s %d rounds, %zu threads (%d started)\n",
          failed ? "FAIL" : "ok", rounds, threads, pool.nthreads);
  gm_staging_shutdown (false);
  free (src);
  free (dst);
  return failed;
}

/* COPY at lengths 0 .. 600 and a few long ones, at every offset of
   source and destination to 64, with SLACK bytes round the copy.  */
static int
check_copy (const char *name, void (*copy) (char *, const char *, size_t))
{
  static const size_t longs[] = {4096, 65536 + 3, 300001};
  char *src = malloc (300001 + 2 * SLACK), *dst = malloc (300001 + 2 * SLACK);
  unsigned seed = 7;
  int failed = 0;

  if (src == NULL || dst == NULL)
    return 1;
  for (size_t i = 0; i < 300001 + 2 * SLACK; i++)
    src[i] = (char) rand_r (&seed);
  for (size_t k = 0; k <= 600 + 3 && !failed; k++)
    {
      size_t len = k <= 600 ? k : longs[k - 601];
      for (size_t from = 0; from < 64 && !failed; from += k <= 600 ? 1 : 9)
        for (size_t to = 0; to < 64 && !failed; to += k <= 600 ? 1 : 7)
          {
            memset (dst, 0, len + 2 * SLACK);
            copy (dst + SLACK + to, src + from, len);
            if (memcmp (dst + SLACK + to, src + from, len) != 0)
              failed = 1;
            for (size_t i = 0; i < len + 2 * SLACK && !failed; i++)
              if ((i < SLACK + to || i >= SLACK + to + len) && dst[i] != 0)
                failed = 1;
            if (failed)
              fprintf (stderr, "%s: %zu bytes from +%zu to +%zu wrong\n",
                       name, len, from, to);
          }
    }
  printf ("%s %s\n", failed ? "FAIL" : "ok", name);
  free (src);
  free (dst);
  return failed;
}

int
main (int argc, char **argv)
{
  int rounds = argc > 1 ? atoi (argv[1]) : 3000;
  int failed = check_copy ("copy_streaming_128", copy_streaming_128);

#if HAVE_STREAMING_512
  if (__builtin_cpu_supports ("avx512f"))
    failed |= check_copy ("copy_streaming_512", copy_streaming_512);
  else
    printf ("skipped copy_streaming_512: the CPU has no AVX-512\n");
#endif
  if (failed)
    return 1;

  if (argc > 2)
    return run (rounds, (size_t) atoi (argv[2]), 1);
  return run (rounds, 16, 1) | run (rounds, 3, 2);
}
