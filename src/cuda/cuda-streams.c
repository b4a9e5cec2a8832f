/* cuda-streams.c -- the CUDA backend's streams and events, and its
   waits: the counts of work queued per device that let a wait on an
   idle device return without asking CUDA, polling that answers Ctrl-C,
   and the streams of other libraries (foreign streams).  Ordering, in
   cuda-backend.c, says which stream a call without one uses.  */

#define _POSIX_C_SOURCE 200809L
#include "config.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include <cuda_runtime_api.h>

#include "cuda-internal.h"
#include "cuda-status.h"

/* Per device: the event gm_cuda_wait records on the legacy default stream
   to see when the work queued there, and in every stream it follows,
   is done.  Made on first use under marks_lock, since waits run without
   the GIL in any thread; destroyed at shutdown.  */
static cudaEvent_t *queue_marks;
static pthread_mutex_t marks_lock = PTHREAD_MUTEX_INITIALIZER;

/* Per device, so that a wait on the default stream pays for the event
   only when gpumem's streams may hold work: how many operations were
   queued on a gpumem stream (gm_cuda_handle_of counts them), the count
   that the last completed mark covered, and whether a stream's handle went out
   to other code (which may queue work on it unseen: then every wait
   uses the mark).  */
static atomic_ulong *stream_ops;
static atomic_ulong *marked_ops;
static atomic_bool *handles_out;

/* Per device, so that a wait finds an idle device without asking CUDA:
   how many operations that may still run after their call returns were
   queued on the legacy default stream (legacy_ops: kernels and waits for
   events; the synchronous copies and memsets, complete on return, are
   not counted), and the count of all such operations, these and
   stream_ops, that the last wait to see the device idle covered
   (idle_ops).  While queued_ops () equals idle_ops and no stream handle
   went out, gpumem has nothing running on the device: gm_cuda_wait
   returns at once.  */
static atomic_ulong *legacy_ops;
static atomic_ulong *idle_ops;

/* The non-blocking streams (made or wrapped), all devices, in a list
   under non_blocking_lock, and how many there are: the counter that
   gm_cuda_join reads.  */
atomic_int gm_cuda_non_blocking_streams;
static gm_stream *non_blocking_list;
static pthread_mutex_t non_blocking_lock = PTHREAD_MUTEX_INITIALIZER;

gm_status
gm_cuda_streams_init (int count)
{
  queue_marks = calloc ((size_t) count, sizeof *queue_marks);
  stream_ops = calloc ((size_t) count, sizeof *stream_ops);
  marked_ops = calloc ((size_t) count, sizeof *marked_ops);
  handles_out = calloc ((size_t) count, sizeof *handles_out);
  legacy_ops = calloc ((size_t) count, sizeof *legacy_ops);
  idle_ops = calloc ((size_t) count, sizeof *idle_ops);
  if (queue_marks == NULL || stream_ops == NULL || marked_ops == NULL
      || handles_out == NULL || legacy_ops == NULL || idle_ops == NULL)
    return gm_error_set (GM_ERR_UNAVAILABLE, 0, NULL, "out of host memory");
  return GM_OK;
}

/* The CUDA stream to queue work on for STREAM: the legacy default
   stream for NULL (see Ordering in cuda-backend.c).  Counts the work queued on
   gpumem's own streams, for gm_cuda_wait.  */
cudaStream_t
gm_cuda_handle_of (gm_stream *stream)
{
  if (stream == NULL)
    return cudaStreamLegacy;
  atomic_fetch_add (&stream_ops[stream->device], 1);
  if (stream->non_blocking)
    atomic_fetch_add (&stream->ops, 1);
  return stream->handle;
}

/* As gm_cuda_handle_of, for work that may still run when its call returns
   (a kernel, a wait for an event): on the legacy default stream of
   DEVICE, it is counted too (legacy_ops).  */
cudaStream_t
gm_cuda_queue_on (int device, gm_stream *stream)
{
  if (stream != NULL)
    return gm_cuda_handle_of (stream);
  atomic_fetch_add (&legacy_ops[device], 1);
  return cudaStreamLegacy;
}

/* The operations that may still run after their call returned, queued
   so far on DEVICE: on gpumem's streams and on the legacy stream.  */
static unsigned long
queued_ops (int device)
{
  return atomic_load (&stream_ops[device]) + atomic_load (&legacy_ops[device]);
}

/* Raises COUNTS[DEVICE] to OPS, the count a completed wait covered,
   unless a wait noted a later count meanwhile.  */
