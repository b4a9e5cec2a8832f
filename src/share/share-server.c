/* ipc-server.c -- the share server: hands shareable blocks to other
   processes and counts who still uses them.

   Each process that shares starts one thread listening on an abstract
   Unix socket named after its pid and a random number.  A consumer
   connects, sends the block's number and secret, and receives the
   block's file descriptor (SCM_RIGHTS); it keeps the connection open as
   its lease.  When the connection ends -- the consumer closed the array
   or exited, however it exited -- the lease ends.  A block is released
   once its producer has dropped it and no lease remains: CUDA asks that
   every importer free an imported pool pointer before its exporter does
   (cudaMemPoolImportPointer), and this order gives exactly that.
   Plain C: the backend's gm_ipc_ops do the memory.  */

#define _GNU_SOURCE
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "share.h"

struct gm_ipc_block
{
  gm_ipc_block *next;
  uint64_t id, secret;
  pid_t pid;                 /* the process that allocated it */
  int device;
  int fd;                    /* what a consumer receives */
  void *ctx, *ptr;
  size_t nbytes;
  size_t leases;
  bool producer_holds;
  bool adopted;              /* memory of the backend's pool (share-books.c) */
  gm_mem_owner owner;        /* an adopted block's */
  size_t pending_opens;      /* until_opened handles not opened yet */
};

struct gm_ipc_import
{
  const gm_ipc_ops *ops;
  int device;
  int conn;                  /* the lease; -1 for a block of this process */
  gm_ipc_block *local;       /* that block */
  void *ctx, *ptr;
  size_t nbytes;
};

/* One lease: a consumer's connection and the block it holds.  */
typedef struct lease
{
  int conn;
  gm_ipc_block *block;
} lease;

/* Held for every field below; the server thread takes it briefly.  */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static bool started;
static pid_t server_pid;
static uint64_t server_name;
static int listen_fd = -1;
static gm_ipc_block *blocks;
static uint64_t next_block = 1;
static lease *leases;
static size_t nleases, leases_room;
static size_t open_imports;
static const gm_ipc_ops *server_ops;

static void
socket_address (struct sockaddr_un *addr, socklen_t *len, uint32_t pid,
                uint64_t name)
{
  int n;

  memset (addr, 0, sizeof *addr);
  addr->sun_family = AF_UNIX;
  /* The abstract namespace (a leading NUL): nothing on disk to clean up
     after a process that dies.  */
  n = snprintf (addr->sun_path + 1, sizeof addr->sun_path - 1,
                "gpumem-share-%u-%016llx", (unsigned) pid,
                (unsigned long long) name);
  *len = (socklen_t) (offsetof (struct sockaddr_un, sun_path) + 1 + n);
}

static uint64_t
random_u64 (void)
{
  uint64_t value = 0;

  if (getrandom (&value, sizeof value, 0) != (ssize_t) sizeof value)
    {
      struct timespec now;
      clock_gettime (CLOCK_REALTIME, &now);
      value = ((uint64_t) now.tv_nsec << 32) ^ (uint64_t) now.tv_sec
              ^ ((uint64_t) getpid () << 48) ^ (uintptr_t) &value;
    }
  return value;
}

/* Releases BLOCK when its producer and every lease have let go; under
   the lock.  */
static void
release_if_unused (gm_ipc_block *block)
{
  gm_ipc_block **link;

  if (block->producer_holds || block->pending_opens > 0 || block->leases > 0)
    return;
  for (link = &blocks; *link != NULL; link = &(*link)->next)
    if (*link == block)
      {
        *link = block->next;
        break;
      }
  gm_ipc_books_release (server_ops, block->device, block->ctx, block->ptr,
                        block->nbytes, block->adopted, block->owner);
  close (block->fd);
  free (block);
}

/* The listed block that ID and SECRET name, or NULL; under the lock.  A
   listed block is still held by its producer, a pending open or a
   lease.  */
static gm_ipc_block *
find_block (uint64_t id, uint64_t secret)
{
  for (gm_ipc_block *block = blocks; block != NULL; block = block->next)
    if (block->id == id && block->secret == secret)
      return block;
  return NULL;
}

