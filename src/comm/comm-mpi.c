/* comm-mpi.c -- MPI: starting and ending it, the ranks' agreement
   exchanged over it, and the collectives whose data it moves (comm-mpi.h).

   MPI starts only when an MPI launcher started the program (its
   environment names a rank), because a singleton MPI_Init on a machine
   without a launcher is slow or fails; otherwise the job is this one
   process and comm.c runs every collective locally.  Where MPI is
   running already (mpi4py imported before gpumem, an application that
   embeds gpumem) gpumem joins it instead, at the thread level it was
   given, and leaves ending it to whoever started it.

   Thread level: gpumem asks for MPI_THREAD_MULTIPLE, as mpi4py does by
   default, so that a script's own MPI calls (mpi4py's, which also run
   without the GIL) may overlap gpumem's from another thread whichever
   of the two starts MPI.  gpumem itself needs only SERIALIZED: the
   Python layer releases the GIL around every collective, so two Python
   threads may enter this file at once, and one mutex here keeps
   gpumem's MPI calls to one thread at a time.  Below SERIALIZED (an MPI
   started by others at FUNNELED or SINGLE) rank 0 prints a warning:
   gpumem.comm is then safe from the main thread alone.

   gpumem's collectives and messages run on communicators of its own,
   duplicates of MPI_COMM_WORLD, so that they never match the script's
   own collectives on the world.  Whoever ends MPI, gpumem releases them
   first: MPI_Finalize deletes the attributes of MPI_COMM_SELF before it
   ends anything else, and one of them is gpumem's (release_on_finalize);
   a collective after that raises instead of running.

   Every collective starts with one small MPI_Allgather of what each rank
   passes (comm-agree.h), so that a rank with other sizes or dtypes,
   another collective or a refused argument makes every rank fail alike
   instead of leaving some waiting for ever or reading past a buffer.  */

#define _POSIX_C_SOURCE 200809L
#include "config.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>
#ifdef HAVE_MPI_EXT_H
#include <mpi-ext.h>
#endif

#include "comm-agree.h"
#include "comm-engine.h"
#include "comm-windows.h"
#include "comm-mpi.h"
#include "comm-mpi-types.h"
#include "comm-stage.h"
#ifdef GM_HAVE_NCCL
#include "comm-nccl.h"
#endif
#include "comm-watchdog.h"
#include "config-facts.h"

/* Data moves in chunks of at most this many bytes (GPUMEM_MPI_CHUNK
   changes it, for tests): MPI counts are ints, and staging through
   pinned memory then needs no more than this.  */
#define COMM_CHUNK ((size_t) 64 << 20)

/* gpumem called MPI_Init_thread, and calls MPI_Finalize.  */
static bool mpi_started;
/* gpumem's use of MPI: from gm_mpi_start until MPI ends (or
   gm_mpi_finalize).  */
static bool mpi_in_use;
/* The thread level MPI gave, and who started MPI.  */
static int thread_level = MPI_THREAD_SINGLE;
static bool mpi_joined;
/* gpumem's collectives run on this duplicate of MPI_COMM_WORLD, and the
   messages of gm_mpi_send and gm_mpi_try_recv travel on that one, apart
   from any the script's own MPI code sends on MPI_COMM_WORLD.  */
static MPI_Comm collectives = MPI_COMM_NULL;
static MPI_Comm messages = MPI_COMM_NULL;
/* The key of gpumem's attribute on MPI_COMM_SELF.  */
static int finalize_key = MPI_KEYVAL_INVALID;
static bool staging_forced;
static size_t chunk_bytes = COMM_CHUNK;
static pthread_mutex_t mpi_lock = PTHREAD_MUTEX_INITIALIZER;

static void fatal (const char *what);
static gm_status ipc_allgather (const void *mine, void *all, size_t nbytes);
static gm_status ipc_barrier (void);
static const gm_comm_ipc_net ipc_net = {ipc_allgather, ipc_barrier};

/* GPUMEM_MPI_CUDA_AWARE, read before MPI starts: -1 unset, else 1 or 0
   (gm_comm_stage_settings).  */
static int aware_env = -1;

