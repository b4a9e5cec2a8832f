/* comm-engine.c -- choosing the engine that moves a collective's data,
   and the two settings that steer it (GPUMEM_COMM, GPUMEM_COMM_TIMEOUT).

   NCCL moves CUDA device memory between GPUs over NVLink, PCIe or the
   network, with the GPUs doing the arithmetic; MPI (comm-mpi.c) moves any
   memory, staging device memory through pinned host memory.  With
   GPUMEM_COMM=auto (the default) a collective takes NCCL wherever NCCL
   can move its data, on every rank alike, and MPI otherwise.  */

#define _POSIX_C_SOURCE 200809L
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm-engine.h"
#include "comm-nccl-load.h"

/* The default of GPUMEM_COMM_TIMEOUT, in seconds: long enough for any
   transfer and for ranks that reach a collective minutes apart, short
   enough that a stuck job ends within the hour.  */
#define COMM_DEFAULT_TIMEOUT_S 600
/* At most a week, so milliseconds fit a long everywhere.  */
#define COMM_MAX_TIMEOUT_S (7 * 24 * 3600)

static gm_comm_engine engine_setting = GM_COMM_ENGINE_AUTO;
static long timeout_ms = COMM_DEFAULT_TIMEOUT_S * 1000L;

gm_status
gm_comm_engine_init (void)
{
  static const char *const names[] = {"auto", "nccl", "mpi", "ipc"};
  const char *engine = getenv ("GPUMEM_COMM");

  if (engine != NULL && *engine != '\0')
    {
      size_t i;
      for (i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp (engine, names[i]) == 0)
          break;
      if (i == sizeof names / sizeof names[0])
        return gm_error_set (GM_ERR_UNAVAILABLE, 0, NULL,
                             "GPUMEM_COMM='%s' is not one of auto, nccl, "
                             "mpi, ipc", engine);
      engine_setting = (gm_comm_engine) i;
    }
  if (gm_env_seconds ("GPUMEM_COMM_TIMEOUT", COMM_DEFAULT_TIMEOUT_S * 1000L,
                      0, COMM_MAX_TIMEOUT_S, &timeout_ms) != GM_OK)
    {
      char why[GM_ERROR_MESSAGE_MAX];
      snprintf (why, sizeof why, "%s", gm_last_error ()->message);
      return gm_error_set (GM_ERR_UNAVAILABLE, 0, NULL, "%s (0: no limit)",
                           why);
    }
  return GM_OK;
}

gm_comm_engine
gm_comm_engine_setting (void)
{
  return engine_setting;
}

const char *
gm_comm_engine_name (gm_comm_engine engine)
{
  switch (engine)
    {
    case GM_COMM_ENGINE_NCCL:
      return "nccl";
    case GM_COMM_ENGINE_MPI:
      return "mpi";
    case GM_COMM_ENGINE_IPC:
      return "ipc";
    default:
      return "auto";
    }
}

long
gm_comm_timeout_ms (void)
{
  return timeout_ms;
}

gm_nccl_verdict
gm_nccl_verdict_for (gm_comm_kind kind, gm_dtype dtype, gm_comm_op op)
{
  (void) op;
#ifndef GM_HAVE_NCCL
  (void) kind;
  (void) dtype;
  return GM_NCCL_NOT_BUILT;
#else
  if (engine_setting == GM_COMM_ENGINE_MPI
      || engine_setting == GM_COMM_ENGINE_IPC)
    return GM_NCCL_TURNED_OFF;
  if (kind == GM_COMM_BARRIER)
    return GM_NCCL_BARRIER;
  if (gm_backend_current == NULL
      || gm_backend_current->device_memory != GM_MEMORY_CUDA)
    return GM_NCCL_HOST_MEMORY;
  /* NCCL has no 16-bit integers; float16 is refused before (MPI cannot
     reduce it, and both engines answer alike).  bcast and gather move
     bytes, any dtype.  */
  if (kind == GM_COMM_ALLREDUCE
      && (dtype == GM_INT16 || dtype == GM_UINT16 || dtype == GM_FLOAT16))
    return GM_NCCL_DTYPE;
  /* Opened at the first collective NCCL would move, once.  */
  {
    void *handle;

    if (gm_nccl_open (&handle) != GM_OK)
      return GM_NCCL_NOT_LOADED;
  }
  return GM_NCCL_OK;
#endif
}

const char *
gm_nccl_verdict_text (gm_nccl_verdict verdict)
{
  switch (verdict)
    {
    case GM_NCCL_OK:
      return "NCCL can move it";
    case GM_NCCL_NOT_BUILT:
      return "gpumem was built without NCCL (configure --with-nccl)";
    case GM_NCCL_TURNED_OFF:
      return "GPUMEM_COMM=mpi or ipc turns NCCL off";
    case GM_NCCL_HOST_MEMORY:
      return "the backend's memory is host memory, not CUDA device memory";
    case GM_NCCL_DTYPE:
      return "NCCL cannot reduce this dtype (it has no 16-bit integers)";
    case GM_NCCL_SHARED_DEVICE:
      return "two ranks use the same GPU (NCCL wants one GPU a rank)";
    case GM_NCCL_BARRIER:
      return "a barrier moves no data";
    case GM_NCCL_NOT_LOADED:
      return "the NCCL library could not be opened: pip install "
             "'gpumem[nccl]' (NVIDIA's nvidia-nccl-cu13 wheel), install "
             "the system's NCCL (libnccl2), or name it in GPUMEM_NCCL "
             "(gpumem --config says what was tried)";
    }
  return "?";
}

const char *
gm_comm_backend_name (void)
{
  const gm_backend *b = gm_backend_current;

  if (engine_setting == GM_COMM_ENGINE_IPC)
    return "ipc";
  /* More ranks on this node than GPUs: the ranks' default devices are
     shared, and their collectives go through shared windows when the
     whole job shares one device (comm-agree.c decides so), else MPI.  */
  if (b != NULL && gm_comm_local_size () > b->device_count ())
    return engine_setting == GM_COMM_ENGINE_AUTO
               && gm_comm_size () == gm_comm_local_size ()
               && b->device_count () == 1
               && gm_comm_ipc_auto (SIZE_MAX)
             ? "ipc" : "mpi";
  return gm_nccl_verdict_for (GM_COMM_ALLREDUCE, GM_FLOAT32, GM_COMM_SUM)
           == GM_NCCL_OK ? "nccl" : "mpi";
}

bool
gm_comm_ipc_auto (size_t nbytes)
{
  const gm_backend *b = gm_backend_current;

  return engine_setting == GM_COMM_ENGINE_AUTO && b != NULL && b->ipc != NULL
         && b->mpi_needs_staging && !gm_comm_cuda_aware ()
         && nbytes / GM_COMM_IPC_MIN_BYTES_PER_RANK
              >= (size_t) gm_comm_size ();
}
