/* queue.c -- the concurrent queue (queue.h).

   Work for each device goes on a stream of the queue's own, in the
   order it was queued.  Copies from host memory read it when queued,
   into the device's page-locked bounce buffer; copies into host memory
   go into the bounce buffer and land in their destination at
   gm_queue_land, once the work is done.  A bounce buffer per device
   keeps the devices from waiting on each other (from the pinned pool,
   pinned-pool.h); none is allocated per copy once the first round has
   sized them.  Queues given back keep
   their streams and buffers, so that opening one per iteration makes
   no stream.  */

#include "config.h"

#include "queue.h"
#include "pinned-pool.h"

#include <stdlib.h>
#include <string.h>

#define BOUNCE_MIN ((size_t) 64 << 10)
#define BOUNCE_ALIGN 256

typedef struct queue_device
{
  gm_stream *stream;          /* made at first use */
  char *bounce;               /* page-locked, BOUNCE_SIZE bytes */
  size_t bounce_size;
  size_t bounce_used;         /* taken since the last landing */
  char **spent;               /* outgrown bounce buffers still in flight */
  int nspent, spent_cap;
  bool busy;                  /* work queued since the last idle */
} queue_device;

/* A copy into host memory waiting to land: NBYTES from the bounce
   buffer at SRC into DST, which OWNER keeps alive and in place.  */
typedef struct queue_landing
{
  char *dst;
  const char *src;
  size_t nbytes;
  void *owner;
} queue_landing;

struct gm_queue
{
  int ndev;
  queue_device *dev;
  queue_landing *landings;
  size_t nlandings, landings_cap;
  struct gm_queue *next;       /* in the free list */
};

static _Thread_local gm_queue *current_queue;
/* Queues given back.  Guarded by the caller's lock (the GIL).  */
static gm_queue *free_queues;

static gm_status
no_memory (const char *what)
{
  return gm_error_set (GM_ERR_HOST_NOMEM, 0, NULL, "out of host memory "
                       "for %s of a concurrent queue", what);
}

gm_queue *
gm_queue_current (void)
{
  return current_queue;
}

void
gm_queue_set_current (gm_queue *queue)
{
  current_queue = queue;
}

static void
queue_destroy (gm_queue *queue)
{
  for (int d = 0; d < queue->ndev; d++)
    {
      queue_device *dev = &queue->dev[d];
      if (dev->stream != NULL)
        gm_backend_current->stream_destroy (dev->stream);
      if (dev->bounce != NULL)
        gm_pinned_free (dev->bounce);
      for (int i = 0; i < dev->nspent; i++)
        gm_pinned_free (dev->spent[i]);
      free (dev->spent);
    }
  free (queue->dev);
  free (queue->landings);
  free (queue);
}

void
gm_queue_free_all (void)
{
  while (free_queues != NULL)
    {
      gm_queue *queue = free_queues;
      free_queues = queue->next;
      if (gm_backend_current != NULL)
        queue_destroy (queue);
    }
}

gm_status
gm_queue_take (gm_queue **out)
{
  gm_queue *queue = free_queues;
  int ndev = gm_backend_current->device_count ();

  if (queue != NULL)
    {
      free_queues = queue->next;
      queue->next = NULL;
      *out = queue;
      return GM_OK;
    }
  queue = calloc (1, sizeof *queue);
  if (queue != NULL)
    queue->dev = calloc ((size_t) ndev, sizeof *queue->dev);
  if (queue == NULL || queue->dev == NULL)
    {
      free (queue);
      return no_memory ("the devices");
    }
  queue->ndev = ndev;
  *out = queue;
  return GM_OK;
}

void
gm_queue_give_back (gm_queue *queue)
{
  queue->next = free_queues;
  free_queues = queue;
}

int
gm_queue_devices (const gm_queue *queue)
{
  return queue->ndev;
}

