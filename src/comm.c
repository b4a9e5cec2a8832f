/* comm.c -- the processes of an MPI job working together (gpumem.comm's
   C layer).

   MPI starts only when an MPI launcher started the program (its
   environment names a rank), because a singleton MPI_Init on a machine
   without a launcher is slow or fails; otherwise the job is this one
   process and every collective is local.

   Thread level: MPI_THREAD_SERIALIZED.  The Python layer releases the
   GIL around every collective, so two Python threads may enter this file
   at once; one mutex here keeps MPI to one thread at a time, which is
   what SERIALIZED asks of us, without the locking cost THREAD_MULTIPLE
   puts on every MPI call.  FUNNELED would not do: a Python thread other
   than the main one may call gpumem.comm.

   Every collective starts with one small MPI_Allgather of what each rank
   passes, so that a rank with other sizes or dtypes, another collective
   or a refused argument makes every rank fail alike instead of leaving
   some waiting for ever or reading past a buffer.  */

#define _POSIX_C_SOURCE 200809L
#include "config.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef GM_HAVE_MPI
#include <mpi.h>
#ifdef HAVE_MPI_EXT_H
#include <mpi-ext.h>
#endif
#endif

#include "comm.h"
#include "comm-engine.h"
#ifdef GM_HAVE_NCCL
#include "comm-nccl.h"
#endif
#include "comm-watchdog.h"

/* Data moves in chunks of at most this many bytes (GPUMEM_MPI_CHUNK
   changes it, for tests): MPI counts are ints, and staging through
   pinned memory then needs no more than this.  */
#define COMM_CHUNK ((size_t) 64 << 20)
/* A gather's root stages one chunk from every rank; chunks shrink with
   the job to keep that near the chunk size, down to this.  */
#define COMM_MIN_GATHER_CHUNK ((size_t) 1 << 20)
#define COMM_DESC_DIMS 4

static int world_rank, world_size = 1;
static int local_rank, local_size = 1;
static bool cuda_aware;

const char *
gm_comm_kind_name (gm_comm_kind kind)
{
  switch (kind)
    {
    case GM_COMM_BARRIER:
      return "barrier";
    case GM_COMM_BCAST:
      return "bcast";
    case GM_COMM_ALLREDUCE:
      return "allreduce";
    case GM_COMM_GATHER:
      return "gather";
    }
  return "?";
}

const char *
gm_comm_op_name (gm_comm_op op)
{
  switch (op)
    {
    case GM_COMM_SUM:
      return "sum";
    case GM_COMM_MAX:
      return "max";
    case GM_COMM_MIN:
      return "min";
    }
  return "?";
}

gm_status
gm_comm_op_check (gm_dtype dtype, gm_comm_op op)
{
  if (dtype == GM_FLOAT16)
    return gm_error_set (GM_ERR_TYPE, 0, NULL,
                         "allreduce cannot reduce float16 arrays: MPI has no "
                         "float16 type (bcast and gather move them); use "
                         "float32");
  if (gm_dtypes[dtype].kind == 'c' && op != GM_COMM_SUM)
    return gm_error_set (GM_ERR_TYPE, 0, NULL,
                         "allreduce op='%s' is not defined for %s: complex "
                         "numbers have no order (op='sum' is)",
                         gm_comm_op_name (op), gm_dtypes[dtype].name);
  return GM_OK;
}

int
gm_comm_rank (void)
{
  return world_rank;
}

int
gm_comm_size (void)
{
  return world_size;
}

int
gm_comm_local_rank (void)
{
  return local_rank;
}

int
gm_comm_local_size (void)
{
  return local_size;
}

bool
gm_comm_cuda_aware (void)
{
  return cuda_aware;
}

int
gm_comm_default_device (void)
{
  int count = gm_backend_current ? gm_backend_current->device_count () : 0;
  return count > 0 ? local_rank % count : 0;
}

/* The local part of a collective in a job of one process.  */
static gm_status
run_alone (const gm_comm_call *call)
{
  size_t nbytes = call->count * gm_dtypes[call->dtype].itemsize;

  if (call->kind != GM_COMM_GATHER || nbytes == 0)
    return GM_OK;
  return gm_backend_current->copy (call->result, call->device, call->data,
                                   call->device, nbytes, call->stream);
}