static void
note_covered (atomic_ulong *counts, int device, unsigned long ops)
{
  unsigned long seen = atomic_load (&counts[device]);

  while (seen < ops
         && !atomic_compare_exchange_weak (&counts[device], &seen, ops))
    continue;
}

static void
sleep_us (long us)
{
  struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
  nanosleep (&ts, NULL);
}

static double
now_us (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (double) ts.tv_sec * 1e6 + (double) ts.tv_nsec / 1e3;
}

/* Polls QUERY on HANDLE until it is no longer cudaErrorNotReady or
   TIMEOUT_US passes.  It spins for the first 20 ms of each call, as a
   spinning cudaStreamSynchronize does, so that a kernel's end is seen
   within a microsecond or two (sleeping earlier cost the 4 x 2^28
   workload 9%, bench/NOTES.md); after that it polls every 100 us, which
   costs nothing on waits that long.  Callers wait in calls of 50 ms,
   checking for Ctrl-C between them.  */
static gm_status
poll_until (cudaError_t (*query) (void *), void *handle, long timeout_us)
{
  gm_status status = GM_OK;
  double start = now_us (), elapsed;

  for (;;)
    {
      cudaError_t err = query (handle);
      if (err == cudaSuccess)
        goto done;
      if (err != cudaErrorNotReady)
        GM_CUDA_CHECK (err);
      elapsed = now_us () - start;
      if (elapsed >= (double) timeout_us)
        return GM_ERR_NOT_READY;
      if (elapsed >= 20000.0)
        sleep_us (100);
    }
done:
  return status;
}

static cudaError_t
query_stream (void *handle)
{
  return cudaStreamQuery ((cudaStream_t) handle);
}

static cudaError_t
query_event (void *handle)
{
  return cudaEventQuery ((cudaEvent_t) handle);
}

/* Joins S (non_blocking_lock held) to the legacy stream of its device,
   which is current, when it needs it: FORCE, or work since its last
   join, or its handle out.  */
static gm_status
join_one (gm_stream *s, bool force)
{
  gm_status status = GM_OK;
  unsigned long ops = atomic_load (&s->ops);

  if (!force && ops == s->joined_ops && !atomic_load (&s->handle_out))
    return GM_OK;
  if (s->join_event == NULL)
    GM_CUDA_CHECK (cudaEventCreateWithFlags (&s->join_event,
                                             cudaEventDisableTiming));
  GM_CUDA_CHECK (cudaEventRecord (s->join_event, s->handle));
  atomic_fetch_add (&legacy_ops[s->device], 1);
  GM_CUDA_CHECK (cudaStreamWaitEvent (cudaStreamLegacy, s->join_event, 0));
  s->joined_ops = ops;
done:
  return status;
}

/* A non-blocking stream is joined to the legacy stream by an event
   recorded on it that the legacy stream waits for, when gpumem queued
   work on it since its last join (or its handle went out, and others
   may have).  The wait is an operation on the legacy stream that may
   still be pending when the call returns: counted in legacy_ops.  */
gm_status
gm_cuda_join_streams (int device)
{
  gm_status status;

  if (atomic_load (&gm_cuda_non_blocking_streams) == 0)
    return GM_OK;
  status = gm_cuda_use_device (device);
  if (status != GM_OK)
    return status;
  pthread_mutex_lock (&non_blocking_lock);
  for (gm_stream *s = non_blocking_list; s != NULL && status == GM_OK;
       s = s->next)
    if (s->device == device)
      status = join_one (s, false);
  pthread_mutex_unlock (&non_blocking_lock);
  return status;
}

/* Adds STREAM, non-blocking, to the list.  */
static void
non_blocking_add (gm_stream *stream)
{
  pthread_mutex_lock (&non_blocking_lock);
  stream->next = non_blocking_list;
  non_blocking_list = stream;
  atomic_fetch_add (&gm_cuda_non_blocking_streams, 1);
  pthread_mutex_unlock (&non_blocking_lock);
}

/* Takes STREAM, non-blocking, off the list and destroys its event.  Its
   work not yet joined is joined first: a stream destroyed with work
   pending (CUDA finishes it) is still seen by the next NULL-stream
   call.  */
