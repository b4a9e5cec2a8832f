/* comm-nccl.c -- the NCCL engine: collectives on CUDA device memory
   across the ranks of an MPI job and across the devices of one process.

   One communicator per rank's device (the rank form), made at first need
   from an ncclUniqueId that rank 0 makes and the job layer broadcasts
   over MPI; one communicator per device of a list (the devices form),
   made by ncclCommInitAll.  Communicators are kept for the rest of the
   run, keyed by the devices they join.

   Ordering.  A collective without a stream runs on the engine's own
   stream of its device (a "lane"), which first waits for an event
   recorded on the device's legacy default stream: that event follows
   every gpumem stream, so the collective sees all work queued before
   it.  The lane is then waited for on the host.  A collective with a
   stream is queued on that stream, ordered as a copy or a kernel there.

   Failure.  Communicators are blocking (NCCL's default): a
   nonblocking one answers ncclInProgress to every call and launches it
   from a thread of NCCL's, which cost about 4 ms a collective on two
   H200s (bench/NOTES.md, "Collectives").  What may block on a peer is
   bounded anyway: the job layer's watchdog (comm-watchdog.c) ends the
   job when a collective, its communicator's making included, outlasts
   GPUMEM_COMM_TIMEOUT; and the wait for a collective's stream polls
   ncclCommGetAsyncError, so a peer that died or stopped is seen as an
   error or as the timeout passing.  Either way the communicator is
   aborted (ncclCommAbort) and the caller ends the job.
   One mutex keeps the engine to one thread at a time.  */

#define _POSIX_C_SOURCE 200809L
#include "config.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime_api.h>
/* nccl.h declares a few functions as f () (no prototype).  */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <nccl.h>
#pragma GCC diagnostic pop

#include "comm-engine.h"
#include "comm-nccl.h"
#include "comm-nccl-load.h"
#include "config-facts.h"
#include "cuda-status.h"

#define NCCL_MAX_GROUPS 64
#define NCCL_MAX_KEYS 64         /* devices whose key is remembered */
/* A wait spins this long before it sleeps between polls (as the CUDA
   backend's waits do: a collective's end is seen within microseconds).  */
#define NCCL_SPIN_MS 20.0
#define NCCL_SLEEP_US 100

/* The communicators that join one list of devices.  */
typedef struct nccl_group
{
  uint64_t key;          /* the rank form's layout, or the device list's hash */
  bool devices_form;
  int n;                 /* communicators: 1 in the rank form */
  ncclComm_t *comms;
  int *devices;
} nccl_group;

/* The engine's stream on one device, and the event it waits on.  */
typedef struct nccl_lane
{
  bool ready;
  cudaStream_t stream;
  cudaEvent_t queued;
} nccl_lane;

static pthread_mutex_t engine_lock = PTHREAD_MUTEX_INITIALIZER;
static nccl_group groups[NCCL_MAX_GROUPS];
static int group_count;
static nccl_lane *lanes;
static int lane_count;

/* NCCL's calls, from the library comm-nccl-load.c opened
   (nccl_api_bind): the binary wheel carries no NCCL.  */
static struct
{
  __typeof__ (ncclAllReduce) *AllReduce;
  __typeof__ (ncclBroadcast) *Broadcast;
  __typeof__ (ncclCommAbort) *CommAbort;
  __typeof__ (ncclCommDestroy) *CommDestroy;
  __typeof__ (ncclCommGetAsyncError) *CommGetAsyncError;
  __typeof__ (ncclCommInitAll) *CommInitAll;
  __typeof__ (ncclCommInitRank) *CommInitRank;
  __typeof__ (ncclGetErrorString) *GetErrorString;
  __typeof__ (ncclGetLastError) *GetLastError;
  __typeof__ (ncclGetUniqueId) *GetUniqueId;
  __typeof__ (ncclGetVersion) *GetVersion;
  __typeof__ (ncclGroupEnd) *GroupEnd;
  __typeof__ (ncclGroupStart) *GroupStart;
  __typeof__ (ncclRecv) *Recv;
  __typeof__ (ncclSend) *Send;
} nccl_api;
static bool nccl_api_bound;

/* Opens NCCL (gm_nccl_open) and looks up every call, once; under
   engine_lock, or before any communicator exists.  GM_OK, or
   GM_ERR_UNAVAILABLE saying what is missing and how to get it.  */