/* DEVICE's state in QUEUE with its stream made, marked busy.  */
static gm_status
device_ready (gm_queue *queue, int device, queue_device **out)
{
  queue_device *dev = &queue->dev[device];

  if (dev->stream == NULL)
    {
      gm_status status = gm_backend_current->stream_create (device, 0,
                                                            &dev->stream);
      if (status != GM_OK)
        {
          dev->stream = NULL;
          return status;
        }
    }
  dev->busy = true;
  *out = dev;
  return GM_OK;
}

gm_status
gm_queue_stream (gm_queue *queue, int device, gm_stream **stream)
{
  queue_device *dev = NULL;
  gm_status status = device_ready (queue, device, &dev);

  *stream = status == GM_OK ? dev->stream : NULL;
  return status;
}

gm_stream *
gm_queue_busy_stream (const gm_queue *queue, int device)
{
  const queue_device *dev;

  if (device < 0 || device >= queue->ndev)
    return NULL;
  dev = &queue->dev[device];
  return dev->busy ? dev->stream : NULL;
}

void
gm_queue_idle (gm_queue *queue, int device)
{
  queue->dev[device].busy = false;
}

/* NBYTES of DEV's bounce buffer in *PTR; NULL when the copy is too large
   for one (the caller copies synchronously).  An outgrown buffer may
   still be in use by queued copies: it is kept until the landing.  */
static gm_status
bounce_take (queue_device *dev, size_t nbytes, char **ptr)
{
  size_t need = (nbytes + BOUNCE_ALIGN - 1) / BOUNCE_ALIGN * BOUNCE_ALIGN;
  size_t size;
  void *fresh;
  gm_status status;

  *ptr = NULL;
  if (nbytes > GM_QUEUE_BOUNCE_MAX)
    return GM_OK;
  if (dev->bounce != NULL && dev->bounce_size - dev->bounce_used >= need)
    {
      *ptr = dev->bounce + dev->bounce_used;
      dev->bounce_used += need;
      return GM_OK;
    }
  size = dev->bounce_size * 2;
  if (size < BOUNCE_MIN)
    size = BOUNCE_MIN;
  while (size < need)
    size *= 2;
  if (dev->bounce != NULL)
    {
      if (dev->nspent == dev->spent_cap)
        {
          int cap = dev->spent_cap ? 2 * dev->spent_cap : 4;
          char **grown = realloc (dev->spent, (size_t) cap * sizeof *grown);
          if (grown == NULL)
            return no_memory ("a bounce buffer");
          dev->spent = grown;
          dev->spent_cap = cap;
        }
      dev->spent[dev->nspent++] = dev->bounce;
      dev->bounce = NULL;
      dev->bounce_size = dev->bounce_used = 0;
    }
  status = gm_pinned_alloc (size, &fresh);
  if (status != GM_OK)
    return status;
  dev->bounce = fresh;
  dev->bounce_size = size;
  dev->bounce_used = need;
  *ptr = dev->bounce;
  return GM_OK;
}

gm_status
gm_queue_check_pending (const gm_queue *queue, const void *ptr,
                        size_t nbytes)
{
  const char *p = ptr;

  for (size_t i = 0; i < queue->nlandings; i++)
    {
      const queue_landing *l = &queue->landings[i];
      if (p < l->dst + l->nbytes && l->dst < p + nbytes)
        return gm_error_set (GM_ERR_VALUE, 0, NULL, "this host memory is "
                             "the destination of a copy queued in the open "
                             "gpumem.concurrent() block: it is filled when "
                             "the block ends or its wait() returns; read it "
                             "after that");
    }
  return GM_OK;
}

gm_status
gm_queue_from_host (gm_queue *queue, int device, void *dst, const void *src,
                    size_t nbytes, bool *queued)
{
  queue_device *dev = NULL;
  char *bounce = NULL;
  gm_status status;

  *queued = false;
  if (nbytes == 0)
    return GM_OK;
  status = gm_queue_check_pending (queue, src, nbytes);
  if (status == GM_OK)
    status = device_ready (queue, device, &dev);
  if (status == GM_OK)
    status = bounce_take (dev, nbytes, &bounce);
  if (status != GM_OK || bounce == NULL)
    return status;
  /* The source is read now: the caller may change it once this
     returns, as after a synchronous copy.  */
  memcpy (bounce, src, nbytes);
  status = gm_backend_current->copy (dst, device, bounce, -1, nbytes,
                                     dev->stream);
  *queued = status == GM_OK;
  return status;
}

