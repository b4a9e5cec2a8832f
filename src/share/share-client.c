/* share-client.c -- the consumer's side of sharing: opening a handle from
   another process's share server (share-server.c).

   The consumer trusts no handle: before it sends one it checks, with
   SO_PEERCRED, that the process listening at the handle's address is
   the handle's producer (pid and uid, so a dead producer's address
   taken over by another process is refused) and a user it shares with;
   every wait has a deadline (GPUMEM_SHARE_TIMEOUT) and ends early when
   the caller's INTERRUPTED hook says so; the descriptor it receives is
   mapped only when it backs exactly the block and cannot shrink (the
   backend's import checks).  Plain C.  */

#define _GNU_SOURCE
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "share.h"

/* The longest wait between two looks at the caller's INTERRUPTED.  */
#define WAIT_SLICE_MS 50

struct gm_ipc_import
{
  const gm_ipc_ops *ops;
  int device;
  int conn;                  /* the lease; -1 for a block of this process */
  gm_ipc_block *local;       /* that block */
  void *ctx, *ptr;
  size_t nbytes;
};

static long long
now_ms (void)
{
  struct timespec now;

  clock_gettime (CLOCK_MONOTONIC, &now);
  return (long long) now.tv_sec * 1000 + now.tv_nsec / 1000000;
}

/* One wait for an open: what it waits for, its deadline, its hook.  */
typedef struct wait_state
{
  const gm_ipc_handle *handle;
  long long deadline;
  int timeout_ms;
  gm_ipc_interrupted interrupted;
  void *arg;
} wait_state;

/* Waits until CONN is ready for EVENTS (0: just a slice passes), within
   W's deadline.  GM_ERR_FAILED past it, GM_ERR_NOT_READY when
   interrupted.  */
