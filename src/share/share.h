/* ipc.h -- sharing device memory between processes on one node.

   A producer allocates a shareable block (gm_ipc_alloc), describes it in
   a handle (gm_ipc_export), and any process on the same node opens that
   handle (gm_ipc_open) onto the same memory.  The handle's bytes are
   plain data (ipc.c encodes and checks them); the file descriptor that
   gives access to the memory travels from the producer's share server
   (ipc-server.c) to the consumer over a Unix socket, and that connection
   stays open as the consumer's lease: the producer releases a block only
   when it has let go of it and every lease has ended (a consumer that
   exits ends its lease with it).  docs/sharing.md has the whole story.

   Plain C: no Python, no CUDA headers.  */

#ifndef GM_IPC_H
#define GM_IPC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gm.h"

/* The handle format's version; a decoder refuses any other.  */
#define GM_IPC_VERSION 1
/* Bytes of the backend's own description of a block (a CUDA pool
   pointer's export data and the IPC event handle, 64 bytes each).  */
#define GM_IPC_OPAQUE 128
/* Bytes of the node id: the kernel's boot id, as text.  */
#define GM_IPC_NODE 40
/* The encoded handle's length for NDIM dimensions.  */
#define GM_IPC_FIXED_BYTES 252
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
  uint64_t server;               /* its share server's random name */
  uint64_t block;                /* the block's number in that server */
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
  /* Maps the block HANDLE describes, whose descriptor FD came from its
     producer (import takes FD and closes it in every case), on DEVICE:
     *PTR is the block's start, *CTX what unmap needs.  GM_ERR_FAILED
     when FD does not give NBYTES.  */
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

/* The backends' sharing (host-ipc.c, cuda-ipc.c).  */
extern const gm_ipc_ops gm_host_ipc_ops;
#ifdef GM_HAVE_CUDA
extern const gm_ipc_ops gm_cuda_ipc_ops;
#endif

/* The share server's side (ipc-server.c).  */
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
/* Fills the fields of *HANDLE that locate BLOCK (kind, node, pid,
   server, block, secret, device, uuid, nbytes, opaque), after the work
   queued on STREAM; the caller fills the array's layout.  With
   UNTIL_OPENED the server keeps the block until one more consumer opens
   it (each such export counts one), even when the producer drops it
   first.  */
gm_status gm_ipc_export (gm_ipc_block *block, gm_stream *stream,
                         bool until_opened, gm_ipc_handle *handle);
/* The producer lets go of BLOCK: the memory is freed now when no lease
   holds it, else when the last lease ends.  Never fails.  */
void gm_ipc_drop (gm_ipc_block *block);

/* Opens HANDLE: asks its producer for the memory (a lease that lasts
   until gm_ipc_close) and maps it; *BASE is element 0's address and
   *DEVICE the device of this process that the handle names.
   GM_ERR_FAILED for a handle of another node, backend kind or device,
   one its producer has closed or never made, or whose producer has
   exited.  Nothing stays mapped on failure.  */
gm_status gm_ipc_open (const gm_ipc_handle *handle, gm_ipc_import **import,
                       void **base, int *device);
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

#endif /* GM_IPC_H */
