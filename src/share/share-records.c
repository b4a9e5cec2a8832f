/* share-records.c -- the share server's books: the shareable blocks of
   this process, the shares made of each (a record holding the handle's
   bytes as gm_ipc_export made them, its random secret and the users it
   admits), and who still holds each block (its producer, until_opened
   shares not opened yet, leases).  A block is released once none
   holds it: CUDA asks that every importer free an imported pool
   pointer before its exporter does (cudaMemPoolImportPointer), and this
   order gives exactly that.  Every field is under gm_ipc_lock, which
   the server thread (share-server.c) shares.  Plain C: the backend's
   gm_ipc_ops do the memory.  */

#define _GNU_SOURCE
#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "share.h"

/* One share: a view of a block, as its handle's bytes, and who may open
   it.  */
typedef struct share_record
{
  struct share_record *next;
  uint64_t id, secret;
  bool until_opened;
  bool pending;              /* until_opened and not opened yet */
  uint32_t allow[GM_IPC_MAX_ALLOW];
  size_t nallow;
  size_t size;
  uint8_t encoded[GM_IPC_MAX_BYTES];
} share_record;

struct gm_ipc_block
{
  gm_ipc_block *next;
  pid_t pid;                 /* the process that allocated it */
  int device;
  int fd;                    /* what a consumer receives */
  void *ctx, *ptr;
  size_t nbytes;
  size_t leases;
  bool producer_holds;
  bool adopted;              /* memory of the backend's pool (share-books.c) */
  gm_mem_owner owner;        /* an adopted block's */
  size_t pending_opens;      /* until_opened shares not opened yet */
  size_t exporting;          /* gm_ipc_export calls under way */
  share_record *shares;
};

static gm_ipc_block *blocks;
static uint64_t next_share = 1;
static size_t open_imports;
static size_t nleases;               /* other processes' leases */
static const gm_ipc_ops *server_ops;

/* Whether the SIZE bytes at A and B are equal, in a time that does not
   depend on where they differ (B holds a secret).  */
static bool
same_bytes (const uint8_t *a, const uint8_t *b, size_t size)
{
  uint8_t diff = 0;

  for (size_t i = 0; i < size; i++)
    diff |= a[i] ^ b[i];
  return diff == 0;
}

/* Releases BLOCK when its producer, every until_opened share, every
   lease and every export under way have let go; under the lock.  */
static void
release_if_unused (gm_ipc_block *block)
{
  gm_ipc_block **link;

  if (block->producer_holds || block->pending_opens > 0 || block->leases > 0
      || block->exporting > 0)
    return;
  for (link = &blocks; *link != NULL; link = &(*link)->next)
    if (*link == block)
      {
        *link = block->next;
        break;
      }
  while (block->shares != NULL)
    {
      share_record *next = block->shares->next;
      free (block->shares);
      block->shares = next;
    }
  gm_ipc_books_release (server_ops, block->device, block->ctx, block->ptr,
                        block->nbytes, block->adopted, block->owner);
  close (block->fd);
  free (block);
}

/* The share whose handle is the SIZE bytes ENCODED, naming record ID
   and SECRET, with its block in *BLOCK; NULL when there is none (never
   made, revoked, released, or a wrong secret).  *ALTERED tells a handle
   with the right record and secret whose other bytes differ from the
   record.  Under the lock.  */
static share_record *
find_share (uint64_t id, uint64_t secret, const uint8_t *encoded,
            size_t size, gm_ipc_block **block, bool *altered)
{
  *altered = false;
  for (gm_ipc_block *b = blocks; b != NULL; b = b->next)
    for (share_record *share = b->shares; share != NULL; share = share->next)
      if (share->id == id)
        {
          if (!same_bytes ((const uint8_t *) &secret,
                           (const uint8_t *) &share->secret, 8))
            return NULL;
          if (size != share->size
              || !same_bytes (encoded, share->encoded, size))
            {
              *altered = true;
              return NULL;
            }
          *block = b;
          return share;
        }
  return NULL;
}

/* Whether SHARE admits a process of user UID; under the lock.  */
static bool
admits (const share_record *share, uint32_t uid)
{
  bool trusted = false;

  if (gm_ipc_trusted (uid, &trusted) == GM_OK && trusted)
    return true;
  for (size_t i = 0; i < share->nallow; i++)
    if (share->allow[i] == uid)
      return true;
  return false;
}

