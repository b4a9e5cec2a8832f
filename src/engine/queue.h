/* queue.h -- the concurrent queue (queue.c): per device a stream of
   its own and a page-locked bounce buffer, so that a thread queues work
   for several devices that then run at the same time.  Plain C beneath
   the Python layer (gpumem.concurrent() is its Python face,
   src/python/py-concurrent.c); any C caller may queue on it.  Each
   function is called by one thread at a time for one queue (the Python
   layer holds the GIL).  */

#ifndef GM_QUEUE_H
#define GM_QUEUE_H

#include "gm.h"

#include <stdbool.h>
#include <stddef.h>

/* Copies between host memory and a device of more than this are not
   queued (the bounce buffers stay small): the caller copies them
   synchronously.  */
#define GM_QUEUE_BOUNCE_MAX ((size_t) 64 << 20)

typedef struct gm_queue gm_queue;

/* The queue open in this thread, or NULL; set by its opener.  */
gm_queue *gm_queue_current (void);
void gm_queue_set_current (gm_queue *queue);

/* A queue for every device of the current backend, in *QUEUE: one
   given back before (its streams and buffers kept), else a new one.  */
gm_status gm_queue_take (gm_queue **queue);
/* Gives QUEUE, whose work is done and landed, back for a later take.  */
void gm_queue_give_back (gm_queue *queue);
/* Frees every queue given back.  Called once, while the backend still
   runs.  */
void gm_queue_free_all (void);

/* The number of devices QUEUE serves.  */
int gm_queue_devices (const gm_queue *queue);
/* QUEUE's stream of DEVICE in *STREAM, made at first use; marks DEVICE
   busy (gm_queue_busy_stream).  */
gm_status gm_queue_stream (gm_queue *queue, int device, gm_stream **stream);
/* DEVICE's stream when work was queued on it since the last
   gm_queue_idle, else NULL.  */
gm_stream *gm_queue_busy_stream (const gm_queue *queue, int device);
/* DEVICE's work is done (the caller waited for its stream).  */
void gm_queue_idle (gm_queue *queue, int device);

/* GM_ERR_VALUE when host memory [PTR, PTR + NBYTES) overlaps the
   destination of a copy QUEUE has not landed (a read of it would see
   the old bytes), else GM_OK.  */
gm_status gm_queue_check_pending (const gm_queue *queue, const void *ptr,
                                  size_t nbytes);
/* Queues a copy of NBYTES host bytes at SRC to DST on DEVICE, reading
   SRC before it returns (through DEVICE's bounce buffer): *QUEUED true.
   *QUEUED false for a copy larger than GM_QUEUE_BOUNCE_MAX or of no
   bytes (the caller copies it).  GM_ERR_VALUE when SRC is the
   destination of a copy not landed yet.  */
gm_status gm_queue_from_host (gm_queue *queue, int device, void *dst,
                              const void *src, size_t nbytes, bool *queued);
/* Queues a copy of NBYTES at SRC on DEVICE into host memory DST,
   landing there at gm_queue_land, which hands OWNER (what keeps DST
   alive and in place) to its release function: *QUEUED true.  *QUEUED
   false as for gm_queue_from_host (OWNER stays the caller's).  */
gm_status gm_queue_to_host (gm_queue *queue, void *dst, const void *src,
                            int device, size_t nbytes, void *owner,
                            bool *queued);
/* Makes QUEUE's stream of WAITER wait, without blocking the host, for
   the work queued so far on its stream of DEVICE: *ORDERED true.  False
   when the backend's streams have no handles (its work is done during
   each call: nothing to order).  */
gm_status gm_queue_order (gm_queue *queue, int waiter, int device,
                          bool *ordered);
/* Queues a copy of NBYTES from SRC on SRC_DEVICE to DST on DST_DEVICE
   (two devices): on the destination's stream, after the work queued for
   the source's device, whose later work waits for it.  *QUEUED false
   when there are no bytes or the streams cannot be ordered so (the
   caller copies synchronously).  */
gm_status gm_queue_peer_copy (gm_queue *queue, void *dst, int dst_device,
                              const void *src, int src_device, size_t nbytes,
                              bool *queued);
/* Lands the copies into host memory (unless FAILED: the work they wait
   for failed, and the host memory keeps its bytes), hands each one's
   owner to RELEASE, and makes the bounce buffers free again.  Call it
   once every busy device's work is done.  */
void gm_queue_land (gm_queue *queue, bool failed, void (*release) (void *));

#endif /* GM_QUEUE_H */