static gm_status
nccl_api_bind (void)
{
  void *handle;

  if (nccl_api_bound)
    return GM_OK;
  if (gm_nccl_open (&handle) != GM_OK)
    return GM_ERR_UNAVAILABLE;
#define BIND(field, symbol)                                        \
  if ((*(void **) &nccl_api.field = dlsym (handle, symbol)) == NULL) \
    return gm_error_set (GM_ERR_UNAVAILABLE, 0, NULL, "the NCCL library "  \
                         "lacks %s (NCCL 2.14 or later has it): pip "       \
                         "install 'gpumem[nccl]'", symbol);
  BIND (AllReduce, "ncclAllReduce");
  BIND (Broadcast, "ncclBroadcast");
  BIND (CommAbort, "ncclCommAbort");
  BIND (CommDestroy, "ncclCommDestroy");
  BIND (CommGetAsyncError, "ncclCommGetAsyncError");
  BIND (CommInitAll, "ncclCommInitAll");
  BIND (CommInitRank, "ncclCommInitRank");
  BIND (GetErrorString, "ncclGetErrorString");
  BIND (GetLastError, "ncclGetLastError");
  BIND (GetUniqueId, "ncclGetUniqueId");
  BIND (GetVersion, "ncclGetVersion");
  BIND (GroupEnd, "ncclGroupEnd");
  BIND (GroupStart, "ncclGroupStart");
  BIND (Recv, "ncclRecv");
  BIND (Send, "ncclSend");
#undef BIND
  nccl_api_bound = true;
  return GM_OK;
}

static gm_status
nccl_failed (ncclResult_t result, const char *what, ncclComm_t comm)
{
  const char *detail = comm != NULL ? nccl_api.GetLastError (comm) : NULL;

  return gm_error_set (result == ncclSystemError ? GM_ERR_UNAVAILABLE
                                                 : GM_ERR_CUDA,
                       0, "ncclError", "NCCL %s failed: %s%s%s", what,
                       nccl_api.GetErrorString (result),
                       detail != NULL && *detail != '\0' ? ": " : "",
                       detail != NULL ? detail : "");
}

static double
now_ms (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (double) ts.tv_sec * 1e3 + (double) ts.tv_nsec / 1e6;
}

/* The moment GPUMEM_COMM_TIMEOUT from now passes; 0: never.  */
static double
deadline_from_now (void)
{
  long timeout = gm_comm_timeout_ms ();
  return timeout > 0 ? now_ms () + (double) timeout : 0.0;
}

static gm_status
timed_out (const char *what)
{
  return gm_error_set (GM_ERR_CUDA, 0, "ncclTimeout",
                       "NCCL %s did not finish within %.3g s "
                       "(GPUMEM_COMM_TIMEOUT): a peer stopped, died or "
                       "called another collective", what,
                       (double) gm_comm_timeout_ms () / 1e3);
}

/* Pauses between polls that have spun since START for long enough.  */
static void
pause_after (double start)
{
  if (now_ms () - start >= NCCL_SPIN_MS)
    {
      struct timespec ts = {0, NCCL_SLEEP_US * 1000L};
      nanosleep (&ts, NULL);
    }
}

/* Waits until the N STREAMS are done, polling each of COMMS for an
   asynchronous error, or DEADLINE passes.  GM_OK or a status naming
   WHAT.  */
static gm_status
wait_streams (int n, const cudaStream_t *streams, const ncclComm_t *comms,
              const char *what, double deadline)
{
  double start = now_ms ();
  gm_status status = GM_OK;

  for (;;)
    {
      bool done = true;
      for (int i = 0; i < n; i++)
        {
          cudaError_t err = cudaStreamQuery (streams[i]);
          ncclResult_t async = ncclSuccess;
          if (err == cudaErrorNotReady)
            done = false;
          else if (err != cudaSuccess)
            GM_CUDA_CHECK (err);
          if (nccl_api.CommGetAsyncError (comms[i], &async) != ncclSuccess
              || (async != ncclSuccess && async != ncclInProgress))
            return nccl_failed (async, what, comms[i]);
        }
      if (done)
        break;
      if (deadline > 0 && now_ms () > deadline)
        return timed_out (what);
      pause_after (start);
    }
done:
  return status;
}