bool
gm_ipc_admitted (uint32_t uid)
{
  bool trusted = false;

  if (gm_ipc_trusted (uid, &trusted) == GM_OK && trusted)
    return true;
  for (gm_ipc_block *b = blocks; b != NULL; b = b->next)
    for (share_record *share = b->shares; share != NULL; share = share->next)
      if (admits (share, uid))
        return true;
  return false;
}

/* Counts one open of SHARE of BLOCK: a new lease, and its until_opened
   hold let go; under the lock.  */
static void
count_open (gm_ipc_block *block, share_record *share)
{
  block->leases++;
  if (share->pending)
    {
      share->pending = false;
      block->pending_opens--;
    }
}

gm_ipc_block *
gm_ipc_lease_begin (const uint8_t *encoded, size_t size, uint32_t uid,
                    int *fd, uint8_t *reply)
{
  gm_ipc_handle handle;
  gm_ipc_block *block = NULL;
  share_record *share;
  bool altered;

  if (gm_ipc_decode (encoded, size, &handle) != NULL)
    {
      *reply = GM_IPC_REPLY_ALTERED;
      return NULL;
    }
  share = find_share (handle.block, handle.secret, encoded, size, &block,
                      &altered);
  if (share == NULL)
    {
      *reply = altered ? GM_IPC_REPLY_ALTERED : GM_IPC_REPLY_CLOSED;
      return NULL;
    }
  if (!admits (share, uid))
    {
      *reply = GM_IPC_REPLY_REFUSED;
      return NULL;
    }
  *fd = block->fd;
  if (handle.readonly && server_ops->readonly_fd != NULL)
    {
      *fd = server_ops->readonly_fd (block->fd);
      if (*fd < 0)
        {
          *reply = GM_IPC_REPLY_NOMEM;
          return NULL;
        }
    }
  count_open (block, share);
  nleases++;
  return block;
}

int
gm_ipc_block_fd (const gm_ipc_block *block)
{
  return block->fd;
}

void
gm_ipc_lease_end (gm_ipc_block *block)
{
  nleases--;
  block->leases--;
  release_if_unused (block);
}

void
gm_ipc_forget_blocks (void)
{
  blocks = NULL;
  nleases = 0;
}

/* Lists BLOCK, whose memory and descriptor are set, as DEVICE's block of
   NBYTES held by its producer.  */
static void
list_block (gm_ipc_block *block, int device, size_t nbytes)
{
  block->device = device;
  block->nbytes = nbytes;
  block->pid = getpid ();
  block->producer_holds = true;
  pthread_mutex_lock (&gm_ipc_lock);
  block->next = blocks;
  blocks = block;
  pthread_mutex_unlock (&gm_ipc_lock);
}

/* A new block record for OPS's memory, or NULL with the error set.  */
static gm_ipc_block *
new_block (const gm_ipc_ops *ops)
{
  gm_ipc_block *block = calloc (1, sizeof *block);

  if (block == NULL)
    {
      gm_error_set (GM_ERR_HOST_NOMEM, 0, NULL,
                    "no memory for a shared block's record");
      return NULL;
    }
  pthread_mutex_lock (&gm_ipc_lock);
  server_ops = ops;
  pthread_mutex_unlock (&gm_ipc_lock);
  return block;
}

gm_status
gm_ipc_block_add (const gm_ipc_ops *ops, int device, size_t nbytes,
                  gm_stream *stream, gm_ipc_block **out, void **ptr)
{
  gm_ipc_block *block = new_block (ops);
  gm_status status;

  if (block == NULL)
    return GM_ERR_HOST_NOMEM;
  status = gm_ipc_books_alloc (ops, device, nbytes, stream, &block->ptr,
                               &block->fd, &block->ctx);
  if (status != GM_OK)
    {
      free (block);
      return status;
    }
  list_block (block, device, nbytes);
  *out = block;
  *ptr = block->ptr;
  return GM_OK;
}

gm_status
gm_ipc_block_adopt (const gm_ipc_ops *ops, gm_mem_owner owner, int device,
                    void *ptr, size_t nbytes, gm_ipc_block **out)
{
  gm_ipc_block *block = new_block (ops);
  gm_status status;

  if (block == NULL)
    return GM_ERR_HOST_NOMEM;
  status = ops->adopt (device, ptr, nbytes, &block->fd, &block->ctx);
  if (status != GM_OK)
    {
      free (block);
      return status;
    }
  block->ptr = ptr;
  block->adopted = true;
  block->owner = owner;
  gm_mem_note_shared (device, nbytes, true);
  list_block (block, device, nbytes);
  *out = block;
  return GM_OK;
}

