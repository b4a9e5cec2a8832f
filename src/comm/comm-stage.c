/* comm-stage.c -- a collective's data staged through host memory, a
   chunk at a time (comm-stage.h).  */

#include "config.h"

#include <stdlib.h>

#include "comm-stage.h"
#include "gm-env.h"

/* A gather's chunks shrink with the job down to this.  */
#define GATHER_MIN_CHUNK ((size_t) 1 << 20)

/* Host memory to stage device data through, kept between collectives.  */
static char *staging;
static size_t staging_bytes;
static bool staging_pinned;

gm_status
gm_comm_stage_settings (size_t max_chunk, size_t *chunk_bytes, int *aware)
{
  const char *set = getenv ("GPUMEM_MPI_CUDA_AWARE");
  bool value;

  if (gm_env_size ("GPUMEM_MPI_CHUNK", max_chunk, 16, max_chunk,
                   chunk_bytes) != GM_OK
      || gm_env_bool ("GPUMEM_MPI_CUDA_AWARE", false, &value) != GM_OK)
    return GM_ERR_UNAVAILABLE;
  *aware = set != NULL && *set != '\0' ? value : -1;
  return GM_OK;
}

void
gm_comm_staging_release (void)
{
  if (staging != NULL && staging_pinned)
    gm_backend_current->host_free (staging);
  else
    free (staging);
  staging = NULL;
  staging_bytes = 0;
}

char *
gm_comm_staging_get (size_t nbytes)
{
  void *ptr = NULL;

  if (nbytes <= staging_bytes)
    return staging;
  gm_comm_staging_release ();
  staging_pinned = gm_backend_current->host_alloc (nbytes, &ptr) == GM_OK;
  if (!staging_pinned)
    ptr = malloc (nbytes);
  if (ptr == NULL)
    return NULL;
  staging = ptr;
  staging_bytes = nbytes;
  return staging;
}

void
gm_comm_stage (gm_status *status, void *dst, int dst_device, const void *src,
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

static gm_status
no_host_memory (bool *broken)
{
  *broken = true;
  return gm_error_set (GM_ERR_HOST_NOMEM, 0, NULL,
                       "out of host memory for staging");
}

gm_status
gm_comm_run_chunks (const gm_comm_call *call, size_t chunk_bytes,
                    bool staged, bool stage_in, bool stage_out,
                    gm_comm_chunk_fn fn, void *ctx, bool *broken)
{
  size_t itemsize = gm_dtypes[call->dtype].itemsize;
  size_t chunk = chunk_bytes / itemsize;
  gm_status status = GM_OK;
  char *host = NULL;

  *broken = false;
  if (staged && call->count > 0)
    {
      host = gm_comm_staging_get (min_size (call->count, chunk) * itemsize);
      if (host == NULL)
        return no_host_memory (broken);
    }
  for (size_t off = 0; off < call->count; off += chunk)
    {
      size_t n = min_size (call->count - off, chunk);
      char *data = (char *) call->data + off * itemsize;
      char *buf = staged ? host : data;
      gm_status sent;

      if (staged && stage_in)
        gm_comm_stage (&status, buf, -1, data, call->device, n * itemsize);
      sent = fn (ctx, call, buf, n);
      if (sent != GM_OK)
        {
          *broken = true;
          return sent;
        }
      if (staged && stage_out)
        gm_comm_stage (&status, data, call->device, buf, -1, n * itemsize);
    }
  return status;
}

size_t
gm_comm_gather_chunk (size_t chunk_bytes, int size, size_t itemsize)
{
  size_t bytes = chunk_bytes / (size_t) size;

  if (bytes < min_size (chunk_bytes, GATHER_MIN_CHUNK))
    bytes = min_size (chunk_bytes, GATHER_MIN_CHUNK);
  return bytes / itemsize;
}

gm_status
gm_comm_run_gather (const gm_comm_call *call, int rank, int size,
                    size_t chunk_bytes, gm_comm_gather_fn fn, void *ctx,
                    bool *broken)
{
  size_t itemsize = gm_dtypes[call->dtype].itemsize;
  size_t rows = (size_t) size;
  size_t chunk = gm_comm_gather_chunk (chunk_bytes, size, itemsize);
  bool root = rank == call->root;
  gm_status status = GM_OK;
  char *host = NULL;

  *broken = false;
  if (call->count > 0)
    {
      host = gm_comm_staging_get (min_size (call->count, chunk) * itemsize
                                  * (root ? rows : 1));
      if (host == NULL)
        return no_host_memory (broken);
    }
  for (size_t off = 0; off < call->count; off += chunk)
    {
      size_t nbytes = min_size (call->count - off, chunk) * itemsize;
      char *data = (char *) call->data + off * itemsize;
      char *mine = root ? host + (size_t) rank * nbytes : host;
      gm_status sent;

      gm_comm_stage (&status, mine, -1, data, call->device, nbytes);
      sent = fn (ctx, call, host, nbytes, root);
      if (sent != GM_OK)
        {
          *broken = true;
          return sent;
        }
      for (size_t r = 0; root && r < rows; r++)
        gm_comm_stage (&status,
                       (char *) call->result
                       + (r * call->count + off) * itemsize,
                       call->device, host + r * nbytes, -1, nbytes);
    }
  return status;
}