/* Counts one open of BLOCK: a new lease, and one until_opened handle
   fewer waiting; under the lock.  */
static void
count_open (gm_ipc_block *block)
{
  block->leases++;
  if (block->pending_opens > 0)
    block->pending_opens--;
}

/* Sends STATUS (0: here it is) and, with it, FD when FD >= 0.  */
static void
send_reply (int conn, uint8_t status, int fd)
{
  struct msghdr msg = { 0 };
  struct iovec iov = { &status, 1 };
  union
  {
    char buf[CMSG_SPACE (sizeof (int))];
    struct cmsghdr align;
  } control;

  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  if (fd >= 0)
    {
      struct cmsghdr *cmsg;
      memset (&control, 0, sizeof control);
      msg.msg_control = control.buf;
      msg.msg_controllen = sizeof control.buf;
      cmsg = CMSG_FIRSTHDR (&msg);
      cmsg->cmsg_level = SOL_SOCKET;
      cmsg->cmsg_type = SCM_RIGHTS;
      cmsg->cmsg_len = CMSG_LEN (sizeof (int));
      memcpy (CMSG_DATA (cmsg), &fd, sizeof fd);
    }
  (void) sendmsg (conn, &msg, MSG_NOSIGNAL);
}

/* Answers one new connection CONN: a block's number and secret in, the
   block's descriptor out, and CONN kept as the lease.  */
