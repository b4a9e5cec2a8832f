/* py-dispatch.h -- where a call of gpumem's Python layer goes: the
   dispatch that decides it, and the blocks it may send a call to (the
   concurrent queue, the graph recorder).  Included by gm-python.h, at
   its end, and by nothing else.  */

#ifndef GM_PY_DISPATCH_H
#define GM_PY_DISPATCH_H

#include "recorder.h"

/* Where a call goes (py-dispatch.c).  Every call that moves bytes or
   launches work asks gmpy_dispatch_get once, after reading its stream=
   argument, and follows the answer instead of asking which block is
   open.  The rule, first match wins:

     a recording (gpumem.graph) is open in this thread   GMPY_GRAPH
     stream= names a gpumem.Stream                       GMPY_STREAM
     a `with stream:` block of the call's device is open GMPY_STREAM
     a gpumem.concurrent() block is open in this thread  GMPY_CONCURRENT
     none of these                                       GMPY_PLAIN

   GMPY_PLAIN work goes to the device's default stream and is complete
   on return; GMPY_STREAM work is queued on that stream; GMPY_CONCURRENT
   work is queued on the block's stream of its device (the block's
   queue, py-concurrent.c, takes host copies its own way); GMPY_GRAPH
   work is recorded (py-graph-record.c), and a call that names a stream
   there (stream= or a `with stream:` block) is refused by the calls
   that record.  */
typedef enum gmpy_mode
{
  GMPY_PLAIN,
  GMPY_STREAM,
  GMPY_CONCURRENT,
  GMPY_GRAPH
} gmpy_mode;

struct gmpy_dispatch
{
  gmpy_mode mode;
  /* The device whose `with stream:` block was consulted, or -1.  */
  int device;
  /* The stream the call names (stream= or the `with stream:` block's),
     or NULL: set in GMPY_STREAM, and in GMPY_GRAPH for a call the
     recording refuses.  */
  gm_stream *stream;
  /* Its gpumem.Stream, borrowed (the caller's argument, or the `with`
     block's list, holds it for the call), or NULL.  */
  PyObject *stream_obj;
};

/* Reads STREAM_OBJ, a call's stream= argument (NULL or None: none),
   and decides where the call on DEVICE goes, into *D.  A given stream
   must be a gpumem.Stream of DEVICE (TypeError, ValueError).  DEVICE
   -1: the call consults no `with stream:` block and a given stream may
   be of any device.  0 or -1.  */
int gmpy_dispatch_get (PyObject *stream_obj, int device, gmpy_dispatch *d);
/* As gmpy_dispatch_get, consulting DEVICE's `with stream:` block, but
   leaving the device of a given stream to the caller's own check (a
   copy between two devices takes a stream of either).  */
int gmpy_dispatch_any_device (PyObject *stream_obj, int device,
                              gmpy_dispatch *d);
/* D for a call that already holds its backend STREAM (NULL: none),
   from C code that read no stream= argument (DLPack's copies): the
   mode a call naming that stream has.  Never fails.  */
void gmpy_dispatch_of (gm_stream *stream, gmpy_dispatch *d);
/* The stream D's call on DEVICE runs on: D's stream, or in
   GMPY_CONCURRENT the block's stream of DEVICE (made at first use),
   which from then on is D's (D becomes a GMPY_STREAM dispatch on it:
   the call's later steps queue there, and the caller waits with
   gmpy_concurrent_join where it must be complete).  NULL for the
   default stream; STREAM may be NULL.  0 or -1.  */
int gmpy_dispatch_stream (gmpy_dispatch *d, int device, gm_stream **stream);
/* For C code that launches its own work on DEVICE (the C API, DLPack's
   exchange API): in *HANDLE the backend's stream handle (a
   cudaStream_t) of the stream a call without stream= uses there in
   this thread, as gmpy_dispatch_get and gmpy_dispatch_stream choose
   it: the innermost `with stream:` block's, else an open
   gpumem.concurrent() block's; NULL for the default stream.  DEVICE is
   one of the backend's (gmpy_device_check).  0 or -1.  */