static void
non_blocking_remove (gm_stream *stream)
{
  bool alive = !gm_cuda_lost ();

  pthread_mutex_lock (&non_blocking_lock);
  if (alive && (atomic_load (&stream->ops) != stream->joined_ops
                || atomic_load (&stream->handle_out))
      && (gm_cuda_use_device (stream->device) != GM_OK
          || join_one (stream, true) != GM_OK))
    cudaGetLastError ();
  for (gm_stream **at = &non_blocking_list; *at != NULL; at = &(*at)->next)
    if (*at == stream)
      {
        *at = stream->next;
        atomic_fetch_sub (&gm_cuda_non_blocking_streams, 1);
        break;
      }
  pthread_mutex_unlock (&non_blocking_lock);
  if (stream->join_event != NULL && alive
      && cudaEventDestroy (stream->join_event) != cudaSuccess)
    cudaGetLastError ();
}

/* STREAM NULL: cudaStreamQuery of it says done while the legacy default
   stream's own queue is empty, even when streams it follows are busy,
   and a synchronous copy queued behind those would then block its
   caller with nothing to answer Ctrl-C.  Recording an event on it is an
   action in the legacy stream, which first waits for every blocking
   stream: the event completes once all the work queued on the device
   so far has.  Another thread's record of the same event only makes
   the wait cover more work.  While no gpumem stream got work since the
   last mark completed (and no stream handle went out), the plain query
   of the legacy stream says the same, a microsecond cheaper; and while
   nothing was queued since a wait saw the device idle (queued_ops ()),
   no query is needed at all.  (gm_cuda_handle_of and gm_cuda_queue_on
   count an operation just before it is queued, so another thread's
   operation may be counted as marked and queued after the mark: a
   later wait then misses it, and a copy queued behind it blocks until
   it is done, as before; the order of the work is CUDA's and stays
   right.)  */
gm_status
gm_cuda_wait (int device, gm_stream *stream, long timeout_us)
{
  gm_status status = GM_OK;
  cudaError_t err = cudaSuccess;
  cudaEvent_t mark;
  unsigned long ops, all_ops;

  GM_CUDA_CHECK_ALIVE ();
  if (stream != NULL)
    {
      status = gm_cuda_use_device (stream->device);
      if (status != GM_OK)
        return status;
      return poll_until (query_stream, (void *) stream->handle, timeout_us);
    }
  /* Nothing of gpumem's can be running: no call to CUDA (the wait before
     every synchronous copy, after a kernel's own wait, costs nothing).
     Work that other libraries queued on the legacy stream is not seen
     here; a copy queued behind it still waits for it, on the stream.  */
  all_ops = queued_ops (device);
  if (all_ops == atomic_load (&idle_ops[device])
      && !atomic_load (&handles_out[device]))
    return GM_OK;
  status = gm_cuda_use_device (device);
  if (status != GM_OK)
    return status;
  ops = atomic_load (&stream_ops[device]);
  /* Non-blocking streams with work since their last join (counted in
     OPS, so that the mark below is recorded) are joined first.  */
  status = gm_cuda_join (device, NULL);
  if (status != GM_OK)
    return status;
  if (ops == atomic_load (&marked_ops[device])
      && !atomic_load (&handles_out[device]))
    {
      status = poll_until (query_stream, (void *) cudaStreamLegacy,
                           timeout_us);
      if (status == GM_OK)
        note_covered (idle_ops, device, all_ops);
      return status;
    }
  pthread_mutex_lock (&marks_lock);
  if (queue_marks[device] == NULL)
    err = cudaEventCreateWithFlags (&queue_marks[device],
                                    cudaEventDisableTiming);
  if (err == cudaSuccess)
    err = cudaEventRecord (queue_marks[device], cudaStreamLegacy);
  mark = queue_marks[device];
  pthread_mutex_unlock (&marks_lock);
  GM_CUDA_CHECK (err);
  status = poll_until (query_event, (void *) mark, timeout_us);
  if (status == GM_OK)
    {
      /* The mark covered the OPS operations counted before it.  */
      note_covered (marked_ops, device, ops);
      note_covered (idle_ops, device, all_ops);
    }
done:
  return status;
}

gm_status
gm_cuda_device_synchronize (int device)
{
  gm_status status = gm_cuda_use_device (device);
  unsigned long all_ops;

  if (status != GM_OK)
    return status;
  all_ops = queued_ops (device);
  GM_CUDA_CHECK (cudaDeviceSynchronize ());
  note_covered (idle_ops, device, all_ops);
done:
  return status;
}