/* The lane of DEVICE, made at first need.  */
static gm_status
lane_get (int device, nccl_lane **lane)
{
  gm_status status = GM_OK;
  nccl_lane *found;

  if (lanes == NULL)
    {
      int count = 0;
      GM_CUDA_CHECK (cudaGetDeviceCount (&count));
      lanes = calloc ((size_t) (count > 0 ? count : 1), sizeof *lanes);
      if (lanes == NULL)
        return gm_error_set (GM_ERR_HOST_NOMEM, 0, NULL,
                             "no host memory for NCCL's streams");
      lane_count = count;
    }
  if (device < 0 || device >= lane_count)
    return gm_error_set (GM_ERR_VALUE, 0, NULL,
                         "device %d is not a CUDA device", device);
  found = &lanes[device];
  if (!found->ready)
    {
      GM_CUDA_CHECK (cudaSetDevice (device));
      GM_CUDA_CHECK (cudaStreamCreateWithFlags (&found->stream,
                                                cudaStreamNonBlocking));
      if (cudaEventCreateWithFlags (&found->queued, cudaEventDisableTiming)
          != cudaSuccess)
        {
          cudaStreamDestroy (found->stream);
          GM_CUDA_CHECK (cudaGetLastError ());
        }
      found->ready = true;
    }
  *lane = found;
done:
  return status;
}

/* Makes LANE's stream wait for all work queued on DEVICE so far, that of
   gpumem's non-blocking streams included (joined to the legacy stream
   first).  */
static gm_status
lane_follow (int device, nccl_lane *lane)
{
  gm_status status = GM_OK;

  if (gm_backend_current->join_streams != NULL)
    {
      status = gm_backend_current->join_streams (device);
      if (status != GM_OK)
        return status;
    }
  GM_CUDA_CHECK (cudaSetDevice (device));
  GM_CUDA_CHECK (cudaEventRecord (lane->queued, cudaStreamLegacy));
  GM_CUDA_CHECK (cudaStreamWaitEvent (lane->stream, lane->queued, 0));
done:
  return status;
}

/* NCCL's type for DTYPE, and how many of it make one element (2 for a
   complex number, reduced as its two parts).  False for the 16-bit
   types (comm-engine.c keeps reductions of them away).  */
static bool
nccl_type (gm_dtype dtype, ncclDataType_t *type, size_t *parts)
{
  *parts = 1;
  switch (dtype)
    {
    case GM_BOOL:
    case GM_UINT8:
      *type = ncclUint8;
      return true;
    case GM_INT8:
      *type = ncclInt8;
      return true;
    case GM_INT32:
      *type = ncclInt32;
      return true;
    case GM_UINT32:
      *type = ncclUint32;
      return true;
    case GM_INT64:
      *type = ncclInt64;
      return true;
    case GM_UINT64:
      *type = ncclUint64;
      return true;
    case GM_FLOAT32:
      *type = ncclFloat32;
      return true;
    case GM_FLOAT64:
      *type = ncclFloat64;
      return true;
    case GM_COMPLEX64:
      *type = ncclFloat32;
      *parts = 2;
      return true;
    case GM_COMPLEX128:
      *type = ncclFloat64;
      *parts = 2;
      return true;
    default:
      return false;
    }
}

/* NumPy's meaning of OP on DTYPE (as comm-mpi.c's mpi_op): on bool arrays,
   stored as 0 and 1, sum and max are an or, min an and.  */
static ncclRedOp_t
nccl_op (gm_dtype dtype, gm_comm_op op)
{
  if (dtype == GM_BOOL)
    return op == GM_COMM_MIN ? ncclMin : ncclMax;
  return op == GM_COMM_MAX ? ncclMax : op == GM_COMM_MIN ? ncclMin : ncclSum;
}

static nccl_group *
group_find (uint64_t key, bool devices_form)
{
  for (int i = 0; i < group_count; i++)
    if (groups[i].key == key && groups[i].devices_form == devices_form)
      return &groups[i];
  return NULL;
}

/* Aborts GROUP's communicators (their work is lost) and forgets it.  */
static void
group_abort (nccl_group *group)
{
  for (int i = 0; i < group->n; i++)
    if (group->comms[i] != NULL)
      nccl_api.CommAbort (group->comms[i]);
  free (group->comms);
  free (group->devices);
  *group = groups[--group_count];
}

/* A new group of N communicators on DEVICES (not yet made), or NULL
   with an error set.  */