int gmpy_dispatch_handle (int device, void **handle);
/* 1 when D's call is recorded (GMPY_GRAPH, naming no stream); 0 when
   no recording is open; -1 with gpumem.Error, saying that WHAT ("a
   copy", "a launch") cannot be captured, when one is and the call names
   a stream.  */
int gmpy_dispatch_record (const gmpy_dispatch *d, const char *what);

/* gpumem.concurrent (py-concurrent.c): the open block of this thread
   queues calls that name no stream.  */
int gmpy_concurrent_init (PyObject *module, gmpy_state *state);
/* Whether a block is open in this thread.  */
bool gmpy_concurrent_active (void);
/* The open block's stream for DEVICE (made at first use) in *STREAM, or
   NULL when no block is open.  0 or -1.  */
int gmpy_concurrent_stream (int device, gm_stream **stream);
/* Queues a copy of NBYTES host bytes at SRC to DST on DEVICE in the
   open block, reading SRC before it returns (through DEVICE's bounce
   buffer).  1 when queued; 0 when no block is open or the copy is too
   large for the bounce buffer (the caller copies synchronously); -1
   with ValueError when SRC is the destination of a queued copy into
   host memory, or another exception.  */
int gmpy_concurrent_from_host (int device, void *dst, const void *src,
                               size_t nbytes);
/* Queues a copy of NBYTES at SRC on DEVICE into host memory DST, which
   VIEW exports, landing when the block's wait() returns or it ends.  1
   when queued (the block then owns VIEW and releases it); 0 as for
   gmpy_concurrent_from_host (VIEW stays the caller's); -1 with an
   exception.  */
int gmpy_concurrent_to_host (Py_buffer *view, void *dst, const void *src,
                             int device, size_t nbytes);
/* Queues a copy of NBYTES from SRC on SRC_DEVICE to DST on DST_DEVICE
   (two devices) in the open block: on the destination's stream, after
   the work queued for the source's device, which then waits for it.
   1 when queued; 0 when no block is open or the backend's streams
   cannot be ordered so (the caller copies synchronously); -1 with an
   exception.  */
int gmpy_concurrent_peer_copy (void *dst, int dst_device, const void *src,
                               int src_device, size_t nbytes);
/* For a launch on DEVICE in the open block that uses arrays of the
   NPEERS devices PEERS (other than DEVICE): the block's stream of DEVICE
   in *STREAM, ordered after the block's work on the peers; or NULL when
   no block is open, or when the backend cannot order streams (the
   peers' work is then waited for, and the caller launches
   synchronously).  0 or -1.  */
int gmpy_concurrent_launch_stream (int device, const int *peers, int npeers,
                                   gm_stream **stream);
/* After such a launch queued on the block's stream of DEVICE: the
   peers' later work in the block waits for it.  0 or -1.  */
int gmpy_concurrent_after_launch (int device, const int *peers, int npeers);
/* 0, or -1 with ValueError when host memory [PTR, PTR + NBYTES)
   overlaps the destination of a copy the open block has not landed.  */
int gmpy_concurrent_check_pending (const void *ptr, size_t nbytes);
/* Waits (as gmpy_wait) for the open block's work on DEVICE, if any.
   0 or -1.  */
int gmpy_concurrent_join (int device);

/* gpumem.graph: calls recorded once and replayed.  The recorder
   (py-graph-record.c) is what the call sites consult; the Python type
   (py-graph.c) begins, ends and replays a recording.  */

/* A host copy of a graph: NBYTES between the host object HOST's memory
   at BUF (LEN bytes there at capture; ROOT, the array that owns it, had
   ROOT_BUF and ROOT_LEN) and STAGING, page-locked memory of the graph's,
   which the recorded device copy reads or writes.  TO_DEVICE: BUF is
   copied into STAGING before each replay; else STAGING into BUF after
   it.  */