gm_status
gm_cuda_stream_create (int device, unsigned flags, gm_stream **stream)
{
  gm_status status = gm_cuda_use_device (device);
  gm_stream *created = NULL;

  if (status != GM_OK)
    return status;
  created = calloc (1, sizeof *created);
  if (created == NULL)
    return gm_error_set (GM_ERR_HOST_NOMEM, 0, NULL, "no memory for a stream");
  created->device = device;
  created->owned = true;
  created->non_blocking = (flags & GM_STREAM_NON_BLOCKING) != 0;
  GM_CUDA_CHECK (cudaStreamCreateWithFlags (&created->handle,
                                            created->non_blocking
                                            ? cudaStreamNonBlocking
                                            : cudaStreamDefault));
  created->joined = created->non_blocking
                    && (flags & GM_STREAM_UNJOINED) == 0;
  if (created->joined)
    non_blocking_add (created);
  *stream = created;
  created = NULL;
done:
  free (created);
  return status;
}

gm_status
gm_cuda_stream_wrap (int device, void *handle, gm_stream **stream)
{
  gm_status status = gm_cuda_use_device (device);
  gm_stream *created = NULL;
  unsigned int flags;

  if (status != GM_OK)
    return status;
  /* Asking for the flags checks that the handle names a live stream.  */
  GM_CUDA_CHECK (cudaStreamGetFlags ((cudaStream_t) handle, &flags));
#if CUDART_VERSION >= 12080
  if ((uintptr_t) handle > 2)
    {
      int owner;
      GM_CUDA_CHECK (cudaStreamGetDevice ((cudaStream_t) handle, &owner));
      if (owner != device)
        {
          status = gm_error_set (GM_ERR_VALUE, 0, NULL, "stream %p belongs "
                                 "to device %d, not %d", handle, owner,
                                 device);
          goto done;
        }
    }
#endif
  created = calloc (1, sizeof *created);
  if (created == NULL)
    return gm_error_set (GM_ERR_HOST_NOMEM, 0, NULL, "no memory for a stream");
  created->device = device;
  created->handle = (cudaStream_t) handle;
  created->owned = false;
  /* Work gpumem queues on it is joined as on its own non-blocking
     streams; the work of the code that made it, as that of any other
     code, only once its handle went out through gpumem.  */
  created->non_blocking = (uintptr_t) handle > 2
                          && (flags & cudaStreamNonBlocking) != 0;
  created->joined = created->non_blocking;
  if (created->joined)
    non_blocking_add (created);
  *stream = created;
done:
  return status;
}

void
gm_cuda_stream_destroy (gm_stream *stream)
{
  if (stream->joined)
    non_blocking_remove (stream);
  if (stream->owned && !gm_cuda_lost ()
      && cudaStreamDestroy (stream->handle) != cudaSuccess)
    cudaGetLastError ();
  free (stream);
}

gm_status
gm_cuda_stream_query (gm_stream *stream, bool *done_flag)
{
  gm_status status = GM_OK;
  cudaError_t err;

  GM_CUDA_CHECK_ALIVE ();
  err = cudaStreamQuery (stream->handle);
  *done_flag = err == cudaSuccess;
  if (err != cudaErrorNotReady)
    GM_CUDA_CHECK (err);
done:
  return status;
}

void *
gm_cuda_stream_handle (gm_stream *stream)
{
  if (stream == NULL)
    return NULL;
  /* Others may queue work on it now, which stream_ops cannot count.  */
  atomic_store (&handles_out[stream->device], true);
  if (stream->non_blocking)
    atomic_store (&stream->handle_out, true);
  return (void *) stream->handle;
}

unsigned
gm_cuda_stream_flags (gm_stream *stream)
{
  return stream->non_blocking ? GM_STREAM_NON_BLOCKING : 0;
}

gm_status
gm_cuda_stream_wait_event (int device, gm_stream *stream, gm_event *event)
{
  gm_status status = gm_cuda_use_device (stream != NULL ? stream->device
                                                        : device);

  if (status != GM_OK)
    return status;
  GM_CUDA_CHECK (cudaStreamWaitEvent (gm_cuda_queue_on (device, stream),
                                      event->handle, 0));
done:
  return status;
}

gm_status
gm_cuda_event_create (int device, unsigned flags, gm_event **event)
{
  gm_status status = gm_cuda_use_device (device);
  gm_event *created = NULL;

  if (status != GM_OK)
    return status;
  created = calloc (1, sizeof *created);
  if (created == NULL)
    return gm_error_set (GM_ERR_HOST_NOMEM, 0, NULL, "no memory for an event");
  created->device = device;
  GM_CUDA_CHECK (cudaEventCreateWithFlags (
       &created->handle,
       ((flags & GM_EVENT_TIMING) ? 0u : cudaEventDisableTiming)
         | ((flags & GM_EVENT_BLOCKING) ? cudaEventBlockingSync : 0u)
         | ((flags & GM_EVENT_INTERPROCESS) ? cudaEventInterprocess : 0u)));
  *event = created;
  created = NULL;
done:
  free (created);
  return status;
}