static gm_status
wait_for (wait_state *w, int conn, short events)
{
  for (;;)
    {
      long long left = w->deadline - now_ms ();
      struct pollfd fd = { conn, events, 0 };
      int ready;

      if (left <= 0)
        return gm_error_set (GM_ERR_FAILED, 0, NULL, "the shared array's "
                             "producer (process %u) did not answer within "
                             "%g s (GPUMEM_SHARE_TIMEOUT)",
                             (unsigned) w->handle->pid,
                             w->timeout_ms / 1000.0);
      ready = poll (&fd, events != 0 ? 1 : 0,
                    left < WAIT_SLICE_MS ? (int) left : WAIT_SLICE_MS);
      if (w->interrupted != NULL && w->interrupted (w->arg))
        return gm_error_set (GM_ERR_NOT_READY, 0, NULL, "interrupted while "
                             "waiting for a shared array's producer");
      if (ready > 0 && events != 0)
        return GM_OK;
      if (events == 0)
        return GM_OK;
      if (ready < 0 && errno != EINTR)
        return gm_error_set (GM_ERR_FAILED, 0, NULL, "cannot open shared "
                             "memory: poll: %s", strerror (errno));
    }
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

/* Connects CONN to the server of W's handle and checks who answers.  */
static gm_status
connect_producer (wait_state *w, int conn)
{
  const gm_ipc_handle *handle = w->handle;
  struct sockaddr_un addr;
  struct ucred cred;
  socklen_t credlen = sizeof cred;
  unsigned len;
  gm_status status;

  gm_ipc_socket_address (&addr, &len, handle->pid, handle->server);
  while (connect (conn, (struct sockaddr *) &addr, (socklen_t) len) != 0)
    {
      if (errno == EINPROGRESS)
        {
          int error = 0;
          socklen_t elen = sizeof error;
          status = wait_for (w, conn, POLLOUT);
          if (status != GM_OK)
            return status;
          if (getsockopt (conn, SOL_SOCKET, SO_ERROR, &error, &elen) == 0
              && error == 0)
            break;
          errno = error;
        }
      else if (errno == EAGAIN || errno == EINTR)
        {
          /* Its queue of connections is full: try again in a moment.  */
          status = wait_for (w, conn, 0);
          if (status != GM_OK)
            return status;
          continue;
        }
      return gm_error_set (GM_ERR_FAILED, 0, NULL, "the shared array's "
                           "producer (process %u) no longer serves it (%s): "
                           "it has exited, or the handle is not one it made",
                           (unsigned) handle->pid, strerror (errno));
    }
  if (getsockopt (conn, SOL_SOCKET, SO_PEERCRED, &cred, &credlen) != 0)
    return gm_error_set (GM_ERR_FAILED, 0, NULL, "cannot open shared "
                         "memory: SO_PEERCRED: %s", strerror (errno));
  if ((uint32_t) cred.pid != handle->pid || (uint32_t) cred.uid != handle->uid)
    return gm_error_set (GM_ERR_FAILED, 0, NULL, "the shared array's "
                         "producer (process %u of user %u) has exited, or "
                         "the handle is not one it made: process %d of user "
                         "%u answers at its address, and is not given the "
                         "handle", (unsigned) handle->pid,
                         (unsigned) handle->uid, (int) cred.pid,
                         (unsigned) cred.uid);
  return GM_OK;
}

/* Sends W's handle on CONN and receives the reply into *REPLY and the
   descriptor that comes with it into *FD (-1: none).  */
static gm_status
exchange (wait_state *w, int conn, uint8_t *reply, int *fd)
{
  uint8_t request[2 + GM_IPC_MAX_BYTES];
  size_t size = gm_ipc_encode (w->handle, request + 2), sent = 0;
  union
  {
    char buf[CMSG_SPACE (4 * sizeof (int))];
    struct cmsghdr align;
  } control;
  struct msghdr msg = { 0 };
  struct iovec iov = { reply, 1 };
  struct cmsghdr *cmsg;
  gm_status status;
  ssize_t got;

  *fd = -1;
  request[0] = (uint8_t) size;
  request[1] = (uint8_t) (size >> 8);
  size += 2;
  while (sent < size)
    {
      ssize_t n = send (conn, request + sent, size - sent,
                        MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0)
        sent += (size_t) n;
      else if (n < 0 && errno != EAGAIN && errno != EINTR)
        goto lost;
      else if ((status = wait_for (w, conn, POLLOUT)) != GM_OK)
        return status;
    }
  for (;;)
    {
      status = wait_for (w, conn, POLLIN);
      if (status != GM_OK)
        return status;
      msg.msg_iov = &iov;
      msg.msg_iovlen = 1;
      msg.msg_control = control.buf;
      msg.msg_controllen = sizeof control.buf;
      got = recvmsg (conn, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
      if (got == 1)
        break;
      if (got < 0 && (errno == EAGAIN || errno == EINTR))
        continue;
      goto lost;
    }
  /* Every descriptor that came is taken, and all but one closed.  */
  for (cmsg = CMSG_FIRSTHDR (&msg); cmsg != NULL;
       cmsg = CMSG_NXTHDR (&msg, cmsg))
    if (cmsg->cmsg_level == SOL_SOCKET && cmsg->cmsg_type == SCM_RIGHTS)
      {
        size_t n = (cmsg->cmsg_len - CMSG_LEN (0)) / sizeof (int);
        for (size_t i = 0; i < n; i++)
          {
            int one;
            memcpy (&one, CMSG_DATA (cmsg) + i * sizeof (int), sizeof one);
            if (*fd < 0)
              *fd = one;
            else
              close (one);
          }
      }
  if ((msg.msg_flags & MSG_CTRUNC) != 0 && *fd >= 0)
    {
      close (*fd);
      *fd = -1;
    }
  return GM_OK;
lost:
  return gm_error_set (GM_ERR_FAILED, 0, NULL, "the shared array's producer "
                       "(process %u) did not answer",
                       (unsigned) w->handle->pid);
}

/* The error for the server's REPLY to W's handle.  */
static gm_status
refusal (const wait_state *w, uint8_t reply)
{
  unsigned pid = (unsigned) w->handle->pid;

  switch (reply)
    {
    case GM_IPC_REPLY_REFUSED:
      return gm_error_set (GM_ERR_FAILED, 0, NULL, "the shared array's "
                           "producer (process %u) does not share it with "
                           "this user (uid %u): share(..., allow=[...]) or "
                           "GPUMEM_SHARE_ALLOW there admits others", pid,
                           (unsigned) geteuid ());
    case GM_IPC_REPLY_ALTERED:
      return gm_error_set (GM_ERR_FAILED, 0, NULL, "the handle does not "
                           "match what its producer (process %u) shared: "
                           "it was altered", pid);
    case GM_IPC_REPLY_BUSY:
      return gm_error_set (GM_ERR_FAILED, 0, NULL, "the shared array's "
                           "producer (process %u) holds as many leases of "
                           "this user as it allows: close some arrays "
                           "opened from it", pid);
    case GM_IPC_REPLY_NOMEM:
      return gm_error_set (GM_ERR_FAILED, 0, NULL, "the shared array's "
                           "producer (process %u) could not answer (out of "
                           "memory or descriptors)", pid);
    default:
      return gm_error_set (GM_ERR_FAILED, 0, NULL, "the shared array is "
                           "closed: its producer (process %u) freed it, "
                           "revoked the handle, or never made it", pid);
    }
}

gm_status
gm_ipc_open (const gm_ipc_handle *handle, gm_ipc_import **out, void **base,
             int *device_out, gm_ipc_interrupted interrupted, void *arg)
{
  const gm_ipc_ops *ops = gm_backend_current ? gm_backend_current->ipc
                                             : NULL;
  char node[GM_IPC_NODE];
  gm_ipc_import *import;
  gm_status status = GM_OK;
  wait_state w = { handle, 0, 0, interrupted, arg };
  uint8_t reply;
  bool own, trusted;
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
  /* The decoder accepts only printable node ids: they may be quoted.  */
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
  status = gm_ipc_trusted (handle->uid, &trusted);
  if (status == GM_OK)
    status = gm_ipc_timeout_ms (&w.timeout_ms);
  if (status != GM_OK)
    return status;
  if (!trusted)
    return gm_error_set (GM_ERR_FAILED, 0, NULL, "the handle's producer "
                         "(process %u) runs as user %u, with whom this "
                         "process does not share (its own user, root, and "
                         "GPUMEM_SHARE_ALLOW)", (unsigned) handle->pid,
                         (unsigned) handle->uid);
  import = calloc (1, sizeof *import);
  if (import == NULL)
    return gm_error_set (GM_ERR_HOST_NOMEM, 0, NULL,
                         "no memory for an import's record");
  import->ops = ops;
  import->device = device;
  import->conn = -1;
  import->nbytes = handle->nbytes;
  status = gm_ipc_open_local (handle, &own, &import->local, &import->ptr);
  if (status != GM_OK || own)
    goto done;
  w.deadline = now_ms () + w.timeout_ms;
  import->conn = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK,
                         0);
  if (import->conn < 0)
    {
      status = gm_error_set (GM_ERR_FAILED, 0, NULL, "cannot open shared "
                             "memory: socket: %s", strerror (errno));
      goto done;
    }
  status = connect_producer (&w, import->conn);
  if (status == GM_OK)
    status = exchange (&w, import->conn, &reply, &fd);
  if (status != GM_OK)
    goto done;
  if (reply != GM_IPC_REPLY_OK || fd < 0)
    {
      if (fd >= 0)
        close (fd);
      status = refusal (&w, reply != GM_IPC_REPLY_OK ? reply
                                                     : GM_IPC_REPLY_NOMEM);
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
  gm_ipc_count_import (1);
  *out = import;
  *base = (char *) import->ptr + handle->offset;
  *device_out = device;
  return GM_OK;
}

void
gm_ipc_close (gm_ipc_import *import)
{
  gm_ipc_count_import (-1);
  if (import->local != NULL)
    gm_ipc_close_local (import->local);
  else
    {
      /* Unmapped before the lease ends: the producer may free as soon as
         it sees the connection close.  */
      gm_ipc_books_unmap (import->ops, import->device, import->ctx,
                          import->ptr, import->nbytes);
      close (import->conn);
    }
  free (import);
}
