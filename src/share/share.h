/* share.h -- sharing device memory between processes on one node.

   A producer allocates a shareable block (gm_ipc_alloc), shares a view
   of it (gm_ipc_export: the share server records the view and hands out
   a handle naming that record), and a process on the same node that
   the share admits opens the handle (gm_ipc_open) onto the same memory.
   The handle's bytes are plain data (share-handle.c encodes and checks them); an
   open presents them to the producer's share server (share-server.c),
   which answers only a handle equal, byte for byte, to one it recorded,
   so that rewriting a field cannot widen, shift or unlock a view.  The
   file descriptor that gives access to the memory travels from the
   server to the consumer over a Unix socket whose peers check each
   other (SO_PEERCRED), and that connection stays open as the consumer's
   lease: the producer releases a block only when it has let go of it
   and every lease has ended (a consumer that exits ends its lease with
   it).  docs/sharing.md has the whole story.

   Plain C: no Python, no CUDA headers.  */

#ifndef GM_IPC_H
#define GM_IPC_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gm.h"

/* The handle format's version; a decoder refuses any other.  */
#define GM_IPC_VERSION 2
/* Bytes of the backend's own description of a block (a CUDA pool
   pointer's export data and the IPC event handle, 64 bytes each).  */
#define GM_IPC_OPAQUE 128
/* Bytes of the node id: the kernel's boot id, as text.  */
#define GM_IPC_NODE 40
/* The encoded handle's length for NDIM dimensions.  */
#define GM_IPC_FIXED_BYTES 260
#define GM_IPC_ENCODED_BYTES(ndim) (GM_IPC_FIXED_BYTES + 16 * (size_t) (ndim))
/* Bytes of the backend's description of a shared event (CUDA's
   interprocess event handle), and an event handle's length: the fixed
   fields, then these bytes.  */
#define GM_IPC_EVENT_DATA 64
#define GM_IPC_EVENT_BYTES (GM_IPC_FIXED_BYTES + GM_IPC_EVENT_DATA)
/* The longest handle of either object.  */
#define GM_IPC_MAX_BYTES                                                   \
  (GM_IPC_ENCODED_BYTES (GM_MAX_NDIM) > GM_IPC_EVENT_BYTES                \
     ? GM_IPC_ENCODED_BYTES (GM_MAX_NDIM) : GM_IPC_EVENT_BYTES)

/* Which backend made a block: a handle opens only in the same kind.  */
enum
{
  GM_IPC_KIND_HOST = 1,
  GM_IPC_KIND_CUDA = 2
};

/* What a handle opens onto.  An event's handle names a block of
   GM_IPC_EVENT_WORD bytes (the word its records publish to, and the
   lease that keeps the producer's event), has no dimensions, and
   carries the backend's event data.  */
enum
{
  GM_IPC_OBJECT_ARRAY = 0,
  GM_IPC_OBJECT_EVENT = 1
};
#define GM_IPC_EVENT_WORD 8

/* What a handle says, decoded.  */
typedef struct gm_ipc_handle
{
  uint8_t kind;                  /* GM_IPC_KIND_* */
  uint8_t object;                /* GM_IPC_OBJECT_* */
  char node[GM_IPC_NODE];        /* the producer's boot id, NUL-padded */
  uint32_t pid;                  /* the producer's process */
  uint32_t uid;                  /* and its effective user */
  uint64_t server;               /* its share server's random name */
  uint64_t block;                /* the share's record in that server */
  uint64_t secret;               /* random: only the handle's holder opens */
  uint32_t device;               /* the producer's device index */
  uint8_t device_uuid[16];
  uint64_t nbytes;               /* the block's size */
  uint64_t offset;               /* element 0's byte offset in the block */
  uint8_t dtype;                 /* gm_dtype */
  uint8_t readonly;
  uint8_t ndim;
  int64_t shape[GM_MAX_NDIM];
  int64_t strides[GM_MAX_NDIM];  /* bytes */
  uint8_t opaque[GM_IPC_OPAQUE];
  uint8_t event[GM_IPC_EVENT_DATA];  /* GM_IPC_OBJECT_EVENT only */
} gm_ipc_handle;

/* Encodes HANDLE into OUT (room for GM_IPC_MAX_BYTES) and returns its
   length: little-endian fields (an array's shape and strides, or an
   event's data), then an FNV-1a checksum over them.  */
size_t gm_ipc_encode (const gm_ipc_handle *handle, uint8_t *out);

/* Decodes the SIZE bytes at DATA into *HANDLE, checking everything a
   handle must be: the magic, the version, the length for its object and
   ndim, the checksum, a known kind, object and dtype, for an event no
   dimensions, dtype 0, not read-only and a block of GM_IPC_EVENT_WORD
   bytes at offset 0, a NUL-terminated node, non-negative
   dimensions, strides that are multiples of the item size, and every
   element inside the block.  NULL when it is a handle, else the reason
   it is not (a constant string; *HANDLE is then unspecified).  Reads no
   byte outside DATA[0 .. SIZE-1].  */