static void
serve_request (int conn)
{
  uint8_t request[16];
  struct timeval timeout = { 1, 0 };
  uint64_t id, secret;
  gm_ipc_block *block;

  /* A peer that sends nothing must not stall the server.  */
  setsockopt (conn, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  if (recv (conn, request, sizeof request, MSG_WAITALL)
      != (ssize_t) sizeof request)
    {
      close (conn);
      return;
    }
  memcpy (&id, request, 8);
  memcpy (&secret, request + 8, 8);
  pthread_mutex_lock (&lock);
  block = find_block (id, secret);
  if (block == NULL)
    {
      pthread_mutex_unlock (&lock);
      send_reply (conn, 1, -1);
      close (conn);
      return;
    }
  if (nleases == leases_room)
    {
      size_t room = leases_room ? 2 * leases_room : 16;
      lease *grown = realloc (leases, room * sizeof *grown);
      if (grown == NULL)
        {
          pthread_mutex_unlock (&lock);
          send_reply (conn, 2, -1);
          close (conn);
          return;
        }
      leases = grown;
      leases_room = room;
    }
  leases[nleases].conn = conn;
  leases[nleases].block = block;
  nleases++;
  count_open (block);
  send_reply (conn, 0, block->fd);
  pthread_mutex_unlock (&lock);
}

/* Ends lease I (its connection closed); under the lock.  */
static void
end_lease (size_t i)
{
  gm_ipc_block *block = leases[i].block;

  close (leases[i].conn);
  leases[i] = leases[--nleases];
  block->leases--;
  release_if_unused (block);
}

static void *
server_main (void *unused)
{
  struct pollfd *fds = NULL;
  size_t room = 0;
  (void) unused;

  for (;;)
    {
      size_t n;
      int ready;

      pthread_mutex_lock (&lock);
      n = nleases + 1;
      if (n > room)
        {
          struct pollfd *grown = realloc (fds, n * sizeof *grown);
          if (grown != NULL)
            {
              fds = grown;
              room = n;
            }
        }
      if (n > room)
        n = room;
      for (size_t i = 1; i < n; i++)
        {
          fds[i].fd = leases[i - 1].conn;
          fds[i].events = POLLIN;
        }
      pthread_mutex_unlock (&lock);
      if (n == 0)
        {
          usleep (100000);
          continue;
        }
      fds[0].fd = listen_fd;
      fds[0].events = POLLIN;
      /* New leases are made only here, so a set built before the wait is
         complete; the timeout bounds how late a lease whose slot moved
         is seen to end.  */
      ready = poll (fds, n, 100);
      if (ready <= 0)
        continue;
      pthread_mutex_lock (&lock);
      for (size_t i = n - 1; i >= 1; i--)
        if (fds[i].revents != 0)
          for (size_t j = 0; j < nleases; j++)
            if (leases[j].conn == fds[i].fd)
              {
                char byte;
                /* A lease carries no data: readable means closed.  */
                if (recv (fds[i].fd, &byte, 1, MSG_DONTWAIT) <= 0
                    || (fds[i].revents & (POLLHUP | POLLERR)) != 0)
                  end_lease (j);
                break;
              }
      pthread_mutex_unlock (&lock);
      if (fds[0].revents & POLLIN)
        {
          int conn = accept4 (listen_fd, NULL, NULL, SOCK_CLOEXEC);
          if (conn >= 0)
            serve_request (conn);
        }
    }
  return NULL;
}

/* In a child made by fork: the server thread did not come along, and the
   parent's connections must not stay open here, or the parent would not
   see its consumers' leases end.  The child starts its own server when
   it shares.  */
static void
atfork_prepare (void)
{
  pthread_mutex_lock (&lock);
}

static void
atfork_parent (void)
{
  pthread_mutex_unlock (&lock);
}

static void
atfork_child (void)
{
  pthread_mutex_init (&lock, NULL);
  if (listen_fd >= 0)
    close (listen_fd);
  listen_fd = -1;
  for (size_t i = 0; i < nleases; i++)
    close (leases[i].conn);
  nleases = 0;
  /* The parent's blocks stay the parent's: gm_ipc_drop sees their pid.  */
  blocks = NULL;
  started = false;
}

/* Starts this process's server; under the lock.  */
static gm_status
server_start (void)
{
  struct sockaddr_un addr;
  socklen_t len;
  pthread_t thread;
  pthread_attr_t attr;
  sigset_t all, old;
  int fd, rc;

  if (started)
    return GM_OK;
  fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return gm_error_set (GM_ERR_FAILED, 0, NULL, "cannot share memory: "
                         "socket: %s", strerror (errno));
  server_pid = getpid ();
  server_name = random_u64 ();
  socket_address (&addr, &len, (uint32_t) server_pid, server_name);
  if (bind (fd, (struct sockaddr *) &addr, len) != 0 || listen (fd, 64) != 0)
    {
      int saved = errno;
      close (fd);
      return gm_error_set (GM_ERR_FAILED, 0, NULL, "cannot share memory: "
                           "cannot listen on a Unix socket: %s",
                           strerror (saved));
    }
  listen_fd = fd;
  /* The thread takes no signal: they stay with the program's threads.  */
  sigfillset (&all);
  pthread_sigmask (SIG_SETMASK, &all, &old);
  pthread_attr_init (&attr);
  pthread_attr_setdetachstate (&attr, PTHREAD_CREATE_DETACHED);
  rc = pthread_create (&thread, &attr, server_main, NULL);
  pthread_attr_destroy (&attr);
  pthread_sigmask (SIG_SETMASK, &old, NULL);
  if (rc != 0)
    {
      close (fd);
      listen_fd = -1;
      return gm_error_set (GM_ERR_FAILED, 0, NULL, "cannot share memory: "
                           "no thread for the share server: %s",
                           strerror (rc));
    }
  started = true;
  return GM_OK;
}

static void
register_atfork (void)
{
  pthread_atfork (atfork_prepare, atfork_parent, atfork_child);
}

static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

/* The backend's sharing, with the fork handlers registered once.  */
static const gm_ipc_ops *
current_ops (void)
{
  pthread_once (&atfork_once, register_atfork);
  return gm_backend_current != NULL ? gm_backend_current->ipc : NULL;
}

static gm_status add_block (gm_ipc_block *block, int device, size_t nbytes,
                            bool adopted, gm_ipc_block **out, void **ptr);

gm_status
gm_ipc_alloc (int device, size_t nbytes, gm_stream *stream,
              gm_ipc_block **out, void **ptr)
{
  const gm_ipc_ops *ops = current_ops ();
  gm_ipc_block *block;
  gm_status status;

  if (ops == NULL)
    return gm_error_set (GM_ERR_UNAVAILABLE, 0, NULL, "the %s backend "
                         "cannot share memory between processes",
                         gm_backend_current ? gm_backend_current->name
                                            : "(none)");
  if (nbytes == 0)
    nbytes = 1;
  block = calloc (1, sizeof *block);
  if (block == NULL)
    return gm_error_set (GM_ERR_HOST_NOMEM, 0, NULL,
                         "no memory for a shared block's record");
  pthread_mutex_lock (&lock);
  server_ops = ops;
  status = server_start ();
  pthread_mutex_unlock (&lock);
  if (status == GM_OK)
    status = gm_ipc_books_alloc (ops, device, nbytes, stream, &block->ptr,
                                 &block->fd, &block->ctx);
  if (status != GM_OK)
    {
      free (block);
      return status;
    }
  return add_block (block, device, nbytes, false, out, ptr);
}

gm_status
gm_ipc_adopt (gm_mem_owner owner, int device, void *ptr, size_t nbytes,
              gm_ipc_block **out)
{
  const gm_ipc_ops *ops = current_ops ();
  gm_ipc_block *block;
  gm_status status;
  void *unused;

  if (ops == NULL || ops->adopt == NULL)
    return gm_error_set (GM_ERR_UNAVAILABLE, 0, NULL, "the %s backend "
                         "cannot share memory between processes",
                         gm_backend_current ? gm_backend_current->name
                                            : "(none)");
  block = calloc (1, sizeof *block);
  if (block == NULL)
    return gm_error_set (GM_ERR_HOST_NOMEM, 0, NULL,
                         "no memory for a shared block's record");
  pthread_mutex_lock (&lock);
  server_ops = ops;
  status = server_start ();
  pthread_mutex_unlock (&lock);
  if (status == GM_OK)
    status = ops->adopt (device, ptr, nbytes, &block->fd, &block->ctx);
  if (status != GM_OK)
    {
      free (block);
      return status;
    }
  block->ptr = ptr;
  block->owner = owner;
  gm_mem_note_shared (device, nbytes, true);
  return add_block (block, device, nbytes, true, out, &unused);
}

/* Lists BLOCK, whose memory and descriptor are set, as DEVICE's block of
   NBYTES held by its producer; *OUT and *PTR for the caller.  */
static gm_status
add_block (gm_ipc_block *block, int device, size_t nbytes, bool adopted,
           gm_ipc_block **out, void **ptr)
{
  block->adopted = adopted;
  block->device = device;
  block->nbytes = nbytes;
  block->pid = getpid ();
  block->secret = random_u64 ();
  block->producer_holds = true;
  pthread_mutex_lock (&lock);
  block->id = next_block++;
  block->next = blocks;
  blocks = block;
  pthread_mutex_unlock (&lock);
  *out = block;
  *ptr = block->ptr;
  return GM_OK;
}

gm_status
gm_ipc_export (gm_ipc_block *block, gm_stream *stream, bool until_opened,
               gm_ipc_handle *handle)
{
  const gm_ipc_ops *ops = current_ops ();
  gm_status status;

  if (block->pid != getpid ())
    return gm_error_set (GM_ERR_FAILED, 0, NULL, "this shared array was "
                         "allocated by process %d, whose child this is: "
                         "share it from there, or copy it",
                         (int) block->pid);
  memset (handle, 0, sizeof *handle);
  handle->kind = ops->kind;
  gm_ipc_node_id (handle->node);
  status = ops->device_uuid (block->device, handle->device_uuid);
  if (status == GM_OK)
    status = ops->describe (block->device, block->ctx, block->ptr, stream,
                            handle->opaque);
  if (status != GM_OK)
    return status;
  handle->pid = (uint32_t) block->pid;
  handle->device = (uint32_t) block->device;
  handle->nbytes = block->nbytes;
  pthread_mutex_lock (&lock);
  handle->server = server_name;
  handle->block = block->id;
  handle->secret = block->secret;
  if (until_opened)
    block->pending_opens++;
  pthread_mutex_unlock (&lock);
  return GM_OK;
}

void
gm_ipc_drop (gm_ipc_block *block)
{
  const gm_ipc_ops *ops = current_ops ();

  if (block->pid != getpid ())
    {
      /* A copy inherited through fork: the parent owns the block; only
         this process's mapping, descriptor and copy of the record go
         (the child lists none of the parent's blocks).  */
      gm_ipc_books_forget (ops, block->device, block->ptr, block->nbytes,
                           block->adopted);
      close (block->fd);
      free (block);
      return;
    }
  pthread_mutex_lock (&lock);
  block->producer_holds = false;
  release_if_unused (block);
  pthread_mutex_unlock (&lock);
}

/* The device of this process that UUID names, or -1.  */
static int
device_of_uuid (const gm_ipc_ops *ops, const uint8_t uuid[16])
{
  int count = gm_backend_current->device_count ();

  for (int d = 0; d < count; d++)
    {
      uint8_t own[16];
      if (ops->device_uuid (d, own) == GM_OK && memcmp (own, uuid, 16) == 0)
        return d;
    }
  return -1;
}

/* Receives the one-byte reply on CONN into *STATUS and the descriptor
   that comes with it into *FD (-1: none).  false when the peer sent
   nothing.  */
static bool
receive_reply (int conn, uint8_t *status, int *fd)
{
  struct msghdr msg = { 0 };
  struct iovec iov = { status, 1 };
  union
  {
    char buf[CMSG_SPACE (sizeof (int))];
    struct cmsghdr align;
  } control;
  struct cmsghdr *cmsg;

  *fd = -1;
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control.buf;
  msg.msg_controllen = sizeof control.buf;
  if (recvmsg (conn, &msg, MSG_CMSG_CLOEXEC) != 1)
    return false;
  for (cmsg = CMSG_FIRSTHDR (&msg); cmsg != NULL;
       cmsg = CMSG_NXTHDR (&msg, cmsg))
    if (cmsg->cmsg_level == SOL_SOCKET && cmsg->cmsg_type == SCM_RIGHTS
        && cmsg->cmsg_len == CMSG_LEN (sizeof (int)))
      memcpy (fd, CMSG_DATA (cmsg), sizeof *fd);
  return true;
}

/* Opens HANDLE's block in the process that made it: a lease without a
   connection.  */
static gm_status
open_local (const gm_ipc_handle *handle, gm_ipc_import *import)
{
  gm_ipc_block *block;

  pthread_mutex_lock (&lock);
  block = find_block (handle->block, handle->secret);
  if (block == NULL)
    {
      pthread_mutex_unlock (&lock);
      return gm_error_set (GM_ERR_FAILED, 0, NULL, "the shared array is "
                           "closed: its producer (this process) freed it");
    }
  count_open (block);
  import->local = block;
  import->ptr = block->ptr;
  pthread_mutex_unlock (&lock);
  return GM_OK;
}

gm_status
gm_ipc_open (const gm_ipc_handle *handle, gm_ipc_import **out, void **base,
             int *device_out)
{
  const gm_ipc_ops *ops = current_ops ();
  char node[GM_IPC_NODE];
  struct sockaddr_un addr;
  socklen_t len;
  uint8_t request[16], reply;
  gm_ipc_import *import;
  gm_status status = GM_OK;
  int device, fd = -1;

  if (ops == NULL)
    return gm_error_set (GM_ERR_UNAVAILABLE, 0, NULL, "the %s backend "
                         "cannot open shared memory",
                         gm_backend_current ? gm_backend_current->name
                                            : "(none)");
  if (handle->kind != ops->kind)
    return gm_error_set (GM_ERR_FAILED, 0, NULL, "the handle is for %s "
                         "memory, and this process runs the %s backend",
                         handle->kind == GM_IPC_KIND_CUDA ? "CUDA" : "host",
                         gm_backend_current->name);
  gm_ipc_node_id (node);
  if (memcmp (node, handle->node, GM_IPC_NODE) != 0)
    return gm_error_set (GM_ERR_FAILED, 0, NULL, "the handle comes from "
                         "another node (%.39s; this is %.39s): shared "
                         "memory opens only on the node that made it",
                         handle->node, node);
  device = device_of_uuid (ops, handle->device_uuid);
  if (device < 0)
    return gm_error_set (GM_ERR_FAILED, 0, NULL, "the handle names a "
                         "device (index %u in process %u) that this "
                         "process cannot see", (unsigned) handle->device,
                         (unsigned) handle->pid);
  import = calloc (1, sizeof *import);
  if (import == NULL)
    return gm_error_set (GM_ERR_HOST_NOMEM, 0, NULL,
                         "no memory for an import's record");
  import->ops = ops;
  import->device = device;
  import->conn = -1;
  import->nbytes = handle->nbytes;
  pthread_mutex_lock (&lock);
  bool own = started && handle->pid == (uint32_t) getpid ()
             && handle->server == server_name;
  pthread_mutex_unlock (&lock);
  if (own)
    {
      status = open_local (handle, import);
      goto done;
    }
  import->conn = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (import->conn < 0)
    {
      status = gm_error_set (GM_ERR_FAILED, 0, NULL, "cannot open shared "
                             "memory: socket: %s", strerror (errno));
      goto done;
    }
  socket_address (&addr, &len, handle->pid, handle->server);
  if (connect (import->conn, (struct sockaddr *) &addr, len) != 0)
    {
      status = gm_error_set (GM_ERR_FAILED, 0, NULL, "the shared array's "
                             "producer (process %u) no longer serves it "
                             "(%s): it has exited, or the handle is not "
                             "one it made", (unsigned) handle->pid,
                             strerror (errno));
      goto done;
    }
  memcpy (request, &handle->block, 8);
  memcpy (request + 8, &handle->secret, 8);
  if (send (import->conn, request, sizeof request, MSG_NOSIGNAL)
      != (ssize_t) sizeof request
      || !receive_reply (import->conn, &reply, &fd))
    {
      status = gm_error_set (GM_ERR_FAILED, 0, NULL, "the shared array's "
                             "producer (process %u) did not answer",
                             (unsigned) handle->pid);
      goto done;
    }
  if (reply != 0 || fd < 0)
    {
      if (fd >= 0)
        close (fd);
      status = gm_error_set (GM_ERR_FAILED, 0, NULL, "the shared array is "
                             "closed: its producer (process %u) freed it, "
                             "or never made it", (unsigned) handle->pid);
      goto done;
    }
  status = gm_ipc_books_import (ops, device, fd, handle, &import->ptr,
                                &import->ctx);

done:
  if (status != GM_OK)
    {
      if (import->conn >= 0)
        close (import->conn);
      free (import);
      return status;
    }
  pthread_mutex_lock (&lock);
  open_imports++;
  pthread_mutex_unlock (&lock);
  *out = import;
  *base = (char *) import->ptr + handle->offset;
  *device_out = device;
  return GM_OK;
}

void
gm_ipc_close (gm_ipc_import *import)
{
  pthread_mutex_lock (&lock);
  open_imports--;
  if (import->local != NULL)
    {
      import->local->leases--;
      release_if_unused (import->local);
    }
  pthread_mutex_unlock (&lock);
  if (import->local == NULL)
    {
      /* Unmapped before the lease ends: the producer may free as soon as
         it sees the connection close.  */
      gm_ipc_books_unmap (import->ops, import->device, import->ctx,
                          import->ptr, import->nbytes);
      close (import->conn);
    }
  free (import);
}

void
gm_ipc_counts (size_t *nblocks, size_t *nleases_out, size_t *imports)
{
  size_t n = 0;

  pthread_mutex_lock (&lock);
  for (gm_ipc_block *block = blocks; block != NULL; block = block->next)
    n++;
  *nblocks = n;
  *nleases_out = nleases;
  *imports = open_imports;
  pthread_mutex_unlock (&lock);
}