/* Records the share of BLOCK that HANDLE (its locating fields filled,
   but the record's number and secret) describes, or finds the same
   share made before (not UNTIL_OPENED, the same users admitted): fills
   HANDLE's number and secret and encodes it into ENCODED, *SIZE bytes.
   Under the lock.  */
static gm_status
record_share (gm_ipc_block *block, bool until_opened, const uint32_t *allow,
              size_t nallow, gm_ipc_handle *handle, uint8_t *encoded,
              size_t *size)
{
  share_record *share;
  gm_ipc_handle check;

  if (!until_opened)
    for (share = block->shares; share != NULL; share = share->next)
      if (!share->until_opened && share->nallow == nallow
          && (nallow == 0
              || memcmp (share->allow, allow, nallow * sizeof *allow) == 0))
        {
          handle->block = share->id;
          handle->secret = share->secret;
          *size = gm_ipc_encode (handle, encoded);
          if (*size == share->size
              && memcmp (encoded, share->encoded, *size) == 0)
            return GM_OK;
        }
  share = calloc (1, sizeof *share);
  if (share == NULL)
    return gm_error_set (GM_ERR_HOST_NOMEM, 0, NULL,
                         "no memory for a share's record");
  share->id = next_share++;
  share->secret = gm_ipc_random ();
  handle->block = share->id;
  handle->secret = share->secret;
  *size = gm_ipc_encode (handle, encoded);
  /* What the server hands out it must accept: the view lies in the
     block, with every other rule of the decoder.  */
  if (gm_ipc_decode (encoded, *size, &check) != NULL)
    {
      free (share);
      return gm_error_set (GM_ERR_VALUE, 0, NULL, "cannot share this view: "
                           "%s", gm_ipc_decode (encoded, *size, &check));
    }
  share->until_opened = share->pending = until_opened;
  if (nallow > 0)
    memcpy (share->allow, allow, nallow * sizeof *allow);
  share->nallow = nallow;
  share->size = *size;
  memcpy (share->encoded, encoded, *size);
  share->next = block->shares;
  block->shares = share;
  if (until_opened)
    block->pending_opens++;
  return GM_OK;
}

gm_status
gm_ipc_export (gm_ipc_block *block, gm_stream *stream, bool until_opened,
               const uint32_t *allow, size_t nallow, gm_ipc_handle *handle,
               uint8_t *encoded, size_t *size)
{
  const gm_ipc_ops *ops = gm_ipc_current_ops ();
  gm_status status;
  bool trusted;

  if (block->pid != getpid ())
    return gm_error_set (GM_ERR_FAILED, 0, NULL, "this shared array was "
                         "allocated by process %d, whose child this is: "
                         "share it from there, or copy it",
                         (int) block->pid);
  if (nallow > GM_IPC_MAX_ALLOW)
    return gm_error_set (GM_ERR_VALUE, 0, NULL, "a share admits at most %d "
                         "other users, not %zu", GM_IPC_MAX_ALLOW, nallow);
  /* A bad GPUMEM_SHARE_ALLOW is the sharer's error, here, rather than a
     refusal its consumers would see.  */
  status = gm_ipc_trusted (0, &trusted);
  if (status != GM_OK)
    return status;
  pthread_mutex_lock (&gm_ipc_lock);
  block->exporting++;
  pthread_mutex_unlock (&gm_ipc_lock);
  handle->kind = ops->kind;
  gm_ipc_node_id (handle->node);
  status = ops->device_uuid (block->device, handle->device_uuid);
  if (status == GM_OK)
    status = ops->describe (block->device, block->ctx, block->ptr, stream,
                            handle->opaque);
  pthread_mutex_lock (&gm_ipc_lock);
  handle->pid = (uint32_t) block->pid;
  gm_ipc_server_identity (&handle->server, &handle->uid);
  handle->device = (uint32_t) block->device;
  handle->nbytes = block->nbytes;
  if (status == GM_OK)
    status = record_share (block, until_opened, allow, nallow, handle,
                           encoded, size);
  block->exporting--;
  release_if_unused (block);
  pthread_mutex_unlock (&gm_ipc_lock);
  return status;
}