const char *gm_ipc_decode (const uint8_t *data, size_t size,
                           gm_ipc_handle *handle);

/* Writes this node's id (the kernel's boot id, else the host name) into
   NODE, NUL-padded.  */
void gm_ipc_node_id (char node[GM_IPC_NODE]);

/* What a backend does for sharing; gm_backend.ipc, NULL where it cannot
   share.  CTX is the backend's own record of a block or an import.  */
typedef struct gm_ipc_ops
{
  uint8_t kind;                  /* GM_IPC_KIND_* */
  /* Allocates NBYTES (> 0) of shareable memory on DEVICE, ordered on
     STREAM: *PTR, a file descriptor *FD that gives another process
     access to it (the share server owns and closes it), and *CTX.  */
  gm_status (*alloc) (int device, size_t nbytes, gm_stream *stream,
                      void **ptr, int *fd, void **ctx);
  /* Fills OPAQUE for a handle of the block (CTX, PTR) and makes its
     first use elsewhere wait for the work queued so far on STREAM
     (NULL: the device's default stream).  */
  gm_status (*describe) (int device, void *ctx, void *ptr, gm_stream *stream,
                         uint8_t opaque[GM_IPC_OPAQUE]);
  /* Frees the block, once no process uses it.  Never fails.  */
  void (*release) (int device, void *ctx, void *ptr, size_t nbytes);
  /* A new descriptor of the block FD names that gives read access
     only, or -1 with errno; NULL where a descriptor cannot say so (the
     read-only flag then binds through gpumem's checks only).  */
  int (*readonly_fd) (int fd);
  /* Maps the block HANDLE describes, whose descriptor FD came from its
     producer (import takes FD and closes it in every case), on DEVICE,
     read-only when HANDLE is: *PTR is the block's start, *CTX what
     unmap needs.  GM_ERR_FAILED when FD does not give exactly NBYTES
     that cannot change size.  */
  gm_status (*import) (int device, int fd, const gm_ipc_handle *handle,
                       void **ptr, void **ctx);
  /* Unmaps what import mapped.  Never fails.  */
  void (*unmap) (int device, void *ctx, void *ptr, size_t nbytes);
  /* The 16 bytes that name DEVICE across processes.  */
  gm_status (*device_uuid) (int device, uint8_t uuid[16]);
  /* Makes the NBYTES at PTR, a block of the backend's malloc on DEVICE,
     shareable where they lie, contents kept: *FD and *CTX as alloc's.
     The memory stays the backend's, freed by its free after disown.
     GM_ERR_UNAVAILABLE where that memory's pool cannot export.  NULL
     where the backend cannot.  */
  gm_status (*adopt) (int device, void *ptr, size_t nbytes, int *fd,
                      void **ctx);
  /* Lets go of what adopt made, not of the memory.  Never fails.  */
  void (*disown) (int device, void *ctx);
  /* How many pools of other processes this process keeps imported,
     after letting go of those no longer needed; NULL where the backend
     imports none.  */
  size_t (*imported_pools) (void);
} gm_ipc_ops;

/* The backends' sharing (host-share.c, cuda-share.c).  */
extern const gm_ipc_ops gm_host_ipc_ops;
#ifdef GM_HAVE_CUDA
extern const gm_ipc_ops gm_cuda_ipc_ops;
#endif

/* The producer's side: the share server (share-server.c) and its books
   (share-records.c).  */
typedef struct gm_ipc_block gm_ipc_block;
typedef struct gm_ipc_import gm_ipc_import;

/* Makes the NBYTES at PTR on DEVICE, from gm_mem_alloc_as for OWNER,
   shareable (ops->adopt) and hands them to the share server as *BLOCK,
   which frees them with gm_mem_free_as once the producer and every
   lease have let go (gm_ipc_drop).  GM_ERR_UNAVAILABLE where that memory
   cannot be shared; the memory is then the caller's as before.  */
gm_status gm_ipc_adopt (gm_mem_owner owner, int device, void *ptr,
                        size_t nbytes, gm_ipc_block **block);

/* Allocates NBYTES of shareable memory on DEVICE ordered on STREAM with
   the current backend: *PTR, and *BLOCK for gm_ipc_export and
   gm_ipc_drop.  Starts this process's share server on first use.
   GM_ERR_UNAVAILABLE where the backend cannot share, GM_ERR_NOMEM.  */
gm_status gm_ipc_alloc (int device, size_t nbytes, gm_stream *stream,
                        gm_ipc_block **block, void **ptr);
