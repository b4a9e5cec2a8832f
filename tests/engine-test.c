/* engine-test.c -- the engines beneath the Python layer (src/engine/),
   driven from plain C as any C caller would: the concurrent queue
   (copies from host memory read when queued, copies into host memory
   landing only at gm_queue_land, the refusal to read a destination not
   landed yet, queues given back and taken again), the graph recorder
   (a copy recorded, not run, then replayed; staging), and the chunked
   copy (the caller's steps around a chunk, overlapping ranges).
     engine-test host    on the host backend
     engine-test cuda    on the CUDA backend: exit 77, "skipped: no CUDA
                         device", where it cannot start
   Exit 0 iff every check passed.  */

#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gm.h"
#include "chunked-copy.h"
#include "queue.h"
#include "recorder.h"
#include "c-test.h"

#define N 4096

/* Whether the N bytes at HOST all hold VALUE.  */
static bool
all_are (const unsigned char *host, unsigned char value)
{
  for (size_t i = 0; i < N; i++)
    if (host[i] != value)
      return false;
  return true;
}

/* Device memory's N bytes, read back (complete on return).  */
static bool
device_all_are (const void *dev, unsigned char value)
{
  unsigned char host[N];

  return gm_backend_current->copy (host, -1, dev, 0, N, NULL) == GM_OK
         && all_are (host, value);
}

static gm_status
wait_for (gm_stream *stream)
{
  gm_status status;

  do
    status = gm_backend_current->wait (0, stream, 50000);
  while (status == GM_ERR_NOT_READY);
  return status;
}

static int released;

static void
count_release (void *owner)
{
  EXPECT (owner == &released, "the owner handed back is the one queued");
  released++;
}

static void
check_queue (void *dev)
{
  unsigned char src[N], dst[N];
  gm_queue *queue, *again;
  gm_stream *stream, *again_stream;
  bool queued;

  EXPECT (gm_queue_take (&queue) == GM_OK, "%s", gm_last_error ()->message);
  EXPECT (gm_queue_devices (queue) == gm_backend_current->device_count (),
          "a queue serves every device");
  EXPECT (gm_queue_busy_stream (queue, 0) == NULL, "nothing queued yet");

  /* From host memory: read when queued.  */
  memset (src, 7, N);
  EXPECT (gm_queue_from_host (queue, 0, dev, src, N, &queued) == GM_OK
          && queued, "a small copy from host memory is queued");
  memset (src, 9, N);
  stream = gm_queue_busy_stream (queue, 0);
  EXPECT (stream != NULL, "device 0 is busy");
  EXPECT (wait_for (stream) == GM_OK, "%s", gm_last_error ()->message);
  EXPECT (device_all_are (dev, 7), "the bytes of when it was queued");

  /* Into host memory: lands at gm_queue_land, not before.  */
  memset (dst, 1, N);
  EXPECT (gm_queue_to_host (queue, dst, dev, 0, N, &released, &queued)
            == GM_OK && queued, "a small copy into host memory is queued");
  EXPECT (wait_for (stream) == GM_OK, "%s", gm_last_error ()->message);
  EXPECT (all_are (dst, 1), "the destination keeps its bytes until landed");
  EXPECT (gm_queue_check_pending (queue, dst + N - 1, 1) == GM_ERR_VALUE,
          "reading a destination not landed is refused");
  EXPECT (gm_queue_check_pending (queue, dst + N, 1) == GM_OK,
          "memory past it is not");
  EXPECT (gm_queue_from_host (queue, 0, dev, dst, 16, &queued)
            == GM_ERR_VALUE && !queued,
          "nor is it a copy's source");
  gm_queue_idle (queue, 0);
  EXPECT (gm_queue_busy_stream (queue, 0) == NULL, "idle once waited for");
  gm_queue_land (queue, false, count_release);
  EXPECT (all_are (dst, 7) && released == 1, "landed, its owner let go");
  EXPECT (gm_queue_check_pending (queue, dst, N) == GM_OK,
          "a landed destination may be read");

  /* A failed round lands nothing but lets every owner go.  */
  memset (dst, 1, N);
  EXPECT (gm_queue_to_host (queue, dst, dev, 0, N, &released, &queued)
            == GM_OK && queued, "queued");
  EXPECT (wait_for (gm_queue_busy_stream (queue, 0)) == GM_OK, "waited");
  gm_queue_idle (queue, 0);
  gm_queue_land (queue, true, count_release);
  EXPECT (all_are (dst, 1) && released == 2, "not landed, owner let go");

  /* Nothing queued: no bytes, or more than the bounce buffers take (the
     source, never read then, is not dereferenced).  */
  EXPECT (gm_queue_from_host (queue, 0, dev, src, 0, &queued) == GM_OK
          && !queued, "no bytes: nothing queued");
  EXPECT (gm_queue_from_host (queue, 0, dev, src, GM_QUEUE_BOUNCE_MAX + 1,
                              &queued) == GM_OK && !queued,
          "too large for a bounce buffer: the caller copies");

  /* Given back and taken again: the same queue, its stream kept.  */
  EXPECT (gm_queue_stream (queue, 0, &stream) == GM_OK, "a stream");
  gm_queue_idle (queue, 0);
  gm_queue_give_back (queue);
  EXPECT (gm_queue_take (&again) == GM_OK && again == queue,
          "the queue given back is taken again");
  EXPECT (gm_queue_stream (again, 0, &again_stream) == GM_OK
          && again_stream == stream, "its stream kept");
  gm_queue_idle (again, 0);
  gm_queue_set_current (again);
  EXPECT (gm_queue_current () == again, "this thread's queue");
  gm_queue_set_current (NULL);
  gm_queue_give_back (again);
  gm_queue_free_all ();
}

