/* comm-windows.c -- collectives between ranks of one node that share one
   device, through windows every rank maps (comm-windows.h).

   The windows.  Each rank allocates one block of shareable memory on
   the device (share.h), at least as large as the round the collective
   moves (CHUNK_BYTES at most), and every rank maps every other rank's
   from the handles they all-gather; the table is kept for the next
   collective and made anew, on every rank at once, when a larger round
   or another device is asked for (every rank decides from the agreed
   call alone).  A rank that cannot make or map its part says so in one
   more all-gather, and every rank then fails alike.

   Turns.  Without MPS a GPU runs one process's work at a time and
   switches between processes that have work queued by time slices, so
   that two ranks copying at once each wait many times as long as one
   alone (bench/NOTES.md, "One GPU, several ranks").  So the ranks touch the
   device in turns, one after the other, a barrier between turns, and
   one rank does the reduction: every step then runs as fast as it runs
   alone, though each pass of the device from one process to another
   still costs.  A round of each
   collective:
     bcast:     the root copies its chunk into its window; every other
                rank, in turn, copies it out of the root's window.
     gather:    every other rank, in turn, copies its chunk into its
                window; then the root copies its chunk and each window
                into their rows.
     allreduce: every rank, in turn, copies its chunk into its window;
                the last rank, in its turn, reduces every window, in
                rank order, into its own and copies the result out;
                every other rank, in turn, copies it out of that
                window.
   Copies and reductions are complete on return, so a barrier after a
   turn means its work is done; the last barrier of a round keeps a
   window from being written by the next round while another rank still
   reads it.  */

#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "comm-windows.h"
#include "share.h"

/* Keys of up to this many devices are kept: every collective asks.  */
#define IPC_MAX_KEYS 64
/* A round moves this many of MPI's chunks (GPUMEM_MPI_CHUNK; 256 MiB a
   round by default): every round costs 2 (N - 1) changes of process on
   the device, so a round must be large against them (bench/NOTES.md,
   "One GPU, several ranks").  Windows are as large as a round.  */
#define IPC_CHUNKS_A_ROUND 4
/* A new window is at least this large (up to the round), so that rounds
   that grow a little do not remake it each time.  */
#define IPC_MIN_WINDOW ((size_t) 1 << 20)

/* This rank's window and its map of every rank's.  */
static struct
{
  uint64_t key;              /* the device's key; 0: no windows */
  int device;
  size_t bytes;              /* every rank's window has this many */
  int nranks;
  gm_ipc_block *block;       /* this rank's */
  void **base;               /* NRANKS: rank R's window, mapped here */
  gm_ipc_import **imports;   /* NRANKS: NULL for this rank's own */
} win;

uint64_t
gm_comm_ipc_key (int device)
{
  static _Atomic uint64_t known[IPC_MAX_KEYS];
  const gm_ipc_ops *ops = gm_backend_current ? gm_backend_current->ipc : NULL;
  uint64_t hash = 1469598103934665603u;   /* FNV-1a */
  char node[GM_IPC_NODE];
  uint8_t uuid[16];

  if (ops == NULL || device < 0)
    return 0;
  if (device < IPC_MAX_KEYS && known[device] != 0)
    return known[device];
  if (ops->device_uuid (device, uuid) != GM_OK)
    return 0;
  gm_ipc_node_id (node);
  for (size_t i = 0; i < sizeof node; i++)
    hash = (hash ^ (unsigned char) node[i]) * 1099511628211u;
  for (size_t i = 0; i < sizeof uuid; i++)
    hash = (hash ^ uuid[i]) * 1099511628211u;
  if (hash == 0)
    hash = 1;
  if (device < IPC_MAX_KEYS)
    known[device] = hash;
  return hash;
}

void
gm_comm_ipc_shutdown (const gm_comm_ipc_net *net)
{
  bool had = win.key != 0;

  /* Imports first.  While the processes live, a producer's block
     outlives its consumers' maps (share.h); at the end of the job a barrier
     keeps every rank's block until every map of it is gone.  */
  for (int r = 0; win.imports != NULL && r < win.nranks; r++)
    if (win.imports[r] != NULL)
      gm_ipc_close (win.imports[r]);
  if (net != NULL && had)
    net->barrier ();
  if (win.block != NULL)
    gm_ipc_drop (win.block);
  free (win.base);
  free (win.imports);
  memset (&win, 0, sizeof win);
}

/* Makes this rank's window of BYTES on DEVICE and its handle's bytes in
   OUT (GM_IPC_ENCODED_BYTES (1) of them).  */