#ifndef GM_HAVE_MPI

gm_status
gm_comm_init (void)
{
  return gm_comm_engine_init ();
}

int
gm_comm_finalize (int status)
{
#ifdef GM_HAVE_NCCL
  gm_nccl_shutdown ();
#endif
  return status;
}

gm_status
gm_comm_run (const gm_comm_call *call)
{
  if (call->refused)
    return gm_error_set (GM_ERR_VALUE, 0, NULL, "arguments refused");
  return run_alone (call);
}

#else /* GM_HAVE_MPI */

static bool mpi_started;
static bool staging_forced;
static size_t chunk_bytes = COMM_CHUNK;
static pthread_mutex_t mpi_lock = PTHREAD_MUTEX_INITIALIZER;
/* Host memory to stage device data through, kept between collectives.  */
static char *staging;
static size_t staging_bytes;
static bool staging_pinned;

static void staging_release (void);
static void fatal (const char *what);

/* Whether to start MPI, in *YES: GPUMEM_MPI when set (gm_env_bool's
   spellings; any other value is an error), else whether an MPI launcher
   started this process.  */
static gm_status
launched (bool *yes)
{
  static const char *const names[] = {
    "OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"
  };
  const char *force = getenv ("GPUMEM_MPI");

  if (force != NULL && *force != '\0')
    return gm_env_bool ("GPUMEM_MPI", false, yes);
  *yes = false;
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (getenv (names[i]) != NULL)
      *yes = true;
  return GM_OK;
}

/* GPUMEM_MPI_CUDA_AWARE, read before MPI starts: whether it is set, and
   its value.  */
static bool aware_forced, aware_setting;

/* Whether MPI reads and writes device addresses: GPUMEM_MPI_CUDA_AWARE
   when set, else what the library says of itself.  False when set also
   stages the host backend's memory, so that tests without a GPU run the
   staging code.  */
static bool
query_cuda_aware (void)
{
  if (aware_forced)
    {
      staging_forced = !aware_setting;
      return aware_setting;
    }
#if defined(MPIX_CUDA_AWARE_SUPPORT)
  return MPIX_Query_cuda_support () == 1;
#else
  return false;
#endif
}