/* Whether MPI reads and writes device addresses: GPUMEM_MPI_CUDA_AWARE
   when set, else what the library says of itself.  False when set also
   stages the host backend's memory, so that tests without a GPU run the
   staging code.  */
static bool
query_cuda_aware (void)
{
  if (aware_env >= 0)
    {
      staging_forced = aware_env == 0;
      return aware_env == 1;
    }
#if defined(MPIX_CUDA_AWARE_SUPPORT)
  return MPIX_Query_cuda_support () == 1;
#else
  return false;
#endif
}

/* Every rank's node (gm_comm_job_set_nodes) from LEADER, this node's
   number.  */
static gm_status
learn_nodes (int leader, int size)
{
  gm_status status = GM_ERR_UNAVAILABLE;
  int *node_of = malloc (sizeof *node_of * (size_t) size);

  if (node_of == NULL)
    return GM_ERR_HOST_NOMEM;
  if (MPI_Allgather (&leader, 1, MPI_INT, node_of, 1, MPI_INT, collectives)
      == MPI_SUCCESS)
    status = gm_comm_job_set_nodes (node_of, size);
  free (node_of);
  return status;
}

/* Releases what gpumem holds of MPI, while MPI still runs; once.  */
static void
release (void)
{
  pthread_mutex_lock (&mpi_lock);
  if (!mpi_in_use)
    {
      pthread_mutex_unlock (&mpi_lock);
      return;
    }
  gm_comm_staging_release ();
  gm_comm_ipc_shutdown (&ipc_net);
  if (messages != MPI_COMM_NULL)
    MPI_Comm_free (&messages);
  if (collectives != MPI_COMM_NULL)
    MPI_Comm_free (&collectives);
  mpi_in_use = false;
  pthread_mutex_unlock (&mpi_lock);
}

/* The delete function of gpumem's attribute on MPI_COMM_SELF, which
   MPI_Finalize calls first, whoever calls it (mpi4py at the
   interpreter's exit, the script, gm_mpi_finalize).  */
static int
release_on_finalize (MPI_Comm comm, int key, void *value, void *extra)
{
  (void) comm;
  (void) key;
  (void) value;
  (void) extra;
  release ();
  return MPI_SUCCESS;
}

/* The thread level LEVEL's name ("MPI_THREAD_MULTIPLE").  */
static const char *
thread_level_name (int level)
{
  if (level == MPI_THREAD_MULTIPLE)
    return "MPI_THREAD_MULTIPLE";
  if (level == MPI_THREAD_SERIALIZED)
    return "MPI_THREAD_SERIALIZED";
  if (level == MPI_THREAD_FUNNELED)
    return "MPI_THREAD_FUNNELED";
  return "MPI_THREAD_SINGLE";
}