static nccl_group *
group_add (uint64_t key, bool devices_form, int n, const int *devices)
{
  nccl_group *group;

  if (group_count == NCCL_MAX_GROUPS)
    {
      gm_error_set (GM_ERR_UNAVAILABLE, 0, NULL,
                    "NCCL: more than %d lists of devices were used in "
                    "collectives", NCCL_MAX_GROUPS);
      return NULL;
    }
  group = &groups[group_count];
  group->comms = calloc ((size_t) n, sizeof *group->comms);
  group->devices = malloc ((size_t) n * sizeof *group->devices);
  if (group->comms == NULL || group->devices == NULL)
    {
      free (group->comms);
      free (group->devices);
      gm_error_set (GM_ERR_HOST_NOMEM, 0, NULL,
                    "no host memory for NCCL communicators");
      return NULL;
    }
  memcpy (group->devices, devices, (size_t) n * sizeof *devices);
  group->key = key;
  group->devices_form = devices_form;
  group->n = n;
  group_count++;
  return group;
}

uint64_t
gm_nccl_device_key (int device)
{
  /* Asked once a device: every collective asks.  */
  static _Atomic uint64_t known[NCCL_MAX_KEYS];
  char bus[64], host[256];
  uint64_t hash = 1469598103934665603u;   /* FNV-1a */

  if (device >= 0 && device < NCCL_MAX_KEYS && known[device] != 0)
    return known[device];
  if (cudaDeviceGetPCIBusId (bus, sizeof bus, device) != cudaSuccess)
    {
      cudaGetLastError ();
      return 0;
    }
  if (gethostname (host, sizeof host) != 0)
    return 0;
  host[sizeof host - 1] = '\0';
  for (const char *p = host; *p; p++)
    hash = (hash ^ (unsigned char) *p) * 1099511628211u;
  hash = (hash ^ '/') * 1099511628211u;
  for (const char *p = bus; *p; p++)
    hash = (hash ^ (unsigned char) *p) * 1099511628211u;
  if (hash == 0)
    hash = 1;
  if (device >= 0 && device < NCCL_MAX_KEYS)
    known[device] = hash;
  return hash;
}

/* The rank form's communicator for LAYOUT, made with the other ranks
   at first need.  On failure *BROKEN says whether the other ranks may
   be left waiting.  */
static gm_status
rank_comm (uint64_t layout, int device, int rank, int size,
           gm_nccl_share_fn share, ncclComm_t *comm, bool *broken)
{
  struct
  {
    int32_t made;
    ncclUniqueId id;
  } shared;
  nccl_group *group = group_find (layout, false);
  gm_status status = GM_OK;
  ncclResult_t result;

  if (group != NULL)
    {
      *comm = group->comms[0];
      return GM_OK;
    }
  memset (&shared, 0, sizeof shared);
  if (rank == 0)
    shared.made = nccl_api.GetUniqueId (&shared.id) == ncclSuccess;
  status = share (&shared, sizeof shared);
  if (status != GM_OK)
    {
      *broken = true;
      return status;
    }
  if (!shared.made)      /* every rank learns it alike */
    return gm_error_set (GM_ERR_UNAVAILABLE, 0, NULL,
                         "NCCL: rank 0 could not make a unique id "
                         "(ncclGetUniqueId failed; NCCL_DEBUG=WARN says why)");
  group = group_add (layout, false, 1, &device);
  if (group == NULL)
    {
      *broken = true;       /* the others go on to ncclCommInitRank */
      return gm_last_error ()->status;
    }
  GM_CUDA_CHECK (cudaSetDevice (device));
  result = nccl_api.CommInitRank (&group->comms[0], size, shared.id, rank);
  if (result != ncclSuccess)
    {
      status = nccl_failed (result, "ncclCommInitRank", NULL);
      goto done;
    }
  *comm = group->comms[0];
done:
  if (status != GM_OK)
    {
      group_abort (group);
      *broken = true;
    }
  return status;
}

/* Queues CALL on COMM and STREAM.  The NCCL call's result, or
   ncclInvalidUsage for a dtype NCCL has none of.  */