gm_status
gm_comm_init (void)
{
  MPI_Comm node;
  int provided = MPI_THREAD_SINGLE;
  const char *aware_env = getenv ("GPUMEM_MPI_CUDA_AWARE");
  bool start;

  if (gm_comm_engine_init () != GM_OK)
    return GM_ERR_UNAVAILABLE;
  if (launched (&start) != GM_OK)
    return GM_ERR_UNAVAILABLE;
  if (!start)
    return GM_OK;
  aware_forced = aware_env != NULL && *aware_env != '\0';
  if (gm_env_bool ("GPUMEM_MPI_CUDA_AWARE", false, &aware_setting) != GM_OK)
    return GM_ERR_UNAVAILABLE;
  if (gm_env_size ("GPUMEM_MPI_CHUNK", COMM_CHUNK, 16, COMM_CHUNK,
                   &chunk_bytes) != GM_OK)
    return GM_ERR_UNAVAILABLE;
  if (MPI_Init_thread (NULL, NULL, MPI_THREAD_SERIALIZED, &provided)
      != MPI_SUCCESS)
    return gm_error_set (GM_ERR_UNAVAILABLE, 0, NULL,
                         "MPI_Init_thread failed");
  mpi_started = true;
  MPI_Comm_rank (MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size (MPI_COMM_WORLD, &world_size);
  /* The ranks that share this node's memory share its devices.  */
  if (MPI_Comm_split_type (MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, world_rank,
                           MPI_INFO_NULL, &node) == MPI_SUCCESS)
    {
      MPI_Comm_rank (node, &local_rank);
      MPI_Comm_size (node, &local_size);
      MPI_Comm_free (&node);
    }
  cuda_aware = query_cuda_aware ();
  if (world_size > 1
      && gm_comm_watchdog_start (gm_comm_timeout_ms (), fatal) != GM_OK)
    return GM_ERR_UNAVAILABLE;
  if (provided < MPI_THREAD_SERIALIZED && world_rank == 0)
    fprintf (stderr, "gpumem: the MPI library offers thread level %d only; "
             "call gpumem.comm from the main thread alone\n", provided);
  return GM_OK;
}

int
gm_comm_finalize (int status)
{
  if (!mpi_started || status == 0 || world_size == 1)
    {
#ifdef GM_HAVE_NCCL
      gm_nccl_shutdown ();
#endif
    }
  if (!mpi_started)
    return status;
  if (status != 0 && world_size > 1)
    {
      fflush (stdout);
      fprintf (stderr, "gpumem: rank %d failed (exit %d); aborting the job\n",
               world_rank, status);
      fflush (stderr);
      MPI_Abort (MPI_COMM_WORLD, status);
    }
  staging_release ();
  MPI_Finalize ();
  mpi_started = false;
  return status;
}

/* What one rank passes, as every rank compares it.  */
typedef struct comm_desc
{
  int64_t kind, refused, op, root, dtype, ndim, count, shape_hash, chunk;
  int64_t dims[COMM_DESC_DIMS];
  /* GPUMEM_COMM, whether NCCL can move this rank's part (a
     gm_nccl_verdict) and the GPU it would use (gm_nccl_device_key).  */
  int64_t engine, nccl, device_key;
} comm_desc;

#define COMM_DESC_WORDS ((int) (sizeof (comm_desc) / sizeof (int64_t)))

static void
describe (const gm_comm_call *call, comm_desc *desc)
{
  uint64_t hash = 1469598103934665603u;   /* FNV-1a */

  memset (desc, 0, sizeof *desc);
  desc->kind = call->kind;
  desc->refused = call->refused;
  desc->chunk = (int64_t) chunk_bytes;
  desc->engine = gm_comm_engine_setting ();
  if (call->refused || call->kind == GM_COMM_BARRIER)
    return;
  desc->nccl = gm_nccl_verdict_for (call->kind, call->dtype, call->op);
#ifdef GM_HAVE_NCCL
  if (desc->nccl == GM_NCCL_OK)
    desc->device_key = (int64_t) gm_nccl_device_key (call->device);
#endif
  desc->op = call->kind == GM_COMM_ALLREDUCE ? (int64_t) call->op : 0;
  desc->root = call->kind == GM_COMM_ALLREDUCE ? 0 : call->root;
  desc->dtype = call->dtype;
  desc->ndim = call->ndim;
  desc->count = (int64_t) call->count;
  for (int i = 0; i < call->ndim; i++)
    {
      hash = (hash ^ (uint64_t) call->shape[i]) * 1099511628211u;
      if (i < COMM_DESC_DIMS)
        desc->dims[i] = call->shape[i];
    }
  desc->shape_hash = (int64_t) hash;
}

/* Writes "(4, 3)" or "a 6-dimensional shape" for DESC into BUF.  */
static void
format_shape (const comm_desc *desc, char *buf, size_t size)
{
  size_t used = 0;

  if (desc->ndim > COMM_DESC_DIMS)
    {
      snprintf (buf, size, "a %" PRId64 "-dimensional shape", desc->ndim);
      return;
    }
  used += (size_t) snprintf (buf, size, "(");
  for (int i = 0; i < desc->ndim && used < size; i++)
    used += (size_t) snprintf (buf + used, size - used, "%s%" PRId64,
                               i ? ", " : "", desc->dims[i]);
  if (used < size)
    snprintf (buf + used, size - used, desc->ndim == 1 ? ",)" : ")");
}

/* Compares every rank's description ALL with rank 0's; GM_ERR_VALUE
   naming the first difference.  Every rank has the same ALL, so every
   rank reaches the same verdict.  */
static gm_status
compare (const comm_desc *all, int n)
{
  const comm_desc *first = &all[0];
  const char *name = gm_comm_kind_name ((gm_comm_kind) first->kind);

  for (int r = 0; r < n; r++)
    if (all[r].refused)
      return gm_error_set (GM_ERR_VALUE, 0, NULL,
                           "gpumem.comm.%s: rank %d refused its arguments "
                           "(its own error says why); no data was moved",
                           gm_comm_kind_name ((gm_comm_kind) all[r].kind), r);
  for (int r = 1; r < n; r++)
    {
      const comm_desc *other = &all[r];

      if (other->kind != first->kind)
        return gm_error_set (GM_ERR_VALUE, 0, NULL,
                             "gpumem.comm: the ranks called different "
                             "collectives: rank 0 %s, rank %d %s", name, r,
                             gm_comm_kind_name ((gm_comm_kind) other->kind));
      if (other->engine != first->engine)
        return gm_error_set (GM_ERR_VALUE, 0, NULL,
                             "gpumem.comm.%s: the ranks set GPUMEM_COMM "
                             "differently: rank 0 '%s', rank %d '%s'", name,
                             gm_comm_engine_name ((gm_comm_engine)
                                                  first->engine), r,
                             gm_comm_engine_name ((gm_comm_engine)
                                                  other->engine));
      if (other->chunk != first->chunk)
        return gm_error_set (GM_ERR_VALUE, 0, NULL,
                             "gpumem.comm.%s: the ranks move data in "
                             "different chunks (GPUMEM_MPI_CHUNK): rank 0 "
                             "%" PRId64 " bytes, rank %d %" PRId64, name,
                             first->chunk, r, other->chunk);
      if (first->kind == GM_COMM_BARRIER)
        continue;
      if (other->dtype != first->dtype || other->count != first->count)
        return gm_error_set (GM_ERR_VALUE, 0, NULL,
                             "gpumem.comm.%s: the arrays differ across "
                             "ranks: rank 0 passes %" PRId64 " elements of "
                             "%s, rank %d %" PRId64 " elements of %s", name,
                             first->count, gm_dtypes[first->dtype].name, r,
                             other->count, gm_dtypes[other->dtype].name);
      if (other->ndim != first->ndim || other->shape_hash != first->shape_hash
          || memcmp (other->dims, first->dims, sizeof first->dims) != 0)
        {
          char mine[96], theirs[96];
          format_shape (first, mine, sizeof mine);
          format_shape (other, theirs, sizeof theirs);
          return gm_error_set (GM_ERR_VALUE, 0, NULL,
                               "gpumem.comm.%s: the arrays' shapes differ "
                               "across ranks: rank 0 passes %s, rank %d %s",
                               name, mine, r, theirs);
        }
      if (other->op != first->op)
        return gm_error_set (GM_ERR_VALUE, 0, NULL,
                             "gpumem.comm.%s: the ranks pass different ops: "
                             "rank 0 '%s', rank %d '%s'", name,
                             gm_comm_op_name ((gm_comm_op) first->op), r,
                             gm_comm_op_name ((gm_comm_op) other->op));
      if (other->root != first->root)
        return gm_error_set (GM_ERR_VALUE, 0, NULL,
                             "gpumem.comm.%s: the ranks name different "
                             "roots: rank 0 root=%" PRId64 ", rank %d "
                             "root=%" PRId64, name, first->root, r,
                             other->root);
    }
  return GM_OK;
}

/* Ends the whole job after printing WHAT: for the rare failures (no
   host memory) after which this rank cannot stay in step with the
   others.  Does not return.  */
static void
fatal (const char *what)
{
  fflush (stdout);
  fprintf (stderr, "gpumem: rank %d: %s; aborting the job\n", world_rank,
           what);
  fflush (stderr);
  MPI_Abort (MPI_COMM_WORLD, 1);
  abort ();
}

/* Whether NCCL moves the data of the collective every rank described
   in ALL (N descriptions that compare equal): when every rank's part
   can go through NCCL and no two ranks share a GPU, *LAYOUT becomes a
   number naming every rank's GPU (the same on every rank, never 0),
   else 0.  GM_ERR_UNAVAILABLE, on every rank alike, when GPUMEM_COMM=nccl
   and NCCL cannot (a dtype NCCL cannot reduce still goes through MPI).  */
static gm_status
choose_engine (const comm_desc *all, int n, uint64_t *layout)
{
  static uint64_t checked_hash;   /* the last layout seen, its verdict */
  static gm_nccl_verdict checked_verdict;
  uint64_t hash = 1469598103934665603u;
  gm_nccl_verdict verdict = GM_NCCL_OK;
  int who = 0;

  *layout = 0;
  if (all[0].kind == GM_COMM_BARRIER)
    return GM_OK;
  for (int r = 0; r < n && verdict == GM_NCCL_OK; r++)
    if (all[r].nccl != GM_NCCL_OK)
      {
        verdict = (gm_nccl_verdict) all[r].nccl;
        who = r;
      }
  for (int r = 0; r < n && verdict == GM_NCCL_OK; r++)
    hash = (hash ^ (uint64_t) all[r].device_key) * 1099511628211u;
  if (hash == 0)
    hash = 1;
  if (verdict == GM_NCCL_OK && hash == checked_hash)
    verdict = checked_verdict;
  else if (verdict == GM_NCCL_OK)
    {
      /* Ranks sharing a GPU (or whose GPU CUDA cannot name) cannot be
         one NCCL communicator.  Checked once a layout.  */
      for (int r = 0; r < n && verdict == GM_NCCL_OK; r++)
        {
          bool shared = all[r].device_key == 0;
          for (int q = r + 1; q < n && !shared; q++)
            shared = all[q].device_key == all[r].device_key;
          if (shared)
            {
              verdict = GM_NCCL_SHARED_DEVICE;
              who = r;
            }
        }
      checked_hash = hash;
      checked_verdict = verdict;
    }
  if (verdict == GM_NCCL_OK)
    *layout = hash;
  else if (all[0].engine == GM_COMM_ENGINE_NCCL
           && verdict != GM_NCCL_DTYPE)
    return gm_error_set (GM_ERR_UNAVAILABLE, 0, NULL,
                         "gpumem.comm.%s: GPUMEM_COMM=nccl, but NCCL cannot "
                         "run it: rank %d: %s; no data was moved",
                         gm_comm_kind_name ((gm_comm_kind) all[0].kind), who,
                         gm_nccl_verdict_text (verdict));
  return GM_OK;
}

/* Copies NBYTES at BYTES from rank 0 to every rank: how the NCCL
   engine shares its unique id.  */
static gm_status
share_bytes (void *bytes, size_t nbytes)
{
  if (MPI_Bcast (bytes, (int) nbytes, MPI_BYTE, 0, MPI_COMM_WORLD)
      != MPI_SUCCESS)
    return gm_error_set (GM_ERR_UNAVAILABLE, 0, NULL,
                         "MPI_Bcast of NCCL's unique id failed");
  return GM_OK;
}

/* Exchanges CALL's description with every rank and compares them; then
   chooses the engine (choose_engine sets *LAYOUT).  */
static gm_status
agree (const gm_comm_call *call, uint64_t *layout)
{
  comm_desc mine, *all;
  gm_status status;

  describe (call, &mine);
  all = malloc (sizeof *all * (size_t) world_size);
  if (all == NULL)
    fatal ("out of host memory for the ranks' descriptions");
  MPI_Allgather (&mine, COMM_DESC_WORDS, MPI_INT64_T, all, COMM_DESC_WORDS,
                 MPI_INT64_T, MPI_COMM_WORLD);
  status = compare (all, world_size);
  if (status == GM_OK)
    status = choose_engine (all, world_size, layout);
  free (all);
  return status;
}

static MPI_Datatype
mpi_type (gm_dtype dtype)
{
  switch (dtype)
    {
    case GM_BOOL:
      return MPI_C_BOOL;
    case GM_INT8:
      return MPI_INT8_T;
    case GM_INT16:
      return MPI_INT16_T;
    case GM_INT32:
      return MPI_INT32_T;
    case GM_INT64:
      return MPI_INT64_T;
    case GM_UINT8:
      return MPI_UINT8_T;
    case GM_UINT16:
    case GM_FLOAT16:          /* moved as bits, never reduced */
      return MPI_UINT16_T;
    case GM_UINT32:
      return MPI_UINT32_T;
    case GM_UINT64:
      return MPI_UINT64_T;
    case GM_FLOAT32:
      return MPI_FLOAT;
    case GM_FLOAT64:
      return MPI_DOUBLE;
    case GM_COMPLEX64:
      return MPI_C_FLOAT_COMPLEX;
    case GM_COMPLEX128:
      return MPI_C_DOUBLE_COMPLEX;
    default:
      return MPI_DATATYPE_NULL;
    }
}

/* NumPy's meaning of OP on DTYPE: on bool arrays a sum is a logical or
   (as a += b is), max an or and min an and.  */
static MPI_Op
mpi_op (gm_dtype dtype, gm_comm_op op)
{
  if (dtype == GM_BOOL)
    return op == GM_COMM_MIN ? MPI_LAND : MPI_LOR;
  switch (op)
    {
    case GM_COMM_MAX:
      return MPI_MAX;
    case GM_COMM_MIN:
      return MPI_MIN;
    default:
      return MPI_SUM;
    }
}

/* Whether MPI must see DEVICE memory through host copies.  */
static bool
needs_staging (void)
{
  return staging_forced
         || (gm_backend_current->mpi_needs_staging && !cuda_aware);
}

static void
staging_release (void)
{
  if (staging != NULL && staging_pinned)
    gm_backend_current->host_free (staging);
  else
    free (staging);
  staging = NULL;
  staging_bytes = 0;
}

/* Host memory of at least NBYTES to stage through, kept for later
   calls: pinned where the backend gives it, else plain memory (slower
   copies).  Without it this rank cannot stay in step with the others,
   so running out of host memory ends the job.  */
static char *
staging_get (size_t nbytes)
{
  void *ptr = NULL;

  if (nbytes <= staging_bytes)
    return staging;
  staging_release ();
  staging_pinned = gm_backend_current->host_alloc (nbytes, &ptr) == GM_OK;
  if (!staging_pinned)
    ptr = malloc (nbytes);
  if (ptr == NULL)
    fatal ("out of host memory for staging");
  staging = ptr;
  staging_bytes = nbytes;
  return staging;
}

/* One staging copy, unless an earlier one failed: the collective goes on
   with the other ranks either way, and *STATUS keeps the first error.  */
static void
stage (gm_status *status, void *dst, int dst_device, const void *src,
       int src_device, size_t nbytes)
{
  if (*status == GM_OK && nbytes > 0)
    *status = gm_backend_current->copy (dst, dst_device, src, src_device,
                                        nbytes, NULL);
}

static size_t
min_size (size_t a, size_t b)
{
  return a < b ? a : b;
}

/* Broadcasts CALL's array from the root, in chunks.  */
static gm_status
run_bcast (const gm_comm_call *call, bool staged)
{
  size_t itemsize = gm_dtypes[call->dtype].itemsize;
  size_t chunk = chunk_bytes / itemsize;
  MPI_Datatype type = mpi_type (call->dtype);
  bool root = world_rank == call->root;
  gm_status status = GM_OK;
  char *host = NULL;

  if (staged && call->count > 0)
    host = staging_get (min_size (call->count, chunk) * itemsize);
  for (size_t off = 0; off < call->count; off += chunk)
    {
      size_t n = min_size (call->count - off, chunk);
      char *data = (char *) call->data + off * itemsize;
      char *buf = staged ? host : data;

      if (staged && root)
        stage (&status, buf, -1, data, call->device, n * itemsize);
      MPI_Bcast (buf, (int) n, type, call->root, MPI_COMM_WORLD);
      if (staged && !root)
        stage (&status, data, call->device, buf, -1, n * itemsize);
    }
  return status;
}

/* Reduces CALL's array over the ranks, in place, in chunks.  */
static gm_status
run_allreduce (const gm_comm_call *call, bool staged)
{
  size_t itemsize = gm_dtypes[call->dtype].itemsize;
  size_t chunk = chunk_bytes / itemsize;
  MPI_Datatype type = mpi_type (call->dtype);
  MPI_Op op = mpi_op (call->dtype, call->op);
  gm_status status = GM_OK;
  char *host = NULL;

  if (staged && call->count > 0)
    host = staging_get (min_size (call->count, chunk) * itemsize);
  for (size_t off = 0; off < call->count; off += chunk)
    {
      size_t n = min_size (call->count - off, chunk);
      char *data = (char *) call->data + off * itemsize;
      char *buf = staged ? host : data;

      if (staged)
        stage (&status, buf, -1, data, call->device, n * itemsize);
      MPI_Allreduce (MPI_IN_PLACE, buf, (int) n, type, op, MPI_COMM_WORLD);
      if (staged)
        stage (&status, data, call->device, buf, -1, n * itemsize);
    }
  return status;
}

/* Gathers every rank's array into the root's result, row R from rank R,
   in chunks: chunk C of every rank's array at once.  */
static gm_status
run_gather (const gm_comm_call *call, bool staged)
{
  size_t itemsize = gm_dtypes[call->dtype].itemsize;
  size_t rows = (size_t) world_size;
  size_t bytes = chunk_bytes / rows, chunk;
  MPI_Datatype type = mpi_type (call->dtype);
  bool root = world_rank == call->root;
  gm_status status = GM_OK;
  char *host = NULL;

  if (bytes < min_size (chunk_bytes, COMM_MIN_GATHER_CHUNK))
    bytes = min_size (chunk_bytes, COMM_MIN_GATHER_CHUNK);
  chunk = bytes / itemsize;
  if (staged && call->count > 0)
    host = staging_get (min_size (call->count, chunk) * itemsize
                        * (root ? rows : 1));
  for (size_t off = 0; off < call->count; off += chunk)
    {
      size_t n = min_size (call->count - off, chunk);
      size_t nbytes = n * itemsize;
      char *data = (char *) call->data + off * itemsize;

      if (!staged && root)
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
                      call->root, MPI_COMM_WORLD);
          MPI_Type_free (&placed);
          MPI_Type_free (&row);
        }
      else if (!staged)
        MPI_Gather (data, (int) n, type, NULL, 0, type, call->root,
                    MPI_COMM_WORLD);
      else if (root)
        {
          stage (&status, host + (size_t) world_rank * nbytes, -1, data,
                 call->device, nbytes);
          MPI_Gather (MPI_IN_PLACE, (int) n, type, host, (int) n, type,
                      call->root, MPI_COMM_WORLD);
          for (size_t r = 0; r < rows; r++)
            stage (&status,
                   (char *) call->result + (r * call->count + off) * itemsize,
                   call->device, host + r * nbytes, -1, nbytes);
        }
      else
        {
          stage (&status, host, -1, data, call->device, nbytes);
          MPI_Gather (host, (int) n, type, NULL, 0, type, call->root,
                      MPI_COMM_WORLD);
        }
    }
  return status;
}