gm_status
gm_mpi_start (void)
{
  MPI_Comm node;
  int provided = MPI_THREAD_SINGLE, initialized = 0, finalized = 0;
  int rank = 0, size = 1, node_rank = 0, node_size = 1, leader;
  gm_status status;
  bool start, forbidden;

  if (mpi_in_use)
    return GM_OK;
  if (gm_comm_launched (&start, &forbidden) != GM_OK)
    return GM_ERR_UNAVAILABLE;
  MPI_Initialized (&initialized);
  MPI_Finalized (&finalized);
  /* MPI running already is joined, unless GPUMEM_MPI=0 says no.  */
  if (forbidden || (!start && !initialized))
    return GM_OK;
  if (finalized)
    return gm_error_set (GM_ERR_UNAVAILABLE, 0, NULL,
                         "MPI was finalized before gpumem started, and "
                         "cannot start again: import gpumem before "
                         "MPI.Finalize()");
  if (gm_comm_stage_settings (COMM_CHUNK, &chunk_bytes, &aware_env) != GM_OK)
    return GM_ERR_UNAVAILABLE;
  if (initialized)
    {
      mpi_joined = true;
      MPI_Query_thread (&provided);
    }
  else if (MPI_Init_thread (NULL, NULL, MPI_THREAD_MULTIPLE, &provided)
           != MPI_SUCCESS)
    return gm_error_set (GM_ERR_UNAVAILABLE, 0, NULL,
                         "MPI_Init_thread failed");
  else
    mpi_started = true;
  thread_level = provided;
  if (MPI_Comm_dup (MPI_COMM_WORLD, &collectives) != MPI_SUCCESS)
    return gm_error_set (GM_ERR_UNAVAILABLE, 0, NULL,
                         "MPI_Comm_dup of MPI_COMM_WORLD failed");
  mpi_in_use = true;
  if (MPI_Comm_create_keyval (MPI_COMM_NULL_COPY_FN, release_on_finalize,
                              &finalize_key, NULL) != MPI_SUCCESS
      || MPI_Comm_set_attr (MPI_COMM_SELF, finalize_key, NULL)
         != MPI_SUCCESS)
    return gm_error_set (GM_ERR_UNAVAILABLE, 0, NULL,
                         "MPI could not register gpumem's release at "
                         "MPI_Finalize");
  MPI_Comm_rank (collectives, &rank);
  MPI_Comm_size (collectives, &size);
  /* The ranks that share this node's memory share its devices; a
     node's number is its lowest world rank.  */
  leader = rank;
  if (MPI_Comm_split_type (collectives, MPI_COMM_TYPE_SHARED, rank,
                           MPI_INFO_NULL, &node) == MPI_SUCCESS)
    {
      MPI_Comm_rank (node, &node_rank);
      MPI_Comm_size (node, &node_size);
      MPI_Allreduce (&rank, &leader, 1, MPI_INT, MPI_MIN, node);
      MPI_Comm_free (&node);
    }
  gm_comm_job_set (rank, size, node_rank, node_size, query_cuda_aware ());
  status = learn_nodes (leader, size);
  if (status == GM_ERR_VALUE)       /* a bad GPUMEM_TEST_RANKS_PER_NODE */
    return GM_ERR_UNAVAILABLE;
  if (status != GM_OK
      || MPI_Comm_dup (collectives, &messages) != MPI_SUCCESS)
    return gm_error_set (GM_ERR_UNAVAILABLE, 0, NULL,
                         "MPI could not tell which node every rank runs "
                         "on");
  if (size > 1
      && gm_comm_watchdog_start (gm_comm_timeout_ms (), fatal) != GM_OK)
    return GM_ERR_UNAVAILABLE;
  if (provided < MPI_THREAD_SERIALIZED && rank == 0)
    fprintf (stderr, "gpumem: MPI runs at %s only; call gpumem.comm from "
             "the main thread alone\n", thread_level_name (provided));
  return GM_OK;
}

void
gm_mpi_finalize (int status)
{
  int finalized = 0;

  if (!mpi_started && !mpi_in_use)
    return;
  MPI_Finalized (&finalized);
  if (status != 0 && gm_comm_size () > 1 && !finalized)
    {
      fflush (stdout);
      fprintf (stderr, "gpumem: rank %d failed (exit %d); aborting the job\n",
               gm_comm_rank (), status);
      fflush (stderr);
      MPI_Abort (MPI_COMM_WORLD, status);
    }
  /* MPI started by others goes on without gpumem: what gpumem holds is
     released now, and its attribute's delete function does nothing
     then.  */
  if (!finalized)
    release ();
  if (mpi_started && !finalized)
    MPI_Finalize ();
  mpi_started = false;
}

/* Ends the whole job after printing WHAT: for the rare failures (no
   host memory) after which this rank cannot stay in step with the
   others.  Does not return.  */
static void
fatal (const char *what)
{
  fflush (stdout);
  fprintf (stderr, "gpumem: rank %d: %s; aborting the job\n", gm_comm_rank (),
           what);
  fflush (stderr);
  MPI_Abort (MPI_COMM_WORLD, 1);
  abort ();
}

#ifdef GM_HAVE_NCCL
/* Copies NBYTES at BYTES from rank 0 to every rank: how the NCCL
   engine shares its unique id (built with NCCL only, its one user).  */
static gm_status
share_bytes (void *bytes, size_t nbytes)
{
  if (MPI_Bcast (bytes, (int) nbytes, MPI_BYTE, 0, collectives)
      != MPI_SUCCESS)
    return gm_error_set (GM_ERR_UNAVAILABLE, 0, NULL,
                         "MPI_Bcast of NCCL's unique id failed");
  return GM_OK;
}
#endif

/* The exchanges of the shared windows' engine (comm-windows.h), under
   mpi_lock as every MPI call here.  */