static void
check_recorder (void *a, void *b)
{
  gm_recorder rec = {0};
  char *stage1, *stage2;

  EXPECT (gm_backend_current->memset (a, 0, 3, N, NULL) == GM_OK
          && gm_backend_current->memset (b, 0, 4, N, NULL) == GM_OK,
          "%s", gm_last_error ()->message);
  EXPECT (gm_recorder_begin (&rec) == GM_OK, "%s",
          gm_last_error ()->message);
  EXPECT (gm_recorder_current () == &rec && rec.capturing,
          "this thread's recorder");
  EXPECT (gm_recorder_copy (&rec, 0, b, 0, a, 0, N) == GM_OK, "%s",
          gm_last_error ()->message);
  EXPECT (rec.deps.ncalls == 1, "one call recorded");
  EXPECT (gm_recorder_staging (&rec, 10, &stage1) == GM_OK
          && gm_recorder_staging (&rec, 10, &stage2) == GM_OK,
          "staging");
  EXPECT ((uintptr_t) stage1 % 256 == 0 && stage2 == stage1 + 256,
          "stages are aligned and share a block");
  EXPECT (gm_recorder_end (&rec) == GM_OK && rec.ready && !rec.capturing,
          "%s", gm_last_error ()->message);
  EXPECT (gm_recorder_current () == NULL, "no recorder after the end");
  EXPECT (rec.graphs[0] != NULL, "device 0's graph");
  /* Read only now: reading device memory while CUDA captures would end
     the capture.  */
  EXPECT (device_all_are (b, 4), "a recorded copy does not run");
  if (rec.graphs == NULL || rec.graphs[0] == NULL)
    return;
  EXPECT (gm_backend_current->graph_launch (rec.graphs[0], NULL) == GM_OK
          && wait_for (NULL) == GM_OK, "%s", gm_last_error ()->message);
  EXPECT (device_all_are (b, 3), "the replay copies");
  gm_recorder_drop (&rec);
  EXPECT (rec.streams == NULL && rec.graphs == NULL && !rec.ready,
          "dropped");
}

typedef struct steps
{
  int between, leave, enter;
  size_t last_n;
} steps;

static gm_status
on_between (void *ctx, size_t done)
{
  ((steps *) ctx)->between++;
  return GM_OK;
}

static void
on_leave (void *ctx, size_t n)
{
  ((steps *) ctx)->leave++;
  ((steps *) ctx)->last_n = n;
}

static void
on_enter (void *ctx)
{
  ((steps *) ctx)->enter++;
}

static void
check_chunked (void *dev)
{
  unsigned char host[N];
  steps seen = {0};
  gm_copy_step step = {&seen, on_between, on_leave, on_enter};
  char *base = dev;

  EXPECT (!gm_copy_overlaps (base, base + 8, 8), "ranges that touch");
  EXPECT (gm_copy_overlaps (base, base + 7, 8), "ranges that overlap");
  EXPECT (gm_copy_overlaps (base + 7, base, 8), "either way");
  EXPECT (!gm_copy_overlaps (base, base, 0), "no bytes");
  memset (host, 5, N);
  EXPECT (gm_copy_chunked (dev, 0, host, -1, N, NULL, &step) == GM_OK,
          "%s", gm_last_error ()->message);
  EXPECT (device_all_are (dev, 5), "copied");
  EXPECT (seen.between == 0 && seen.leave == 1 && seen.enter == 1
          && seen.last_n == N, "one chunk: its steps around it only");
  EXPECT (gm_copy_chunked (dev, 0, host, -1, N, NULL, NULL) == GM_OK,
          "no steps");
}

int
main (int argc, char **argv)
{
  void *a = NULL, *b = NULL;
  int exit_status;

  exit_status = test_start_backend (argc, argv, "engine-test");
  if (exit_status != 0)
    return exit_status;
  if (gm_backend_current->malloc (0, N, NULL, &a) != GM_OK
      || gm_backend_current->malloc (0, N, NULL, &b) != GM_OK)
    {
      fprintf (stderr, "malloc: %s\n", gm_last_error ()->message);
      return 1;
    }
  check_queue (a);
  check_recorder (a, b);
  check_chunked (a);
  gm_backend_current->free (0, a, N, NULL);
  gm_backend_current->free (0, b, N, NULL);
  if (failures == 0)
    printf ("engine-test %s: all checks passed\n", argv[1]);
  return failures == 0 ? 0 : 1;
}