gm_status
gm_queue_to_host (gm_queue *queue, void *dst, const void *src, int device,
                  size_t nbytes, void *owner, bool *queued)
{
  queue_device *dev = NULL;
  queue_landing *landing;
  char *bounce = NULL;
  gm_status status;

  *queued = false;
  if (nbytes == 0)
    return GM_OK;
  status = device_ready (queue, device, &dev);
  if (status == GM_OK)
    status = bounce_take (dev, nbytes, &bounce);
  if (status != GM_OK || bounce == NULL)
    return status;
  if (queue->nlandings == queue->landings_cap)
    {
      size_t cap = queue->landings_cap ? 2 * queue->landings_cap : 16;
      queue_landing *grown = realloc (queue->landings, cap * sizeof *grown);
      if (grown == NULL)
        return no_memory ("its copies into host memory");
      queue->landings = grown;
      queue->landings_cap = cap;
    }
  status = gm_backend_current->copy (bounce, -1, src, device, nbytes,
                                     dev->stream);
  if (status != GM_OK)
    return status;
  landing = &queue->landings[queue->nlandings++];
  landing->dst = dst;
  landing->src = bounce;
  landing->nbytes = nbytes;
  landing->owner = owner;
  *queued = true;
  return GM_OK;
}

/* The streams are ordered through their handles, as another library's
   would be (foreign_stream_wait records an event and makes the handle
   wait for it).  */
gm_status
gm_queue_order (gm_queue *queue, int waiter, int device, bool *ordered)
{
  const gm_backend *backend = gm_backend_current;
  queue_device *later = NULL, *earlier = NULL;
  gm_status status;
  void *handle;

  *ordered = false;
  status = device_ready (queue, waiter, &later);
  if (status == GM_OK)
    status = device_ready (queue, device, &earlier);
  if (status != GM_OK)
    return status;
  handle = backend->stream_handle (later->stream);
  if (handle == NULL || backend->stream_handle (earlier->stream) == NULL)
    return GM_OK;
  status = backend->foreign_stream_wait (device, earlier->stream, handle);
  *ordered = status == GM_OK;
  return status;
}

gm_status
gm_queue_peer_copy (gm_queue *queue, void *dst, int dst_device,
                    const void *src, int src_device, size_t nbytes,
                    bool *queued)
{
  queue_device *to = NULL;
  gm_status status;
  bool ordered;

  *queued = false;
  if (nbytes == 0)
    return GM_OK;
  /* The copy waits for the work queued for the source's device (which
     may write SRC), and that device's later work waits for the copy
     (which reads SRC).  Where streams cannot be ordered, the caller's
     synchronous copy is as good.  */
  status = gm_queue_order (queue, dst_device, src_device, &ordered);
  if (status != GM_OK || !ordered)
    return status;
  status = device_ready (queue, dst_device, &to);
  if (status == GM_OK)
    status = gm_backend_current->copy (dst, dst_device, src, src_device,
                                       nbytes, to->stream);
  if (status == GM_OK)
    status = gm_queue_order (queue, src_device, dst_device, &ordered);
  *queued = status == GM_OK;
  return status;
}

void
gm_queue_land (gm_queue *queue, bool failed, void (*release) (void *))
{
  for (size_t i = 0; i < queue->nlandings; i++)
    {
      queue_landing *l = &queue->landings[i];
      if (!failed)
        memcpy (l->dst, l->src, l->nbytes);
      release (l->owner);
    }
  queue->nlandings = 0;
  for (int d = 0; d < queue->ndev; d++)
    {
      queue_device *dev = &queue->dev[d];
      dev->bounce_used = 0;
      for (int i = 0; i < dev->nspent; i++)
        gm_pinned_free (dev->spent[i]);
      dev->nspent = 0;
    }
}