static gm_status
ipc_allgather (const void *mine, void *all, size_t nbytes)
{
  if (MPI_Allgather (mine != NULL ? mine : MPI_IN_PLACE, (int) nbytes,
                     MPI_BYTE, all, (int) nbytes, MPI_BYTE, collectives)
      != MPI_SUCCESS)
    return gm_error_set (GM_ERR_UNAVAILABLE, 0, NULL,
                         "MPI_Allgather of the ranks' windows failed");
  return GM_OK;
}

static gm_status
ipc_barrier (void)
{
  if (MPI_Barrier (collectives) != MPI_SUCCESS)
    return gm_error_set (GM_ERR_UNAVAILABLE, 0, NULL, "MPI_Barrier failed");
  return GM_OK;
}

/* CALL's communicator, this rank in it and its size: gpumem's own
   (the job's world), or the script's (CALL->group).  */
static MPI_Comm
call_comm (const gm_comm_call *call)
{
  return call->group != NULL ? MPI_Comm_f2c (call->group->handle)
                             : collectives;
}

static int
call_rank (const gm_comm_call *call)
{
  return call->group != NULL ? call->group->rank : gm_comm_rank ();
}

static int
call_size (const gm_comm_call *call)
{
  return call->group != NULL ? call->group->size : gm_comm_size ();
}

gm_status
gm_mpi_group_open (int handle, gm_comm_group *group)
{
  MPI_Comm comm;
  int inter = 0, finalized = 0;

  MPI_Finalized (&finalized);
  if (!mpi_in_use || finalized)
    return gm_error_set (GM_ERR_UNAVAILABLE, 0, NULL,
                         "gpumem does not use MPI here (no MPI launcher "
                         "started this process and MPI was not running when "
                         "gpumem started, or it has been finalized): a "
                         "communicator cannot be used");
  comm = MPI_Comm_f2c (handle);
  if (comm == MPI_COMM_NULL)
    return gm_error_set (GM_ERR_VALUE, 0, NULL, "comm is MPI_COMM_NULL, "
                         "or no communicator (this process is not in it)");
  if (MPI_Comm_test_inter (comm, &inter) != MPI_SUCCESS || inter)
    return gm_error_set (GM_ERR_VALUE, 0, NULL, "comm is an "
                         "intercommunicator; collectives take an "
                         "intracommunicator");
  group->handle = handle;
  group->net = NULL;
  MPI_Comm_rank (comm, &group->rank);
  MPI_Comm_size (comm, &group->size);
  return GM_OK;
}

/* Exchanges CALL's description with every rank and compares them; then
   chooses the engine (gm_comm_choose_engine sets *LAYOUT and
   *IPC_KEY).  A communicator of the script's is MPI's alone: NCCL's
   communicators and the shared windows are the job's.  */
static gm_status
agree (const gm_comm_call *call, uint64_t *layout, uint64_t *ipc_key)
{
  gm_comm_desc mine, *all;
  gm_status status;

  gm_comm_describe (call, chunk_bytes, &mine);
  all = malloc (sizeof *all * (size_t) call_size (call));
  if (all == NULL)
    fatal ("out of host memory for the ranks' descriptions");
  MPI_Allgather (&mine, GM_COMM_DESC_WORDS, MPI_INT64_T, all,
                 GM_COMM_DESC_WORDS,
                 MPI_INT64_T, call_comm (call));
  status = gm_comm_compare (all, call_size (call));
  *layout = 0;
  *ipc_key = 0;
  if (status == GM_OK && call->group == NULL)
    status = gm_comm_choose_engine (all, gm_comm_size (), layout, ipc_key);
  free (all);
  return status;
}

/* Whether MPI must see DEVICE memory through host copies.  */
static bool
needs_staging (void)
{
  return staging_forced
         || (gm_backend_current->mpi_needs_staging && !gm_comm_cuda_aware ());
}

/* The chunks of a collective that works on CALL's array in place
   (gm_comm_chunk_fn).  MPI's errors end the job by its own handler.  */
static gm_status
bcast_chunk (void *ctx, const gm_comm_call *call, void *buf, size_t n)
{
  (void) ctx;
  MPI_Bcast (buf, (int) n, gm_mpi_type (call->dtype), call->root,
             call_comm (call));
  return GM_OK;
}

