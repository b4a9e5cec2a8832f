/* pool-hooks.c -- other libraries allocating from gpumem's pool.

   PyTorch's pluggable allocator, CuPy's allocator and Numba's memory
   manager hand gpumem raw stream handles (a cudaStream_t, or NULL for
   the default stream) and get device memory from the same stream-ordered
   pool and the same books as gpumem's own arrays (memory.c), each under
   its own owner.  Plain C, callable without the GIL: PyTorch allocates
   from C++ threads of its own.

   A foreign stream is wrapped once (the backend's stream_wrap, which
   checks that the handle names a live stream of the device) and the
   wrapper kept, keyed by device and handle, for the life of the process:
   a wrapper holds nothing but the handle, so a handle that a library
   destroys and CUDA later gives to a new stream still names the stream
   a block is ordered on.  Past HOOK_STREAMS distinct streams a call
   wraps and unwraps its stream itself.  */

#include "config.h"

#include <pthread.h>
#include <stdint.h>

#include "gm.h"
#include "pool-hooks.h"

enum
{
  HOOK_STREAMS = 256
};

typedef struct hook_stream
{
  int device;
  void *handle;
  gm_stream *stream;
} hook_stream;

static hook_stream hook_streams[HOOK_STREAMS];
static int hook_streams_used;
static pthread_mutex_t hook_streams_lock = PTHREAD_MUTEX_INITIALIZER;

/* The kept wrapper of HANDLE on DEVICE, or NULL; with
   hook_streams_lock held.  */
static gm_stream *
find_locked (int device, void *handle)
{
  for (int i = 0; i < hook_streams_used; i++)
    if (hook_streams[i].handle == handle && hook_streams[i].device == device)
      return hook_streams[i].stream;
  return NULL;
}

/* In *STREAM gpumem's stream for HANDLE on DEVICE: NULL for the default
   stream (HANDLE NULL, or CUDA's special handles 1, the legacy default
   stream, and 2, the per-thread default stream, which names another
   stream in each thread and follows the legacy one), a kept wrapper, or
   (*OWNED true) one made for this call alone, which the caller
   destroys.  */
static gm_status
stream_for (int device, void *handle, gm_stream **stream, bool *owned)
{
  gm_status status;
  gm_stream *made;

  *stream = NULL;
  *owned = false;
  if ((uintptr_t) handle <= 2)
    return GM_OK;
  pthread_mutex_lock (&hook_streams_lock);
  *stream = find_locked (device, handle);
  pthread_mutex_unlock (&hook_streams_lock);
  if (*stream != NULL)
    return GM_OK;

  status = gm_backend_current->stream_wrap (device, handle, &made);
  if (status != GM_OK)
    return status;
  pthread_mutex_lock (&hook_streams_lock);
  /* Another thread may have wrapped the same handle meanwhile.  */
  *stream = find_locked (device, handle);
  if (*stream != NULL)
    {
      pthread_mutex_unlock (&hook_streams_lock);
      gm_backend_current->stream_destroy (made);
      return GM_OK;
    }
  if (hook_streams_used < HOOK_STREAMS)
    {
      hook_streams[hook_streams_used].device = device;
      hook_streams[hook_streams_used].handle = handle;
      hook_streams[hook_streams_used].stream = made;
      hook_streams_used++;
    }
  else
    *owned = true;
  pthread_mutex_unlock (&hook_streams_lock);
  *stream = made;
  return GM_OK;
}

/* GM_OK when the backend's pool can serve another library, else
   GM_ERR_UNAVAILABLE saying why.  */
static gm_status
check_backend (void)
{
  if (gm_backend_current == NULL)
    return gm_error_set (GM_ERR_UNAVAILABLE, 0, NULL, "gpumem is not "
                         "initialized");
  if (gm_backend_current->device_memory != GM_MEMORY_CUDA)
    return gm_error_set (GM_ERR_UNAVAILABLE, 0, NULL, "the %s backend has "
                         "no CUDA memory for other libraries to allocate: "
                         "run on the cuda backend",
                         gm_backend_current->name);
  return GM_OK;
}

gm_status
gm_pool_hook_alloc (gm_mem_owner owner, int device, size_t nbytes,
                    void *stream_handle, void **ptr)
{
  gm_status status = check_backend ();
  gm_stream *stream;
  bool owned;

  *ptr = NULL;
  if (status != GM_OK)
    return status;
  status = stream_for (device, stream_handle, &stream, &owned);
  if (status != GM_OK)
    return status;
  status = gm_mem_alloc_as (owner, device, nbytes, stream, ptr);
  if (status == GM_OK)
    {
      status = gm_pool_blocks_add (*ptr, nbytes, owner, device);
      if (status != GM_OK)
        {
          gm_mem_free_as (owner, device, *ptr, nbytes, stream);
          *ptr = NULL;
        }
    }
  if (owned)
    gm_backend_current->stream_destroy (stream);
  return status;
}

gm_status
gm_pool_hook_free (gm_mem_owner owner, int device, void *ptr, size_t nbytes,
                   void *stream_handle)
{
  gm_status status = check_backend ();
  gm_pool_drop_fn drop;
  gm_stream *stream;
  void *ctx;
  bool owned;

  if (status != GM_OK)
    return status;
  status = stream_for (device, stream_handle, &stream, &owned);
  if (gm_pool_blocks_remove (ptr, &drop, &ctx))
    {
      /* A block shared with other processes goes to the share server,
         which frees it in the default stream's order once they have let
         go: the work the library queued on its stream comes first.  */
      if (status == GM_OK)
        do
          status = gm_backend_current->wait (device, stream, 1000000);
        while (status == GM_ERR_NOT_READY);
      else
        status = gm_backend_current->device_synchronize (device);
      drop (ctx);
      if (owned)
        gm_backend_current->stream_destroy (stream);
      return status;
    }
  if (status != GM_OK)
    {
      /* The block must still go back: in the default stream's order,
         which follows the legacy default stream's work.  */
      stream = NULL;
      owned = false;
    }
  status = gm_mem_free_as (owner, device, ptr, nbytes, stream);
  if (owned)
    gm_backend_current->stream_destroy (stream);
  return status;
}

void *
gm_pool_torch_alloc (size_t nbytes, int device, void *stream)
{
  void *ptr;

  if (gm_pool_hook_alloc (GM_MEM_OWNER_TORCH, device, nbytes, stream, &ptr)
      != GM_OK)
    return NULL;
  return ptr;
}

const char *
gm_pool_torch_error (void)
{
  return gm_last_error ()->message;
}

void
gm_pool_torch_free (void *ptr, size_t nbytes, int device, void *stream)
{
  (void) gm_pool_hook_free (GM_MEM_OWNER_TORCH, device, ptr, nbytes, stream);
}