static gm_status
make_window (int device, size_t bytes, uint8_t *out)
{
  uint8_t encoded[GM_IPC_MAX_BYTES];
  gm_ipc_handle handle;
  gm_status status;
  size_t size;
  void *ptr;

  status = gm_ipc_alloc (device, bytes, NULL, &win.block, &ptr);
  if (status != GM_OK)
    return status;
  win.base[gm_comm_rank ()] = ptr;
  memset (&handle, 0, sizeof handle);
  handle.dtype = GM_UINT8;
  handle.ndim = 1;
  handle.shape[0] = (int64_t) bytes;
  handle.strides[0] = 1;
  status = gm_ipc_export (win.block, NULL, false, NULL, 0, &handle, encoded,
                          &size);
  if (status != GM_OK)
    return status;
  memcpy (out, encoded, GM_IPC_ENCODED_BYTES (1));
  return GM_OK;
}

/* Maps rank R's window from its handle's bytes IN.  */
static gm_status
map_window (int r, const uint8_t *in)
{
  gm_ipc_handle handle;
  int device;

  if (gm_ipc_decode (in, GM_IPC_ENCODED_BYTES (1), &handle) != NULL)
    return gm_error_set (GM_ERR_FAILED, 0, NULL, "rank %d made no window",
                         r);
  return gm_ipc_open (&handle, &win.imports[r], &win.base[r], &device, NULL,
                      NULL);
}

/* Gives every rank a window of at least WANT bytes (and at most MOST,
   which is at least WANT) on DEVICE (KEY), mapped by every rank, unless
   the current ones do.  Every rank decides alike from the same
   arguments.  */
static gm_status
windows_for (uint64_t key, int device, size_t want, size_t most,
             const gm_comm_ipc_net *net)
{
  const size_t hsize = GM_IPC_ENCODED_BYTES (1);
  int nranks = gm_comm_size (), rank = gm_comm_rank ();
  size_t bytes = want;
  gm_status status = GM_OK, failed = GM_OK;
  uint8_t *handles;
  int32_t mine, *all;

  if (win.key == key && win.device == device && win.bytes >= want)
    return GM_OK;
  if (win.key == key && bytes < 2 * win.bytes)
    bytes = 2 * win.bytes;
  if (bytes < IPC_MIN_WINDOW)
    bytes = IPC_MIN_WINDOW;
  if (bytes > most)
    bytes = most;
  gm_comm_ipc_shutdown (NULL);
  handles = calloc ((size_t) nranks, hsize);
  all = calloc ((size_t) nranks, sizeof *all);
  win.base = calloc ((size_t) nranks, sizeof *win.base);
  win.imports = calloc ((size_t) nranks, sizeof *win.imports);
  win.nranks = nranks;
  if (handles == NULL || all == NULL || win.base == NULL
      || win.imports == NULL)
    status = gm_error_set (GM_ERR_HOST_NOMEM, 0, NULL, "out of host memory "
                           "for the ranks' windows");
  else
    status = make_window (device, bytes, handles + (size_t) rank * hsize);
  /* Every rank takes part in both exchanges, whatever failed: the
     others would wait for it otherwise.  */
  if (handles != NULL)
    failed = net->allgather (NULL, handles, hsize);
  for (int r = 0; status == GM_OK && failed == GM_OK && r < nranks; r++)
    if (r != rank)
      status = map_window (r, handles + (size_t) r * hsize);
  mine = status != GM_OK;
  if (all != NULL && failed == GM_OK)
    failed = net->allgather (&mine, all, sizeof mine);
  for (int r = 0; all != NULL && failed == GM_OK && r < nranks; r++)
    if (all[r] != 0 && status == GM_OK)
      status = gm_error_set (GM_ERR_FAILED, 0, NULL, "rank %d could not "
                             "make or map its window", r);
  if (failed != GM_OK && status == GM_OK)
    status = failed;
  free (handles);
  free (all);
  if (status != GM_OK)
    {
      gm_comm_ipc_shutdown (NULL);
      return status;
    }
  win.key = key;
  win.device = device;
  win.bytes = bytes;
  return GM_OK;
}

/* The first error of a round is kept: the round goes on meeting the
   other ranks after it.  */
static void
keep (gm_status *first, gm_status status)
{
  if (*first == GM_OK)
    *first = status;
}

/* One device copy of a round, unless an earlier step failed.  */
static void
device_copy (gm_status *status, int device, void *dst, const void *src,
             size_t nbytes)
{
  if (*status == GM_OK && nbytes > 0)
    keep (status, gm_backend_current->copy (dst, device, src, device, nbytes,
                                            NULL));
}

/* DST = SRCS[0] op ... op SRCS[N-1] over COUNT elements, in that order,
   in groups of the backend's most inputs; DST may be one of the SRCS
   only when N is at most GM_REDUCE_MAX_INPUTS (one group), else none.  */
