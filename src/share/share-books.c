/* share-books.c -- sharing in the memory books: every block the share
   server makes is booked as gpumem's, under the limit, and counted as
   shared; every block this process opens from another is booked as the
   imported owner's (memory.c), so memory_stats, set_memory_limit, the
   history and the out-of-memory message cover them as they cover any
   allocation.  The backend's gm_ipc_ops do the memory.  */

#define _POSIX_C_SOURCE 200809L
#include "config.h"

#include <unistd.h>

#include "share.h"

/* What ops->alloc and ops->import hand back besides the pointer.  */
typedef struct shareable
{
  const gm_ipc_ops *ops;
  int fd;                        /* alloc: out; import: in */
  void *ctx;
  const gm_ipc_handle *handle;   /* import only */
} shareable;

static gm_status
alloc_get (void *arg, int device, size_t nbytes, gm_stream *stream,
           void **ptr)
{
  shareable *made = arg;

  return made->ops->alloc (device, nbytes, stream, ptr, &made->fd,
                           &made->ctx);
}

static gm_status
release_put (void *arg, int device, void *ptr, size_t nbytes,
             gm_stream *stream)
{
  shareable *made = arg;
  (void) stream;

  made->ops->release (device, made->ctx, ptr, nbytes);
  return GM_OK;
}

gm_status
gm_ipc_books_alloc (const gm_ipc_ops *ops, int device, size_t nbytes,
                    gm_stream *stream, void **ptr, int *fd, void **ctx)
{
  shareable made = { ops, -1, NULL, NULL };
  gm_status status = gm_mem_alloc_with (GM_MEM_OWNER_GPUMEM, device, nbytes,
                                        stream, alloc_get, &made, ptr);

  if (status != GM_OK)
    return status;
  gm_mem_note_shared (device, nbytes, true);
  *fd = made.fd;
  *ctx = made.ctx;
  return GM_OK;
}

void
gm_ipc_books_release (const gm_ipc_ops *ops, int device, void *ctx,
                      void *ptr, size_t nbytes, bool adopted,
                      gm_mem_owner owner)
{
  shareable made = { ops, -1, ctx, NULL };
  gm_status status;

  gm_mem_note_shared (device, nbytes, false);
  if (adopted)
    {
      ops->disown (device, ctx);
      status = gm_mem_free_as (owner, device, ptr, nbytes, NULL);
    }
  else
    status = gm_mem_free_with (GM_MEM_OWNER_GPUMEM, device, ptr, nbytes,
                               NULL, release_put, &made);
  /* The server's thread may be the one letting go: nobody to tell.  */
  (void) status;
}

/* A fork child's copy of a parent's block: on the host backend its
   mapping goes (an adopted block's is the backend's own memory); a CUDA
   child holds nothing to free.  Books only otherwise.  */
static gm_status
forget_put (void *arg, int device, void *ptr, size_t nbytes,
            gm_stream *stream)
{
  const gm_ipc_ops *ops = arg;
  (void) stream;

  if (ops != NULL && ops->kind == GM_IPC_KIND_HOST)
    ops->unmap (device, NULL, ptr, nbytes);
  return GM_OK;
}

void
gm_ipc_books_forget (const gm_ipc_ops *ops, int device, void *ptr,
                     size_t nbytes, bool adopted)
{
  gm_mem_note_shared (device, nbytes, false);
  if (adopted && ops != NULL && ops->kind == GM_IPC_KIND_HOST)
    (void) gm_mem_free (device, ptr, nbytes, NULL);
  else
    (void) gm_mem_free_with (GM_MEM_OWNER_GPUMEM, device, ptr, nbytes, NULL,
                             forget_put, (void *) ops);
}

static gm_status
import_get (void *arg, int device, size_t nbytes, gm_stream *stream,
            void **ptr)
{
  shareable *made = arg;
  int fd = made->fd;
  (void) nbytes;
  (void) stream;

  /* ops->import closes the descriptor, so it is handed over once: the
     books' second try after a refusal keeps the first one's error.  */
  made->fd = -1;
  if (fd < 0)
    return GM_ERR_NOMEM;
  return made->ops->import (device, fd, made->handle, ptr, &made->ctx);
}

static gm_status
unmap_put (void *arg, int device, void *ptr, size_t nbytes,
           gm_stream *stream)
{
  shareable *made = arg;
  (void) stream;

  made->ops->unmap (device, made->ctx, ptr, nbytes);
  return GM_OK;
}

gm_status
gm_ipc_books_import (const gm_ipc_ops *ops, int device, int fd,
                     const gm_ipc_handle *handle, void **ptr, void **ctx)
{
  shareable made = { ops, fd, NULL, handle };
  gm_status status = gm_mem_alloc_with (GM_MEM_OWNER_IMPORTED, device,
                                        (size_t) handle->nbytes, NULL,
                                        import_get, &made, ptr);

  /* Refused by the limit before import took the descriptor.  */
  if (made.fd >= 0)
    close (made.fd);
  if (status == GM_OK)
    *ctx = made.ctx;
  return status;
}

void
gm_ipc_books_unmap (const gm_ipc_ops *ops, int device, void *ctx, void *ptr,
                    size_t nbytes)
{
  shareable made = { ops, -1, ctx, NULL };

  (void) gm_mem_free_with (GM_MEM_OWNER_IMPORTED, device, ptr, nbytes, NULL,
                           unmap_put, &made);
}

size_t
gm_ipc_imported_pools (void)
{
  const gm_ipc_ops *ops = gm_backend_current != NULL
                          ? gm_backend_current->ipc : NULL;

  return ops != NULL && ops->imported_pools != NULL ? ops->imported_pools ()
                                                    : 0;
}