static gm_status
allreduce_chunk (void *ctx, const gm_comm_call *call, void *buf, size_t n)
{
  (void) ctx;
  MPI_Allreduce (MPI_IN_PLACE, buf, (int) n, gm_mpi_type (call->dtype),
                 gm_mpi_op (call->dtype, call->op), call_comm (call));
  return GM_OK;
}

/* Runs FN over CALL's array in chunks, ending the job when the host has
   no memory left to stage through.  */
static gm_status
run_chunks (const gm_comm_call *call, bool staged, bool stage_in,
            bool stage_out, gm_comm_chunk_fn fn)
{
  bool broken;
  gm_status status = gm_comm_run_chunks (call, chunk_bytes, staged, stage_in,
                                         stage_out, fn, NULL, &broken);

  if (broken)
    fatal (gm_last_error ()->message);
  return status;
}

static size_t
min_size (size_t a, size_t b)
{
  return a < b ? a : b;
}

/* One chunk of a gather staged through host memory
   (gm_comm_gather_fn).  */
static gm_status
gather_chunk (void *ctx, const gm_comm_call *call, void *host, size_t nbytes,
              bool root)
{
  (void) ctx;
  MPI_Gather (root ? MPI_IN_PLACE : host, (int) nbytes, MPI_BYTE,
              root ? host : NULL, (int) nbytes, MPI_BYTE, call->root,
              call_comm (call));
  return GM_OK;
}

/* Gathers every rank's array into the root's result, row R from rank R,
   in chunks: chunk C of every rank's array at once; through host memory
   where STAGED (comm-stage.h), else straight into the result.  */
static gm_status
run_gather (const gm_comm_call *call, bool staged)
{
  size_t itemsize = gm_dtypes[call->dtype].itemsize;
  MPI_Comm comm = call_comm (call);
  size_t chunk = gm_comm_gather_chunk (chunk_bytes, call_size (call),
                                       itemsize);
  MPI_Datatype type = gm_mpi_type (call->dtype);
  bool root = call_rank (call) == call->root;

  if (staged)
    {
      bool broken;
      gm_status status = gm_comm_run_gather (call, call_rank (call),
                                             call_size (call), chunk_bytes,
                                             gather_chunk, NULL, &broken);
      if (broken)
        fatal (gm_last_error ()->message);
      return status;
    }
  for (size_t off = 0; off < call->count; off += chunk)
    {
      size_t n = min_size (call->count - off, chunk);
      char *data = (char *) call->data + off * itemsize;

      if (root)
        {
          /* Each rank's chunk lands at its place in the result: a
             receive type of N elements whose extent is a whole row.  */
          MPI_Datatype row, placed;
          MPI_Type_contiguous ((int) n, type, &row);
          MPI_Type_create_resized (row, 0,
                                   (MPI_Aint) (call->count * itemsize),
                                   &placed);
          MPI_Type_commit (&placed);
          MPI_Gather (data, (int) n, type,
                      (char *) call->result + off * itemsize, 1, placed,
                      call->root, comm);
          MPI_Type_free (&placed);
          MPI_Type_free (&row);
        }
      else
        MPI_Gather (data, (int) n, type, NULL, 0, type, call->root, comm);
    }
  return GM_OK;
}