static ncclResult_t
enqueue_rank (const gm_comm_call *call, int rank, int size, ncclComm_t comm,
              cudaStream_t stream)
{
  size_t nbytes = call->count * gm_dtypes[call->dtype].itemsize;
  ncclDataType_t type;
  size_t parts;
  ncclResult_t result;

  switch (call->kind)
    {
    case GM_COMM_ALLREDUCE:
      if (!nccl_type (call->dtype, &type, &parts))
        return ncclInvalidUsage;
      return nccl_api.AllReduce (call->data, call->data, call->count * parts, type,
                            nccl_op (call->dtype, call->op), comm, stream);
    case GM_COMM_BCAST:
      return nccl_api.Broadcast (call->data, call->data, nbytes, ncclUint8,
                            call->root, comm, stream);
    case GM_COMM_GATHER:
      /* Row R of the root's result from rank R: grouped point-to-point
         transfers, the root's own row a copy on the same stream.  */
      result = nccl_api.GroupStart ();
      if (result != ncclSuccess)
        return result;
      if (rank == call->root)
        for (int r = 0; r < size && result == ncclSuccess; r++)
          {
            char *row = (char *) call->result + (size_t) r * nbytes;
            if (r == rank)
              {
                cudaError_t err = cudaMemcpyAsync (row, call->data, nbytes,
                                                   cudaMemcpyDeviceToDevice,
                                                   stream);
                /* Recorded through the one mapper, so that a lost
                   context is remembered; NCCL's status names the
                   failure to the caller.  */
                if (err != cudaSuccess)
                  {
                    gm_cuda_status (err, "cudaMemcpyAsync", __FILE__,
                                    __LINE__);
                    result = ncclUnhandledCudaError;
                  }
              }
            else
              result = nccl_api.Recv (row, nbytes, ncclUint8, r, comm, stream);
          }
      else
        result = nccl_api.Send (call->data, nbytes, ncclUint8, call->root, comm,
                           stream);
      {
        ncclResult_t ended = nccl_api.GroupEnd ();
        return result != ncclSuccess ? result : ended;
      }
    default:
      return ncclSuccess;
    }
}

gm_status
gm_nccl_run_rank (const gm_comm_call *call, uint64_t layout, int rank,
                  int size, gm_nccl_share_fn share, bool *broken)
{
  const char *what = gm_comm_kind_name (call->kind);
  size_t nbytes = call->count * gm_dtypes[call->dtype].itemsize;
  gm_status status = GM_OK;
  ncclComm_t comm = NULL;
  nccl_lane *lane = NULL;
  cudaStream_t stream;
  ncclResult_t result;

  *broken = false;
  if (nbytes == 0 || call->kind == GM_COMM_BARRIER)
    return GM_OK;
  pthread_mutex_lock (&engine_lock);
  status = nccl_api_bind ();
  if (status == GM_OK)
    status = rank_comm (layout, call->device, rank, size, share, &comm,
                        broken);
  if (status != GM_OK)
    goto unlock;
  if (call->stream != NULL)
    stream = (cudaStream_t) gm_backend_current->stream_handle (call->stream);
  else
    {
      status = lane_get (call->device, &lane);
      if (status == GM_OK)
        status = lane_follow (call->device, lane);
      stream = lane != NULL ? lane->stream : NULL;
    }
  if (status == GM_OK && cudaSetDevice (call->device) != cudaSuccess)
    status = gm_cuda_status (cudaGetLastError (), "cudaSetDevice",
                             __FILE__, __LINE__);
  /* The other ranks go on into NCCL: from here a failure breaks the
     job.  */
  if (status != GM_OK)
    goto broken;
  result = enqueue_rank (call, rank, size, comm, stream);
  if (result != ncclSuccess)
    {
      status = nccl_failed (result, what, comm);
      goto broken;
    }
  if (call->stream == NULL)
    status = wait_streams (1, &stream, &comm, what, deadline_from_now ());
  if (status == GM_OK)
    goto unlock;
broken:
  *broken = true;
  {
    nccl_group *group = group_find (layout, false);
    if (group != NULL)
      group_abort (group);
  }
unlock:
  pthread_mutex_unlock (&engine_lock);
  return status;
}