static gm_status
reduce (void *dst, void *const *srcs, int n, size_t count,
        const gm_comm_call *call)
{
  const gm_backend *b = gm_backend_current;
  void *group[GM_REDUCE_MAX_INPUTS];
  gm_status status;
  int done = n < GM_REDUCE_MAX_INPUTS ? n : GM_REDUCE_MAX_INPUTS;

  status = b->reduce (dst, srcs, done, count, call->dtype, call->op,
                      call->device, NULL);
  while (status == GM_OK && done < n)
    {
      int take = n - done;
      if (take > GM_REDUCE_MAX_INPUTS - 1)
        take = GM_REDUCE_MAX_INPUTS - 1;
      group[0] = dst;
      memcpy (group + 1, srcs + done, sizeof *srcs * (size_t) take);
      status = b->reduce (dst, group, take + 1, count, call->dtype,
                          call->op, call->device, NULL);
      done += take;
    }
  return status;
}

/* Ends the turn of the rank whose turn it was: every rank waits until
   its work is done.  */
static void
end_turn (const gm_comm_ipc_net *net, gm_status *status)
{
  keep (status, net->barrier ());
}

/* One round of an allreduce: COUNT elements from element OFF.  The
   last rank reduces, in the same turn as its copy in and out, and the
   others copy out in the reverse order, so that the device passes from
   one process to another 2 (N - 1) times a round and the next round
   starts with the rank that ended this one.  */
static void
allreduce_round (const gm_comm_call *call, size_t off, size_t count,
                 const gm_comm_ipc_net *net, gm_status *status)
{
  size_t nbytes = count * gm_dtypes[call->dtype].itemsize;
  int rank = gm_comm_rank (), last = win.nranks - 1;
  char *data = (char *) call->data + off * gm_dtypes[call->dtype].itemsize;

  /* The reduction may write over its last source only when one kernel
     reads them all; else it lands in the last rank's array first.  */
  bool one_pass = win.nranks <= GM_REDUCE_MAX_INPUTS;

  for (int turn = 0; turn <= last; turn++)
    {
      if (turn == rank)
        device_copy (status, call->device, win.base[rank], data, nbytes);
      if (turn == rank && rank == last && *status == GM_OK)
        keep (status, reduce (one_pass ? win.base[last] : data, win.base,
                              win.nranks, count, call));
      if (turn == rank && rank == last && one_pass)
        device_copy (status, call->device, data, win.base[last], nbytes);
      else if (turn == rank && rank == last)
        device_copy (status, call->device, win.base[last], data, nbytes);
      end_turn (net, status);
    }
  for (int turn = last - 1; turn >= 0; turn--)
    {
      if (turn == rank)
        device_copy (status, call->device, data, win.base[last], nbytes);
      end_turn (net, status);
    }
}

/* One round of a bcast or gather: COUNT elements from element OFF.  */
static void
move_round (const gm_comm_call *call, size_t off, size_t count,
            const gm_comm_ipc_net *net, gm_status *status)
{
  size_t itemsize = gm_dtypes[call->dtype].itemsize;
  size_t nbytes = count * itemsize;
  int rank = gm_comm_rank ();
  bool root = rank == call->root;
  char *data = (char *) call->data + off * itemsize;

  if (call->kind == GM_COMM_BCAST)
    {
      if (root)
        device_copy (status, call->device, win.base[rank], data, nbytes);
      end_turn (net, status);
      for (int turn = 0; turn < win.nranks; turn++)
        {
          if (turn == rank && !root)
            device_copy (status, call->device, data, win.base[call->root],
                     nbytes);
          if (turn != call->root)
            end_turn (net, status);
        }
      return;
    }
  /* The root's turn comes last, with its own chunk copied straight into
     its row.  */
  for (int turn = 0; turn < win.nranks; turn++)
    {
      if (turn == rank && !root)
        device_copy (status, call->device, win.base[rank], data, nbytes);
      if (turn != call->root)
        end_turn (net, status);
    }
  for (int r = 0; root && r < win.nranks; r++)
    device_copy (status, call->device,
             (char *) call->result + ((size_t) r * call->count + off)
                                       * itemsize,
             r == rank ? data : win.base[r], nbytes);
  end_turn (net, status);
}

gm_status
gm_comm_ipc_run (const gm_comm_call *call, uint64_t key, size_t chunk_bytes,
                 const gm_comm_ipc_net *net)
{
  size_t itemsize = gm_dtypes[call->dtype].itemsize;
  size_t total = call->count * itemsize, round, chunk;
  gm_status status;

  if (total == 0 || call->kind == GM_COMM_BARRIER)
    return GM_OK;
  /* Whole elements a round.  */
  chunk = chunk_bytes / itemsize * IPC_CHUNKS_A_ROUND;
  if (chunk == 0)
    chunk = 1;
  round = (call->count < chunk ? call->count : chunk) * itemsize;
  status = windows_for (key, call->device, round, chunk * itemsize, net);
  if (status != GM_OK)
    return status;
  for (size_t off = 0; off < call->count; off += chunk)
    {
      size_t n = call->count - off < chunk ? call->count - off : chunk;
      if (call->kind == GM_COMM_ALLREDUCE)
        allreduce_round (call, off, n, net, &status);
      else
        move_round (call, off, n, net, &status);
    }
  return status;
}