typedef struct gmpy_graph_stage
{
  PyObject *host, *root;
  char *buf, *root_buf;
  Py_ssize_t len, root_len;
  char *staging;
  size_t nbytes;
  bool to_device;
} gmpy_graph_stage;

/* A recording: the recorder beneath (src/engine/recorder.c: streams,
   graphs, staging, dependencies) and what Python holds for it.  */
typedef struct gmpy_graph_rec
{
  PyObject *name;              /* a str, for messages */
  gm_recorder recorder;
  gmpy_graph_stage *stages;
  size_t nstages, stages_cap;
  PyObject *held;              /* a list: the DeviceArrays the calls use */
  bool replaying;              /* a thread is in a replay, which waits
                                  without the GIL: staging is in use */
  struct gmpy_graph_rec *next; /* in the list of live recordings */
} gmpy_graph_rec;

/* The recording open in this thread (py-utils.c, which gmpy_wait and
   gmpy_graph_refuse consult), or NULL.  */
extern _Thread_local gmpy_graph_rec *gmpy_graph_capture;
/* -1 with gpumem.Error saying that WHAT cannot be captured when a
   recording is open in this thread; 0 otherwise (py-utils.c).  */
int gmpy_graph_refuse (const char *what);
/* Opens REC (zeroed but for NAME) as this thread's recording: 0, or -1
   with an exception (one is open already).  */
int gmpy_graph_rec_begin (gmpy_graph_rec *rec);
/* Closes this thread's recording REC: each device's capture ends and
   becomes a graph.  When DISCARD (the block raised) or on error, what
   was recorded is let go.  0 or -1 with an exception.  */
int gmpy_graph_rec_end (gmpy_graph_rec *rec, bool discard);
/* Frees what REC holds (graphs, streams, staging, references) and takes
   it off the list of live recordings.  */
void gmpy_graph_rec_clear (gmpy_graph_rec *rec);
/* Visits REC's references for the garbage collector.  */
int gmpy_graph_rec_traverse (gmpy_graph_rec *rec, visitproc visit,
                             void *arg);
/* The recording stream of DEVICE for the next call, in *STREAM: a call
   on the arrays ARRAYS (N of them, NULL entries skipped), which the
   graph then holds, touching the NACCESS ranges ACCESS; the stream is
   told which earlier calls this one waits for (graph-deps.h), so queue
   the call at once.  -1 with gpumem.Error when an array is on another
   device.  */
int gmpy_graph_stream (int device, PyObject *const *arrays, int n,
                       const gm_graph_access *access, size_t naccess,
                       gm_stream **stream);
/* A tuple: for each call REC recorded, in order, the tuple of the
   numbers of the earlier calls it waits for.  */
PyObject *gmpy_graph_rec_dependencies (const gmpy_graph_rec *rec);
/* Records a copy of NBYTES between device memory (DEV, of DEVICE) and
   the host memory VIEW exports: TO_DEVICE from VIEW's start into DEV,
   else from DEV into VIEW's start.  0 or -1 with an exception
   (ValueError when DEV's DeviceArray was freed meanwhile).  */
int gmpy_graph_host_copy (const gmpy_devbuf *dev, const Py_buffer *view,
                          size_t nbytes, bool to_device);
/* Records a copy of NBYTES from SRC to DST, device memory of one device
   (BUFS: the DeviceArrays behind them, when known).  0 or -1.  */
int gmpy_graph_device_copy (const gmpy_devbuf *dst_buf,
                            const gmpy_devbuf *src_buf, void *dst,
                            int dst_device, const void *src, int src_device,
                            size_t nbytes);
/* 0 when no live graph uses ARRAY's memory, else -1 with gpumem.Error
   naming the graph (free () is refused).  */
int gmpy_graph_check_free (arraypy_object *array);
/* The type gpumem.graph (py-graph.c).  */
int gmpy_graph_init (PyObject *module, gmpy_state *state);

#endif /* GM_PY_DISPATCH_H */