gm_status
gm_comm_run (const gm_comm_call *call)
{
  gm_status status, moved;
  uint64_t layout;
  bool staged;

  if (!mpi_started || world_size == 1)
    {
      if (call->refused)
        return gm_error_set (GM_ERR_VALUE, 0, NULL, "arguments refused");
      return run_alone (call);
    }
  pthread_mutex_lock (&mpi_lock);
  gm_comm_watchdog_arm (gm_comm_kind_name (call->kind));
  status = agree (call, &layout);
  if (status != GM_OK || call->kind == GM_COMM_BARRIER)
    goto done;
#ifdef GM_HAVE_NCCL
  if (layout != 0)
    {
      bool broken;
      status = gm_nccl_run_rank (call, layout, world_rank, world_size,
                                 share_bytes, &broken);
      if (broken)
        fatal (gm_last_error ()->message);
      goto done;
    }
#endif
  /* MPI reads the memory behind the device's back: the work queued on
     it must be done first.  */
  status = gm_backend_current->device_synchronize (call->device);
  staged = needs_staging ();
  /* A failed synchronize is reported after the collective, which still
     meets the other ranks.  */
  if (call->kind == GM_COMM_BCAST)
    moved = run_bcast (call, staged);
  else if (call->kind == GM_COMM_ALLREDUCE)
    moved = run_allreduce (call, staged);
  else
    moved = run_gather (call, staged);
  if (status == GM_OK)
    status = moved;
done:
  gm_comm_watchdog_disarm ();
  pthread_mutex_unlock (&mpi_lock);
  return status;
}

#endif /* GM_HAVE_MPI */
