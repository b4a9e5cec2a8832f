/* pinned-ranges-test.c -- the list of gpumem's page-locked blocks
   (src/core/pinned-ranges.c) against a plain model: edges of each block,
   blocks added and removed in random order past the list's first
   growth, bad arguments, and threads adding, removing and looking up at
   once.  No device needed; the addresses are never dereferenced.  */

#include "config.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "pinned-ranges.h"
#include "c-test.h"

static const void *
at (uintptr_t address)
{
  return (const void *) address;
}

static void
check_edges (void)
{
  EXPECT (!gm_pinned_ranges_holds (at (0x10000)), "empty list");
  EXPECT (gm_pinned_ranges_add (at (0x30000), 0x1000), "add");
  EXPECT (gm_pinned_ranges_add (at (0x10000), 1), "add");
  EXPECT (gm_pinned_ranges_add (at (0x20000), 0x800), "add");
  EXPECT (gm_pinned_ranges_holds (at (0x10000)), "a 1-byte block's byte");
  EXPECT (!gm_pinned_ranges_holds (at (0x10001)), "past a 1-byte block");
  EXPECT (!gm_pinned_ranges_holds (at (0xffff)), "before a block");
  EXPECT (gm_pinned_ranges_holds (at (0x20000)), "a block's first byte");
  EXPECT (gm_pinned_ranges_holds (at (0x207ff)), "a block's last byte");
  EXPECT (!gm_pinned_ranges_holds (at (0x20800)), "one past a block");
  EXPECT (gm_pinned_ranges_holds (at (0x30fff)), "the last block's end");
  EXPECT (!gm_pinned_ranges_holds (at (0x31000)), "past the last block");
  EXPECT (!gm_pinned_ranges_holds (at (UINTPTR_MAX)), "the top address");
  gm_pinned_ranges_remove (at (0x20001));
  EXPECT (gm_pinned_ranges_holds (at (0x20400)),
          "removing at an address no block starts at removes nothing");
  gm_pinned_ranges_remove (at (0x20000));
  EXPECT (!gm_pinned_ranges_holds (at (0x20000)), "a removed block");
  EXPECT (gm_pinned_ranges_holds (at (0x10000))
          && gm_pinned_ranges_holds (at (0x30000)), "its neighbours stay");
  EXPECT (!gm_pinned_ranges_add (NULL, 16), "NULL start");
  EXPECT (!gm_pinned_ranges_add (at (0x40000), 0), "empty block");
  EXPECT (!gm_pinned_ranges_add (at (UINTPTR_MAX - 4), 16),
          "a block past the top of the address space");
  EXPECT (!gm_pinned_ranges_holds (at (0x40000)), "refused blocks unlisted");
  gm_pinned_ranges_clear ();
  EXPECT (!gm_pinned_ranges_holds (at (0x10000))
          && !gm_pinned_ranges_holds (at (0x30000)), "cleared");
}

/* Blocks of 1 to 4 KiB at the start of 2000 slots 64 KiB apart, added
   and removed in random order, against a table of which slots are in;
   every step looks up random addresses.  */
#define SLOTS 2000
#define SLOT ((uintptr_t) 1 << 16)
#define BASE ((uintptr_t) 1 << 30)

static void
check_model (void)
{
  static size_t length[SLOTS];     /* 0: not listed */

  for (int step = 0; step < 200000; step++)
    {
      size_t s = rng () % SLOTS;
      uintptr_t start = BASE + s * SLOT;
      if (length[s] == 0)
        {
          size_t n = 1 + rng () % 4096;
          EXPECT (gm_pinned_ranges_add (at (start), n), "add %zu", s);
          length[s] = n;
        }
      else if (rng () % 3 == 0)
        {
          gm_pinned_ranges_remove (at (start));
          length[s] = 0;
        }
      for (int q = 0; q < 4; q++)
        {
          size_t t = rng () % SLOTS;
          uintptr_t offset = rng () % 4200;
          bool want = offset < length[t];
          EXPECT (gm_pinned_ranges_holds (at (BASE + t * SLOT + offset))
                  == want, "slot %zu offset %zu: want %d", t,
                  (size_t) offset, want);
        }
      if (failures > 10)
        return;
    }
  gm_pinned_ranges_clear ();
}

/* Four threads: each adds and removes blocks of its own while every
   thread's standing block stays found.  */
#define THREADS 4

static void *
churn (void *arg)
{
  uintptr_t mine = BASE + (uintptr_t) (intptr_t) arg * 4 * SLOT;
  long wrong = 0;

  for (int i = 0; i < 100000; i++)
    {
      uintptr_t start = mine + SLOT + (uintptr_t) (i % 2) * SLOT;
      if (!gm_pinned_ranges_add (at (start), 4096))
        wrong++;
      if (!gm_pinned_ranges_holds (at (start + 4095)))
        wrong++;
      for (int t = 0; t < THREADS; t++)
        if (!gm_pinned_ranges_holds (at (BASE + (uintptr_t) t * 4 * SLOT)))
          wrong++;
      gm_pinned_ranges_remove (at (start));
      if (gm_pinned_ranges_holds (at (start)))
        wrong++;
    }
  return (void *) (intptr_t) wrong;
}

static void
check_threads (void)
{
  pthread_t threads[THREADS];

  for (int t = 0; t < THREADS; t++)
    EXPECT (gm_pinned_ranges_add (at (BASE + (uintptr_t) t * 4 * SLOT), 64),
            "standing block %d", t);
  for (int t = 0; t < THREADS; t++)
    if (pthread_create (&threads[t], NULL, churn, (void *) (intptr_t) t))
      {
        fprintf (stderr, "pthread_create failed\n");
        exit (1);
      }
  for (int t = 0; t < THREADS; t++)
    {
      void *wrong;
      pthread_join (threads[t], &wrong);
      EXPECT (wrong == NULL, "thread %d: %ld wrong answers", t,
              (long) (intptr_t) wrong);
    }
  gm_pinned_ranges_clear ();
}

int
main (void)
{
  check_edges ();
  check_model ();
  check_threads ();
  if (failures)
    {
      fprintf (stderr, "pinned-ranges-test: %d failures\n", failures);
      return 1;
    }
  puts ("pinned-ranges-test: edges, 200000 random steps against the model, "
        "4 threads: ok");
  return 0;
}