void
gm_cuda_event_destroy (gm_event *event)
{
  if (!gm_cuda_lost ()
      && cudaEventDestroy (event->handle) != cudaSuccess)
    cudaGetLastError ();
  free (event);
}

gm_status
gm_cuda_event_record (gm_event *event, gm_stream *stream)
{
  gm_status status = gm_cuda_join (event->device, stream);

  if (status == GM_OK)
    status = gm_cuda_use_device (event->device);
  if (status != GM_OK)
    return status;
  GM_CUDA_CHECK (cudaEventRecord (event->handle, gm_cuda_handle_of (stream)));
done:
  return status;
}

gm_status
gm_cuda_event_query (gm_event *event, bool *done_flag)
{
  gm_status status = GM_OK;
  cudaError_t err;

  GM_CUDA_CHECK_ALIVE ();
  err = cudaEventQuery (event->handle);
  *done_flag = err == cudaSuccess;
  if (err != cudaErrorNotReady)
    GM_CUDA_CHECK (err);
done:
  return status;
}

gm_status
gm_cuda_event_wait (gm_event *event, long timeout_us)
{
  gm_status status = GM_OK;

  GM_CUDA_CHECK_ALIVE ();
  return poll_until (query_event, (void *) event->handle, timeout_us);
done:
  return status;
}

gm_status
gm_cuda_event_elapsed_ms (gm_event *start, gm_event *end, float *ms)
{
  gm_status status = GM_OK;

  GM_CUDA_CHECK_ALIVE ();
  GM_CUDA_CHECK (cudaEventElapsedTime (ms, start->handle, end->handle));
done:
  return status;
}

/* The cudaStream_t a foreign stream number HANDLE names: 1 and 2 are
   CUDA's legacy and per-thread default streams, as the CUDA Array
   Interface and DLPack number them; anything else is a cudaStream_t.  */
static cudaStream_t
foreign_stream (void *handle)
{
  uintptr_t value = (uintptr_t) handle;

  return value == 1 ? cudaStreamLegacy
         : value == 2 ? cudaStreamPerThread
         : (cudaStream_t) handle;
}

gm_status
gm_cuda_foreign_stream_sync (void *handle)
{
  gm_status status = GM_OK;
  cudaStream_t stream = foreign_stream (handle);

  GM_CUDA_CHECK_ALIVE ();
  GM_CUDA_CHECK (cudaStreamSynchronize (stream));
done:
  return status;
}

gm_status
gm_cuda_foreign_stream_wait (int device, gm_stream *stream, void *handle)
{
  gm_status status = gm_cuda_use_device (stream ? stream->device : device);
  cudaStream_t waiter = foreign_stream (handle);
  cudaStream_t source = stream ? stream->handle : cudaStreamLegacy;
  cudaEvent_t event = NULL;

  if (status != GM_OK)
    return status;
  /* A stream is ordered after its own work already.  */
  if (waiter == source)
    return GM_OK;
  status = gm_cuda_join (device, stream);
  if (status != GM_OK)
    return status;
  GM_CUDA_CHECK (cudaEventCreateWithFlags (&event, cudaEventDisableTiming));
  GM_CUDA_CHECK (cudaEventRecord (event, source));
  /* The legacy default stream now waits for SOURCE's work: see
     legacy_ops.  */
  if (waiter == cudaStreamLegacy)
    atomic_fetch_add (&legacy_ops[stream ? stream->device : device], 1);
  GM_CUDA_CHECK (cudaStreamWaitEvent (waiter, event, 0));
done:
  /* The wait already enqueued holds on to what it needs: the event can
     go at once.  */
  if (event != NULL && cudaEventDestroy (event) != cudaSuccess)
    cudaGetLastError ();
  return status;
}

void
gm_cuda_streams_device_done (int device)
{
  if (queue_marks[device] != NULL)
    cudaEventDestroy (queue_marks[device]);
}

void
gm_cuda_streams_shutdown (void)
{
  free (queue_marks);
  free (stream_ops);
  free (marked_ops);
  free (handles_out);
  free (legacy_ops);
  free (idle_ops);
  queue_marks = NULL;
  stream_ops = marked_ops = legacy_ops = idle_ops = NULL;
  handles_out = NULL;
}