gm_status
gm_nccl_run_devices (const gm_comm_devices_call *call)
{
  uint64_t key = 1469598103934665603u;
  size_t itemsize = gm_dtypes[call->dtype].itemsize;
  nccl_group *group;
  cudaStream_t *streams = NULL;
  gm_status status = GM_OK;
  ncclResult_t result = ncclSuccess, ended;
  ncclDataType_t type = ncclUint8;
  size_t parts = 1;
  double deadline;

  if (call->count == 0 || call->n < 2)
    return GM_OK;
  if (call->kind == GM_COMM_ALLREDUCE
      && !nccl_type (call->dtype, &type, &parts))
    return gm_error_set (GM_ERR_TYPE, 0, NULL,
                         "NCCL cannot reduce %s arrays",
                         gm_dtypes[call->dtype].name);
  for (int i = 0; i < call->n; i++)
    key = (key ^ (uint64_t) (call->devices[i] + 1)) * 1099511628211u;
  streams = malloc ((size_t) call->n * sizeof *streams);
  if (streams == NULL)
    return gm_error_set (GM_ERR_HOST_NOMEM, 0, NULL,
                         "no host memory for a collective");
  pthread_mutex_lock (&engine_lock);
  status = nccl_api_bind ();
  if (status != GM_OK)
    goto unlock;
  group = group_find (key, true);
  if (group != NULL && (group->n != call->n
                        || memcmp (group->devices, call->devices,
                                   (size_t) call->n * sizeof (int)) != 0))
    group = NULL;           /* another list with the same hash: rare */
  if (group == NULL)
    {
      group = group_add (key, true, call->n, call->devices);
      if (group == NULL)
        {
          status = gm_last_error ()->status;
          goto unlock;
        }
      result = nccl_api.CommInitAll (group->comms, call->n, call->devices);
      if (result != ncclSuccess)
        {
          status = nccl_failed (result, "ncclCommInitAll", NULL);
          group_abort (group);
          goto unlock;
        }
    }
  for (int i = 0; i < call->n && status == GM_OK; i++)
    {
      nccl_lane *lane;
      status = lane_get (call->devices[i], &lane);
      if (status == GM_OK)
        status = lane_follow (call->devices[i], lane);
      if (status == GM_OK)
        streams[i] = lane->stream;
    }
  if (status != GM_OK)
    goto unlock;
  result = nccl_api.GroupStart ();
  for (int i = 0; i < call->n && result == ncclSuccess; i++)
    result = call->kind == GM_COMM_ALLREDUCE
               ? nccl_api.AllReduce (call->data[i], call->data[i],
                                call->count * parts, type,
                                nccl_op (call->dtype, call->op),
                                group->comms[i], streams[i])
               : nccl_api.Broadcast (call->data[i], call->data[i],
                                call->count * itemsize, ncclUint8,
                                call->root, group->comms[i], streams[i]);
  ended = nccl_api.GroupEnd ();
  if (result == ncclSuccess)
    result = ended;
  deadline = deadline_from_now ();
  if (result != ncclSuccess)
    status = nccl_failed (result, gm_comm_kind_name (call->kind),
                          group->comms[0]);
  else
    status = wait_streams (call->n, streams, group->comms,
                           gm_comm_kind_name (call->kind), deadline);
  if (status != GM_OK)
    group_abort (group);
unlock:
  pthread_mutex_unlock (&engine_lock);
  free (streams);
  return status;
}

void
gm_nccl_shutdown (void)
{
  pthread_mutex_lock (&engine_lock);
  while (group_count > 0)
    {
      nccl_group *group = &groups[group_count - 1];
      for (int i = 0; i < group->n; i++)
        {
          ncclComm_t comm = group->comms[i];
          /* The rank form's communicators are aborted, which is local:
             finalizing one waits for the other ranks to finalize too,
             and they may end minutes later, or have ended by
             MPI_Abort.  Every collective without a stream was waited
             for; one queued on a stream the script never waited for is
             cut short, as the process's end would cut it.  */
          if (comm != NULL && !group->devices_form)
            nccl_api.CommAbort (comm);
          else if (comm != NULL)
            nccl_api.CommDestroy (comm);
        }
      free (group->comms);
      free (group->devices);
      group_count--;
    }
  for (int d = 0; d < lane_count; d++)
    if (lanes[d].ready)
      {
        cudaEventDestroy (lanes[d].queued);
        cudaStreamDestroy (lanes[d].stream);
      }
  free (lanes);
  lanes = NULL;
  lane_count = 0;
  pthread_mutex_unlock (&engine_lock);
}


bool
gm_nccl_describe (int *version, char *path, size_t size, const char **how)
{
  gm_status status;

  pthread_mutex_lock (&engine_lock);
  status = nccl_api_bind ();
  pthread_mutex_unlock (&engine_lock);
  *version = 0;
  *how = NULL;
  if (size > 0)
    path[0] = '\0';
  if (status != GM_OK)
    return false;
  if (nccl_api.GetVersion (version) != ncclSuccess)
    *version = 0;
  gm_nccl_opened (path, size, how);
  return true;
}