/* The most users a share may admit besides the producer's own and root
   (gm_ipc_export's ALLOW, GPUMEM_SHARE_ALLOW).  */
#define GM_IPC_MAX_ALLOW 16

/* Shares BLOCK's view that the caller put in *HANDLE (object, offset,
   dtype, readonly, ndim, shape, strides, an event's data): fills the
   fields that locate it (kind, node, pid, uid, server, block, secret,
   device, uuid, nbytes, opaque) after the work queued on STREAM,
   records the whole handle in the share server, and encodes it into
   ENCODED (room for GM_IPC_MAX_BYTES), *SIZE bytes.  Only a handle
   equal to that record opens it, only in a process of the producer's
   user, root, a user of GPUMEM_SHARE_ALLOW, or one of the NALLOW uids
   ALLOW.  With UNTIL_OPENED the server keeps the block until this
   share is opened once (each such export counts one), even when the
   producer drops it first.  GM_ERR_VALUE for a view outside the block
   or a bad GPUMEM_SHARE_ALLOW; GM_ERR_FAILED in a child of the process
   that allocated BLOCK.  The caller keeps BLOCK (does not drop it)
   until this returns; exports and drops of other blocks may run in
   other threads.  */
gm_status gm_ipc_export (gm_ipc_block *block, gm_stream *stream,
                         bool until_opened, const uint32_t *allow,
                         size_t nallow, gm_ipc_handle *handle,
                         uint8_t *encoded, size_t *size);
/* Revokes the share HANDLE names, made by this process: it opens
   nowhere from now on, and an until_opened share no longer keeps its
   block (leases already made stay).  GM_ERR_FAILED when this process
   made no such share or revoked it already.  */
gm_status gm_ipc_unshare (const gm_ipc_handle *handle);
/* The producer lets go of BLOCK: the memory is freed now when no lease
   or unopened until_opened share holds it, else when the last of them
   ends.  Never fails.  */
void gm_ipc_drop (gm_ipc_block *block);

/* Called by gm_ipc_open while it waits for a producer, every few tens
   of milliseconds: true ends the wait (gm_ipc_open then fails with
   GM_ERR_NOT_READY).  */
typedef bool (*gm_ipc_interrupted) (void *arg);

/* Opens HANDLE: checks that the process answering at its producer's
   address is that producer (its pid and uid, by SO_PEERCRED) and a user
   this process trusts (its own, root, GPUMEM_SHARE_ALLOW), presents the
   handle, receives the memory (a lease that lasts until gm_ipc_close)
   and maps it; *BASE is element 0's address and *DEVICE the device of
   this process that the handle names.  Every wait ends within
   GPUMEM_SHARE_TIMEOUT seconds, or when INTERRUPTED (may be NULL) says
   so (GM_ERR_NOT_READY).  GM_ERR_FAILED for a handle of another node,
   backend kind or device, one its producer did not make as it is, has
   closed or revoked, one whose producer has exited, does not admit this
   user, or does not answer in time.  Nothing stays mapped on failure.  */
gm_status gm_ipc_open (const gm_ipc_handle *handle, gm_ipc_import **import,
                       void **base, int *device,
                       gm_ipc_interrupted interrupted, void *arg);
/* Unmaps IMPORT and ends its lease.  Never fails.  */
void gm_ipc_close (gm_ipc_import *import);

/* The memory books of sharing (share-books.c): the backend's ops
   wrapped so that every shareable block is booked as gpumem's (and
   limited, and counted as shared) and every import as the imported
   owner's (memory.c).  */
gm_status gm_ipc_books_alloc (const gm_ipc_ops *ops, int device,
                              size_t nbytes, gm_stream *stream, void **ptr,
                              int *fd, void **ctx);
/* Frees a listed block: ops->release, or for an ADOPTED one ops->disown
   and gm_mem_free_as for OWNER.  */
void gm_ipc_books_release (const gm_ipc_ops *ops, int device, void *ctx,
                           void *ptr, size_t nbytes, bool adopted,
                           gm_mem_owner owner);
/* Lets go of a block inherited through fork (the parent's): this
   process's mapping and its books only.  */
void gm_ipc_books_forget (const gm_ipc_ops *ops, int device, void *ptr,
                          size_t nbytes, bool adopted);
gm_status gm_ipc_books_import (const gm_ipc_ops *ops, int device, int fd,
                               const gm_ipc_handle *handle, void **ptr,
                               void **ctx);
void gm_ipc_books_unmap (const gm_ipc_ops *ops, int device, void *ctx,
                         void *ptr, size_t nbytes);

/* The backend's imported pools (ops->imported_pools; 0 without).  */
size_t gm_ipc_imported_pools (void);

/* Blocks and leases this process's server holds (for tests and stats).  */
void gm_ipc_counts (size_t *blocks, size_t *leases, size_t *imports);