gm_status
gm_mpi_run (const gm_comm_call *call)
{
  gm_status status, moved;
  uint64_t layout, ipc_key;
  bool staged;

  pthread_mutex_lock (&mpi_lock);
  if (!mpi_in_use)
    {
      pthread_mutex_unlock (&mpi_lock);
      return gm_error_set (GM_ERR_UNAVAILABLE, 0, NULL,
                           "MPI has been finalized: gpumem.comm's "
                           "collectives cannot run after MPI.Finalize()");
    }
  gm_comm_watchdog_arm (gm_comm_kind_name (call->kind));
  status = agree (call, &layout, &ipc_key);
  if (status != GM_OK || call->kind == GM_COMM_BARRIER)
    goto done;
#ifdef GM_HAVE_NCCL
  if (layout != 0)
    {
      bool broken;
      status = gm_nccl_run_rank (call, layout, gm_comm_rank (),
                                 gm_comm_size (), share_bytes, &broken);
      if (broken)
        fatal (gm_last_error ()->message);
      goto done;
    }
#endif
  /* MPI reads the memory behind the device's back: the work queued on
     it must be done first.  */
  status = gm_backend_current->device_synchronize (call->device);
  if (ipc_key != 0)
    {
      moved = gm_comm_ipc_run (call, ipc_key, chunk_bytes, &ipc_net);
      if (status == GM_OK)
        status = moved;
      goto done;
    }
  staged = needs_staging ();
  /* A failed synchronize is reported after the collective, which still
     meets the other ranks.  */
  if (call->kind == GM_COMM_BCAST)
    {
      bool root = call_rank (call) == call->root;

      moved = run_chunks (call, staged, root, !root, bcast_chunk);
    }
  else if (call->kind == GM_COMM_ALLREDUCE)
    moved = run_chunks (call, staged, true, true, allreduce_chunk);
  else
    moved = run_gather (call, staged);
  if (status == GM_OK)
    status = moved;
done:
  gm_comm_watchdog_disarm ();
  pthread_mutex_unlock (&mpi_lock);
  return status;
}


gm_status
gm_mpi_send (int dest, int tag, const void *bytes, size_t nbytes)
{
  int rc;

  pthread_mutex_lock (&mpi_lock);
  rc = !mpi_in_use ? MPI_ERR_COMM
       : MPI_Send (bytes, (int) nbytes, MPI_BYTE, dest, tag, messages);
  pthread_mutex_unlock (&mpi_lock);
  if (rc != MPI_SUCCESS)
    return gm_error_set (GM_ERR_UNAVAILABLE, 0, NULL,
                         "MPI_Send to rank %d failed", dest);
  return GM_OK;
}

gm_status
gm_mpi_try_recv (int source, int tag, void *buf, size_t cap, size_t *nbytes)
{
  MPI_Message message;
  MPI_Status status;
  int found = 0, count = 0, rc;

  pthread_mutex_lock (&mpi_lock);
  rc = !mpi_in_use ? MPI_ERR_COMM
       : MPI_Improbe (source, tag, messages, &found, &message, &status);
  if (rc == MPI_SUCCESS && found)
    {
      MPI_Get_count (&status, MPI_BYTE, &count);
      if ((size_t) count <= cap)
        rc = MPI_Mrecv (buf, count, MPI_BYTE, &message, MPI_STATUS_IGNORE);
      else
        {
          /* Not one of gm_mpi_send's: taken off the queue, refused.  */
          char *sink = malloc ((size_t) count);
          rc = MPI_Mrecv (sink, count, MPI_BYTE, &message,
                          MPI_STATUS_IGNORE);
          free (sink);
          count = -1;
        }
    }
  pthread_mutex_unlock (&mpi_lock);
  if (rc != MPI_SUCCESS)
    return gm_error_set (GM_ERR_UNAVAILABLE, 0, NULL,
                         "receiving a message from rank %d failed", source);
  if (!found)
    return GM_ERR_NOT_READY;
  if (count < 0)
    return gm_error_set (GM_ERR_VALUE, 0, NULL,
                         "rank %d sent a message longer than %zu bytes",
                         source, cap);
  *nbytes = (size_t) count;
  return GM_OK;
}

void
gm_mpi_describe (gm_comm_facts *facts)
{
  int len = 0;

  MPI_Get_version (&facts->mpi_major, &facts->mpi_minor);
  {
    char text[MPI_MAX_LIBRARY_VERSION_STRING];

    MPI_Get_library_version (text, &len);
    text[len > 0 && len < MPI_MAX_LIBRARY_VERSION_STRING ? len : 0] = '\0';
    text[strcspn (text, "\n")] = '\0';
    snprintf (facts->mpi_library, sizeof facts->mpi_library, "%s", text);
  }
  gm_loaded_from ((const void *) (uintptr_t) MPI_Init, facts->mpi_path,
                  sizeof facts->mpi_path);
  facts->mpi_in_use = mpi_in_use;
  facts->mpi_joined = mpi_joined;
  facts->thread_level = mpi_in_use ? thread_level_name (thread_level) : "";
}