gm_status
gm_ipc_unshare (const gm_ipc_handle *handle)
{
  uint8_t encoded[GM_IPC_MAX_BYTES];
  size_t size = gm_ipc_encode (handle, encoded);
  gm_ipc_block *block = NULL;
  share_record *share = NULL, **link;
  bool altered = false;

  pthread_mutex_lock (&gm_ipc_lock);
  if (gm_ipc_server_is (handle->pid, handle->server))
    share = find_share (handle->block, handle->secret, encoded, size,
                        &block, &altered);
  if (share == NULL)
    {
      pthread_mutex_unlock (&gm_ipc_lock);
      return gm_error_set (GM_ERR_FAILED, 0, NULL, "unshare: the handle "
                           "names no share of this process (%s)",
                           altered ? "it was altered"
                                   : "made elsewhere, revoked already, or "
                                     "its memory released");
    }
  for (link = &block->shares; *link != share; link = &(*link)->next)
    ;
  *link = share->next;
  if (share->pending)
    block->pending_opens--;
  free (share);
  release_if_unused (block);
  pthread_mutex_unlock (&gm_ipc_lock);
  return GM_OK;
}

void
gm_ipc_drop (gm_ipc_block *block)
{
  const gm_ipc_ops *ops = gm_ipc_current_ops ();

  if (block->pid != getpid ())
    {
      /* A copy inherited through fork: the parent owns the block; only
         this process's mapping, descriptor and copy of the record go
         (the child lists none of the parent's blocks).  */
      gm_ipc_books_forget (ops, block->device, block->ptr, block->nbytes,
                           block->adopted);
      close (block->fd);
      while (block->shares != NULL)
        {
          share_record *next = block->shares->next;
          free (block->shares);
          block->shares = next;
        }
      free (block);
      return;
    }
  pthread_mutex_lock (&gm_ipc_lock);
  block->producer_holds = false;
  release_if_unused (block);
  pthread_mutex_unlock (&gm_ipc_lock);
}

gm_status
gm_ipc_open_local (const gm_ipc_handle *handle, bool *own,
                   gm_ipc_block **out, void **ptr)
{
  uint8_t encoded[GM_IPC_MAX_BYTES];
  size_t size = gm_ipc_encode (handle, encoded);
  gm_ipc_block *block = NULL;
  share_record *share;
  bool altered;

  pthread_mutex_lock (&gm_ipc_lock);
  *own = gm_ipc_server_is (handle->pid, handle->server);
  if (!*own)
    {
      pthread_mutex_unlock (&gm_ipc_lock);
      return GM_OK;
    }
  share = find_share (handle->block, handle->secret, encoded, size, &block,
                      &altered);
  if (share == NULL)
    {
      pthread_mutex_unlock (&gm_ipc_lock);
      if (altered)
        return gm_error_set (GM_ERR_FAILED, 0, NULL, "the handle does not "
                             "match what its producer (this process) "
                             "shared: it was altered");
      return gm_error_set (GM_ERR_FAILED, 0, NULL, "the shared array is "
                           "closed: its producer (this process) freed it "
                           "or revoked the handle");
    }
  count_open (block, share);
  *out = block;
  *ptr = block->ptr;
  pthread_mutex_unlock (&gm_ipc_lock);
  return GM_OK;
}

void
gm_ipc_close_local (gm_ipc_block *block)
{
  pthread_mutex_lock (&gm_ipc_lock);
  block->leases--;
  release_if_unused (block);
  pthread_mutex_unlock (&gm_ipc_lock);
}

void
gm_ipc_count_import (int delta)
{
  pthread_mutex_lock (&gm_ipc_lock);
  open_imports = delta > 0 ? open_imports + 1 : open_imports - 1;
  pthread_mutex_unlock (&gm_ipc_lock);
}

void
gm_ipc_counts (size_t *nblocks, size_t *nleases_out, size_t *imports)
{
  size_t n = 0;

  pthread_mutex_lock (&gm_ipc_lock);
  for (gm_ipc_block *block = blocks; block != NULL; block = block->next)
    n++;
  *nblocks = n;
  *nleases_out = nleases;
  *imports = open_imports;
  pthread_mutex_unlock (&gm_ipc_lock);
}