/* Beneath the server, its books and the consumer, in this order:
   the settings (share-settings.c), what a process keeps once
   (share-process.c), the memory books of sharing (share-books.c), the
   server's records (share-records.c), then the server (share-server.c)
   and the consumer (share-client.c), each calling only the files
   before it.  */

/* The settings (share-settings.c).  Whether UID may share with this
   process, either way: its own, root, or a user of GPUMEM_SHARE_ALLOW.
   GM_ERR_FAILED (gpumem.Error) for a bad setting.  */
gm_status gm_ipc_trusted (uint32_t uid, bool *trusted);
/* GPUMEM_SHARE_TIMEOUT, the longest wait for a peer, in milliseconds
   (read once).  GM_ERR_FAILED for a bad setting.  */
gm_status gm_ipc_timeout_ms (int *ms);

/* What a process keeps once (share-process.c).  The lock of the
   server's state and its books: everything below is under it but
   gm_ipc_random, gm_ipc_current_ops and gm_ipc_socket_address.  */
extern pthread_mutex_t gm_ipc_lock;
/* Random 64 bits (getrandom).  */
uint64_t gm_ipc_random (void);
/* The current backend's sharing, NULL where it cannot share.  */
const gm_ipc_ops *gm_ipc_current_ops (void);
/* The abstract socket address of the server PID, NAME.  */
void gm_ipc_socket_address (void *addr, unsigned *len, uint32_t pid,
                            uint64_t name);
/* Names this process's server as its handles carry it: process PID of
   user UID, random NAME, answering; or, RUNNING false, no server (one
   that has not started, or a child made by fork).  */
void gm_ipc_server_named (bool running, uint32_t pid, uint32_t uid,
                          uint64_t name);
/* Whether PID and NAME are this process's running server.  */
bool gm_ipc_server_is (uint32_t pid, uint64_t name);
/* The server's random name and user, for handles.  */
void gm_ipc_server_identity (uint64_t *name, uint32_t *uid);

/* The books (share-records.c), for the server and the consumer.  */
/* Lists a new block of NBYTES on DEVICE, allocated with OPS ordered on
   STREAM (gm_ipc_alloc's *BLOCK and *PTR), once the server runs.  */
gm_status gm_ipc_block_add (const gm_ipc_ops *ops, int device,
                            size_t nbytes, gm_stream *stream,
                            gm_ipc_block **block, void **ptr);
/* Lists the NBYTES at PTR on DEVICE, OWNER's memory of the backend's
   pool, made shareable by OPS->adopt (gm_ipc_adopt's *BLOCK), once the
   server runs.  */
gm_status gm_ipc_block_adopt (const gm_ipc_ops *ops, gm_mem_owner owner,
                              int device, void *ptr, size_t nbytes,
                              gm_ipc_block **block);
/* When HANDLE names a share of this process's server: opens it without
   a connection (*OWN true, *BLOCK and *PTR the block and its memory),
   or fails as the server would answer.  *OWN false otherwise.  */
gm_status gm_ipc_open_local (const gm_ipc_handle *handle, bool *own,
                             gm_ipc_block **block, void **ptr);
/* Ends a lease gm_ipc_open_local made on BLOCK.  */
void gm_ipc_close_local (gm_ipc_block *block);
/* Counts one open import more (DELTA 1) or fewer (-1).  */
void gm_ipc_count_import (int delta);
/* Whether any share admits user UID.  */
bool gm_ipc_admitted (uint32_t uid);
/* Begins a lease for the handle of SIZE bytes ENCODED that a process of
   UID presents: its block, and in *FD the descriptor to send (the
   block's own, gm_ipc_block_fd, or a read-only one the caller closes);
   NULL and *REPLY (GM_IPC_REPLY_*) when it is refused.  */
gm_ipc_block *gm_ipc_lease_begin (const uint8_t *encoded, size_t size,
                                  uint32_t uid, int *fd, uint8_t *reply);
int gm_ipc_block_fd (const gm_ipc_block *block);
/* Ends a lease gm_ipc_lease_begin began.  */
void gm_ipc_lease_end (gm_ipc_block *block);
/* In a child made by fork: forgets the parent's blocks and leases.  */
void gm_ipc_forget_blocks (void);

/* The server (share-server.c).  Starts this process's server, once.  */
gm_status gm_ipc_server_start (void);

/* Reply codes of the server.  */
enum
{
  GM_IPC_REPLY_OK = 0,
  GM_IPC_REPLY_CLOSED = 1,
  GM_IPC_REPLY_NOMEM = 2,
  GM_IPC_REPLY_REFUSED = 3,
  GM_IPC_REPLY_BUSY = 4,
  GM_IPC_REPLY_ALTERED = 5
};

#endif /* GM_IPC_H */
