/* c-test.h -- what the C test programs of tests/ share: EXPECT, which
   counts a failed check in FAILURES and goes on; rng, their random
   numbers; and, in a program that includes gm.h before it,
   test_start_backend, which starts the backend the command line names.  */

#ifndef GM_C_TEST_H
#define GM_C_TEST_H

#include <stdint.h>
#include <stdio.h>

/* The failed checks so far: the program exits 0 iff none.  */
static int failures;

/* Counts a failed check and says where (the first 20 of them), then goes
   on.  */
#define EXPECT(COND, ...)                                               \
  do                                                                    \
    {                                                                   \
      if (!(COND))                                                      \
        {                                                               \
          if (failures++ < 20)                                          \
            {                                                           \
              fprintf (stderr, "%s:%d: check failed: %s: ", __FILE__,   \
                       __LINE__, #COND);                                \
              fprintf (stderr, __VA_ARGS__);                            \
              fprintf (stderr, "\n");                                   \
            }                                                           \
        }                                                               \
    }                                                                   \
  while (0)

static uint64_t rng_state = 0x9e3779b97f4a7c15u;

/* The next of a xorshift64 sequence, the same on every run, so that a
   failure comes back.  */
static inline uint64_t
rng (void)
{
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}

#ifdef GM_H
#include <stdbool.h>
#include <string.h>

/* Starts the backend ARGV[1] names, "host" or "cuda", for the program
   PROGRAM: 0 when it started, else the status the program exits with:
   2 for a bad command line, 77 (skipped) where the CUDA backend cannot
   start, 1 where the host backend cannot.  */
static inline int
test_start_backend (int argc, char **argv, const char *program)
{
  bool cuda;

  if (argc != 2 || (strcmp (argv[1], "host") && strcmp (argv[1], "cuda")))
    {
      fprintf (stderr, "usage: %s host|cuda\n", program);
      return 2;
    }
  cuda = strcmp (argv[1], "cuda") == 0;
  if (gm_backend_init (cuda ? GM_BACKEND_CUDA : GM_BACKEND_HOST, true)
      != GM_OK)
    {
      if (cuda)
        {
          printf ("skipped: no CUDA device (%s)\n", gm_last_error ()->message);
          return 77;
        }
      fprintf (stderr, "host backend: %s\n", gm_last_error ()->message);
      return 1;
    }
  return 0;
}
#endif /* GM_H */

#endif /* GM_C_TEST_H */
